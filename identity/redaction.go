package identity

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// redactableFields are the document fields a holder may withhold (SPEC §9,
// REDACTABLE_FIELDS), space-separated in the reference's order.
const redactableFields = "systemPrompt constitution tools capital operator history redTeam model provenance"

// RedactableFields returns the names of the fields a holder may withhold;
// the rest (version, disclosureId, agentId, issuedAt, validUntil, nonce,
// auditAnchor) travel in clear as DisclosureMeta.
func RedactableFields() []string { return strings.Fields(redactableFields) }

// DisclosureMeta is the always-clear part of a redactable disclosure.
type DisclosureMeta struct {
	Version      int    `json:"version"`
	DisclosureID string `json:"disclosureId"`
	AgentID      string `json:"agentId"`
	IssuedAt     string `json:"issuedAt"`
	ValidUntil   string `json:"validUntil"`
	Nonce        string `json:"nonce"`
	AuditAnchor  string `json:"auditAnchor,omitempty"`
}

// RedactableDisclosure is the signed commitment set: Signature covers
// canonicalize({meta, commitments}).
type RedactableDisclosure struct {
	Meta        DisclosureMeta    `json:"meta"`
	Commitments map[string]string `json:"commitments"`
	Signature   Signature         `json:"signature"`
}

// RedactableHolder is what the agent keeps in order to reveal fields later:
// the signed commitments, each committed field's canonical value and its
// salt. It is never shipped whole: the salts of withheld fields must stay
// private, or the commitments stop hiding anything.
type RedactableHolder struct {
	Redactable RedactableDisclosure
	Fields     map[string]json.RawMessage
	Salts      map[string]string
}

// RevealedField is a disclosed field with the salt that opens its
// commitment.
type RevealedField struct {
	Value json.RawMessage `json:"value"`
	Salt  string          `json:"salt"`
}

// RedactedView is what a holder ships: the meta, every commitment, the
// signature and only the revealed fields.
type RedactedView struct {
	Meta        DisclosureMeta           `json:"meta"`
	Commitments map[string]string        `json:"commitments"`
	Revealed    map[string]RevealedField `json:"revealed"`
	Signature   Signature                `json:"signature"`
}

// RedactionResult is the outcome of [VerifyRedacted]. RevealedFields, sorted,
// names the fields whose values are proven; it is empty unless OK.
type RedactionResult struct {
	OK             bool     `json:"ok"`
	RevealedFields []string `json:"revealedFields"`
	Reason         string   `json:"reason,omitempty"`
}

// Commit returns the salted commitment to a field value (SPEC §9):
// sha256Hex(canonicalize(value) + ":" + salt).
func Commit(value any, salt string) (string, error) {
	canon, err := Canonicalize(value)
	if err != nil {
		return "", err
	}
	return commitCanonical(canon, salt), nil
}

func commitCanonical(canon []byte, salt string) string {
	h := sha256.New()
	h.Write(canon)
	h.Write([]byte{':'})
	h.Write([]byte(salt))
	return hex.EncodeToString(h.Sum(nil))
}

// PrepareRedactable commits to every present redactable field of d under a
// fresh salt (16 bytes from r, crypto/rand when r is nil, hex encoded) and
// signs {meta, commitments} with key. d must be structurally valid and its
// agentId must name key (hex or did:key; a reference verifier accepts only
// the lowercase hex form).
func PrepareRedactable(d *Disclosure, key ed25519.PrivateKey, r io.Reader) (*RedactableHolder, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("identity: redact: private key is %d bytes, want %d", len(key), ed25519.PrivateKeySize)
	}
	if r == nil {
		r = rand.Reader
	}
	canon, err := Canonicalize(d)
	if err != nil {
		return nil, err
	}
	v, err := parseStrictJSON(string(canon), maxJSONDepth)
	if err != nil {
		return nil, fmt.Errorf("identity: redact: %w", err)
	}
	var doc Disclosure
	if err := decodeDisclosure(&v, &doc); err != nil {
		return nil, fmt.Errorf("identity: redact: malformed disclosure: %w", err)
	}
	pub := key.Public().(ed25519.PublicKey)
	if err := VerifyKeyBinding(doc.AgentID, pub, nil); err != nil {
		return nil, fmt.Errorf("identity: redact: %w", err)
	}
	h := &RedactableHolder{
		Redactable: RedactableDisclosure{
			Meta: DisclosureMeta{
				Version:      doc.Version,
				DisclosureID: doc.DisclosureID,
				AgentID:      doc.AgentID,
				IssuedAt:     doc.IssuedAt,
				ValidUntil:   doc.ValidUntil,
				Nonce:        doc.Nonce,
				AuditAnchor:  doc.AuditAnchor,
			},
			Commitments: map[string]string{},
		},
		Fields: map[string]json.RawMessage{},
		Salts:  map[string]string{},
	}
	for field := range strings.FieldsSeq(redactableFields) {
		m := v.member(field)
		if m == nil {
			continue
		}
		value, err := appendCanonical(nil, m)
		if err != nil {
			return nil, fmt.Errorf("identity: redact: %w", err)
		}
		var salt [16]byte
		if _, err := io.ReadFull(r, salt[:]); err != nil {
			return nil, fmt.Errorf("identity: redact: salt: %w", err)
		}
		s := hex.EncodeToString(salt[:])
		h.Fields[field] = value
		h.Salts[field] = s
		h.Redactable.Commitments[field] = commitCanonical(value, s)
	}
	signed, err := Canonicalize(struct {
		Meta        DisclosureMeta    `json:"meta"`
		Commitments map[string]string `json:"commitments"`
	}{h.Redactable.Meta, h.Redactable.Commitments})
	if err != nil {
		return nil, err
	}
	h.Redactable.Signature = Signature{
		Algorithm: "ed25519",
		PublicKey: hex.EncodeToString(pub),
		Value:     hex.EncodeToString(ed25519.Sign(key, signed)),
	}
	return h, nil
}

// Reveal builds the view that discloses the named fields. Names that were
// not committed (absent from the document, or not redactable) are skipped.
func Reveal(h *RedactableHolder, fields ...string) RedactedView {
	view := RedactedView{
		Meta:        h.Redactable.Meta,
		Commitments: maps.Clone(h.Redactable.Commitments),
		Revealed:    map[string]RevealedField{},
		Signature:   h.Redactable.Signature,
	}
	for _, f := range fields {
		if _, ok := h.Redactable.Commitments[f]; !ok {
			continue
		}
		view.Revealed[f] = RevealedField{Value: slices.Clone(h.Fields[f]), Salt: h.Salts[f]}
	}
	return view
}

// VerifyRedacted verifies a RedactedView given as JSON (SPEC §9): meta's
// agentId must name the signature's key (hex in either case, or did:key);
// the signature must verify over canonicalize({meta, commitments}); and
// every revealed value must reopen its commitment. Any failure fails the
// whole view. The view is parsed strictly (at most [MaxEnvelopeSize] bytes,
// no duplicate keys, no unknown members); revealed values are proven, not
// validated against the disclosure schema.
func VerifyRedacted(raw []byte) RedactionResult {
	fail := func(reason string) RedactionResult {
		return RedactionResult{RevealedFields: []string{}, Reason: reason}
	}
	if len(raw) > MaxEnvelopeSize {
		return fail(fmt.Sprintf("view is larger than %d bytes", MaxEnvelopeSize))
	}
	v, err := parseStrictJSON(string(raw), maxJSONDepth)
	if err != nil {
		return fail("malformed view: " + err.Error())
	}
	view, err := decodeRedactedView(&v)
	if err != nil {
		return fail("malformed view: " + err.Error())
	}
	pub, err := hex.DecodeString(view.sig.PublicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return fail("signature.publicKey is not a 32-byte Ed25519 key")
	}
	if k, err := PublicKeyOf(view.agentID); err != nil || !bytes.Equal(k, pub) {
		return fail("agentId does not match the signing public key")
	}
	signed := make([]byte, 0, 1024)
	signed = append(signed, `{"commitments":`...)
	signed, err = appendCanonical(signed, view.commitments)
	if err == nil {
		signed = append(signed, `,"meta":`...)
		signed, err = appendCanonical(signed, view.meta)
	}
	if err != nil {
		return fail("malformed view: " + err.Error())
	}
	sig, err := hex.DecodeString(view.sig.Value)
	if err != nil || len(sig) != ed25519.SignatureSize || !ed25519.Verify(pub, append(signed, '}'), sig) {
		return fail("signature mismatch")
	}
	fields := make([]string, 0, len(view.revealed.keys))
	for i, name := range view.revealed.keys {
		expected := view.commitments.member(name)
		if expected == nil {
			return fail("revealed field " + quoteForError(name) + " has no commitment")
		}
		r := &view.revealed.vals[i]
		value, err := appendCanonical(nil, r.member("value"))
		if err != nil {
			return fail("malformed view: " + err.Error())
		}
		if commitCanonical(value, r.member("salt").text) != expected.text {
			return fail("revealed field " + quoteForError(name) + " does not match its commitment")
		}
		fields = append(fields, name)
	}
	slices.Sort(fields)
	return RedactionResult{OK: true, RevealedFields: fields}
}

// redactedView is a structurally valid view, its parts kept as parsed
// values so the signed bytes are the canonical form of exactly what came.
type redactedView struct {
	meta, commitments, revealed *jsonValue
	agentID                     string
	sig                         Signature
}

func decodeRedactedView(v *jsonValue) (redactedView, error) {
	var rv redactedView
	if err := wantObject(v); err != nil {
		return rv, err
	}
	var seen uint32
	for i, k := range v.keys {
		m := &v.vals[i]
		var err error
		switch k {
		case "meta":
			seen |= 1 << 0
			rv.meta = m
			rv.agentID, err = decodeMeta(m)
		case "commitments":
			seen |= 1 << 1
			rv.commitments = m
			err = wantStringMap(m)
		case "revealed":
			seen |= 1 << 2
			rv.revealed = m
			err = decodeRevealed(m)
		case "signature":
			seen |= 1 << 3
			rv.sig, err = decodeSignatureBlock(m)
		default:
			return rv, unknownField(k)
		}
		if err != nil {
			return rv, at(k, err)
		}
	}
	if seen != 1<<4-1 {
		return rv, missing("meta commitments revealed signature", seen)
	}
	return rv, nil
}

// decodeMeta checks the meta block and returns its agentId.
func decodeMeta(v *jsonValue) (string, error) {
	if err := wantObject(v); err != nil {
		return "", err
	}
	var agentID string
	var seen uint32
	for i, k := range v.keys {
		m := &v.vals[i]
		var err error
		switch k {
		case "version":
			seen |= 1 << 0
			if m.kind != kindNumber || !isOne(m.text) {
				err = mustBe("the number 1")
			}
		case "disclosureId":
			seen |= 1 << 1
			_, err = decString(m)
		case "agentId":
			seen |= 1 << 2
			agentID, err = decString(m)
		case "issuedAt":
			seen |= 1 << 3
			_, err = decString(m)
		case "validUntil":
			seen |= 1 << 4
			_, err = decString(m)
		case "nonce":
			seen |= 1 << 5
			_, err = decString(m)
		case "auditAnchor":
			_, err = decString(m)
		default:
			return "", unknownField(k)
		}
		if err != nil {
			return "", at(k, err)
		}
	}
	if seen != 1<<6-1 {
		return "", missing("version disclosureId agentId issuedAt validUntil nonce", seen)
	}
	return agentID, nil
}

func wantStringMap(v *jsonValue) error {
	if err := wantObject(v); err != nil {
		return err
	}
	for i, k := range v.keys {
		if _, err := decString(&v.vals[i]); err != nil {
			return at(k, err)
		}
	}
	return nil
}

func decodeRevealed(v *jsonValue) error {
	if err := wantObject(v); err != nil {
		return err
	}
	for i, field := range v.keys {
		e := &v.vals[i]
		if err := wantObject(e); err != nil {
			return at(field, err)
		}
		var seen uint32
		for j, k := range e.keys {
			switch k {
			case "value":
				seen |= 1 << 0
			case "salt":
				seen |= 1 << 1
				if _, err := decString(&e.vals[j]); err != nil {
					return at(field, at(k, err))
				}
			default:
				return at(field, unknownField(k))
			}
		}
		if seen != 1<<2-1 {
			return at(field, missing("value salt", seen))
		}
	}
	return nil
}
