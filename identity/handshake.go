package identity

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Challenge is the verifier's half of the live handshake (SPEC §7.1).
// VerifierID, when not empty, is bound into the proof as the RFC 9421 tag;
// an empty VerifierID means none (there is no way to ask for tag="").
type Challenge struct {
	Nonce             string `json:"nonce"`
	IssuedAt          string `json:"issuedAt"`
	VerifierID        string `json:"verifierId,omitempty"`
	SupportedVersions []int  `json:"supportedVersions,omitempty"`
}

// ChallengeResponse is the agent's proof of live key possession (SPEC §7.2).
// Signature is the hex Ed25519 signature over the RFC 9421 signature base
// that SignatureInput describes.
type ChallengeResponse struct {
	Nonce             string `json:"nonce"`
	AgentID           string `json:"agentId"`
	AuditHead         string `json:"auditHead"`
	SignedAt          string `json:"signedAt"`
	DisclosureVersion *int   `json:"disclosureVersion,omitempty"`
	SignatureInput    string `json:"signatureInput"`
	Signature         string `json:"signature"`
}

// NewChallenge issues a challenge with a fresh nonce: 16 bytes read from r
// (crypto/rand when r is nil), hex encoded. versions advertises the
// disclosure versions the verifier understands (nil for none).
func NewChallenge(r io.Reader, now time.Time, verifierID string, versions []int) (Challenge, error) {
	if r == nil {
		r = rand.Reader
	}
	var nonce [16]byte
	if _, err := io.ReadFull(r, nonce[:]); err != nil {
		return Challenge{}, fmt.Errorf("identity: challenge nonce: %w", err)
	}
	if verifierID != "" && !isStructuredValue(verifierID) {
		return Challenge{}, fmt.Errorf("identity: challenge: verifierId must be printable ASCII without '\"' or '\\': %w", ErrMalformed)
	}
	return Challenge{
		Nonce:             hex.EncodeToString(nonce[:]),
		IssuedAt:          Timestamp(now),
		VerifierID:        verifierID,
		SupportedVersions: slices.Clone(versions),
	}, nil
}

// sigMaterial is what the signature base is built from: the verifier's
// nonce and verifierId, and the agent's claimed values.
type sigMaterial struct {
	agentID, auditHead, signedAt, nonce, verifierID string
	version                                         *int
}

// signatureParams is the @signature-params value (SPEC §7.3):
// ("adp-agent-id" "adp-audit-head"["adp-disclosure-version"]);created=…;
// keyid=…;alg="ed25519";nonce=…[;tag=…].
func (m *sigMaterial) signatureParams() string {
	var b strings.Builder
	b.WriteString(`("adp-agent-id" "adp-audit-head"`)
	if m.version != nil {
		b.WriteString(` "adp-disclosure-version"`)
	}
	b.WriteString(`);created="`)
	b.WriteString(m.signedAt)
	b.WriteString(`";keyid="`)
	b.WriteString(m.agentID)
	b.WriteString(`";alg="ed25519";nonce="`)
	b.WriteString(m.nonce)
	b.WriteByte('"')
	if m.verifierID != "" {
		b.WriteString(`;tag="`)
		b.WriteString(m.verifierID)
		b.WriteByte('"')
	}
	return b.String()
}

// signatureBase is the RFC 9421 signature base: one line per covered
// component, then the @signature-params line, joined by "\n".
func (m *sigMaterial) signatureBase() []byte {
	var b bytes.Buffer
	b.WriteString(`"adp-agent-id": `)
	b.WriteString(m.agentID)
	b.WriteString("\n\"adp-audit-head\": ")
	b.WriteString(m.auditHead)
	if m.version != nil {
		b.WriteString("\n\"adp-disclosure-version\": ")
		b.WriteString(strconv.Itoa(*m.version))
	}
	b.WriteString("\n\"@signature-params\": ")
	b.WriteString(m.signatureParams())
	return b.Bytes()
}

// signatureInput is the Signature-Input value carried on the wire.
func (m *sigMaterial) signatureInput() string { return "sig=" + m.signatureParams() }

// wellFormed reports whether every value can sit in the signature base
// unambiguously: RFC 8941 sf-string characters (printable ASCII, no '"' or
// '\'), so no value can end a quoted parameter or start a new line. The
// reference does not check; it matters because a newline or quote in one
// value could make two different responses share one signature base.
func (m *sigMaterial) wellFormed() bool {
	return isStructuredValue(m.agentID) && isStructuredValue(m.auditHead) &&
		isStructuredValue(m.signedAt) && isStructuredValue(m.nonce) &&
		(m.verifierID == "" || isStructuredValue(m.verifierID))
}

func isStructuredValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// Respond answers a challenge (SPEC §7.2–7.3): it signs the RFC 9421
// signature base binding agentID, auditHead, the challenge's nonce and
// verifierId, the time now (as [Timestamp]) and, when version is not nil,
// the disclosure version it presents. agentID defaults to key's hex public
// key, which is what SPEC §7.2 defines and what every verifier checks the
// signature against (§7.4 step 4); leave it empty to interoperate. Passing
// another form (the did:key form, or the pre-rotation identity) is
// understood by [VerifyResponse] but refused by verifiers that follow §7.4
// to the letter.
func Respond(ch Challenge, key ed25519.PrivateKey, agentID, auditHead string, now time.Time, version *int) (ChallengeResponse, error) {
	if len(key) != ed25519.PrivateKeySize {
		return ChallengeResponse{}, fmt.Errorf("identity: respond: private key is %d bytes, want %d", len(key), ed25519.PrivateKeySize)
	}
	if agentID == "" {
		agentID = hex.EncodeToString(key.Public().(ed25519.PublicKey))
	}
	m := sigMaterial{
		agentID:    agentID,
		auditHead:  auditHead,
		signedAt:   Timestamp(now),
		nonce:      ch.Nonce,
		verifierID: ch.VerifierID,
		version:    version,
	}
	if !m.wellFormed() {
		return ChallengeResponse{}, fmt.Errorf("identity: respond: agentId, auditHead, nonce and verifierId must be printable ASCII without '\"' or '\\': %w", ErrMalformed)
	}
	var v *int
	if version != nil {
		n := *version
		v = &n
	}
	return ChallengeResponse{
		Nonce:             ch.Nonce,
		AgentID:           agentID,
		AuditHead:         auditHead,
		SignedAt:          m.signedAt,
		DisclosureVersion: v,
		SignatureInput:    m.signatureInput(),
		Signature:         hex.EncodeToString(ed25519.Sign(key, m.signatureBase())),
	}, nil
}

// HandshakePolicy is what the verifier expects of a response (SPEC §7.4).
type HandshakePolicy struct {
	// ExpectedAgentID is the agentId the disclosure claims; required.
	ExpectedAgentID string
	// DisclosureAnchor is the disclosure's auditAnchor, if any.
	DisclosureAnchor string
	// Now is the verifier's clock; the zero value means time.Now().
	Now time.Time
	// MaxAge bounds how old the response may be; zero means 60 s.
	MaxAge time.Duration
	// SupportedVersions, when not nil, lists the disclosure versions the
	// verifier accepts; a response declaring another is refused. An empty
	// non-nil slice accepts no declared version.
	SupportedVersions []int
	// RotationChain links the agentId to the key that now signs, when the
	// agent rotated keys after the identity was established. Usually the
	// disclosure envelope's rotationChain.
	RotationChain []RotationStatement
	// PriorHeads are audit heads known to precede DisclosureAnchor; a
	// response presenting one regressed. The verifier cannot order heads
	// on its own, so without them no regression is detected.
	PriorHeads []string
	// RefuseRegression makes a detected regression fail the handshake;
	// by default it is only reported, as in the reference.
	RefuseRegression bool
}

// HandshakeResult is the outcome of [VerifyResponse]: OK when no check
// failed. Regression reports an audit head found in PriorHeads.
type HandshakeResult struct {
	OK         bool     `json:"ok"`
	Checks     []Check  `json:"checks"`
	Failed     []string `json:"failed"`
	Regression bool     `json:"regression"`
}

// Handshake check names, in the order of SPEC §7.4.
const (
	HandshakeCheckNonce          = "nonce"
	HandshakeCheckAgentID        = "agentId"
	HandshakeCheckSignatureInput = "signatureInput"
	HandshakeCheckSignature      = "signature"
	HandshakeCheckVersion        = "version"
	HandshakeCheckFreshness      = "freshness"
	HandshakeCheckAuditHead      = "auditHead"
)

// VerifyResponse runs the MUST-checks of SPEC §7.4 in order and reports
// each: the nonce answers ch; the agentId is the expected one (compared as
// keys when both name one, so hex and did:key forms of one key match); the
// Signature-Input is exactly what ch and the response's values produce; the
// signature verifies over the reconstructed signature base; a declared
// version is supported; the response is between 0 and MaxAge old (signedAt
// is parsed as RFC 3339, any offset); and, when there is an anchor or prior
// heads to compare with, the audit head has not regressed.
//
// The signing key is the key agentId names. When hp.RotationChain is not
// empty the identity has moved on: the response's agentId is either the key
// the chain ends at (SPEC §7.2, the responder's own key; the chain must
// verify from ExpectedAgentID to it), or the stable identity itself, signed
// by the key the chain ends at; a rotated-away key can no longer answer.
// When hp.SupportedVersions is nil the challenge's SupportedVersions apply
// (SPEC §7.5: a verifier refuses a version it did not advertise).
func VerifyResponse(resp ChallengeResponse, ch Challenge, hp HandshakePolicy) HandshakeResult {
	res := HandshakeResult{Checks: make([]Check, 0, 7)}
	record := func(name string, ok bool, reason string) {
		if ok {
			reason = ""
		}
		res.Checks = append(res.Checks, Check{Name: name, OK: ok, Reason: reason})
	}

	record(HandshakeCheckNonce, resp.Nonce == ch.Nonce, "nonce mismatch (replayed or wrong challenge)")

	switch {
	case hp.ExpectedAgentID == "":
		record(HandshakeCheckAgentID, false, "no expected agentId in the handshake policy")
	default:
		record(HandshakeCheckAgentID, sameAgent(resp.AgentID, hp.ExpectedAgentID) ||
			answersForRotated(resp.AgentID, hp.ExpectedAgentID, hp.RotationChain),
			"response agentId does not match the disclosure")
	}

	m := sigMaterial{
		agentID:    resp.AgentID,
		auditHead:  resp.AuditHead,
		signedAt:   resp.SignedAt,
		nonce:      ch.Nonce,
		verifierID: ch.VerifierID,
		version:    resp.DisclosureVersion,
	}
	switch {
	case !m.wellFormed():
		record(HandshakeCheckSignatureInput, false, "a signed value is not printable ASCII without '\"' or '\\'")
	default:
		record(HandshakeCheckSignatureInput, resp.SignatureInput == m.signatureInput(), "signature-input does not match the issued challenge")
	}

	ok, reason := verifyHandshakeSignature(&m, resp.Signature, hp.RotationChain)
	record(HandshakeCheckSignature, ok, reason)

	supported := hp.SupportedVersions
	if supported == nil {
		// The challenge advertised them (§7.1); §7.5 holds the verifier to
		// what it advertised.
		supported = ch.SupportedVersions
	}
	if supported != nil && resp.DisclosureVersion != nil {
		v := *resp.DisclosureVersion
		record(HandshakeCheckVersion, slices.Contains(supported, v),
			fmt.Sprintf("unsupported disclosure version %d (verifier supports %v)", v, supported))
	}

	now := hp.Now
	if now.IsZero() {
		now = time.Now()
	}
	maxAge := hp.MaxAge
	if maxAge <= 0 {
		maxAge = 60 * time.Second
	}
	switch signedAt, err := time.Parse(time.RFC3339Nano, resp.SignedAt); {
	case err != nil:
		record(HandshakeCheckFreshness, false, "signedAt is not an RFC 3339 timestamp")
	default:
		age := now.Sub(signedAt)
		record(HandshakeCheckFreshness, age >= 0 && age <= maxAge, "challenge response is stale (age "+age.String()+")")
	}

	if hp.DisclosureAnchor != "" || len(hp.PriorHeads) > 0 {
		res.Regression = resp.AuditHead != hp.DisclosureAnchor && slices.Contains(hp.PriorHeads, resp.AuditHead)
		record(HandshakeCheckAuditHead, !(res.Regression && hp.RefuseRegression),
			"audit head regressed to a head older than the disclosure's anchor")
	}

	res.Failed = make([]string, 0, 2)
	for _, c := range res.Checks {
		if !c.OK {
			res.Failed = append(res.Failed, c.Name)
		}
	}
	res.OK = len(res.Failed) == 0
	return res
}

// verifyHandshakeSignature checks the response's signature. The key is the
// one the response's agentId names (SPEC §7.4 step 4), except when a
// rotation chain is given and the response answers as the stable identity
// itself: then the identity has moved on, and only the key the
// chain ends at may sign for it, so a rotated-away key can no longer
// answer. A response whose agentId is the chain's last key (§7.2: the
// responder's own key) is checked against that key; the agentId check
// verifies the chain from the expected identity to it.
func verifyHandshakeSignature(m *sigMaterial, sigHex string, chain []RotationStatement) (bool, string) {
	key, err := PublicKeyOf(m.agentID)
	if err != nil {
		return false, "response agentId does not name an Ed25519 key"
	}
	if len(chain) > 0 {
		last, err := PublicKeyOf(chain[len(chain)-1].To)
		if err != nil {
			return false, "rotation chain does not end at an Ed25519 key"
		}
		if !bytes.Equal(key, last) {
			if err := VerifyRotationChain(m.agentID, chain, last); err != nil {
				return false, err.Error()
			}
		}
		key = last
	}
	sig, err := hex.DecodeString(sigHex)
	if err != nil || len(sig) != ed25519.SignatureSize || !ed25519.Verify(key, m.signatureBase(), sig) {
		return false, "challenge signature invalid (no live key possession)"
	}
	return true, ""
}

// answersForRotated reports whether agentID names the key a verified
// rotation chain from expected ends at: the responder answering with its
// current key (SPEC §7.2) for an identity that rotated to it.
func answersForRotated(agentID, expected string, chain []RotationStatement) bool {
	if len(chain) == 0 {
		return false
	}
	key, err := PublicKeyOf(agentID)
	if err != nil {
		return false
	}
	last, err := PublicKeyOf(chain[len(chain)-1].To)
	if err != nil || !bytes.Equal(key, last) {
		return false
	}
	return VerifyRotationChain(expected, chain, last) == nil
}

// sameAgent compares two agentIds as keys when both name one, else as
// strings.
func sameAgent(a, b string) bool {
	if a == b {
		return true
	}
	ka, errA := PublicKeyOf(a)
	kb, errB := PublicKeyOf(b)
	return errA == nil && errB == nil && bytes.Equal(ka, kb)
}
