package identity_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/identity"
)

// Examples use fixed keys and a fixed clock so their output is stable.

func adpExampleKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

var adpExampleNow = time.Date(2026, 6, 24, 12, 30, 0, 0, time.UTC)

// adpExampleDisclosure is a small but complete disclosure for agentID.
func adpExampleDisclosure(agentID string) *identity.Disclosure {
	d := &identity.Disclosure{
		Version:      identity.DisclosureVersion,
		DisclosureID: "disc_example",
		AgentID:      agentID,
		IssuedAt:     identity.Timestamp(adpExampleNow.Add(-time.Hour)),
		ValidUntil:   identity.Timestamp(adpExampleNow.Add(23 * time.Hour)),
		Nonce:        "8f1d2c",
		AuditAnchor:  strings.Repeat("ab", 32),
		SystemPrompt: identity.SystemPrompt{Algorithm: "sha256", Digest: strings.Repeat("cd", 32)},
		Constitution: identity.Constitution{
			HardConstraints: []identity.HardConstraint{{ID: "no_self_payment", Description: "never pay the operator", Kind: "deny"}},
			Enforced:        true,
		},
		Tools:    identity.ToolInventory{Tools: []identity.Tool{{Name: "pay", Access: "gated", MovesValue: true}}},
		Capital:  identity.Capital{Custody: "non_custodial"},
		Operator: identity.OperatorIdentity{OperatorID: "op_1", Attestation: identity.Attestation{Scheme: "none", Level: "signed"}, DeniabilityBoundary: "spend within mandates"},
		History:  identity.History{ChainAnchor: strings.Repeat("ef", 32), Summary: identity.HistorySummary{TotalDecisions: 12, SettledCount: 10, BlockedCount: 2}},
	}
	d.Constitution.Digest = identity.ConstitutionDigest(d.Constitution)
	return d
}

func ExampleCanonicalize() {
	b, err := identity.Canonicalize(map[string]any{"b": 1, "a": []int{3, 1, 2}, "😀": true, "\uFB33": nil})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))
	// Output: {"a":[3,1,2],"b":1,"😀":true,"דּ":null}
}

func ExampleCanonicalJSON() {
	b, err := identity.CanonicalJSON([]byte(`{ "score": 87.50, "big": 1E6, "ratio": 5e-1 }`))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))
	_, err = identity.CanonicalJSON([]byte(`{"a":1,"a":2}`))
	fmt.Println(errors.Is(err, identity.ErrMalformed))
	// Output:
	// {"big":1000000,"ratio":0.5,"score":87.5}
	// true
}

func ExampleConstitutionDigest() {
	c := identity.Constitution{
		HardConstraints: []identity.HardConstraint{{ID: "no_self_payment", Description: "no paying your own operator", Kind: "deny"}},
		Enforced:        true,
	}
	fmt.Println(identity.ConstitutionDigest(c))
	// Output: 783f12f83f4197241af54143e5ab5d1da6c42442b96434eb63b05e01afdf5c68
}

func ExampleTimestamp() {
	fmt.Println(identity.Timestamp(time.Date(2026, 6, 24, 14, 30, 0, 123456789, time.FixedZone("CEST", 2*3600))))
	// Output: 2026-06-24T12:30:00.123Z
}

func ExampleDIDKey() {
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)) // the W3C test vector's zero seed
	fmt.Println(identity.DIDKey(key.Public().(ed25519.PublicKey)))
	// Output: did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp
}

func ExamplePublicKeyOf() {
	for _, id := range []string{
		"did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp",
		"3B6A27BCCEB6A42D62A3A8D02A6F0D73653215771DE243A63AC048A18B59DA29",
		"agent-7",
	} {
		k, err := identity.PublicKeyOf(id)
		fmt.Printf("%x %v\n", k, errors.Is(err, identity.ErrAgentID))
	}
	// Output:
	// 3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29 false
	// 3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29 false
	//  true
}

func ExampleDIDDocument() {
	doc, err := identity.DIDDocument("did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp", "https://agent.example/.well-known/agent-disclosure")
	if err != nil {
		panic(err)
	}
	fmt.Println(doc.VerificationMethod[0].ID)
	fmt.Println(doc.Service[0].Type, doc.Service[0].ServiceEndpoint)
	// Output:
	// did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp#z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp
	// AgentDisclosure https://agent.example/.well-known/agent-disclosure
}

func ExampleParseDisclosure() {
	_, err := identity.ParseDisclosure([]byte(`{"version":1,"disclosureId":"d"}`))
	fmt.Println(err)
	fmt.Println(errors.Is(err, identity.ErrMalformed))
	// Output:
	// identity: malformed disclosure: agentId: required field is missing
	// true
}

func ExampleSignV1() {
	key := adpExampleKey(1)
	d := adpExampleDisclosure(identity.DIDKey(key.Public().(ed25519.PublicKey)))
	env, err := identity.SignV1(d, key, nil)
	if err != nil {
		panic(err)
	}
	var sd identity.SignedDisclosure
	if err := json.Unmarshal(env, &sd); err != nil {
		panic(err)
	}
	fmt.Println(sd.Signature.Algorithm, len(sd.Signature.Value))
	fmt.Println(identity.Verify(env, identity.Policy{Now: adpExampleNow}).Outcome)
	// Output:
	// ed25519 128
	// transact
}

func ExampleSignJWS() {
	key := adpExampleKey(1)
	env, err := identity.SignJWS(adpExampleDisclosure(identity.DIDKey(key.Public().(ed25519.PublicKey))), key, nil)
	if err != nil {
		panic(err)
	}
	var j identity.JWSDisclosure
	if err := json.Unmarshal(env, &j); err != nil {
		panic(err)
	}
	fmt.Println(j.Protected)
	fmt.Println(j.Header.JWK.Kty, j.Header.JWK.Crv)
	d := identity.Verify(env, identity.Policy{Now: adpExampleNow})
	fmt.Println(d.Envelope, d.Outcome)
	// Output:
	// eyJhbGciOiJFZERTQSIsInR5cCI6ImFwcGxpY2F0aW9uL2FkcCtqc29uIn0
	// OKP Ed25519
	// jws transact
}

func ExampleSignCanonical() {
	key := adpExampleKey(1)
	canon, err := identity.Canonicalize(adpExampleDisclosure(identity.DIDKey(key.Public().(ed25519.PublicKey))))
	if err != nil {
		panic(err)
	}
	v1, jws, err := identity.SignCanonical(canon, key, nil)
	if err != nil {
		panic(err)
	}
	a := identity.Verify(v1, identity.Policy{Now: adpExampleNow})
	b := identity.Verify(jws, identity.Policy{Now: adpExampleNow})
	fmt.Println(a.Outcome, b.Outcome, a.Digest == b.Digest)
	// Output: transact transact true
}

func ExampleVerify() {
	key := adpExampleKey(1)
	d := adpExampleDisclosure(identity.DIDKey(key.Public().(ed25519.PublicKey)))
	d.Capital.Custody = "custodial"
	env, err := identity.SignV1(d, key, nil)
	if err != nil {
		panic(err)
	}
	policy := identity.Policy{
		Now:                         adpExampleNow,
		RequireEnforcedConstitution: true,
		RequireNonCustodial:         true,
		RequireRedTeam:              true,
	}
	dec := identity.Verify(env, policy)
	fmt.Println(dec.Outcome, dec.Failed)
	for _, c := range dec.Checks {
		if c.OK {
			fmt.Println(c.Name, "ok")
		} else {
			fmt.Println(c.Name, "failed:", c.Reason)
		}
	}
	fmt.Println(identity.Verify([]byte(`{"not":"an envelope"}`), policy).Failed)
	// Output:
	// refuse [redTeamPresent nonCustodial]
	// signature ok
	// freshness ok
	// enforcedConstitution ok
	// redTeamPresent failed: no red-team attestation
	// nonCustodial failed: operation is custodial
	// [schema]
}

func ExampleRotate() {
	oldKey, newKey := adpExampleKey(1), adpExampleKey(2)
	st, err := identity.Rotate(oldKey, newKey.Public().(ed25519.PublicKey), adpExampleNow)
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Type, st.RotatedAt)
	// The identity stays the old key's; the new key signs with the chain.
	d := adpExampleDisclosure(identity.DIDKey(oldKey.Public().(ed25519.PublicKey)))
	env, err := identity.SignV1(d, newKey, []identity.RotationStatement{st})
	if err != nil {
		panic(err)
	}
	fmt.Println(identity.Verify(env, identity.Policy{Now: adpExampleNow}).Outcome)
	// Output:
	// rotation 2026-06-24T12:30:00.000Z
	// transact
}

func ExampleVerifyRotationChain() {
	k0, k1, k2 := adpExampleKey(1), adpExampleKey(2), adpExampleKey(3)
	h1, _ := identity.Rotate(k0, k1.Public().(ed25519.PublicKey), adpExampleNow)
	h2, _ := identity.Rotate(k1, k2.Public().(ed25519.PublicKey), adpExampleNow)
	agent := identity.DIDKey(k0.Public().(ed25519.PublicKey))
	fmt.Println(identity.VerifyRotationChain(agent, []identity.RotationStatement{h1, h2}, k2.Public().(ed25519.PublicKey)))
	err := identity.VerifyRotationChain(agent, []identity.RotationStatement{h2}, k2.Public().(ed25519.PublicKey))
	fmt.Println(err, errors.Is(err, identity.ErrRotationChain))
	// Output:
	// <nil>
	// identity: rotation chain: hop 0 does not continue from the previous key true
}

func ExampleVerifyKeyBinding() {
	key := adpExampleKey(1)
	pub := key.Public().(ed25519.PublicKey)
	fmt.Println(identity.VerifyKeyBinding(identity.DIDKey(pub), pub, nil))
	err := identity.VerifyKeyBinding(identity.DIDKey(adpExampleKey(2).Public().(ed25519.PublicKey)), pub, nil)
	fmt.Println(errors.Is(err, identity.ErrKeyBinding))
	// Output:
	// <nil>
	// true
}

func ExampleParsePolicy() {
	p, err := identity.ParsePolicy([]byte(`{"requireEnforcedConstitution":true,"minRedTeamGrade":"B"}`))
	fmt.Println(p.MinRedTeamGrade, err)
	_, err = identity.ParsePolicy([]byte(`{"now":"2026-06-24T12:30:00.000Z"}`))
	fmt.Println(err)
	// Output:
	// B <nil>
	// identity: invalid policy: now: unknown field (additionalProperties is false)
}

func ExampleTighten() {
	server := identity.Policy{RequireEnforcedConstitution: true, MinRedTeamGrade: "B"}
	p, err := identity.Tighten(server, identity.Policy{MinRedTeamGrade: "A", RequireNonCustodial: true})
	fmt.Println(p.MinRedTeamGrade, p.RequireNonCustodial, p.RequireEnforcedConstitution, err)
	_, err = identity.Tighten(server, identity.Policy{MinRedTeamGrade: "C", RequireFresh: new(false)})
	fmt.Println(err, errors.Is(err, identity.ErrPolicyLoosened))
	// Output:
	// A true true <nil>
	// identity: request loosens the policy: requireFresh, minRedTeamGrade true
}

func ExamplePolicy_Hash() {
	a := identity.Policy{RequiredHardConstraints: []string{"b", "a"}}
	b := identity.Policy{RequiredHardConstraints: []string{"a", "b", "a"}, RequireFresh: new(true), MaxRedTeamHardFails: new(0)}
	fmt.Println(a.Hash() == b.Hash(), a.Hash() == identity.Policy{}.Hash())
	// Output: true false
}

func ExampleNewChallenge() {
	ch, err := identity.NewChallenge(bytes.NewReader(make([]byte, 16)), adpExampleNow, "verifier-X", []int{1})
	if err != nil {
		panic(err)
	}
	b, _ := json.Marshal(ch)
	fmt.Println(string(b))
	// Output: {"nonce":"00000000000000000000000000000000","issuedAt":"2026-06-24T12:30:00.000Z","verifierId":"verifier-X","supportedVersions":[1]}
}

func ExampleRespond() {
	key := adpExampleKey(1)
	ch := identity.Challenge{Nonce: "chal_1", IssuedAt: "2026-06-24T12:30:00.000Z", VerifierID: "verifier-X"}
	resp, err := identity.Respond(ch, key, "", strings.Repeat("ab", 4), adpExampleNow, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.SignatureInput)
	// Output: sig=("adp-agent-id" "adp-audit-head");created="2026-06-24T12:30:00.000Z";keyid="8a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5c";alg="ed25519";nonce="chal_1";tag="verifier-X"
}

func ExampleVerifyResponse() {
	key := adpExampleKey(1)
	agent := identity.DIDKey(key.Public().(ed25519.PublicKey))
	anchor := strings.Repeat("ab", 32)
	ch, _ := identity.NewChallenge(nil, adpExampleNow, "verifier-X", []int{1})
	version := 1
	resp, _ := identity.Respond(ch, key, agent, anchor, adpExampleNow.Add(2*time.Second), &version)
	r := identity.VerifyResponse(resp, ch, identity.HandshakePolicy{
		ExpectedAgentID:   agent,
		DisclosureAnchor:  anchor,
		Now:               adpExampleNow.Add(3 * time.Second),
		SupportedVersions: []int{1},
	})
	fmt.Println(r.OK, r.Failed)
	r = identity.VerifyResponse(resp, ch, identity.HandshakePolicy{ExpectedAgentID: agent, Now: adpExampleNow.Add(time.Hour)})
	fmt.Println(r.OK, r.Failed)
	// Output:
	// true []
	// false [freshness]
}

func ExampleRedactableFields() {
	fmt.Println(identity.RedactableFields())
	// Output: [systemPrompt constitution tools capital operator history redTeam model provenance]
}

func ExampleCommit() {
	c, err := identity.Commit(map[string]any{"custody": "non_custodial", "mandates": []any{}}, "00112233")
	fmt.Println(c, err)
	// Output: 2ab8a2108d5c75e2704232a35e1caa60b8d0e35bd0f89dd363c31f471a815957 <nil>
}

func ExamplePrepareRedactable() {
	key := adpExampleKey(1)
	h, err := identity.PrepareRedactable(adpExampleDisclosure(identity.DIDKey(key.Public().(ed25519.PublicKey))), key, bytes.NewReader(make([]byte, 256)))
	if err != nil {
		panic(err)
	}
	fmt.Println(len(h.Redactable.Commitments), h.Salts["capital"])
	// Output: 6 00000000000000000000000000000000
}

func ExampleReveal() {
	key := adpExampleKey(1)
	h, err := identity.PrepareRedactable(adpExampleDisclosure(identity.DIDKey(key.Public().(ed25519.PublicKey))), key, nil)
	if err != nil {
		panic(err)
	}
	view := identity.Reveal(h, "constitution", "capital")
	fmt.Println(len(view.Commitments), len(view.Revealed))
	// Output: 6 2
}

func ExampleVerifyRedacted() {
	key := adpExampleKey(1)
	h, err := identity.PrepareRedactable(adpExampleDisclosure(identity.DIDKey(key.Public().(ed25519.PublicKey))), key, nil)
	if err != nil {
		panic(err)
	}
	view, _ := json.Marshal(identity.Reveal(h, "constitution", "capital"))
	fmt.Printf("%+v\n", identity.VerifyRedacted(view))
	forged := bytes.Replace(view, []byte(`"enforced":true`), []byte(`"enforced":false`), 1)
	fmt.Printf("%+v\n", identity.VerifyRedacted(forged))
	// Output:
	// {OK:true RevealedFields:[capital constitution] Reason:}
	// {OK:false RevealedFields:[] Reason:revealed field "constitution" does not match its commitment}
}

func ExampleSignRevocation() {
	key := adpExampleKey(1)
	r, err := identity.SignRevocation(key, "disc_example", "superseded", adpExampleNow)
	if err != nil {
		panic(err)
	}
	fmt.Println(r.ID, r.RevokedAt, identity.VerifyRevocation(r))
	// Output: disc_example 2026-06-24T12:30:00.000Z <nil>
}

func ExampleVerifyRevocation() {
	r, _ := identity.SignRevocation(adpExampleKey(1), "disc_example", "superseded", adpExampleNow)
	r.Reason = "never happened"
	err := identity.VerifyRevocation(r)
	fmt.Println(err, errors.Is(err, identity.ErrInvalidSignature))
	// Output: identity: revocation: identity: signature does not verify true
}

func ExampleRevocationList() {
	var list identity.RevocationList
	list.Revoke("disc_example", "superseded", adpExampleNow)
	fmt.Println(list.IsRevoked("disc_example"), list.IsRevoked("disc_other"))
	fmt.Printf("%+v\n", list.Status("disc_example"))
	b, _ := json.Marshal(&list)
	fmt.Println(string(b))
	var again identity.RevocationList
	if err := json.Unmarshal(b, &again); err != nil {
		panic(err)
	}
	fmt.Println(len(again.Entries()))

	// A list is a policy's revocation oracle.
	key := adpExampleKey(1)
	env, _ := identity.SignV1(adpExampleDisclosure(identity.DIDKey(key.Public().(ed25519.PublicKey))), key, nil)
	fmt.Println(identity.Verify(env, identity.Policy{Now: adpExampleNow, IsRevoked: list.IsRevoked}).Failed)
	// Output:
	// true false
	// {Revoked:true Reason:superseded RevokedAt:2026-06-24T12:30:00.000Z}
	// [{"id":"disc_example","reason":"superseded","revokedAt":"2026-06-24T12:30:00.000Z"}]
	// 1
	// [revocation]
}

func ExampleEntryHash() {
	fmt.Println(identity.EntryHash(0, "ffba29539fea533b2a4c50697bc9e9c10b8a72e0ce3dbbccb203a53bf7ee7172",
		"ef4931f78822741b7eccd616712ff1367d308537828b083ea1326b9ba583cb9d", "2026-06-24T12:00:00.000Z", identity.Genesis))
	// Output: 0604ade07ce53d30557cff67d40bc9e31af95945e7af6a3e840f34208ba31f74
}

func ExampleVerifyInclusionProof() {
	e := identity.TransparencyEntry{
		Index:            0,
		DisclosureDigest: "ffba29539fea533b2a4c50697bc9e9c10b8a72e0ce3dbbccb203a53bf7ee7172",
		AgentID:          "ef4931f78822741b7eccd616712ff1367d308537828b083ea1326b9ba583cb9d",
		IssuedAt:         "2026-06-24T12:00:00.000Z",
		PrevHash:         identity.Genesis,
		Hash:             "0604ade07ce53d30557cff67d40bc9e31af95945e7af6a3e840f34208ba31f74",
	}
	fmt.Println(identity.VerifyInclusionProof(e))
	e.IssuedAt = "2026-06-24T12:00:00.001Z"
	fmt.Println(errors.Is(identity.VerifyInclusionProof(e), identity.ErrTampered))
	// Output:
	// <nil>
	// true
}

func ExampleVerifyLog() {
	var log identity.TransparencyLog
	log.AppendDigest("aa", "agent", "2026-06-24T12:00:00.000Z")
	log.AppendDigest("bb", "agent", "2026-06-24T13:00:00.000Z")
	entries := log.Entries()
	fmt.Println(identity.VerifyLog(entries))
	entries[0].DisclosureDigest = "cc"
	fmt.Println(identity.VerifyLog(entries))
	// Output:
	// <nil>
	// identity: transparency log broken at entry 0: hash does not recompute
}

func ExampleTransparencyLog() {
	key := adpExampleKey(1)
	d := adpExampleDisclosure(identity.DIDKey(key.Public().(ed25519.PublicKey)))
	var log identity.TransparencyLog
	fmt.Println(log.Head() == identity.Genesis)
	e, err := log.Append(d)
	if err != nil {
		panic(err)
	}
	env, _ := identity.SignJWS(d, key, nil)
	dec := identity.Verify(env, identity.Policy{Now: adpExampleNow})
	fmt.Println(e.Index, e.PrevHash == identity.Genesis, log.Contains(dec.Digest))
	log.AppendDigest(dec.Digest, dec.AgentID, dec.Disclosure.IssuedAt) // a re-issue is visible
	proof, ok := log.InclusionProof(1)
	fmt.Println(ok, proof.Recomputes, proof.Entry.PrevHash == e.Hash, log.Head() == proof.Entry.Hash, log.Verify())
	// Output:
	// true
	// 0 true true
	// true true true true <nil>
}
