// Package ucp is a client of the Universal Commerce Protocol (UCP),
// versions 2026-01-11 and 2026-04-08, over its REST binding: it
// implements [cart.Merchant] for one merchant.
//
// # Discovery and version negotiation
//
// [New] fetches the merchant's profile (/.well-known/ucp) with [Discover]
// and validates it against the profile schema of the version it declares.
// A merchant offers the profile's own version and, from 2026-04-08 on, the
// older versions listed in ucp.supported_versions, each described by a
// profile of its own. [Negotiate] picks the newest version offered that
// Options.Versions allows (both by default); when that is not the
// profile's own version the client fetches and validates the
// version-specific profile. No common version fails with
// [ErrNoCommonVersion]. The REST endpoint is
// services["dev.ucp.shopping"].rest.endpoint (2026-01-11) or the entry
// with transport "rest" (2026-04-08); the merchant must declare the
// dev.ucp.shopping.checkout capability.
//
// # Requests
//
// Every request carries UCP-Agent: profile="<Options.AgentProfile>" and a
// fresh Request-Id (a UUID); both bindings make them mandatory. Create,
// Update, Complete and Cancel carry an Idempotency-Key, which the bindings
// type as a UUID: we send a UUIDv8 derived from our key (the cart's
// IdempotencyKey, the payment's IdempotencyKey, the session id for
// cancel), so a retry sends the same key. Request signatures are optional
// in 2026-04-08 (RFC 9421); 2026-01-11 marks a Request-Signature header
// required without defining it, so we send one only when Options.Sign is
// set. Update is PUT, a full replacement, in both versions.
//
// # Responses
//
// Every 2xx body is validated against the negotiated version's response
// schema before any of it is used (2026-04-08: checkout.json resolved for
// responses, oneOf an error_response). Validation is strict Go code that
// builds the wire types from exactly the keys it checked; it is never
// looser than the schemas (tests check it against an independent
// validator) and sometimes stricter: formats (uri, date-time) are
// asserted, integers must fit in an int64, a 2026-04-08 profile must be a
// business profile. A body that fails is refused whole with
// [cart.ErrInvalidResponse].
//
// Status mapping onto [cart.Status]: incomplete → incomplete (with
// Options.ReadyWithoutErrors, ready when no message is of type error; see
// below); requires_escalation → auth when an error message has code requires_3ds,
// else escalation (Cart.ContinueURL carries continue_url);
// ready_for_complete → ready; complete_in_progress → in_progress;
// completed → completed; canceled → expired when expires_at has passed
// (by Options.Now), else canceled. Totals: subtotal, tax, fulfillment
// (shipping), discount and items_discount (as positive amounts; 2026-04-08
// sends them negative) and total.
//
// UCP's incomplete means "missing required information, resolve via
// update": only ready_for_complete may be completed by a platform, and by
// default the client keeps to that. Some merchants never report
// ready_for_complete and accept the completion anyway — the protocol's
// public sample merchant keeps every session incomplete, without a
// message, until it is completed. [Options.ReadyWithoutErrors], which an
// operator chooses per merchant, treats such a session as ready: an
// incomplete session that carries no message of type error maps to ready
// (Cart.RawStatus still says incomplete, so the record tells what the
// merchant said) and Complete completes it. An incomplete session with an
// error message (out of stock, missing information) and every other
// status map as above whatever the option.
//
// Errors, per operation: 404 → [cart.ErrNotFound]; other 4xx →
// [cart.ErrRejected] with the merchant's message; a 2026-04-08 error
// response → ErrNotFound (code not_found), [cart.ErrDeclined]
// (payment_failed, payment_declined) or ErrRejected. A timeout, a
// connection error or a 5xx is [cart.ErrUnavailable] except on complete,
// where it is [cart.ErrUnknownOutcome]; so is an invalid 2xx answer to
// complete (it matches ErrInvalidResponse too).
//
// # Response signatures
//
// 2026-04-08 lets a merchant sign its answers (RFC 9421 over the REST
// binding): a signature over @status and, with a body, content-digest
// (RFC 9530, sha-256 of the raw bytes) and content-type, by an EC key
// named by keyid (P-256/ES256 or P-384/ES384: the JWK's crv decides; the
// value is raw r||s, never DER). Every checkout answer (create, get,
// update, complete, cancel, errors included) is checked on its raw bytes
// before any of it is read, status included:
//
//   - with Options.SigningKeys (keys an operator pinned) it must carry a
//     signature by one of them that verifies, and the profile's keys are
//     not trusted; an unsigned answer is refused, except a 5xx, which is
//     used for nothing but "try later";
//   - without, a signed answer must verify with a usable key of the
//     profile's signing_keys (RSA keys, other curves, malformed keys and a
//     kid published twice are skipped and logged at debug); an unsigned
//     answer is accepted. A keyid the client does not know makes it read
//     the profile's signing_keys again, at most once a minute (by
//     Options.Now), and verify once more: a merchant rotating its key
//     publishes the new one before signing with it.
//
// A signature passes when it names a trusted keyid, covers those
// components (plain, without parameters), carries no alg but its key's,
// has not expired (expires, judged by Options.Now; created is optional and
// not judged: UCP leaves replay protection to idempotency keys) and
// verifies; a Content-Digest, when present, must match the body. Of
// several signatures (at most four) one must pass. A refusal is a
// [*SignatureError], matching [ErrSignature] and [cart.ErrInvalidResponse],
// that says which check failed; on complete it matches
// [cart.ErrUnknownOutcome] too: the order may exist, so the answer is
// neither an order nor a decline. 2026-01-11 defines no response
// signatures: its answers are not checked, and New refuses pinned keys for
// it ([ErrSignaturesUnsupported]). Profiles and the payment handler's
// tokenization endpoint are not covered. The structured fields, the
// signature base and the ECDSA check are github.com/yaronf/httpsign's.
//
// # Payment instrument
//
// Complete first re-reads the session: it must be ready_for_complete (or,
// with Options.ReadyWithoutErrors, incomplete without an error message) at
// exactly the payment's amount and currency (else [cart.ErrNotReady] or
// [ErrAmountMismatch]), or already completing/completed (then the merchant
// answers by idempotency key). The client then uses the session's payment
// handler (2026-01-11 payment.handlers, 2026-04-08 ucp.payment_handlers;
// the profile's as a fallback) that follows the UCP tokenization pattern:
// its config.endpoint is a tokenization API /tokenize URL and its optional
// config.identity.access_token goes into the binding. We tokenize a
// source credential of type "spend_allowance" — a token credential in the
// schema's sense, with handler-defined members amount and currency — bound
// to the checkout id: it authorises exactly Payment.Amount in
// Payment.Currency on that session. The returned token goes into the
// instrument's credential ({"type":"token","token":…}) and completes the
// session. 2026-01-11 knows only card instruments, which require brand and
// last_digits: we send brand "spend_allowance" and the token's last four
// characters.
//
// A handler without a tokenization endpoint takes the credential itself in
// the completion's instrument (a wallet's or a PSP's token handler). When
// no offered handler tokenizes, the client uses the first offered handler
// (session's, then profile's) it holds a credential for
// ([Options.PaymentCredentials], matched by handler id, then name): the
// credential goes into the instrument as is ({"type":"token","token":…};
// brand and last_digits from the credential, default "token" and the
// token's last four characters). The body is the same on every attempt
// under the same key, so a retry and the unknown-outcome re-read work as
// for tokens. With neither, Complete fails with [cart.ErrRejected] before
// anything is sent.
//
// # Tolerance
//
// Profiles and answers are validated for what the client uses. A payment
// handler's version, spec and schema URIs are never used: a violation
// there (a handler declaring version "1.0") is collected in
// [Profile.Ignored] (answers: logged) instead of refusing the document.
// A completed 2026-01-11 session that names its order in order_id and
// order_permalink_url (the drafts' shape) instead of order yields that
// order, both members checked as order's are.
//
// Complete outcomes: completed with an order → [cart.Order]; an error
// message payment_declined/payment_failed → [cart.ErrDeclined]; any other
// open status → [cart.ErrNotReady]; complete_in_progress →
// [cart.ErrUnknownOutcome].
package ucp
