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
		description: "The live (not expired, not revoked) mandates honoured for the caller's agents, each with its usage, in the order they were first honoured (mandates remembered before that order was kept come first, by id). Pages by limit 1–100 (default 20); cursor is the nextCursor of the previous page."},
		(*Service).MandateList),
	declare(decl{ns: "mandate", name: "verify", cred: agent, summary: "Dry-run a mandate against a spend",
		description: "Would this mandate allow this spend now, and if not, why: the token is verified (signature, claims, expiry, revocation of the mandate and of the agent identity), then the gate decides with the live counters (period, velocity, session) without recording, reserving or counting anything. allowed is true only for an allow without a person."},
		(*Service).MandateVerify),
	declare(decl{ns: "mandate", name: "revoke", cred: operator, entry: "mandate.revoked", summary: "Revoke a mandate (operator)",
		description: "Override. Revokes a mandate for good: later payments under it are refused (intent.unauthorized, mandate_revoked) and held ones can no longer be approved. Records mandate.revoked with the rationale (the entry type predates the protocol surface and is kept for the consumers that read it). Revoking twice returns the first revocation. An id this deployment has never seen is revoked all the same, and recorded: mandates are bearer tokens signed off-line, so the one to revoke is often one that leaked before it was ever used; a payment under it is refused from then on.",
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
		description: "The caller's intents waiting for approval, oldest first (in the order they were held); cursor is the nextCursor of the previous page.",
		problems:    []string{CodeBadCursor}}, (*Service).OversightQueueGet),

	// revocation
	declare(decl{ns: "revocation", name: "list", cred: agent, summary: "The revocation feed",
		description: "Revoked mandates and agent identities, in the order they were revoked, after a cursor. Poll with nextCursor to follow.",
		problems:    []string{pay.CodeBadFeedCursor}}, (*Service).RevocationList),
	declare(decl{ns: "revocation", name: "check", cred: agent, summary: "Is a mandate or an identity revoked",
		description: "Exactly one of mandateId and agent.", problems: []string{contract.CodeRequestValidation}}, (*Service).RevocationCheckGet),
	declare(decl{ns: "revocation", name: "revoke_identity", cred: operator, entry: "protocol.revocation.revoke_identity", summary: "Revoke an agent identity (operator)",
		description: "Override. From this transaction on the gate refuses every mandate whose subject the identity is (intent.unauthorized, identity_revoked), approvals and captures under them are refused, and sessions cannot be opened. Revoking twice returns the first revocation. An id this deployment has never seen is revoked all the same, and recorded: mandates are bearer tokens signed off-line, so the one to revoke is often one that leaked before it was ever used; a payment under it is refused from then on.",
		problems:    []string{pay.CodeMalformed}}, (*Service).RevokeIdentity),

	// proof
	declare(decl{ns: "proof", name: "get", cred: agent, summary: "Proof of enforcement of an intent",
		description: "The decision, the policy hash in force when it was made with the gate.policy entry that recorded it, and every record entry about the intent, each with an inclusion proof against one signed checkpoint. Verifies offline with the record's public key alone (countersign proof verify FILE).",
		problems:    []string{CodeProofNotFound}}, (*Service).ProofGet),
	declare(decl{ns: "proof", name: "verify", cred: agent, summary: "Verify a proof of enforcement",
		description: "Checks a proof with this deployment's verifier key, as countersign proof verify does offline. Always 200: valid, or the first check that failed."},
		(*Service).ProofVerify),

	// terms
	declare(decl{ns: "terms", name: "propose", cred: agent, entry: "protocol.terms.propose", summary: "Propose two-party terms",
		description: "Stores terms between one of the caller's identities (who pays) and a counterparty (an ADP agent id), and returns signingBytes: the canonical bytes the counterparty signs with its own Ed25519 key to accept them. The terms may name a stake of the counterparty held in custody here, which a dispute resolved against it may slash.",
		problems:    []string{CodeTermsInvalid, CodeCounterpartyRevoked, CodeCustodyAgent}}, (*Service).TermsPropose),
	declare(decl{ns: "terms", name: "accept", cred: agent, entry: "protocol.terms.accept", summary: "Accept terms with the counterparty's signature",
		description: "Verifies the counterparty's Ed25519 signature over the terms' signingBytes (its agent id through the identity package; a counterparty the operator revoked is refused) and marks them accepted. From then on an instruction citing termsId must match them (payee, amount, currency, rail, before validUntil) or the gate denies it (terms.mismatch, terms.not_accepted, terms.expired, terms.unknown). The same signature again answers the accepted terms.",
		problems:    []string{CodeTermsNotFound, CodeTermsSignature, CodeTermsAccepted, CodeTermsExpired, CodeCounterpartyRevoked}}, (*Service).TermsAccept),
	declare(decl{ns: "terms", name: "get", cred: agent, summary: "Read terms", description: "Terms of one of the caller's identities, with both signatures once accepted.",
		problems: []string{CodeTermsNotFound}}, (*Service).TermsGet),

	// negotiate
	declare(decl{ns: "negotiate", name: "offer", cred: agent, entry: "protocol.negotiate.offer", summary: "Open a negotiation with an offer",
		description: "Opens a thread with our first offer, signed with the deployment's identity key over its canonical bytes (protocol.OfferSigningBytes).",
		problems:    []string{CodeTermsInvalid, CodeCounterpartyRevoked, CodeNegotiationNoKey, CodeCustodyAgent}}, (*Service).NegotiateOffer),
	declare(decl{ns: "negotiate", name: "counter", cred: agent, entry: "protocol.negotiate.counter", summary: "Counter the latest offer",
		description: "Adds the next offer, from the side whose turn it is: ours (signed here) or the counterparty's (its signature over the offer's bytes, verified).",
		problems:    []string{CodeNegotiationNotFound, CodeNegotiationClosed, CodeNegotiationTurn, CodeTermsInvalid, CodeTermsSignature, CodeCounterpartyRevoked, CodeNegotiationNoKey}},
		(*Service).NegotiateCounter),
	declare(decl{ns: "negotiate", name: "accept", cred: agent, entry: "protocol.negotiate.accept", summary: "Accept the latest offer",
		description: "Accepting our offer takes the counterparty's signature over its bytes; accepting the counterparty's is signed here. Either way the answer carries accepted terms (protocol.terms.accept) whose termsId instructions cite, both signatures over the same bytes.",
		problems:    []string{CodeNegotiationNotFound, CodeNegotiationClosed, CodeTermsSignature, CodeTermsInvalid, CodeTermsExpired, CodeCounterpartyRevoked, CodeNegotiationNoKey}},
		(*Service).NegotiateAccept),
	declare(decl{ns: "negotiate", name: "reject", cred: agent, entry: "protocol.negotiate.reject", summary: "End a negotiation without terms",
		description: "By us, or by the counterparty with its signature over protocol.RejectionSigningBytes of the latest offer.",
		problems:    []string{CodeNegotiationNotFound, CodeNegotiationClosed, CodeTermsSignature, CodeTermsInvalid, CodeCounterpartyRevoked}}, (*Service).NegotiateReject),
	declare(decl{ns: "negotiate", name: "get", cred: agent, summary: "Read a negotiation", description: "A negotiation of one of the caller's identities, every offer with its signature.",
		problems: []string{CodeNegotiationNotFound}}, (*Service).NegotiateGet),

	// obligation
	declare(decl{ns: "obligation", name: "create", cred: agent, entry: "protocol.obligation.create", moves: true, summary: "Create a conditional payment",
		description: "The spend passes the same gate, reservation and approval as /pay (idempotency namespace protocol/obligation.create per agent key); its amount is reserved (and authorized on a rail that can) until evidence of at least evidenceFloor clears it (clearing), or the deadline refuses it and releases the reservation (protocol.obligation.expire). 200 awaiting_evidence, 202 pending_approval, 403 denied, 402 declined.",
		problems:    append(slices.Clone(spendProblems), CodeObligationInvalid)}, (*Service).ObligationCreate),
	declare(decl{ns: "obligation", name: "get", cred: agent, summary: "Read an obligation", description: "An obligation of the caller, its state read from its intent.",
		problems: []string{CodeObligationNotFound}}, (*Service).ObligationGet),
	declare(decl{ns: "obligation", name: "list", cred: agent, summary: "List the caller's obligations",
		description: "Oldest first (in the order they committed), optionally of one status; cursor is the nextCursor of the previous page.", problems: []string{CodeBadCursor}}, (*Service).ObligationList),
	declare(decl{ns: "obligation", name: "cancel", cred: agent, entry: "protocol.obligation.cancel", summary: "Cancel an obligation",
		description: "Releases an obligation awaiting evidence: nothing is paid, the reservation goes back, the rail's authorization is voided. Refused once evidence was submitted (obligation.has_evidence): the counterparty is performing.",
		problems:    []string{CodeObligationNotFound, CodeObligationEvidence, CodeObligationNotReady, CodeObligationCleared, CodeObligationCancelled, CodeDeadlinePassed, CodeObligationClosed, pay.CodeRailUnavailable}},
		(*Service).ObligationCancel),

	// evidence
	declare(decl{ns: "evidence", name: "submit", cred: agent, entry: "protocol.evidence.submit", summary: "Submit evidence",
		description: "Verifies a statement for its class — self (the caller's word), sign (the counterparty's key), wit (a configured witness), rec (a registered merchant or rail), att (a configured attester), proof (inclusion in a configured log), pote (proof whose checkpoint a configured witness co-signed) — and stores it. About an obligation, it attempts the clearing at once: the answer carries it (202 while still below the floor). The same statement and class again answers the stored evidence.",
		accepted:    "Accepted: the evidence is stored and the obligation is still below its floor (clearing.problem names the awaited class).",
		problems:    []string{CodeEvidenceSubject, CodeEvidenceInvalid, CodeEvidenceSigner, CodeCounterpartyRevoked, CodeDeadlinePassed, CodeObligationCancelled, CodeObligationClosed}}, (*Service).EvidenceSubmit),
	declare(decl{ns: "evidence", name: "get", cred: agent, summary: "Read evidence", description: "Evidence about one of the caller's subjects.",
		problems: []string{CodeEvidenceNotFound}}, (*Service).EvidenceGet),
	declare(decl{ns: "evidence", name: "list", cred: agent, summary: "List evidence about a subject", description: "Oldest first (in the order it committed); cursor is the nextCursor of the previous page.",
		problems: []string{CodeEvidenceSubject, CodeBadCursor}}, (*Service).EvidenceList),

	// clearing
	declare(decl{ns: "clearing", name: "status", cred: agent, summary: "An obligation's clearing state",
		description: "The floor, the classes achieved, whether admissible evidence exists, and while pending the clearing.pending problem naming the awaited class. Changes nothing.",
		problems:    []string{CodeObligationNotFound}}, (*Service).ClearingStatus),
	declare(decl{ns: "clearing", name: "attempt", cred: agent, entry: "protocol.clearing.attempt", moves: true, summary: "Clear an obligation",
		description: "With admissible evidence, captures the reserved amount once through the two-phase settlement: 200 cleared with the receipt (again on every later attempt). Below the floor: 202 with the problem clearing.pending naming the awaited class and the classes achieved. After the deadline: obligation.deadline_passed.",
		accepted:    "Accepted, not cleared: the evidence is below the floor; problem (code clearing.pending) names the awaited class and the classes achieved.",
		problems: []string{CodeObligationNotFound, CodeDeadlinePassed, CodeObligationCancelled, CodeObligationNotReady, CodeObligationClosed,
			pay.CodeFrozen, pay.CodeUnauthorized, pay.CodeDeclined, pay.CodeRailUnavailable, pay.CodeInFlight}}, (*Service).ClearingAttempt),

	// delivery
	declare(decl{ns: "delivery", name: "record", cred: agent, entry: "protocol.delivery.record", summary: "Record a delivery",
		description: "What was delivered for one of the caller's payments or obligations, with evidence about the same subject. One delivery per subject.",
		problems:    []string{CodeEvidenceSubject, CodeDeliveryExists, CodeDeliveryInvalid}}, (*Service).DeliveryRecord),
	declare(decl{ns: "delivery", name: "accept", cred: agent, entry: "protocol.delivery.accept", summary: "Accept a delivery",
		description: "The caller accepts a recorded delivery (delivery.not_recorded once accepted or disputed).",
		problems:    []string{CodeDeliveryNotFound, CodeDeliveryState}}, (*Service).DeliveryAccept),
	declare(decl{ns: "delivery", name: "get", cred: agent, summary: "Read a delivery", problems: []string{CodeDeliveryNotFound},
		description: "A delivery of the caller."}, (*Service).DeliveryGet),
	declare(decl{ns: "delivery", name: "dispute", cred: operator, entry: "protocol.delivery.dispute", summary: "Dispute a delivery (operator)",
		description: "Override. Opens a dispute on the delivery's subject for its agent (protocol.dispute.open), even once accepted.",
		problems:    []string{CodeDeliveryNotFound, CodeDisputeExists, CodeDisputeUnsettled, CodeDisputeInvalid}}, (*Service).DeliveryDispute),

	// dispute
	declare(decl{ns: "dispute", name: "open", cred: agent, entry: "protocol.dispute.open", summary: "Open a dispute",
		description: "On a settled payment or cleared obligation of the caller, seeking a refund (claimMinor, all that remains by default). The counterparty's stake named by the subject's terms is held (stake.disputed) until resolution. One dispute per subject.",
		problems:    []string{CodeEvidenceSubject, CodeDisputeExists, CodeDisputeUnsettled, CodeDisputeInvalid}}, (*Service).DisputeOpen),
	declare(decl{ns: "dispute", name: "respond", cred: agent, entry: "protocol.dispute.respond", summary: "Respond to a dispute",
		description: "The respondent (a credential acting for the counterparty identity) answers once, with evidence.",
		problems:    []string{CodeDisputeNotFound, CodeDisputeNotParty, CodeDisputeResolved, CodeDisputeInvalid}}, (*Service).DisputeRespond),
	declare(decl{ns: "dispute", name: "get", cred: agent, summary: "Read a dispute", problems: []string{CodeDisputeNotFound},
		description: "A dispute the caller is a party to, with the resolution's refund status read from its intent."}, (*Service).DisputeGet),
	declare(decl{ns: "dispute", name: "list", cred: agent, summary: "List disputes",
		description: "The disputes an identity of the caller is a party to, oldest first (in the order they committed); cursor is the nextCursor of the previous page.",
		problems:    []string{CodeCustodyAgent, CodeBadCursor}}, (*Service).DisputeList),
	declare(decl{ns: "dispute", name: "resolve", cred: operator, entry: "protocol.dispute.resolve", moves: true, summary: "Resolve a dispute (operator)",
		description: "Override. For the claimant: refunds refundMinor (the claim by default) through the operator refund path, exactly once (protocol.dispute.refund; a refund the kill switch delays is retried by the scheduler), slashes slashMinor of the named stake into the claimant's custody (protocol.stake.slash), and makes the dispute's claims payable and pays them from the pool (protocol.claim.pay). For the respondent: nothing moves and its claims are rejected.",
		problems:    []string{CodeDisputeNotFound, CodeDisputeResolved, CodeDisputeInvalid}}, (*Service).DisputeResolve),

	// insurance
	declare(decl{ns: "insurance", name: "quote", cred: agent, summary: "Price a policy",
		description: "The premium the configured schedule sets for covering one of the caller's payments or obligations up to limitMinor, and the pool's payee.",
		problems:    []string{CodeEvidenceSubject, CodeInsuranceInvalid}}, (*Service).InsuranceQuote),
	declare(decl{ns: "insurance", name: "bind", cred: agent, entry: "protocol.insurance.bind", moves: true, summary: "Bind a policy",
		description: "A spend of exactly the quoted premium to the pool's payee through the gate (idempotency namespace protocol/insurance.bind). Active once the premium settles into the pool. A second live policy on one subject is denied insurance.already_covered.",
		problems:    append(slices.Clone(spendProblems), CodeEvidenceSubject, CodeInsuranceInvalid, CodeInsurancePremium, CodeCustodyWrongPayee)},
		(*Service).InsuranceBind),
	declare(decl{ns: "insurance", name: "get", cred: agent, summary: "Read a policy", problems: []string{CodePolicyNotFound},
		description: "A policy of the caller, with what its claims ask and what the pool paid."}, (*Service).InsuranceGet),

	// claim
	declare(decl{ns: "claim", name: "file", cred: agent, entry: "protocol.claim.file", summary: "File a claim",
		description: "On an active policy, for the caller's dispute about its subject, at most what the limit has left. Payable when the dispute is resolved for the claimant, and paid from the pool into the claimant's custody then (or as soon as the pool can).",
		problems:    []string{CodePolicyNotFound, CodeDisputeNotFound, CodeClaimInvalid, CodeClaimExceedsLimit, CodeClaimExists, CodeClaimPolicy, CodeClaimDisputeLost}},
		(*Service).ClaimFile),
	declare(decl{ns: "claim", name: "get", cred: agent, summary: "Read a claim", problems: []string{CodeClaimNotFound},
		description: "A claim of the caller."}, (*Service).ClaimGet),
	declare(decl{ns: "claim", name: "list", cred: agent, summary: "List claims", problems: []string{CodeBadCursor},
		description: "The caller's claims, oldest first (in the order they committed), optionally of one status; cursor is the nextCursor of the previous page."}, (*Service).ClaimList),
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
