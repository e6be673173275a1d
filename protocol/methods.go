package protocol

import (
	"slices"

	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/pay"
)

const (
	agent    = contract.CredentialAgent
	operator = contract.CredentialOperator
)

// Problem codes every spend may answer: the /pay outcomes and refusals.
var spendProblems = []string{pay.CodeMalformed, pay.CodeUnauthorized, pay.CodeDenied, pay.CodeDeclined, pay.CodeFrozen,
	pay.CodeRailUnavailable, pay.CodeIdempotencyConflict, pay.CodeInFlight}

var holdProblems = []string{pay.CodeHoldNotFound, pay.CodeHoldNotAuthorized, pay.CodeHoldCaptured, pay.CodeHoldReleased}

// methods is the surface: one declaration per method. Adding a method is
// adding a line here and its handler; the route, the OpenAPI entry, the
// credential matrix and the Go API follow.
var methods = []Method{
	// mandate
	declare(decl{ns: "mandate", name: "get", cred: agent, summary: "Read a mandate and its live usage",
		description: "A mandate honoured for one of the caller's agents: its claims, status (active, expired, revoked), the current period window with settled, reserved and remaining amounts, and the velocity count as the gate sees it now.",
		problems:    []string{CodeMandateNotFound}}, (*Service).MandateGet),
	declare(decl{ns: "mandate", name: "list", cred: agent, summary: "List the caller's live mandates",
		description: "The live (not expired, not revoked) mandates honoured for the caller's agents, by id, each with its usage. Pages by cursor (the last id) and limit 1–100 (default 20)."},
		(*Service).MandateList),
	declare(decl{ns: "mandate", name: "verify", cred: agent, summary: "Dry-run a mandate against a spend",
		description: "Would this mandate allow this spend now, and if not, why: the token is verified (signature, claims, expiry, revocation of the mandate and of the agent identity), then the gate decides with the live counters (period, velocity, session) without recording, reserving or counting anything. allowed is true only for an allow without a person."},
		(*Service).MandateVerify),
	declare(decl{ns: "mandate", name: "revoke", cred: operator, entry: "mandate.revoked", summary: "Revoke a mandate (operator)",
		description: "Override. Revokes a mandate for good: later payments under it are refused (intent.unauthorized, mandate_revoked) and held ones can no longer be approved. Records mandate.revoked with the rationale (the entry type predates the protocol surface and is kept for the consumers that read it). Revoking twice returns the first revocation.",
		problems:    []string{pay.CodeMalformed}}, (*Service).MandateRevoke),

	// session
	declare(decl{ns: "session", name: "open", cred: agent, entry: "protocol.session.open", summary: "Open a session under a mandate",
		description: "A sub-budget (at most the mandate's period cap) and a lifetime (ending at the latest with the mandate) for a task. Instructions carrying its sessionId are checked by the gate against it as well: session.exhausted, session.expired, session.unknown, session.mandate_mismatch. Records protocol.session.open.",
		problems:    []string{pay.CodeUnauthorized, pay.CodeSessionInvalid}}, (*Service).SessionOpen),
	declare(decl{ns: "session", name: "get", cred: agent, summary: "Read a session",
		description: "A session of the caller with its used and remaining budget.", problems: []string{pay.CodeSessionNotFound}},
		(*Service).SessionGet),
	declare(decl{ns: "session", name: "close", cred: agent, entry: "protocol.session.close", summary: "Close a session",
		description: "Closes an open session: later instructions naming it are denied (session.expired); intents already under it finish. Closing a closed or expired session is session.closed and changes nothing. The scheduler expires sessions at their end (protocol.session.expire).",
		problems:    []string{pay.CodeSessionNotFound, pay.CodeSessionClosed}}, (*Service).SessionClose),

	// hold
	declare(decl{ns: "hold", name: "place", cred: agent, entry: "protocol.hold.place", moves: true, summary: "Place an authorization hold",
		description: "The spend passes the same gate, reservation and approval as /pay (idempotency namespace protocol/hold.place per agent key). On allow its amount is reserved against the mandate and, on a rail that can authorize (sandbox-card), authorized by the rail: 200 held. On confirm: 202 pending_approval with the approval challenge, the hold placed when an operator approves. Denied: 403 intent.denied; declined by the rail: 402. Records protocol.hold.place with the hold's state (and protocol.hold.authorize when the rail answers later).",
		problems:    spendProblems}, (*Service).HoldPlace),
	declare(decl{ns: "hold", name: "capture", cred: agent, entry: "protocol.hold.capture", moves: true, summary: "Capture a hold",
		description: "Settles 1 up to the held amount through the two-phase settlement (the rail's capture when it holds the funds) and gives the rest of the reservation back. Refused without change when the hold is not held (hold.not_authorized, hold.already_captured, hold.released), when the amount exceeds it (hold.capture_exceeds), while the kill switch is engaged (settlement.frozen) or when the mandate or agent identity was revoked. Idempotent on idempotencyKey.",
		problems:    append(slices.Clone(holdProblems), pay.CodeCaptureExceeds, pay.CodeIdempotencyConflict, pay.CodeFrozen, pay.CodeUnauthorized, pay.CodeDeclined, pay.CodeRailUnavailable, pay.CodeInFlight)},
		(*Service).HoldCapture),
	declare(decl{ns: "hold", name: "release", cred: agent, entry: "protocol.hold.release", summary: "Release a hold",
		description: "Voids a held hold: nothing moves, the reservation goes back to the mandate (and session), the rail's authorization is voided first. The scheduler releases a hold at its expiry (protocol.hold.expire).",
		problems:    append(slices.Clone(holdProblems), pay.CodeRailUnavailable)}, (*Service).HoldRelease),
	declare(decl{ns: "hold", name: "get", cred: agent, summary: "Read a hold", description: "A hold of the caller, its state read from its intent.",
		problems: []string{pay.CodeHoldNotFound}}, (*Service).HoldGet),

	// meter
	declare(decl{ns: "meter", name: "open", cred: agent, entry: "protocol.meter.open", moves: true, summary: "Open a pay-per-use meter",
		description: "A hold of the cap (the spend's amount) through the gate, with a unit price. 200 open, 202 pending_approval, 403 denied. Records protocol.meter.open.",
		problems:    append(slices.Clone(spendProblems), contract.CodeRequestValidation)}, (*Service).MeterOpen),
	declare(decl{ns: "meter", name: "record", cred: agent, summary: "Record usage on a meter",
		description: "Accrues units × unit price within the cap (meter.cap_exceeded beyond it, nothing changed). Idempotent on usageId. Costs no settlement and no record entry: each line is stored durably and folded into the meter's hash chain, whose head the close entry commits to.",
		problems:    []string{CodeMeterNotFound, CodeMeterNotOpen, CodeMeterCapExceeded, CodeMeterUsageReused}}, (*Service).MeterRecord),
	declare(decl{ns: "meter", name: "close", cred: agent, entry: "protocol.meter.close", moves: true, summary: "Close a meter and settle the accrued total",
		description: "Stops accrual, then settles the accrued total exactly once (a capture of the meter's hold; a release when nothing accrued). Records protocol.meter.close with the units, lines and chain head. Idempotent on idempotencyKey.",
		problems:    []string{CodeMeterNotFound, CodeMeterNotOpen, pay.CodeFrozen, pay.CodeUnauthorized, pay.CodeDeclined, pay.CodeRailUnavailable, pay.CodeIdempotencyConflict, pay.CodeHoldCaptured, pay.CodeInFlight}},
		(*Service).MeterClose),
	declare(decl{ns: "meter", name: "get", cred: agent, summary: "Read a meter", problems: []string{CodeMeterNotFound},
		description: "A meter of the caller: units, accrued amount, lines, chain head and status."}, (*Service).MeterGet),

	// custody
	declare(decl{ns: "custody", name: "balance", cred: agent, summary: "Read custody balances",
		description: "The identity's balances per currency (available, staked, withdrawing, refunding), derived from its ledger lines.",
		problems:    []string{CodeCustodyAgent}}, (*Service).CustodyBalance),
	declare(decl{ns: "custody", name: "deposit", cred: agent, entry: "protocol.custody.deposit", moves: true, summary: "Deposit into custody",
		description: "A payment to the deployment's custody account through the gate; the identity's available balance is credited in the settlement's transaction (protocol.custody.deposit.settle). A refund of a deposit takes the money back out of custody first and is refused when it is no longer available.",
		problems:    append(slices.Clone(spendProblems), CodeCustodyWrongPayee)}, (*Service).CustodyDeposit),
	declare(decl{ns: "custody", name: "withdraw", cred: agent, entry: "protocol.custody.withdraw", moves: true, summary: "Withdraw from custody to a destination",
		description: "A payment to a destination through the gate, out of the identity's available balance: denied custody.insufficient_funds (a gate reason) when it is short; reserved as withdrawing when admitted; debited when it settles, given back when it fails or expires.",
		problems:    append(slices.Clone(spendProblems), CodeCustodyWrongPayee)}, (*Service).CustodyWithdraw),
	declare(decl{ns: "custody", name: "ledger", cred: agent, summary: "Page custody ledger lines",
		description: "An account's ledger lines, oldest first, each with the running balance after it. Pages by cursor (the last line's seq) and limit 1–100.",
		problems:    []string{CodeCustodyAgent, CodeBadCursor}}, (*Service).CustodyLedger),

	// stake
	declare(decl{ns: "stake", name: "post", cred: agent, entry: "protocol.stake.post", summary: "Lock a stake out of custody",
		description: "Moves an amount of the identity's available custody into a lock of its own until lockedUntil (custody.insufficient_funds when short). Idempotent on idempotencyKey. The scheduler marks it releasable at lockedUntil (protocol.stake.unlock).",
		problems:    []string{CodeStakeInvalid, CodeCustodyInsufficient, CodeCustodyAgent, pay.CodeIdempotencyConflict}}, (*Service).StakePost),
	declare(decl{ns: "stake", name: "get", cred: agent, summary: "Read a stake", problems: []string{CodeStakeNotFound},
		description: "A stake of the caller."}, (*Service).StakeGet),
	declare(decl{ns: "stake", name: "release", cred: agent, entry: "protocol.stake.release", summary: "Release a stake",
		description: "Moves the stake back to available custody, after lockedUntil (stake.locked before) and only if no open dispute names it (stake.disputed). Slashing happens only through dispute resolution.",
		problems:    []string{CodeStakeNotFound, CodeStakeLocked, CodeStakeDisputed, CodeStakeReleased}}, (*Service).StakeRelease),

	// economics
	declare(decl{ns: "economics", name: "summary", cred: agent, summary: "Aggregate spending",
		description: "Settled, refunded, held and denied amounts of the caller's intents created in [since, until), grouped by payee, rail, mandate or tag, per currency. Read only.",
		problems:    []string{contract.CodeRequestValidation}}, (*Service).EconomicsSummaryGet),
	declare(decl{ns: "economics", name: "budget", cred: agent, summary: "Burn rate and projected exhaustion",
		description: "Per mandate: the current period's counted amount, remaining amount, burn per hour and, when the cap would be reached before the period ends at that rate, when.",
		problems:    []string{CodeMandateNotFound}}, (*Service).EconomicsBudgetGet),

	// oversight
	declare(decl{ns: "oversight", name: "status", cred: agent, summary: "The controls' state",
		description: "The kill switch, the circuit breaker and the number of the caller's intents waiting for a person."},
		(*Service).OversightStatusGet),
	declare(decl{ns: "oversight", name: "policy", cred: agent, summary: "The policy in force and its hash",
		description: "The gate policy in force and its hash: the digest GET /disclose publishes and gate.policy entries record."},
		(*Service).OversightPolicyGet),
	declare(decl{ns: "oversight", name: "queue", cred: agent, summary: "The caller's held intents",
		description: "The caller's intents waiting for approval, oldest first; cursor is the last intent id.",
		problems:    []string{CodeBadCursor}}, (*Service).OversightQueueGet),

	// revocation
	declare(decl{ns: "revocation", name: "list", cred: agent, summary: "The revocation feed",
		description: "Revoked mandates and agent identities, in the order they were revoked, after a cursor. Poll with nextCursor to follow.",
		problems:    []string{pay.CodeBadFeedCursor}}, (*Service).RevocationList),
	declare(decl{ns: "revocation", name: "check", cred: agent, summary: "Is a mandate or an identity revoked",
		description: "Exactly one of mandateId and agent.", problems: []string{contract.CodeRequestValidation}}, (*Service).RevocationCheckGet),
	declare(decl{ns: "revocation", name: "revoke_identity", cred: operator, entry: "protocol.revocation.revoke_identity", summary: "Revoke an agent identity (operator)",
		description: "Override. From this transaction on the gate refuses every mandate whose subject the identity is (intent.unauthorized, identity_revoked), approvals and captures under them are refused, and sessions cannot be opened. Revoking twice returns the first revocation.",
		problems:    []string{pay.CodeMalformed}}, (*Service).RevokeIdentity),

	// proof
	declare(decl{ns: "proof", name: "get", cred: agent, summary: "Proof of enforcement of an intent",
		description: "The decision, the policy hash in force when it was made with the gate.policy entry that recorded it, and every record entry about the intent, each with an inclusion proof against one signed checkpoint. Verifies offline with the record's public key alone (countersign proof verify FILE).",
		problems:    []string{CodeProofNotFound}}, (*Service).ProofGet),
	declare(decl{ns: "proof", name: "verify", cred: agent, summary: "Verify a proof of enforcement",
		description: "Checks a proof with this deployment's verifier key, as countersign proof verify does offline. Always 200: valid, or the first check that failed."},
		(*Service).ProofVerify),
}

var byID = func() map[string]Method {
	m := make(map[string]Method, len(methods))
	for _, d := range methods {
		m[d.ID()] = d
	}
	return m
}()

// Methods returns every declared method, namespace by namespace.
func Methods() []Method { return slices.Clone(methods) }

// Lookup returns the method with the operation id, if declared.
func Lookup(id string) (Method, bool) {
	m, ok := byID[id]
	return m, ok
}
