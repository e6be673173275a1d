package pay

import (
	"encoding/binary"
	"time"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/internal/seqlist"
)

// Status is the state of an intent.
//
//	pending_approval ──approve──▶ settling ──▶ settled ──refund──▶ partially_refunded ──▶ refunded
//	        │                        │
//	        ├──window passed──▶ expired   └──the rail declines──▶ failed
//	        └──an operator declines──▶ declined
//	denied (terminal, decided by the gate)
//
// An intent asked for as a hold (see [HoldOptions]) stops at authorized
// instead of settling: the amount stays reserved (and, on a rail that can
// authorize, held by the rail) until a capture settles part or all of it,
// a release voids it, or its expiry passes:
//
//	(settling: authorize) ──▶ authorized ──capture──▶ settling ──▶ settled
//	                              ├──release──▶ voided
//	                              └──expiry───▶ expired
type Status string

// Intent states (DESIGN §4).
const (
	StatusPendingApproval   Status = "pending_approval"
	StatusSettling          Status = "settling"
	StatusSettled           Status = "settled"
	StatusPartiallyRefunded Status = "partially_refunded"
	StatusRefunded          Status = "refunded"
	StatusDenied            Status = "denied"
	StatusFailed            Status = "failed"
	StatusExpired           Status = "expired"
	// StatusAuthorized: a hold whose amount is reserved, waiting for a
	// capture or a release.
	StatusAuthorized Status = "authorized"
	// StatusVoided: a hold released without a capture; nothing moved.
	StatusVoided Status = "voided"
	// StatusDeclined: an operator refused the held intent
	// ([Service.Decline]); nothing moved and its reservation was
	// released. Not to be confused with the rail's decline
	// (payment.declined), which ends an intent failed.
	StatusDeclined Status = "declined"
)

// Outcome is what a payment request came to, as the HTTP layer renders it:
// settled → 200 Receipt, held → 202, denied → 403 problem, failed → 402
// problem.
type Outcome string

// Outcomes of Pay.
const (
	OutcomeSettled Outcome = "settled"
	OutcomeHeld    Outcome = "held"
	OutcomeDenied  Outcome = "denied"
	OutcomeFailed  Outcome = "failed"
	// OutcomeAuthorized: a hold was placed (see [HoldOptions]); nothing
	// moved yet.
	OutcomeAuthorized Outcome = "authorized"
)

// Route names an idempotency namespace: keys used on /pay and /buy never
// collide.
type Route string

// Routes.
const (
	RoutePay Route = "pay"
	RouteBuy Route = "buy"
)

// Receipt is the record of a settlement, bound to the signed record by
// AuditSeq and AuditHash (the payment.settled entry).
type Receipt struct {
	ID             string    `json:"id"`
	IntentID       string    `json:"intentId"`
	IdempotencyKey string    `json:"idempotencyKey"`
	Payee          string    `json:"payee"`
	Amount         Amount    `json:"amount"`
	Rail           string    `json:"rail"`
	Reference      string    `json:"reference"`
	Terms          Terms     `json:"terms"`
	SettledAt      time.Time `json:"settledAt"`
	AuditSeq       uint64    `json:"auditSeq"`
	AuditHash      string    `json:"auditHash"`
}

// Links point at the intent's resources.
type Links struct {
	Self   string `json:"self"`
	Events string `json:"events"`
}

// Held is the 202 answer: the payment waits for a person. Challenge is
// shown here once and stored only as a hash; the operator's approval must
// present it.
type Held struct {
	IntentID string        `json:"intentId"`
	Status   Status        `json:"status"`
	Decision gate.Decision `json:"decision"`
	// Challenge is shown once, in the 202 answer to the payment request;
	// an approval that is still short of approvals does not repeat it.
	Challenge         string    `json:"challenge,omitempty"`
	MandateID         string    `json:"mandateId"`
	ApprovalsRequired int       `json:"approvalsRequired"`
	ApprovalsReceived int       `json:"approvalsReceived"`
	ExpiresAt         time.Time `json:"expiresAt"`
	Links             Links     `json:"links"`
}

// Denial is what the 403 intent.denied problem carries.
type Denial struct {
	IntentID  string        `json:"intentId"`
	MandateID string        `json:"mandateId"`
	Reasons   []gate.Reason `json:"reasons"`
	AuditSeq  uint64        `json:"auditSeq"`
}

// Failure is what the 402 payment.declined problem carries: the rail
// refused and no money moved.
type Failure struct {
	IntentID    string `json:"intentId"`
	Rail        string `json:"rail"`
	DeclineCode string `json:"declineCode"`
	Message     string `json:"message"`
	AuditSeq    uint64 `json:"auditSeq"`
}

// UnknownOutcome describes a settlement whose outcome is not known: the
// rail timed out, failed in a way that may have moved the money, or could
// not be reached. The intent's status stays settling (the interface's
// rule: an unknown outcome never becomes failed without a lookup); the
// reconciler asks the rail again every minute, and an operator sees these
// intents in GET /operator/settling.
type UnknownOutcome struct {
	// Since is when the first attempt without a definite answer ended;
	// AuditSeq is the payment.outcome_unknown entry recording it.
	Since    time.Time `json:"since"`
	AuditSeq uint64    `json:"auditSeq"`
	// Attempts counts settlement attempts and lookups that ended without
	// a definite answer; LastAttemptAt and Reason describe the latest.
	Attempts      int       `json:"attempts"`
	LastAttemptAt time.Time `json:"lastAttemptAt"`
	// Reason is one of unknown_outcome, rail_unavailable, timeout or
	// no_definite_answer.
	Reason string `json:"reason"`
}

// Result is the outcome of a payment request. Exactly one of Receipt,
// Held, Denial and Failure is set, matching Outcome. A replay returns the
// stored Result of the first request with Replayed set; RequestID is then
// the first request's id, so a rendering of a replay is byte-identical to
// the original.
type Result struct {
	Outcome   Outcome  `json:"outcome"`
	IntentID  string   `json:"intentId"`
	RequestID string   `json:"requestId"`
	Receipt   *Receipt `json:"receipt,omitempty"`
	Held      *Held    `json:"held,omitempty"`
	Denial    *Denial  `json:"denial,omitempty"`
	Failure   *Failure `json:"failure,omitempty"`
	// Authorized is set for OutcomeAuthorized.
	Authorized *Authorized `json:"authorized,omitempty"`
	Replayed   bool        `json:"-"`
}

// Authorized is the outcome of a hold placed: the amount reserved against
// the mandate (and held by the rail when it can authorize) until ExpiresAt.
type Authorized struct {
	IntentID string `json:"intentId"`
	Amount   Amount `json:"amount"`
	// RailAuthorization says whether the rail itself holds the funds; when
	// false the hold is a reservation of the mandate's budget only.
	RailAuthorization bool      `json:"railAuthorization"`
	Reference         string    `json:"reference,omitempty"`
	ExpiresAt         time.Time `json:"expiresAt"`
	AuditSeq          uint64    `json:"auditSeq"`
}

// Approval is the pending-approval material of a held intent.
type Approval struct {
	ChallengeHash string          `json:"challengeHash"` // hex SHA-256 of the challenge bytes
	Required      int             `json:"required"`
	Received      []ApprovalGrant `json:"received"`
	ExpiresAt     time.Time       `json:"expiresAt"`
	// Acknowledge is true when the approval must carry acknowledged:true
	// (irreversible or above a confirm threshold).
	Acknowledge bool `json:"acknowledge"`
	// Declined is set when an operator refused the intent: it is what a
	// repeated decline answers.
	Declined *ApprovalDecline `json:"declined,omitempty"`
}

// ApprovalDecline is an operator's refusal of a held intent.
type ApprovalDecline struct {
	Operator  string    `json:"operator"`
	At        time.Time `json:"at"`
	Rationale string    `json:"rationale"`
	// AuditSeq is the approval.declined entry.
	AuditSeq uint64 `json:"auditSeq"`
}

// ApprovalGrant is one operator's approval.
type ApprovalGrant struct {
	Operator string    `json:"operator"`
	At       time.Time `json:"at"`
}

// Refund is one refund of a settled intent.
type Refund struct {
	ID        string    `json:"id"`
	Minor     int64     `json:"minor"`
	Reference string    `json:"reference"`
	At        time.Time `json:"at"`
	Operator  string    `json:"operator"`
	Rationale string    `json:"rationale,omitempty"`
	RequestID string    `json:"requestId,omitempty"`
}

// Intent is one payment, as stored and as served by GET /intents/{id}.
type Intent struct {
	ID             string        `json:"id"`
	Status         Status        `json:"status"`
	Route          Route         `json:"route"`
	AgentKeyID     string        `json:"agentKeyId"`
	Agent          string        `json:"agent"`
	IdempotencyKey string        `json:"idempotencyKey"`
	Payee          string        `json:"payee"`
	Amount         Amount        `json:"amount"`
	Purpose        string        `json:"purpose"`
	Terms          Terms         `json:"terms"`
	MandateID      string        `json:"mandateId"`
	Decision       gate.Decision `json:"decision"`
	// Metadata travels with the settlement to the rail (see Signed).
	Metadata map[string]string `json:"metadata,omitempty"`
	Receipt  *Receipt          `json:"receipt,omitempty"`
	Approval *Approval         `json:"approval,omitempty"`
	Failure  *Failure          `json:"failure,omitempty"`
	// UnknownOutcome is set while the intent is settling after an attempt
	// that ended without a definite answer from the rail: the money may or
	// may not have moved. It is cleared when the outcome is known.
	UnknownOutcome *UnknownOutcome `json:"unknownOutcome,omitempty"`
	RefundedMinor  int64           `json:"refundedMinor"`
	Refunds        []Refund        `json:"refunds"`
	// PendingRefund is a refund sent to the rail whose answer is not
	// recorded yet; no other refund starts until it is.
	PendingRefund *Refund `json:"pendingRefund,omitempty"`
	// MandateExpiresAt is when the mandate the decision was made under
	// expires; an approval after it is refused.
	MandateExpiresAt time.Time `json:"mandateExpiresAt"`
	// Reservation is the amount counted against the mandate's period cap
	// while the intent is held or settling, and the key of that counter.
	ReservedMinor int64  `json:"reservedMinor"`
	PeriodKey     string `json:"periodKey,omitempty"`
	// Tags are the usage tags of the request that created the intent.
	Tags []string `json:"tags,omitempty"`
	// SessionID is the session the intent spends under, if any.
	SessionID string `json:"sessionId,omitempty"`
	// TermsID is the terms the instruction cited, if any (checked by the
	// terms gate when it was decided).
	TermsID string `json:"termsId,omitempty"`
	// Hold is set on an intent asked for as a hold.
	Hold      *HoldState `json:"hold,omitempty"`
	RequestID string     `json:"requestId,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	UpdatedAt time.Time  `json:"updatedAt"`
	Links     Links      `json:"links"`
}

// Store key layout of package pay (DESIGN §1: pay owns pay/).
const (
	keyIntent       = "pay/intent/"        // + intent id → Intent JSON
	keyIntentEvents = "pay/intent-events/" // + intent id + "/" + seq BE8 → empty
	keySettling     = "pay/settling/"      // + intent id → seq BE8 (see settlingList): intents the reconciler must finish
	keyHeld         = "pay/held/"          // + intent id → seq BE8 (see heldList): intents waiting for approval
	keyRefunding    = "pay/refunding/"     // + intent id → empty: intents with a refund in progress
	keyIdem         = "pay/idem/"          // + route + "/" + agent key id + "/" + key → idemRecord
	keyIdemExpiry   = "pay/idem-exp/"      // + expiry BE8 (unix ns) + route/akid/key → empty
	keyPeriod       = "pay/period/"        // + mandate id + "/" + window start (unix s) → int64 decimal
	keyVelocity     = "pay/velocity/"      // + mandate id + "/" + unix ns BE8 + intent id → empty
	keyDenials      = "pay/denials/"       // + mandate id → consecutive denials, decimal
	keyRevoked      = "pay/revoked/"       // + mandate id → revocation JSON
	keyControl      = "pay/control"        // kill switch and breaker state JSON

	keyHoldExpiry      = "pay/hold-exp/"      // + expiry BE8 (unix ns) + intent id → empty: authorized holds by expiry
	keySession         = "pay/session/"       // + session id → Session JSON
	keySessionExpiry   = "pay/session-exp/"   // + expiry BE8 + session id → empty: open sessions by expiry
	keyRevokedIdentity = "pay/revoked-agent/" // + agent id → IdentityRevocation JSON
	keyRevocations     = "pay/revocations/"   // + feed seq BE8 + kind + "/" + id → empty: the revocation feed
	keyRevocationSeq   = "pay/revocation-seq" // the feed's last seq, decimal
	keyByKey           = "pay/by-key/"        // + agent key id + "/" + created BE8 + intent id → empty
	keyByMandate       = "pay/by-mandate/"    // + mandate id + "/" + created BE8 + intent id → empty
	keyIndexVersion    = "pay/index-version"  // which secondary indexes exist for every intent

	keyHeldOrder     = "pay/held-order/"     // + seq BE8 + intent id → empty: heldList in commit order
	keySettlingOrder = "pay/settling-order/" // + seq BE8 + intent id → empty: settlingList in commit order
	keyListLayout    = "pay/list-layout"     // set once keyHeld and keySettling have their order rows
)

// The lists an operator pages (Held, Settling) follow commit order (see
// package seqlist): an intent's place is the seq of an entry appended in
// the transaction that put it into the list. Their member rows are the
// id-keyed sets they were before (an empty value, from a store written
// then, is seq 0), so the reconciler and the approval sweep read them as
// they did.
var (
	heldList     = seqlist.Index{Order: keyHeldOrder, Member: keyHeld}
	settlingList = seqlist.Index{Order: keySettlingOrder, Member: keySettling}
)

func be8(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

func intentKey(id string) []byte { return []byte(keyIntent + id) }

func intentEventKey(id string, seq uint64) []byte {
	return append([]byte(keyIntentEvents+id+"/"), be8(seq)...)
}
