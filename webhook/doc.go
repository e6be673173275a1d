// Package webhook delivers Countersign's events to HTTP endpoints: signed,
// durable, at least once, and derived from the signed record so that the
// event stream and the audit trail cannot disagree.
//
// # Events
//
// Events are never emitted on their own. [Derive] turns each record entry
// into events (DESIGN §7): every entry yields audit.appended; a
// gate.decision entry yields gate.decision and, by its data's outcome,
// intent.denied ("deny") or approval.pending ("confirm"); payment.settled
// and the memory.* entries yield themselves. [Kinds] lists the kinds with
// descriptions for generated documentation (AsyncAPI). The body of every
// delivery is an [Event]:
//
//	{"id":"evt_42_payment.settled","type":"payment.settled",
//	 "createdAt":"2026-11-22T10:00:00.123456Z","sequence":42,
//	 "data":{...},"entry":{...the whole signed record entry...}}
//
// id is the same for every delivery of the event, across retries and
// restarts: a receiver deduplicates on it. Arrival order is not record
// order (a retried event arrives after later ones); sequence is. entry is
// the signed entry itself, so a receiver holding the record's public key
// can verify the event rather than trust the delivery.
//
// # Signatures
//
// Every delivery carries
//
//	Svc-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>
//
// Stripe's scheme, so existing verifiers work; the HMAC key is the whole
// secret string, "whsec_" included. During a secret rotation the header
// carries one v1 value per valid secret. A receiver calls [Verify] on the
// raw body before parsing it: constant-time comparison, any of several
// secrets, any of several v1 values, and a tolerance (default 300 s) that
// rejects both stale and future timestamps. [SignedTestPayload] signs a
// body for receivers' tests. Deliveries also carry Svc-Event-Id,
// Svc-Event-Type, Content-Type: application/json and a User-Agent.
//
// # Endpoints
//
// [Endpoints] creates, reads, updates and deletes endpoints: an https url
// (http only to loopback, and loopback at all, only with
// Options.AllowLoopbackHTTP: sandbox mode), the event kinds wanted
// (["*"] for all), and whether the endpoint is active. Each change appends
// a webhook.endpoint_created, _updated or _deleted entry in the same store
// transaction, never with the secret. Creation returns the signing secret
// ("whsec_" + base64url of 32 random bytes) once; reads never show it.
// Rotating it returns a new one once, and the old one keeps signing, as a
// second v1 value, for 24 hours. Only entries appended after an
// endpoint's creation entry are delivered to it, and none recorded while
// it is inactive.
//
// # Secrets at rest
//
// The dispatcher must sign with the secrets, so they cannot be hashed.
// They are sealed with AES-256-GCM under a key derived by HKDF-SHA256 from
// Options.SealKey (32 bytes), with the endpoint id as additional data (a
// sealed secret moved to another endpoint does not open), and a key id so
// that the seal key can be rotated through Options.OldSealKeys. Without a
// SealKey they are stored in the clear, and NewEndpoints logs a warning
// saying so. Secrets never appear in the record, in reads, in errors or in
// logs (the types that hold them implement slog.LogValuer).
//
// # Delivery
//
// The [Dispatcher] tails the record from a persisted cursor. For each
// entry it writes one delivery per subscribed, active endpoint into a
// persisted outbox and advances the cursor in the same transaction, so a
// restart neither loses nor duplicates a delivery. Workers (8 by default)
// take due deliveries, POST them with a 10 s timeout and record the
// outcome: 2xx delivers; 410 Gone fails the delivery and deactivates the
// endpoint (recorded as webhook.endpoint_updated by the system actor
// "webhook.dispatcher"); anything else (another status, a redirect, a
// timeout, a refused or failed connection) is retried on the schedule
// (see [DefaultSchedule]: 15 attempts over 65 hours, jittered, then
// failed). Deliveries still pending when their endpoint is deactivated
// fail, unsent, when they come due; Retry resends one after the endpoint
// is active again. At most two attempts per endpoint run at once and the workers
// take endpoints round-robin, so a slow or dead endpoint holds at most
// two workers and never delays the others. [Dispatcher.Deliveries] lists
// an endpoint's deliveries, [Dispatcher.Retry] makes one due now.
//
// Delivery is at least once: a crash after a receiver answered 2xx but
// before the outcome was stored sends the event again. One dispatcher per
// store is the intended deployment; a second one over a shared store is
// safe (the cursor is checked in the tailing transaction) but may send
// duplicates.
//
// # SSRF
//
// Before connecting, the dispatcher resolves the endpoint's host itself
// and refuses (as a failed, retried attempt) if any address is private
// (10/8, 172.16/12, 192.168/16, fc00::/7), loopback (127/8, ::1; allowed
// with DispatcherOptions.AllowLoopback), link-local (169.254/16,
// fe80::/10), multicast, unspecified, shared (100.64/10) or otherwise
// reserved, IPv4-mapped and NAT64/6to4 forms included. It then dials the
// address it checked, not the name, so a DNS answer that changes between
// check and connection (DNS rebinding) cannot reach inside the network;
// TLS still verifies the name. No proxy is used and redirects are not
// followed. Endpoints refuses such addresses up front when the url names
// one literally. Both checks are the server's one URL guard, package
// netguard, which merchant and counterparty URLs pass too.
//
// # Storage layout
//
// All keys start with "webhook/"; integers are 8-byte big-endian so that
// key order is numeric order:
//
//	webhook/ep/<endpoint id>                          endpoint JSON (sealed secrets, creation seq)
//	webhook/cursor                                    the last record seq tailed
//	webhook/outbox/<ep>/<due><seq><kind>              a pending delivery, due at <due> (unix ns)
//	webhook/dlv/<ep>/<seq><kind>                      the delivery record (listing, retries)
//	webhook/expire/<at><ep><seq><kind>                when a finished record is swept (30 days)
//
// The outbox is per endpoint so that the scheduler reads each endpoint's
// due deliveries separately: a backlog at one endpoint never has to be
// scanned to reach another's. A deleted endpoint leaves a tombstone under
// webhook/ep/ (its secrets erased at once) until the dispatcher's sweep
// has purged its deliveries.
//
// # Testing
//
// Time, randomness, DNS and the HTTP client are options. Tests drive the
// dispatcher with [Dispatcher.Tick] under a fake clock instead of Start's
// background loops: Tick tails, sweeps, and attempts everything due at
// Now, then returns.
//
// # Performance
//
// Measured on the 2-core development machine, shared with other work
// (numbers vary by ±30% or more):
//
//	go test -run '^$' -bench Deliver -benchtime 20000x ./webhook/   (200 entries × 100 endpoints)
//	go test -run '^$' -bench Deliver -benchtime 100000x ./webhook/  (1,000 entries × 100 endpoints)
//
//	BenchmarkDeliver/memstore     ~17,000-31,000 events/s
//	BenchmarkDeliver/pebblestore  ~5,600-10,500 events/s (fsync per group commit)
//
// Each event is tailed into the outbox, signed, POSTed over a kept-alive
// connection to a receiver on 127.0.0.1, and its outcome stored in its own
// transaction. With Pebble the store's single committer goroutine is the
// bound: reading the delivery record and writing its outcome costs about
// 20 µs a delivery there.
package webhook
