package pay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/store"
)

// Holds
//
// A hold is an intent that passes the same gate, the same reservation of
// the mandate's period budget and the same approval as a payment, but
// stops at authorized instead of settling. A capture later settles part or
// all of the held amount through the same two-phase settlement (the intent
// id stays the rail's key) and gives the rest of the reservation back; a
// release voids it; the expiry sweep voids what was never captured.
//
// On a rail with the settle.Authorizer capability the rail holds the funds
// too: placing a hold is itself a rail call, made two-phase like a
// settlement (settling with hold.phase "authorize", resolved by
// LookupAuthorization after a crash), and a capture is Authorizer.Capture.
// On other rails a hold is a reservation of the mandate's budget only and
// its capture is a normal Settle of the captured amount.

// Errors of holds. Check with errors.Is; each carries a stable code.
var (
	// ErrNotHold: the intent was not placed as a hold.
	ErrNotHold = errcode.New(CodeHoldNotFound, "pay: this intent is not a hold")
	// ErrHoldNotAuthorized: the hold is not (yet) authorized: waiting for
	// approval, or its authorization is still with the rail.
	ErrHoldNotAuthorized = errcode.New(CodeHoldNotAuthorized, "pay: the hold is not authorized")
	// ErrHoldCaptured: the hold was already captured (or its capture is
	// in progress).
	ErrHoldCaptured = errcode.New(CodeHoldCaptured, "pay: the hold was already captured")
	// ErrHoldReleased: the hold was released, expired, denied, failed or
	// declined by an operator; nothing can be captured.
	ErrHoldReleased = errcode.New(CodeHoldReleased, "pay: the hold was released or expired")
	// ErrCaptureExceeds: the capture is more than the held amount.
	ErrCaptureExceeds = errcode.New(CodeCaptureExceeds, "pay: capture amount exceeds the held amount")
)

// Hold phases ([HoldState.Phase]).
const (
	HoldPhaseAuthorize  = "authorize"  // the rail's authorization is being asked for (status settling)
	HoldPhaseAuthorized = "authorized" // held; waiting for a capture or a release
	HoldPhaseCapture    = "capture"    // the capture is with the rail (status settling)
	HoldPhaseDone       = "done"       // captured, voided, expired or failed
)

// HoldOptions ask [Service.authorizeSigned] for a hold instead of a
// settlement (in [Signed.Hold]).
type HoldOptions struct {
	// TTL is how long the hold lasts once authorized; the expiry sweep
	// ([Service.ExpireHolds]) voids it after. 1 minute to 30 days.
	TTL time.Duration
	// Until, when set, is an absolute end no authorization outlives (an
	// obligation's deadline): the hold expires at the earlier of
	// authorization + TTL and Until, and is never captured after it.
	Until time.Time
}

// HoldState is the hold part of an intent.
type HoldState struct {
	Phase string `json:"phase"`
	// TTLSeconds is the hold's lifetime once authorized.
	TTLSeconds int64 `json:"ttlSeconds"`
	// Until is HoldOptions.Until, if set.
	Until time.Time `json:"until,omitzero"`
	// RailAuthorization: the rail holds the funds (settle.Authorizer);
	// false: a reservation of the mandate's budget only.
	RailAuthorization bool   `json:"railAuthorization"`
	Reference         string `json:"reference,omitempty"`
	// AuthorizedAt and ExpiresAt are set once authorized.
	AuthorizedAt time.Time `json:"authorizedAt,omitzero"`
	ExpiresAt    time.Time `json:"expiresAt,omitzero"`
	// CaptureMinor and CaptureKey are set by the capture request: the
	// amount to settle and the caller's idempotency key for it.
	CaptureMinor int64  `json:"captureMinor,omitempty"`
	CaptureKey   string `json:"captureKey,omitempty"`
	// ReleasedMinor is what the capture gave back to the budget.
	ReleasedMinor int64 `json:"releasedMinor,omitempty"`
	// EndedBy says how a hold ended without capture: "release",
	// "expiry", "decline" (the rail declined it), "operator_decline" (an
	// operator declined it while it waited for approval).
	EndedBy string `json:"endedBy,omitempty"`
}

// MinHoldTTL and MaxHoldTTL bound [HoldOptions.TTL].
const (
	MinHoldTTL = time.Minute
	MaxHoldTTL = 30 * 24 * time.Hour
)

// settleMinor is what settles for the intent: the captured amount of a
// hold, the whole amount otherwise.
func (in *Intent) settleMinor() int64 {
	if in.Hold != nil && in.Hold.CaptureMinor > 0 {
		return in.Hold.CaptureMinor
	}
	return in.Amount.Minor
}

// SettledMinor is what an intent settled: its receipt's amount (a hold's
// capture may be less than what was held), 0 before it settled.
func (in *Intent) SettledMinor() int64 {
	if in.Receipt == nil {
		return 0
	}
	return in.Receipt.Amount.Minor
}

// authorizer returns the rail's authorization capability, if any.
func (s *Service) authorizer(rail string) (settle.Authorizer, bool) {
	r, err := s.rails.Get(rail)
	if err != nil {
		return nil, false
	}
	return settle.AuthorizerOf(r)
}

// startHold moves a just-allowed (or just-approved) hold intent on, inside
// txn, at step (StepDecided or StepApproved): to settling (phase
// authorize) when its rail authorizes, so that the caller then asks the
// rail; straight to authorized otherwise. seq is an entry the caller
// appended in txn. It reports whether the rail must be asked, or the
// outcome.
func (s *Service) startHold(txn store.Txn, in *Intent, step Step, seq uint64, requestID string) (bool, *Result, error) {
	if _, ok := s.authorizer(in.Terms.Rail); ok {
		if err := in.transition(step, StatusSettling); err != nil {
			return false, nil, err
		}
		in.Hold.Phase, in.Hold.RailAuthorization = HoldPhaseAuthorize, true
		return true, nil, settlingList.Put(txn, seq, in.ID)
	}
	r, err := s.markAuthorized(txn, in, step, "", time.Time{}, requestID, false)
	return false, r, err
}

// markAuthorized records the hold as authorized inside txn, at step.
// notify is false when the caller reports the change itself (the deciding
// transaction reports StepDecided with the intent already authorized).
func (s *Service) markAuthorized(txn store.Txn, in *Intent, step Step, reference string, railExpiry time.Time, requestID string, notify bool) (*Result, error) {
	if err := in.transition(step, StatusAuthorized); err != nil {
		return nil, err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	h := in.Hold
	h.Phase, h.Reference, h.AuthorizedAt = HoldPhaseAuthorized, reference, now
	h.ExpiresAt = now.Add(time.Duration(h.TTLSeconds) * time.Second)
	if !railExpiry.IsZero() && railExpiry.Before(h.ExpiresAt) {
		h.ExpiresAt = railExpiry.UTC().Truncate(time.Microsecond)
	}
	if !h.Until.IsZero() && h.Until.Before(h.ExpiresAt) {
		h.ExpiresAt = h.Until
	}
	in.UpdatedAt = now
	data, err := json.Marshal(map[string]any{"amount": in.Amount, "rail": in.Terms.Rail,
		"railAuthorization": h.RailAuthorization, "reference": reference, "expiresAt": h.ExpiresAt})
	if err != nil {
		return nil, err
	}
	e, err := s.append(txn, audit.Record{Type: "payment.authorized", IntentID: in.ID, Actor: systemActor, RequestID: requestID, Data: data})
	if err != nil {
		return nil, err
	}
	if err := settlingList.Remove(txn, in.ID); err != nil {
		return nil, err
	}
	if err := txn.Set(holdExpiryKey(h.ExpiresAt, in.ID), nil); err != nil {
		return nil, err
	}
	r := &Result{Outcome: OutcomeAuthorized, IntentID: in.ID, RequestID: in.RequestID, Authorized: &Authorized{
		IntentID: in.ID, Amount: in.Amount, RailAuthorization: h.RailAuthorization, Reference: reference,
		ExpiresAt: h.ExpiresAt, AuditSeq: e.Seq,
	}}
	in.UnknownOutcome = nil
	if err := s.finalIdem(txn, in, r); err != nil {
		return nil, err
	}
	if notify {
		if err := s.changed(txn, in, step, requestID); err != nil {
			return nil, err
		}
	}
	return r, putIntent(txn, in)
}

func holdExpiryKey(at time.Time, id string) []byte {
	return append(append([]byte(keyHoldExpiry), be8(uint64(at.UnixNano()))...), id...)
}

// authorizeClaimed asks the rail to authorize a hold that transaction 1
// left settling in phase authorize, and records the answer. The caller
// holds the intent's claim.
func (s *Service) authorizeClaimed(ctx context.Context, in *Intent, requestID string, lookupFirst bool) (*Result, error) {
	az, ok := s.authorizer(in.Terms.Rail)
	if !ok {
		return nil, fmt.Errorf("%w: intent %s: rail %q no longer authorizes", ErrRailUnavailable, in.ID, in.Terms.Rail)
	}
	a, err := s.askAuthorization(ctx, az, in, lookupFirst)
	return s.finishAuthorize(ctx, in, a, err, requestID)
}

// askAuthorization asks the rail to authorize a hold, first looking up
// whether it already did when an earlier attempt may have reached it.
// Placing a hold moves no money: it is asked for again even while the
// kill switch is engaged; the capture is what the switch stops.
func (s *Service) askAuthorization(ctx context.Context, az settle.Authorizer, in *Intent, lookupFirst bool) (settle.Authorization, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.railTO)
	defer cancel()
	if lookupFirst {
		a, err := az.LookupAuthorization(rctx, in.ID)
		if !errors.Is(err, settle.ErrUnknownKey) {
			return a, err
		}
	}
	return az.Authorize(rctx, settleRequest(in))
}

// finishAuthorize records the rail's answer to an authorization.
func (s *Service) finishAuthorize(ctx context.Context, in *Intent, a settle.Authorization, callErr error, requestID string) (*Result, error) {
	ctx = context.WithoutCancel(ctx)
	var declined *settle.DeclineError
	var res *Result
	switch {
	case callErr == nil && a.Status == settle.AuthAuthorized:
		err := s.log.Update(ctx, func(txn store.Txn) error {
			res = nil
			cur, err := getIntent(txn, in.ID)
			if err != nil {
				return err
			}
			if cur.Status != StatusSettling || cur.Hold == nil || cur.Hold.Phase != HoldPhaseAuthorize {
				return nil
			}
			res, err = s.markAuthorized(txn, cur, StepAuthorized, a.Reference, a.ExpiresAt, requestID, true)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("pay: recording authorization of %s: %w", in.ID, err)
		}
		if res == nil {
			return s.storedResult(ctx, in)
		}
		return res, nil
	case errors.As(callErr, &declined), errors.Is(callErr, settle.ErrInvalidRequest),
		callErr == nil && (a.Status == settle.AuthVoided || a.Status == settle.AuthExpired):
		code, msg := "declined", "the rail declined the authorization"
		switch {
		case declined != nil:
			code, msg = declined.Code, declined.Message
		case callErr != nil:
			code, msg = "rail_refused", "the rail refused the request"
		default:
			code, msg = "authorization_"+string(a.Status), "the rail's authorization is "+string(a.Status)
		}
		return s.failSettling(ctx, in, nil, code, msg, requestID)
	default:
		reason := unknownReason(callErr)
		s.logger.WarnContext(ctx, "rail authorization not definite; hold stays settling",
			slog.String("intentId", in.ID), slog.String("rail", in.Terms.Rail), slog.String("reason", reason), slog.Any("error", callErr))
		err := s.log.Update(ctx, func(txn store.Txn) error { return s.markUnknown(txn, in.ID, reason, requestID) })
		if err != nil {
			s.logger.ErrorContext(ctx, "recording an unknown authorization outcome", slog.String("intentId", in.ID), slog.Any("error", err))
		}
		return nil, fmt.Errorf("%w (intent %s)", ErrRailUnavailable, in.ID)
	}
}

// CaptureRequest asks to settle part or all of a hold.
type CaptureRequest struct {
	IntentID string
	// Minor is the amount to settle: 1 up to the held amount. The rest of
	// the reservation goes back to the mandate's budget.
	Minor int64
	// IdempotencyKey names this capture: a repeat with the same key and
	// amount answers the capture's outcome again (Replayed); with another
	// amount it is ErrIdempotencyConflict; another key on a captured hold
	// is ErrHoldCaptured.
	IdempotencyKey string
}

// captureHold settles part or all of an authorized hold of the caller's agent
// key, through the same two-phase settlement as a payment. within, when
// not nil, runs inside the transaction that starts the capture (the
// protocol surface records its own entry there). The kill switch stops a
// capture (ErrFrozen, nothing changed), and so does a revoked mandate or
// agent identity.
func (s *Service) captureHold(ctx context.Context, c Caller, req CaptureRequest, requestID string, within func(store.Txn, *Intent) error) (*Result, error) {
	var (
		toSettle *Intent
		replay   *Intent
	)
	// The intent is claimed before the transaction that moves it to
	// settling, as a payment's is before its decision: otherwise a
	// concurrent capture under the same key, between that commit and the
	// rail call, finds it settling and resumes it, and the rail is asked
	// to capture twice (the second answer a decline for money that moved).
	// A replay that finds it claimed answers ErrInFlight.
	if !s.claim(req.IntentID) {
		return nil, ErrInFlight
	}
	claimed := true
	defer func() {
		if claimed {
			s.release(req.IntentID)
		}
	}()
	err := s.log.Update(ctx, func(txn store.Txn) error {
		toSettle, replay = nil, nil
		in, err := getIntent(txn, req.IntentID)
		if err != nil {
			return err
		}
		if in.AgentKeyID != c.KeyID {
			return ErrIntentNotFound
		}
		if in.Hold == nil {
			return ErrNotHold
		}
		if in.Hold.CaptureKey != "" {
			switch {
			case in.Hold.CaptureKey != req.IdempotencyKey:
				return ErrHoldCaptured
			case in.Hold.CaptureMinor != req.Minor:
				return ErrIdempotencyConflict
			}
			replay = in
			return nil
		}
		switch in.Status {
		case StatusAuthorized:
		case StatusPendingApproval, StatusSettling:
			return ErrHoldNotAuthorized
		default:
			return fmt.Errorf("%w (status %s)", ErrHoldReleased, in.Status)
		}
		if req.Minor <= 0 || req.Minor > in.Amount.Minor {
			return fmt.Errorf("%w: asked %d, %d held", ErrCaptureExceeds, req.Minor, in.Amount.Minor)
		}
		if exp := in.Hold.ExpiresAt; !exp.IsZero() && !s.now().Before(exp) {
			// Past its expiry and not yet swept: as good as expired.
			return fmt.Errorf("%w (expired at %s)", ErrHoldReleased, exp.Format(time.RFC3339))
		}
		if err := s.stillAuthorized(txn, in); err != nil {
			return err
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		release := in.Amount.Minor - req.Minor
		if err := s.releasePart(txn, in, release); err != nil {
			return err
		}
		if err := in.transition(StepCapture, StatusSettling); err != nil {
			return err
		}
		h := in.Hold
		h.Phase, h.CaptureMinor, h.CaptureKey, h.ReleasedMinor = HoldPhaseCapture, req.Minor, req.IdempotencyKey, release
		in.UpdatedAt = now
		if err := txn.Delete(holdExpiryKey(h.ExpiresAt, in.ID)); err != nil {
			return err
		}
		data, err := json.Marshal(map[string]int64{"captureMinor": req.Minor, "releasedMinor": release})
		if err != nil {
			return err
		}
		e, err := s.append(txn, audit.Record{Type: "payment.capture_requested", IntentID: in.ID, Actor: agentActor(c), RequestID: requestID, Data: data})
		if err != nil {
			return err
		}
		if err := settlingList.Put(txn, e.Seq, in.ID); err != nil {
			return err
		}
		if err := s.changed(txn, in, StepCapture, requestID); err != nil {
			return err
		}
		if within != nil {
			if err := within(txn, in); err != nil {
				return err
			}
		}
		toSettle = in
		return putIntent(txn, in)
	})
	if err != nil {
		return nil, err
	}
	if replay != nil {
		s.release(req.IntentID) // resume claims it itself
		claimed = false
		if replay.Status == StatusSettling {
			res, err := s.resume(ctx, replay.ID, requestID)
			if err != nil {
				return nil, err
			}
			// If the first capture finished meanwhile, resume answers from
			// the outcome stored under the hold's own idempotency key (the
			// authorization); a capture answers from the capture's outcome.
			cur, err := s.readIntent(ctx, replay.ID)
			if err != nil {
				return nil, err
			}
			if cur.Status != StatusSettling {
				return s.captureOutcome(cur)
			}
			return res, nil
		}
		return s.captureOutcome(replay)
	}
	return s.settleHoldClaimed(ctx, toSettle, requestID)
}

// captureOutcome answers a repeated capture from the intent's final state.
func (s *Service) captureOutcome(in *Intent) (*Result, error) {
	switch {
	case in.Receipt != nil:
		return &Result{Outcome: OutcomeSettled, IntentID: in.ID, RequestID: in.RequestID, Receipt: in.Receipt, Replayed: true}, nil
	case in.Failure != nil:
		return &Result{Outcome: OutcomeFailed, IntentID: in.ID, RequestID: in.RequestID, Failure: in.Failure, Replayed: true}, nil
	}
	return nil, fmt.Errorf("pay: capture of %s is %s without an outcome", in.ID, in.Status)
}

// stillAuthorized re-checks, before money moves, what the gate checked
// when the hold was placed and may have changed since: the kill switch,
// the mandate's and the agent's revocation, the mandate's expiry.
func (s *Service) stillAuthorized(r store.Reader, in *Intent) error {
	ctl, err := getControl(r)
	if err != nil {
		return err
	}
	if ctl.KillSwitchEngaged {
		return ErrFrozen
	}
	if revoked, err := isRevoked(r, in.MandateID); err != nil {
		return err
	} else if revoked {
		return &UnauthorizedError{Reason: ReasonMandateRevoked}
	}
	if revoked, err := identityRevoked(r, in.Agent); err != nil {
		return err
	} else if revoked {
		return &UnauthorizedError{Reason: ReasonIdentityRevoked}
	}
	if !in.MandateExpiresAt.IsZero() && !s.now().Before(in.MandateExpiresAt) {
		return &UnauthorizedError{Reason: ReasonMandateExpired}
	}
	return nil
}

// settleHoldClaimed sends a capture to the rail, for a caller that holds
// the intent's claim: Authorizer.Capture when the rail holds the funds, a
// Settle of the captured amount otherwise.
func (s *Service) settleHoldClaimed(ctx context.Context, in *Intent, requestID string) (*Result, error) {
	if !in.Hold.RailAuthorization {
		return s.settleClaimed(ctx, in, nil, requestID)
	}
	az, ok := s.authorizer(in.Terms.Rail)
	if !ok {
		return s.finish(ctx, in, nil, settle.Settlement{}, fmt.Errorf("%w: rail %q no longer authorizes", settle.ErrUnavailable, in.Terms.Rail), requestID)
	}
	st, err := s.callRail(ctx, func(ctx context.Context) (settle.Settlement, error) {
		return az.Capture(ctx, in.ID, in.Hold.CaptureMinor)
	})
	return s.finish(ctx, in, nil, st, closedAsDecline(err), requestID)
}

// voidHold releases an authorized hold of the caller's agent key without
// capturing it: the reservation goes back to the mandate's budget and, on
// a rail that authorizes, the rail's hold is voided first. within, when
// not nil, runs inside the transaction that records it.
func (s *Service) voidHold(ctx context.Context, c Caller, intentID, requestID string, within func(store.Txn, *Intent) error) (*Intent, error) {
	in, err := s.readIntent(ctx, intentID)
	if err != nil {
		return nil, err
	}
	if in.AgentKeyID != c.KeyID {
		return nil, ErrIntentNotFound
	}
	if err := holdVoidable(in); err != nil {
		return nil, err
	}
	return s.void(ctx, in, "release", agentActor(c), requestID, within)
}

func holdVoidable(in *Intent) error {
	switch {
	case in.Hold == nil:
		return ErrNotHold
	case in.Status == StatusAuthorized:
		return nil
	case in.Hold.CaptureKey != "":
		return ErrHoldCaptured
	case in.Status == StatusPendingApproval || in.Status == StatusSettling:
		return ErrHoldNotAuthorized
	}
	return fmt.Errorf("%w (status %s)", ErrHoldReleased, in.Status)
}

// void voids a hold: the rail first (an unvoided rail hold only expires at
// the rail; a voided one with an authorized intent can no longer be
// captured, which fails closed), then the intent.
func (s *Service) void(ctx context.Context, in *Intent, endedBy string, actor audit.Actor, requestID string, within func(store.Txn, *Intent) error) (*Intent, error) {
	if in.Hold.RailAuthorization {
		az, ok := s.authorizer(in.Terms.Rail)
		if ok {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.railTO)
			_, err := az.Void(rctx, in.ID)
			cancel()
			if err != nil && !errors.Is(err, settle.ErrAuthorizationClosed) && !errors.Is(err, settle.ErrUnknownKey) {
				return nil, fmt.Errorf("%w: voiding the rail's hold of %s: %v", ErrRailUnavailable, in.ID, err)
			}
		}
	}
	var out *Intent
	err := s.log.Update(context.WithoutCancel(ctx), func(txn store.Txn) error {
		out = nil
		cur, err := getIntent(txn, in.ID)
		if err != nil {
			return err
		}
		if err := holdVoidable(cur); err != nil {
			return err
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		if err := s.releaseReservation(txn, cur); err != nil {
			return err
		}
		if err := txn.Delete(holdExpiryKey(cur.Hold.ExpiresAt, cur.ID)); err != nil {
			return err
		}
		status, typ, step := StatusVoided, "payment.voided", StepVoided
		if endedBy == "expiry" {
			status, typ, step = StatusExpired, "payment.hold_expired", StepExpired
		}
		if err := cur.transition(step, status); err != nil {
			return err
		}
		cur.UpdatedAt, cur.Hold.Phase, cur.Hold.EndedBy = now, HoldPhaseDone, endedBy
		data, err := json.Marshal(map[string]any{"amount": cur.Amount, "endedBy": endedBy})
		if err != nil {
			return err
		}
		if _, err := s.append(txn, audit.Record{Type: typ, IntentID: cur.ID, Actor: actor, RequestID: requestID, Data: data}); err != nil {
			return err
		}
		if err := s.changed(txn, cur, step, requestID); err != nil {
			return err
		}
		if within != nil {
			if err := within(txn, cur); err != nil {
				return err
			}
		}
		out = cur
		return putIntent(txn, cur)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ExpireHolds voids every authorized hold whose expiry has passed and
// returns how many. The protocol scheduler runs it; it reads its work from
// the store, so a restart loses nothing.
func (s *Service) ExpireHolds(ctx context.Context) (int, error) {
	upper := append([]byte(keyHoldExpiry), be8(uint64(s.now().UnixNano())+1)...)
	var due []*Intent
	err := s.st.View(ctx, func(r store.Reader) error {
		it := r.Iterate([]byte(keyHoldExpiry), upper, false)
		var idsDue []string
		for it.Next() && len(idsDue) < 1000 {
			idsDue = append(idsDue, string(it.Key()[len(keyHoldExpiry)+8:]))
		}
		if err := it.Close(); err != nil {
			return err
		}
		for _, id := range idsDue {
			in, err := getIntent(r, id)
			if err != nil {
				return err
			}
			due = append(due, in)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("pay: expire holds: %w", err)
	}
	n := 0
	for _, in := range due {
		if in.Status != StatusAuthorized {
			continue
		}
		if _, err := s.void(ctx, in, "expiry", audit.Actor{Kind: "system", ID: "hold-sweep"}, "", nil); err != nil {
			if errors.Is(err, ErrRailUnavailable) {
				continue // the next sweep tries again
			}
			var coded interface{ Code() string }
			if errors.As(err, &coded) {
				continue // changed meanwhile (captured, released)
			}
			return n, fmt.Errorf("pay: expire hold %s: %w", in.ID, err)
		}
		n++
	}
	return n, nil
}

// resumeHold finishes a hold intent left settling: its authorization,
// or a capture the rail holds the funds for. It runs under resume's claim.
func (s *Service) resumeHold(ctx context.Context, in *Intent, rail settle.Rail, ctl Control, requestID string) (*Result, error) {
	az, ok := settle.AuthorizerOf(rail)
	if !ok {
		return nil, fmt.Errorf("%w: intent %s: rail %q no longer authorizes", ErrRailUnavailable, in.ID, in.Terms.Rail)
	}
	if in.Hold.Phase == HoldPhaseAuthorize {
		a, err := s.askAuthorization(ctx, az, in, true)
		return s.finishAuthorize(ctx, in, a, err, requestID)
	}
	st, err := s.callRail(ctx, func(ctx context.Context) (settle.Settlement, error) { return rail.Lookup(ctx, in.ID) })
	if errors.Is(err, settle.ErrUnknownKey) {
		if ctl.KillSwitchEngaged {
			return nil, ErrFrozen
		}
		st, err = s.callRail(ctx, func(ctx context.Context) (settle.Settlement, error) {
			return az.Capture(ctx, in.ID, in.Hold.CaptureMinor)
		})
	}
	return s.finish(ctx, in, nil, st, closedAsDecline(err), requestID)
}

// closedAsDecline reads a rail's refusal to capture a voided or expired
// authorization as the decline it is: nothing moved, nothing will.
func closedAsDecline(err error) error {
	if errors.Is(err, settle.ErrAuthorizationClosed) {
		return &settle.DeclineError{Code: "authorization_closed", Message: "the rail's authorization was voided or expired"}
	}
	return err
}
