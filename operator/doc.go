// Package operator makes a human operator's authority checkable: every
// operator request carries a detached signature in the Svc-Operator header,
// made with a key only that person holds, over exactly the request they
// meant to send.
//
// The client half is [Signer] (used by the CLI, the examples and tests);
// the server half is [Verifier]. Both follow the wire contract of
// docs/DESIGN.md §5, restated here so that a client in another language can
// be written from this page alone.
//
// # Keys
//
// An operator key is an Ed25519 or ECDSA P-256 key pair. The person keeps
// the private key as a JWK file (internal/keyfile); the server trusts a JWK
// Set of public keys, each with a unique kid, loaded with [LoadKeySet] or
// [ReadKeySet]. A private key in the set is refused: the server must hold
// public keys only.
//
// # The header
//
// Svc-Operator is an RFC 8941 Dictionary with exactly four members, for
// example
//
//	Svc-Operator: keyid="op-alice", ts=1763800000, nonce="AQEBAQEBAQEBAQEBAQEBAQ", sig=:BASE64...:
//
// The members are:
//
//   - keyid: String, the kid of the operator's key (1 to 128 visible ASCII
//     bytes).
//   - ts: Integer, the signing time in Unix seconds.
//   - nonce: String, 16 to 64 random bytes in base64url without padding
//     (canonical: unused trailing bits are zero). A fresh one per request.
//   - sig: Byte Sequence, the signature (standard base64 with padding).
//
// Members may come in any order; the parser accepts the whitespace RFC 8941
// allows. It is stricter than RFC 8941 where a security header should
// have one meaning and one spelling: an unknown member, a member given
// twice (RFC 8941 would let the last win), parameters and inner lists are
// refused, since nothing in them would be signed (a future version that
// needs more members will change the first signed line instead); and a
// byte sequence must be canonical padded base64. See [ParseHeader].
//
// # The signed message
//
// The signature covers these seven lines joined by "\n" (no trailing
// newline):
//
//	svc-operator-v1
//	{operationId}                      e.g. operator.approve, as served in /openapi.json
//	{METHOD}                           upper case
//	{base_url}{path}[?{query}]         see below
//	{ts}                               decimal, exactly as in the header
//	{nonce}                            exactly as in the header
//	{base64url(SHA-256(body))}         no padding; the empty body when there is none
//
// {base_url} is the server's configured public base URL with any trailing
// "/" removed (the "servers" URL of /openapi.json), never the Host header.
// {path} is the path as sent on the request line, percent-encoding kept
// exactly (Go: url.URL.EscapedPath); "?" and the raw query follow only when
// the query is not empty. When the base URL has a path (a proxy serves the
// API under a prefix and strips it), {path} is the route path the server
// receives, so {base_url}{path} is still the URL the client addressed.
//
// An Ed25519 key signs the message itself (EdDSA). A P-256 key signs its
// SHA-256 (ES256), and sig holds the 64-byte fixed-size r||s form that JWS
// uses (RFC 7518 §3.4), not ASN.1 DER.
//
// # Verification
//
// [Verifier.Verify] accepts a request when, in this order: the header is
// present and well formed; keyid names a trusted key; |now − ts| is at
// most the window (300 s by default); sig has the length the key's
// algorithm produces; the signature verifies over the lines rebuilt from
// the request as received; and the nonce has never been accepted before.
// Each refusal is an [*UnauthorizedError] with a stable [Reason].
//
// The nonce is recorded only after the signature verifies, so a caller
// without a key cannot fill the store or burn another person's nonce. It
// is written durably under the store prefix operator/nonce/ in the same
// serializable transaction that checks it is new, so of two concurrent
// requests with one nonce exactly one is accepted, and a restart forgets
// nothing. A nonce is kept for twice the window after it was accepted
// (see [Verifier.SweepNonces]) so it outlives every moment its ts is still
// acceptable; nonces are unique across all keys, because keyid itself is
// not signed.
//
// # Rationale
//
// Every operator action states why it is taken; [CheckRationale] enforces
// the minimum length.
package operator
