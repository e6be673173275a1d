package protocol

import (
	"context"
	"errors"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// Namespace hold: authorization holds. A hold is a pay intent placed as a
// hold (pay.HoldOptions): the same gate, reservation and approval as a
// payment, then capture (settles ≤ the held amount, frees the rest),
// release, or expiry. The hold's id is its intent's with the prefix
// hold_, and its state is read from the intent, so the two can never
// disagree.

const routeHoldPlace pay.Route = "protocol/hold.place"

// HoldStatus is the state of a hold: its intent's, as holdStatus reads
// it (DESIGN §9 shows the table of its changes).
type HoldStatus string

// Hold statuses.
const (
	HoldPendingApproval HoldStatus = "pending_approval"
	HoldAuthorizing     HoldStatus = "authorizing" // the rail is asked to authorize
	HoldHeld            HoldStatus = "held"
	HoldCapturing       HoldStatus = "capturing" // the capture is with the rail
	HoldStatusCaptured  HoldStatus = "captured"
	HoldReleased        HoldStatus = "released"
	HoldExpired         HoldStatus = "expired"
	HoldDenied          HoldStatus = "denied"
	HoldFailed          HoldStatus = "failed"
	HoldDeclined        HoldStatus = "declined" // an operator refused it while it waited for approval
)

// Hold is an authorization hold.
type Hold struct {
	ID       string     `json:"id" doc:"hold_ followed by the intent id's suffix."`
	Status   HoldStatus `json:"status" doc:"pending_approval, authorizing, held, capturing, captured, released, expired, denied, failed or declined (an operator refused it while it waited for approval)."`
	IntentID string     `json:"intentId"`
	Payee    string     `json:"payee"`
	Amount   pay.Amount `json:"amount" doc:"The amount held."`
	Rail     string     `json:"rail"`
	// RailAuthorization: the rail holds the funds; false: the hold is a
	// reservation of the mandate's budget only.
	RailAuthorization bool          `json:"railAuthorization"`
	CapturedMinor     int64         `json:"capturedMinor"`
	ReleasedMinor     int64         `json:"releasedMinor"`
	ExpiresAt         *time.Time    `json:"expiresAt,omitempty" doc:"When an uncaptured hold is released by the expiry sweep; set once held."`
	Decision          gate.Decision `json:"decision"`
	Receipt           *pay.Receipt  `json:"receipt,omitempty"`
	CreatedAt         time.Time     `json:"createdAt"`
	UpdatedAt         time.Time     `json:"updatedAt"`
	Entries           []uint64      `json:"entries" doc:"Sequence numbers of the record entries that changed it."`
}

func holdStatus(in *pay.Intent) HoldStatus {
	switch in.Status {
	case pay.StatusPendingApproval:
		return HoldPendingApproval
	case pay.StatusSettling:
		if in.Hold != nil && in.Hold.Phase == pay.HoldPhaseAuthorize {
			return HoldAuthorizing
		}
		return HoldCapturing
	case pay.StatusAuthorized:
		return HoldHeld
	case pay.StatusSettled, pay.StatusPartiallyRefunded, pay.StatusRefunded:
		return HoldStatusCaptured
	case pay.StatusVoided:
		return HoldReleased
	case pay.StatusExpired:
		return HoldExpired
	case pay.StatusDenied:
		return HoldDenied
	case pay.StatusDeclined:
		return HoldDeclined
	}
	return HoldFailed
}

func holdOf(in *pay.Intent, entries []uint64) Hold {
	id, _ := prefixID(in.ID, "int_", "hold_")
	h := Hold{ID: id, Status: holdStatus(in), IntentID: in.ID, Payee: in.Payee, Amount: in.Amount, Rail: in.Terms.Rail,
		Decision: in.Decision, Receipt: in.Receipt, CreatedAt: in.CreatedAt, UpdatedAt: in.UpdatedAt, Entries: entries}
	if entries == nil {
		h.Entries = []uint64{}
	}
	if hs := in.Hold; hs != nil {
		h.RailAuthorization = hs.RailAuthorization
		h.CapturedMinor = in.SettledMinor()
		h.ReleasedMinor = hs.ReleasedMinor
		if !hs.ExpiresAt.IsZero() {
			t := hs.ExpiresAt
			h.ExpiresAt = &t
		}
	}
	return h
}

// HoldPlaceRequest is the body of hold.place.
type HoldPlaceRequest struct {
	Spend      pay.Instruction `json:"spend" doc:"The payment instruction of the hold, signed for this method (typ svc-spend+jws over {method, payment}; protocol.SignSpend)."`
	TTLSeconds int64           `json:"ttlSeconds" validate:"min=60,max=2592000" doc:"How long the hold lasts once held, 60 s to 30 days; the expiry sweep releases it after."`
}

// HoldPlaced is the answer of hold.place: the outcome as decided, the same
// bytes on every replay.
type HoldPlaced struct {
	HoldID   string `json:"holdId"`
	IntentID string `json:"intentId"`
	// Status is held, or pending_approval (202: an operator must approve;
	// approval carries the challenge, shown once).
	Status            HoldStatus `json:"status"`
	Amount            pay.Amount `json:"amount"`
	RailAuthorization bool       `json:"railAuthorization"`
	Reference         string     `json:"reference,omitempty"`
	ExpiresAt         *time.Time `json:"expiresAt,omitempty"`
	AuditSeq          uint64     `json:"auditSeq,omitempty"`
	Approval          *pay.Held  `json:"approval,omitempty"`
	replayed          bool
}

// WasReplayed reports an idempotent repeat.
func (h *HoldPlaced) WasReplayed() bool { return h.replayed }

// IsAccepted reports a hold waiting for approval (202).
func (h *HoldPlaced) IsAccepted() bool { return h.Status == HoldPendingApproval }

// HoldPlace places an authorization hold: the spend passes the gate; on
// allow its amount is reserved against the mandate (and authorized by the
// rail when it can) until captured, released or expired.
func (s *Service) HoldPlace(ctx context.Context, call Call, req *HoldPlaceRequest) (*HoldPlaced, error) {
	res, err := s.spend(ctx, call, routeHoldPlace, "hold.place", &req.Spend, req,
		&pay.HoldOptions{TTL: time.Duration(req.TTLSeconds) * time.Second}, nil)
	if err != nil {
		return nil, err
	}
	out := placedOf(res)
	if out.Status == HoldPendingApproval {
		out.Amount = req.Spend.Amount // the same request on a replay, so the same bytes
	}
	return out, nil
}

func placedOf(res *pay.Result) *HoldPlaced {
	id, _ := prefixID(res.IntentID, "int_", "hold_")
	out := &HoldPlaced{HoldID: id, IntentID: res.IntentID, replayed: res.Replayed}
	switch {
	case res.Authorized != nil:
		a := res.Authorized
		t := a.ExpiresAt
		out.Status, out.Amount, out.RailAuthorization, out.Reference, out.ExpiresAt, out.AuditSeq =
			HoldHeld, a.Amount, a.RailAuthorization, a.Reference, &t, a.AuditSeq
	case res.Held != nil:
		out.Status, out.Approval = HoldPendingApproval, res.Held
	}
	return out
}

// HoldRef names a hold.
type HoldRef struct {
	HoldID string `json:"holdId" validate:"required,max=64" doc:"The hold's id (hold_...)."`
}

// HoldCaptureRequest is the body of hold.capture.
type HoldCaptureRequest struct {
	HoldID         string `json:"holdId" validate:"required,max=64"`
	AmountMinor    int64  `json:"amountMinor" validate:"gt=0,lt=9007199254740992" doc:"What to settle, 1 up to the held amount; the rest goes back to the mandate's budget."`
	IdempotencyKey string `json:"idempotencyKey" validate:"required,max=255,printascii" doc:"Names this capture: a repeat with the same key and amount answers the same outcome (Idempotent-Replayed: true); another amount is 422 idempotency.conflict; another key on a captured hold is 409 hold.already_captured."`
}

// HoldCaptured is the answer of hold.capture.
type HoldCaptured struct {
	HoldID        string       `json:"holdId"`
	IntentID      string       `json:"intentId"`
	CapturedMinor int64        `json:"capturedMinor"`
	ReleasedMinor int64        `json:"releasedMinor"`
	Receipt       *pay.Receipt `json:"receipt"`
	replayed      bool
}

// WasReplayed reports an idempotent repeat.
func (h *HoldCaptured) WasReplayed() bool { return h.replayed }

func (s *Service) holdIntent(id string) (string, error) {
	intent, ok := prefixID(id, "hold_", "int_")
	if !ok {
		return "", pay.ErrNotHold
	}
	return intent, nil
}

// HoldCapture settles part or all of a held hold through the two-phase
// settlement, and frees the rest of the reservation.
func (s *Service) HoldCapture(ctx context.Context, call Call, req *HoldCaptureRequest) (*HoldCaptured, error) {
	intentID, err := s.holdIntent(req.HoldID)
	if err != nil {
		return nil, err
	}
	if err := s.ownRoute(ctx, call, intentID, routeHoldPlace); err != nil {
		return nil, err
	}
	if err := s.st.View(ctx, func(r store.Reader) error {
		return checkKey(r, call, "hold.capture", req.IdempotencyKey, req.HoldID)
	}); err != nil {
		return nil, err
	}
	res, err := s.books.Capture(ctx, *call.Agent, pay.CaptureRequest{IntentID: intentID, Minor: req.AmountMinor, IdempotencyKey: req.IdempotencyKey}, call.RequestID,
		func(txn store.Txn, _ *pay.Intent) error {
			return bindKey(txn, call, "hold.capture", req.IdempotencyKey, req.HoldID)
		})
	if err != nil {
		return nil, notHoldAsNotFound(err)
	}
	if res.Outcome != pay.OutcomeSettled {
		return nil, &Refused{Result: res}
	}
	return s.captured(ctx, call, req.HoldID, res)
}

// captured renders a capture's outcome from what never changes once
// settled (the receipt and the held amount), so a replay is the same bytes.
func (s *Service) captured(ctx context.Context, call Call, objID string, res *pay.Result) (*HoldCaptured, error) {
	in, err := s.pay.Intent(ctx, *call.Agent, res.IntentID)
	if err != nil {
		return nil, err
	}
	return &HoldCaptured{HoldID: objID, IntentID: res.IntentID, CapturedMinor: res.Receipt.Amount.Minor,
		ReleasedMinor: in.Amount.Minor - res.Receipt.Amount.Minor, Receipt: res.Receipt, replayed: res.Replayed}, nil
}

// HoldRelease releases a held hold without capturing: nothing moves, the
// reservation goes back, the rail's authorization is voided.
func (s *Service) HoldRelease(ctx context.Context, call Call, req *HoldRef) (*Hold, error) {
	intentID, err := s.holdIntent(req.HoldID)
	if err != nil {
		return nil, err
	}
	if err := s.ownRoute(ctx, call, intentID, routeHoldPlace); err != nil {
		return nil, err
	}
	in, err := s.books.Void(ctx, *call.Agent, intentID, call.RequestID, nil)
	if err != nil {
		return nil, notHoldAsNotFound(err)
	}
	return s.holdView(ctx, in)
}

// HoldGet returns a hold of the caller.
func (s *Service) HoldGet(ctx context.Context, call Call, req *HoldRef) (*Hold, error) {
	intentID, err := s.holdIntent(req.HoldID)
	if err != nil {
		return nil, err
	}
	in, err := s.pay.Intent(ctx, *call.Agent, intentID)
	if err != nil || in.Route != routeHoldPlace {
		return nil, pay.ErrNotHold
	}
	return s.holdView(ctx, in)
}

func (s *Service) holdView(ctx context.Context, in *pay.Intent) (*Hold, error) {
	seqs, err := s.entrySeqs(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	h := holdOf(in, seqs)
	return &h, nil
}

// entrySeqs reads the sequence numbers of the entries about an intent.
func (s *Service) entrySeqs(ctx context.Context, intentID string) ([]uint64, error) {
	var seqs []uint64
	err := s.st.View(ctx, func(r store.Reader) error {
		var err error
		seqs, err = s.books.IntentEntrySeqs(r, intentID)
		return err
	})
	return seqs, err
}

// ownRoute checks that an intent is the caller's and was placed by the
// given route (a meter's hold is captured by meter.close, not hold.capture).
func (s *Service) ownRoute(ctx context.Context, call Call, intentID string, route pay.Route) error {
	in, err := s.pay.Intent(ctx, *call.Agent, intentID)
	if err != nil || in.Route != route {
		return pay.ErrNotHold
	}
	return nil
}

func notHoldAsNotFound(err error) error {
	if errors.Is(err, pay.ErrIntentNotFound) {
		return pay.ErrNotHold
	}
	return err
}

// stepNames names the protocol entries of system transitions; an agent's
// call is named after its method.
var stepNames = map[pay.Step]string{
	pay.StepDecided: "place", pay.StepApproved: "approve", pay.StepAuthorized: "authorize",
	pay.StepCapture: "capture", pay.StepSettled: "settle", pay.StepFailed: "fail",
	pay.StepVoided: "release", pay.StepExpired: "expire", pay.StepDeclined: "decline", pay.StepRefunding: "refund",
	pay.StepRefunded: "refund", pay.StepRefundRefused: "refund",
}

// holdChanged appends protocol.hold.{step} with the hold's new state in
// the transaction that changed its intent.
func (s *Service) holdChanged(txn store.Txn, in *pay.Intent, step pay.Step, requestID string) error {
	if err := moveHold(in, step); err != nil {
		return err
	}
	_, err := s.recordIntent(txn, "protocol.hold."+stepNames[step], in, step, requestID, holdOf(in, nil))
	return err
}

// recordIntent appends a protocol entry about an intent's change, acted by
// the agent for its own calls and by the system otherwise.
func (s *Service) recordIntent(txn store.Txn, typ string, in *pay.Intent, step pay.Step, requestID string, obj any) (audit.Entry, error) {
	call := systemCall(requestID)
	switch step {
	case pay.StepDecided, pay.StepCapture, pay.StepVoided:
		call.Agent = &pay.Caller{KeyID: in.AgentKeyID}
	}
	if step == pay.StepVoided && in.Hold != nil && in.Hold.EndedBy != "release" {
		call.Agent = nil
	}
	return s.record(txn, call, typ, in.ID, obj)
}
