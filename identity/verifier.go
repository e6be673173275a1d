package identity

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/internal/wirejson"
	"github.com/countersign/countersign/store"
)

// VerifyRequest is the input of [Service.Verify]: a disclosure envelope in
// either shape and, optionally, a per-call policy and the answer to a
// challenge this deployment issued.
type VerifyRequest struct {
	// Envelope is the signed disclosure as received (v1 object or v2
	// flattened JWS), never re-encoded before verification.
	Envelope json.RawMessage
	// Policy tightens the deployment's verification policy for this call;
	// nil verifies under the deployment's policy as it is.
	Policy *Policy
	// Response answers a challenge issued by [Service.Challenge]; when
	// set, the live handshake (ADP §7) is one of the checks.
	Response *ChallengeResponse
}

// verifyWrapper is the wrapped form of a /verify body.
type verifyWrapper struct {
	Envelope json.RawMessage    `json:"envelope"`
	Policy   json.RawMessage    `json:"policy,omitempty"`
	Response *ChallengeResponse `json:"challengeResponse,omitempty"`
}

// ParseVerifyRequest reads the body of POST /verify: either a bare
// disclosure envelope, or {"envelope": ..., "policy": ..., "challengeResponse": ...}.
// The two are told apart by the member "envelope", which neither ADP
// envelope has.
//
// A body that is not a JSON object, and an envelope member that is not
// one, is no disclosure of anybody's: it is the request that is wrong, a
// [*contract.DecodeError] or [*contract.ValidationError] (400), and
// nothing is verified or recorded. An object that is not a valid
// disclosure is the counterparty's failure, not the caller's: the
// verifier refuses it with its schema check, and the refusal is a
// recorded Decision. A malformed policy or challenge response is an
// error (ErrBadPolicy, ErrBadChallenge).
func ParseVerifyRequest(body []byte) (VerifyRequest, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(body, &probe); err != nil || probe == nil {
		if !json.Valid(body) {
			return VerifyRequest{}, &contract.DecodeError{Code: contract.CodeRequestMalformedJSON, Offset: -1,
				Detail: "the request body is not valid JSON; send a disclosure envelope (a JSON object) or {\"envelope\": ...}"}
		}
		return VerifyRequest{}, &contract.ValidationError{Errors: []contract.FieldError{{Rule: "type",
			Message: "must be a JSON object: a disclosure envelope (ADP v1 or a flattened JWS) or {\"envelope\": ...}"}}}
	}
	env, ok := probe["envelope"]
	if !ok {
		return VerifyRequest{Envelope: body}, nil
	}
	if t := bytes.TrimSpace(env); len(t) == 0 || t[0] != '{' {
		return VerifyRequest{}, &contract.ValidationError{Errors: []contract.FieldError{{Field: "envelope", Rule: "type",
			Message: "must be a JSON object: a disclosure envelope (ADP v1 or a flattened JWS)"}}}
	}
	var w verifyWrapper
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return VerifyRequest{}, fmt.Errorf("%w: the request %s", ErrBadChallenge, wirejson.Describe(err))
	}
	req := VerifyRequest{Envelope: w.Envelope, Response: w.Response}
	if len(w.Policy) > 0 && !bytes.Equal(w.Policy, []byte("null")) {
		p, err := ParsePolicy(w.Policy)
		if err != nil {
			return VerifyRequest{}, fmt.Errorf("%w: %v", ErrBadPolicy, err)
		}
		req.Policy = &p
	}
	return req, nil
}

// Verified is the answer of [Service.Verify]: the decision and the record
// entry that holds it.
type Verified struct {
	Decision
	// AuditSeq is the identity.verified entry of this decision.
	AuditSeq uint64 `json:"auditSeq"`
}

// Trust is the last recorded decision about a counterparty.
type Trust struct {
	Outcome      string    `json:"outcome"`
	Failed       []string  `json:"failed"`
	PolicyHash   string    `json:"policyHash"`
	Digest       string    `json:"digest,omitempty"`
	DisclosureID string    `json:"disclosureId,omitempty"`
	At           time.Time `json:"at"`
	AuditSeq     uint64    `json:"auditSeq"`
}

// verifiedData is the data of an identity.verified entry: enough to audit
// the decision, never the disclosure itself.
type verifiedData struct {
	Digest       string   `json:"digest"`
	AgentID      string   `json:"agentId"`
	DisclosureID string   `json:"disclosureId,omitempty"`
	Envelope     string   `json:"envelope,omitempty"`
	Outcome      string   `json:"outcome"`
	Failed       []string `json:"failed"`
	Checks       []string `json:"checks"`
	PolicyHash   string   `json:"policyHash"`
	Handshake    bool     `json:"handshake"`
	Source       string   `json:"source"`
	Counterparty string   `json:"counterparty,omitempty"`
}

// Verify checks a counterparty's disclosure under the deployment's policy,
// tightened by the request's, against the revocations this deployment has
// recorded and, when the request answers a challenge, the live handshake;
// and appends the decision to the record in the same transaction that
// stores it as the counterparty's trust. A refusal is a Decision, not an
// error; errors are a policy that would loosen the deployment's
// (ErrBadPolicy) and storage failures.
func (s *Service) Verify(ctx context.Context, req VerifyRequest, actor audit.Actor, requestID string) (Verified, error) {
	p := s.policy
	if req.Policy != nil {
		t, err := Tighten(s.policy, *req.Policy)
		if err != nil {
			return Verified{}, fmt.Errorf("%w: %v", ErrBadPolicy, err)
		}
		p = t
	}
	return s.decide(ctx, req.Envelope, p, req.Response, actor, requestID, decideFor{source: "verify"})
}

// decideFor says what a decision is about beyond the disclosure itself.
type decideFor struct {
	// source is "verify" (an agent's /verify) or "resolve" (a registered
	// counterparty fetched by Resolve).
	source string
	// party is the registered counterparty checked, and partyKey its
	// registered agent key: the trust is stored under it, whatever (if
	// anything) the fetched disclosure claimed.
	party    string
	partyKey ed25519.PublicKey
	// post runs checks only the caller can run, after the verifier's.
	post func(*Decision)
}

// decide runs the verifier, then the handshake when resp is set, then
// the caller's checks, and records the decision.
func (s *Service) decide(ctx context.Context, raw []byte, p Policy, resp *ChallengeResponse, actor audit.Actor,
	requestID string, about decideFor) (Verified, error) {
	now := s.now()
	p.Now = now
	revoked, err := s.revokedSet(ctx)
	if err != nil {
		return Verified{}, err
	}
	p.IsRevoked = revoked
	d := Verify(raw, p)
	var used []byte
	if resp != nil {
		used = []byte(keyChallenge + resp.Nonce)
		var ok bool
		var reason string
		if ok, reason, err = s.checkHandshake(ctx, d, resp, now); err != nil {
			return Verified{}, err
		}
		addCheck(&d, "handshake", ok, reason)
	}
	if about.post != nil {
		about.post(&d)
	}
	data := verifiedData{
		Digest: d.Digest, AgentID: d.AgentID, DisclosureID: d.DisclosureID, Envelope: d.Envelope,
		Outcome: d.Outcome, Failed: nonNil(d.Failed), PolicyHash: d.PolicyHash, Handshake: resp != nil,
		Source: about.source, Counterparty: about.party,
	}
	for _, c := range d.Checks {
		data.Checks = append(data.Checks, c.Name)
	}
	b, err := json.Marshal(data)
	if err != nil {
		return Verified{}, err
	}
	trustKey := ""
	if about.partyKey != nil {
		trustKey = keyTrust + keyHex(about.partyKey)
	} else if k, err := PublicKeyOf(d.AgentID); err == nil {
		trustKey = keyTrust + keyHex(k)
	}
	var seq uint64
	err = s.log.Update(ctx, func(txn store.Txn) error {
		if used != nil {
			// The challenge is spent whatever the outcome: a response is
			// accepted once.
			if err := txn.Delete(used); err != nil {
				return err
			}
		}
		e, err := s.log.Append(txn, audit.Record{Type: EntryVerified, Actor: actor, RequestID: requestID, Data: b})
		if err != nil {
			return err
		}
		seq = e.Seq
		if trustKey == "" {
			return nil
		}
		t, err := json.Marshal(Trust{Outcome: d.Outcome, Failed: nonNil(d.Failed), PolicyHash: d.PolicyHash,
			Digest: d.Digest, DisclosureID: d.DisclosureID, At: now.UTC(), AuditSeq: e.Seq})
		if err != nil {
			return err
		}
		return txn.Set([]byte(trustKey), t)
	})
	if err != nil {
		return Verified{}, fmt.Errorf("identity: record decision: %w", err)
	}
	return Verified{Decision: d, AuditSeq: seq}, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// addCheck appends a check to a decision and keeps its outcome consistent:
// transact only while nothing failed.
func addCheck(d *Decision, name string, ok bool, reason string) {
	d.Checks = append(d.Checks, Check{Name: name, OK: ok, Reason: reason})
	if !ok {
		d.Failed = append(d.Failed, name)
		d.Outcome = OutcomeRefuse
	}
}

// issuedChallenge is a challenge this deployment issued and not yet saw
// answered.
type issuedChallenge struct {
	Challenge Challenge `json:"challenge"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// Challenge issues a live-handshake challenge (ADP §7.1) to send to a
// counterparty; [Service.Verify] accepts the counterparty's answer once,
// within Options.ChallengeTTL.
func (s *Service) Challenge(ctx context.Context, verifierID string) (Challenge, error) {
	if len(verifierID) > 256 {
		return Challenge{}, fmt.Errorf("%w: verifierId longer than 256 bytes", ErrBadChallenge)
	}
	if verifierID != "" && !isStructuredValue(verifierID) {
		// It becomes an RFC 9421 tag parameter: the client's to fix.
		return Challenge{}, fmt.Errorf("%w: verifierId must be printable ASCII without '\"' or '\\'", ErrBadChallenge)
	}
	now := s.now()
	ch, err := NewChallenge(s.rand, now, verifierID, []int{1})
	if err != nil {
		return Challenge{}, fmt.Errorf("identity: challenge: %w", err)
	}
	b, err := json.Marshal(issuedChallenge{Challenge: ch, ExpiresAt: now.Add(s.chTTL).UTC()})
	if err != nil {
		return Challenge{}, err
	}
	err = s.st.Update(ctx, func(txn store.Txn) error {
		if err := s.sweepChallenges(txn, now); err != nil {
			return err
		}
		return txn.Set([]byte(keyChallenge+ch.Nonce), b)
	})
	if err != nil {
		return Challenge{}, fmt.Errorf("identity: challenge: %w", err)
	}
	return ch, nil
}

// sweepChallenges deletes a few expired challenges, so that unanswered
// ones do not accumulate; bounded so that issuing stays cheap.
func (s *Service) sweepChallenges(txn store.Txn, now time.Time) error {
	it := txn.Iterate([]byte(keyChallenge), store.PrefixEnd([]byte(keyChallenge)), false)
	var dead [][]byte
	for n := 0; it.Next() && n < 64; n++ {
		var c issuedChallenge
		if json.Unmarshal(it.Value(), &c) != nil || now.After(c.ExpiresAt) {
			dead = append(dead, bytes.Clone(it.Key()))
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, k := range dead {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// checkHandshake verifies a response to a challenge this deployment issued,
// bound to the disclosure's agent id and audit anchor.
func (s *Service) checkHandshake(ctx context.Context, d Decision, resp *ChallengeResponse, now time.Time) (bool, string, error) {
	var c issuedChallenge
	err := s.st.View(ctx, func(r store.Reader) error {
		b, err := r.Get([]byte(keyChallenge + resp.Nonce))
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &c)
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, "the response answers no challenge this deployment issued, or one already answered", nil
	case err != nil:
		return false, "", fmt.Errorf("identity: handshake: %w", err)
	case now.After(c.ExpiresAt):
		return false, "the challenge expired before it was answered", nil
	case d.Disclosure == nil:
		return false, "no verified disclosure to bind the handshake to", nil
	}
	hp := HandshakePolicy{ExpectedAgentID: d.AgentID, DisclosureAnchor: d.Disclosure.AuditAnchor, Now: now,
		RotationChain: d.RotationChain, SupportedVersions: c.Challenge.SupportedVersions}
	if hp.SupportedVersions == nil {
		hp.SupportedVersions = []int{1} // what every challenge issued here advertises
	}
	r := VerifyResponse(*resp, c.Challenge, hp)
	if !r.OK {
		return false, fmt.Sprintf("handshake failed: %v", r.Failed), nil
	}
	return true, "", nil
}

// Respond answers a counterparty's challenge (ADP §7.2) with this
// deployment's current key, bound to the record's current head. The
// response's agentId is that key in hex, as §7.2 defines it and §7.4 step 4
// verifies it: the stable agent id itself while no rotation happened (and
// it is hex), the rotation chain's last key after one.
func (s *Service) Respond(ctx context.Context, ch Challenge) (ChallengeResponse, error) {
	if ch.Nonce == "" || len(ch.Nonce) > 256 || len(ch.VerifierID) > 256 || len(ch.SupportedVersions) > 16 {
		return ChallengeResponse{}, fmt.Errorf("%w: nonce is required; nonce and verifierId at most 256 bytes, at most 16 versions", ErrBadChallenge)
	}
	if err := s.sync(ctx, false); err != nil {
		return ChallengeResponse{}, err
	}
	head, err := s.head(ctx)
	if err != nil {
		return ChallengeResponse{}, err
	}
	key, _, _ := s.signer()
	v := 1
	resp, err := Respond(ch, key, "", head, s.now(), &v)
	if err != nil {
		return ChallengeResponse{}, fmt.Errorf("%w: %v", ErrBadChallenge, err)
	}
	return resp, nil
}

// head returns the hash of the record's newest entry.
func (s *Service) head(ctx context.Context) (string, error) {
	size, err := s.log.Size(ctx)
	if err != nil {
		return "", fmt.Errorf("identity: record head: %w", err)
	}
	if size == 0 {
		return "", errors.New("identity: the record is empty")
	}
	e, err := s.log.Get(ctx, size)
	if err != nil {
		return "", fmt.Errorf("identity: record head: %w", err)
	}
	return e.Hash, nil
}

// RevocationRecord is one id (a disclosure id or an agent id) this deployment
// refuses from now on (ADP §10.1).
type RevocationRecord struct {
	ID        string            `json:"id"`
	Reason    string            `json:"reason"`
	RevokedAt time.Time         `json:"revokedAt"`
	Signed    *SignedRevocation `json:"signed,omitempty"`
	AuditSeq  uint64            `json:"auditSeq"`
}

// RevokeRequest asks to revoke an id: either named by the operator, or
// carried by a revocation the id's own key signed.
type RevokeRequest struct {
	ID     string            `json:"id,omitempty" validate:"omitempty,max=256" doc:"A disclosure id or an agent id (64 hex or did:key)."`
	Reason string            `json:"reason,omitempty" validate:"omitempty,max=500" doc:"Why, for people reading the record."`
	Signed *SignedRevocation `json:"signed,omitempty" doc:"A signed revocation (ADP §10.1); its id and reason are used and its signature is checked."`
}

// revocationKey normalises an id: agent ids in hex or did:key form revoke
// the same key.
func revocationKey(id string) string {
	if k, err := PublicKeyOf(id); err == nil {
		return keyRevoked + "key:" + keyHex(k)
	}
	return keyRevoked + "id:" + id
}

// Revoke records a revocation; every later Verify refuses a disclosure
// whose disclosureId or agentId it names.
func (s *Service) Revoke(ctx context.Context, req RevokeRequest, call OperatorCall) (RevocationRecord, error) {
	rv := RevocationRecord{ID: req.ID, Reason: req.Reason, RevokedAt: s.now().UTC(), Signed: req.Signed}
	if req.Signed != nil {
		if err := VerifyRevocation(*req.Signed); err != nil {
			return RevocationRecord{}, fmt.Errorf("%w: %v", ErrBadRevocation, err)
		}
		if req.ID != "" && req.ID != req.Signed.ID {
			return RevocationRecord{}, fmt.Errorf("%w: id differs from the signed revocation's id", ErrBadRevocation)
		}
		rv.ID, rv.Reason = req.Signed.ID, req.Signed.Reason
	}
	if rv.ID == "" || len(rv.ID) > 256 {
		return RevocationRecord{}, fmt.Errorf("%w: an id of 1 to 256 bytes is required", ErrBadRevocation)
	}
	err := s.log.Update(ctx, func(txn store.Txn) error {
		r := rv
		data, err := json.Marshal(r)
		if err != nil {
			return err
		}
		e, err := s.log.Append(txn, audit.Record{Type: EntryRevoked, Actor: operatorActor(call), RequestID: call.RequestID,
			Rationale: call.Rationale, Data: data})
		if err != nil {
			return err
		}
		r.AuditSeq = e.Seq
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		rv = r
		return txn.Set([]byte(revocationKey(r.ID)), b)
	})
	if err != nil {
		return RevocationRecord{}, fmt.Errorf("identity: revoke: %w", err)
	}
	return rv, nil
}

// revokedSet returns an oracle over the revocations recorded so far. It
// reads the whole set once per decision: revocations are few, and the
// verifier's oracle must not do I/O.
func (s *Service) revokedSet(ctx context.Context) (func(string) bool, error) {
	set := map[string]bool{}
	err := s.st.View(ctx, func(r store.Reader) error {
		it := r.Iterate([]byte(keyRevoked), store.PrefixEnd([]byte(keyRevoked)), false)
		for it.Next() {
			set[string(it.Key())] = true
		}
		return it.Close()
	})
	if err != nil {
		return nil, fmt.Errorf("identity: revocations: %w", err)
	}
	if len(set) == 0 {
		return func(string) bool { return false }, nil
	}
	return func(id string) bool { return set[revocationKey(id)] }, nil
}

// keyOf returns the public key an agent id names, or nil.
func keyOf(agentID string) ed25519.PublicKey {
	k, err := PublicKeyOf(agentID)
	if err != nil {
		return nil
	}
	return k
}
