// Package identity implements the Agent Disclosure Protocol (ADP,
// specification version 2, disclosure schema version 1): the signed
// disclosure an agent shows a counterparty before it transacts, and
// everything a counterparty needs to check it. The implementation follows
// the protocol's SPEC.md and is held to its conformance corpus (canonical
// vectors, the must-reject corpus, the reference interop fixtures and the
// canonicalization fuzz corpus; see testdata/adp).
//
// # Documents
//
// A [Disclosure] is the document: identity and freshness (agentId,
// issuedAt, validUntil, nonce, auditAnchor), the system-prompt digest, the
// constitution (with its load-bearing enforced flag), tools, capital,
// operator, history and the optional redTeam, model, provenance and
// extensions. The Go types carry the exact ADP JSON names, and unset
// optional fields are omitted, so [Canonicalize] of a Disclosure is the
// byte string ADP signs. [ParseDisclosure] validates a document
// structurally. [ConstitutionDigest] computes constitution.digest as the
// reference emitter does; nothing verifies it.
//
// # Canonical form
//
// Signatures cover RFC 8785 (JCS) canonical JSON: keys sorted by UTF-16
// code unit, numbers in ECMAScript form, no whitespace ([Canonicalize],
// [CanonicalJSON], built on github.com/gowebpki/jcs). The verifier writes
// the same bytes straight from its parse tree; the two are tested equal.
//
// # Signing
//
// [SignV1] writes the v1 object envelope {disclosure, signature,
// rotationChain?} and [SignJWS] the v2 flattened JWS with protected header
// {"alg":"EdDSA","typ":"application/adp+json"}; [SignCanonical] produces
// both from one canonicalization. The agentId is the signing key as 64 hex
// digits or its did:key ([DIDKey], [PublicKeyOf], [DIDDocument]). After a
// key change the agentId stays and a rotation chain ([Rotate]) links it to
// the new key.
//
// # Key normalisation
//
// Wherever an agentId is compared with a key — the identity binding
// ([VerifyKeyBinding]), rotation hops ([VerifyRotationChain]), the
// handshake, redacted views — both sides are reduced to the 32 key bytes:
// hex in either case and did:key name the same key. The reference compares
// strings; normalising accepts nothing the key holder did not sign, and lets
// a did:key identity rotate, which the reference cannot.
//
// # Verifying
//
// [Verify] takes untrusted bytes and a [Policy] and returns a [Decision]:
// transact or refuse, with every check and the names of those that failed
// (the reference's names: "signature", "freshness", "enforcedConstitution",
// "redTeamGrade", ...; "schema" for input that is not a valid envelope,
// which stops evaluation). It never panics and never returns an error. The
// input is limited to [MaxEnvelopeSize] (256 KiB) and 64 levels of nesting,
// parsed once, strictly (duplicate keys refused), validated by hand-written
// code equivalent to the published JSON Schemas (a differential test runs
// both), canonicalized once, then checked. Freshness requires RFC 3339 UTC
// timestamps and compares instants; see Verify.
//
// A server combines its own policy with a caller's request with
// [Tighten], which only ever adds requirements, and identifies a policy by
// [Policy.Hash]. [ParsePolicy] reads the ADP policy JSON strictly.
//
// # Handshake
//
// A disclosure proves commitments; the live handshake proves key
// possession now. A verifier issues a [NewChallenge]; the agent answers
// with [Respond], an Ed25519 signature over an RFC 9421 signature base
// (SPEC §7.3); [VerifyResponse] runs the MUST-checks of SPEC §7.4.
//
// # Selective disclosure, revocation, transparency
//
// [PrepareRedactable] commits to each field under a salt and signs the
// commitments; [Reveal] discloses a subset; [VerifyRedacted] checks a view.
// [SignRevocation], [VerifyRevocation] and [RevocationList] implement the
// status list of SPEC §10.1; [TransparencyLog], [EntryHash] and
// [VerifyInclusionProof] the hash-linked log of SPEC §10.2.
//
// # The deployment's own identity
//
// [Service] is a deployment's identity, built on the above. [Open] loads
// (or on first start creates and records) the agent id — the first identity
// key as 64 lowercase hex digits, the form every ADP verifier accepts on
// every path, kept for good as written (an identity created before this
// default keeps its did:key) — and the rotation chain to the key that signs
// now; [Service.Respond] answers a challenge with the current key in hex
// (SPEC §7.2); [Service.Rotate] extends the chain under an operator's
// call. [Service.Disclose] serves the deployment's signed disclosure, whose
// fields are read from the running server through [Sources] (the gate
// policy in force as the constitution, the contract model's operations as
// the tools, the live mandates as the capital, the operator configuration)
// and from the record (the history, tallied incrementally, and the audit
// anchor, its head); signatures are cached so serving costs none.
// [Service.Verify] checks a counterparty's disclosure under the
// deployment's policy tightened by the caller's, the revocations an
// operator recorded and, with [Service.Challenge] and a counterparty's
// [Service.Respond], the live handshake; every decision is an
// identity.verified record entry, written in the transaction that stores it
// as the counterparty's trust. [Service.Resolve] turns a reference into a
// [Counterparty] offline, and fetches a disclosure only from the base URL
// of a counterparty an operator registered ([Service.Register]).
package identity
