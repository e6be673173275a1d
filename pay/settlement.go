package pay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/ids"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/store"
)

var systemActor = audit.Actor{Kind: "system", ID: "settlement"}

// settleClaimed calls the rail for an intent transaction 1 left settling
// and records the outcome (transaction 2), for a caller that holds the
// intent's claim.
// prior is in as the caller's transaction stored it, or nil (see
// intentReader).
func (s *Service) settleClaimed(ctx context.Context, in *Intent, prior []byte, requestID string) (*Result, error) {
	rail, err := s.rails.Get(in.Terms.Rail)
	if err != nil {
		// The gate admits only registered rails; a rail that vanished
		// since is a configuration fault. Nothing was sent: fail closed.
		return s.finish(ctx, in, prior, settle.Settlement{}, err, requestID)
	}
	if ts, ok := rail.(settle.TxnSettler); ok && ts.SharesLog() {
		var step func(store.Txn) (settle.Settlement, error)
		st, err := s.callRail(ctx, func(ctx context.Context) (st settle.Settlement, err error) {
			step, st, err = ts.SettleInTxn(ctx, s.st, settleRequest(in))
			return st, err
		})
		if step != nil {
			return s.finishInTxn(ctx, in, prior, step, requestID)
		}
		return s.finish(ctx, in, prior, st, err, requestID)
	}
	st, err := s.callRail(ctx, func(ctx context.Context) (settle.Settlement, error) {
		return rail.Settle(ctx, settleRequest(in))
	})
	return s.finish(ctx, in, prior, st, err, requestID)
}

// finishInTxn records the rail's answer, which step gives inside the
// transaction that records the outcome: for a rail that settles in that
// transaction (settle.TxnSettler) step is the rail's write, so the rail's
// entry and the outcome commit together or not at all; for an answer
// already had it is answered. A settled or pending answer settles the
// intent, a definite refusal fails it, and any other answer writes
// nothing there and is recorded as finish records it. Whoever finished
// the intent first answers from storage.
func (s *Service) finishInTxn(ctx context.Context, in *Intent, prior []byte, step func(store.Txn) (settle.Settlement, error), requestID string) (*Result, error) {
	ctx = context.WithoutCancel(ctx)
	var res *Result
	var stepSt settle.Settlement
	var stepErr error
	rd := newIntentReader(in, prior)
	err := s.log.Update(ctx, func(txn store.Txn) error {
		res, stepSt, stepErr = nil, settle.Settlement{}, nil
		cur, err := rd.get(txn)
		if err != nil {
			return err
		}
		if cur.Status != StatusSettling {
			return nil // someone else finished it; answer from storage below
		}
		stepSt, stepErr = step(txn)
		return s.recordAnswer(txn, cur, stepSt, stepErr, true, requestID, &res)
	})
	switch {
	case errors.Is(err, errIndefinite):
		return s.finish(ctx, in, prior, stepSt, stepErr, requestID)
	case err != nil:
		return nil, fmt.Errorf("pay: recording the rail's answer for %s: %w", in.ID, err)
	case res == nil:
		return s.storedResult(ctx, in)
	}
	return res, nil
}

// recordAnswer records the rail's answer on cur, an intent settling: a
// settled or pending answer settles it, a definite refusal fails it, and
// any other answer is errIndefinite, to abort the transaction. listed
// says whether cur is on the settling list (it is not when it was decided
// in this transaction, on a rail that answers at once).
func (s *Service) recordAnswer(txn store.Txn, cur *Intent, st settle.Settlement, callErr error, listed bool, requestID string, res **Result) error {
	if railSettled(st, callErr) {
		return s.recordSettled(txn, cur, st, listed, requestID, res)
	}
	if code, msg, ok := railRefusal(st, callErr); ok {
		return s.recordFailed(txn, cur, code, msg, listed, requestID, res)
	}
	return errIndefinite
}

// answered is the step of an answer the rail has already given.
func answered(st settle.Settlement, callErr error) func(store.Txn) (settle.Settlement, error) {
	return func(store.Txn) (settle.Settlement, error) { return st, callErr }
}

// railSettled reports whether a rail's answer is a settlement (settled,
// or pending on a rail of deferred finality).
func railSettled(st settle.Settlement, callErr error) bool {
	return callErr == nil && (st.Status == settle.StatusSettled || st.Status == settle.StatusPending)
}

// errIndefinite aborts finishInTxn's transaction when the rail's answer
// was not definite.
var errIndefinite = errors.New("pay: the rail's answer was not definite")

// errUnprepared aborts a deciding transaction whose payment is not the one
// its rail's write was prepared for (prepareInstant).
var errUnprepared = errors.New("pay: the payment decided is not the one prepared")

// railRefusal reports whether a rail's answer is a definite refusal, and
// the decline code and message it is recorded with.
func railRefusal(st settle.Settlement, callErr error) (code, msg string, ok bool) {
	var declined *settle.DeclineError
	switch {
	case errors.As(callErr, &declined):
		return declined.Code, declined.Message, true
	case errors.Is(callErr, settle.ErrInvalidRequest), errors.Is(callErr, settle.ErrUnknownRail):
		return "rail_refused", "the rail refused the request", true
	case callErr == nil && st.Status == settle.StatusDeclined:
		code = "declined"
		if st.DeclineCode != "" {
			code = st.DeclineCode
		}
		return code, "the rail declined the payment", true
	}
	return "", "", false
}

func settleRequest(in *Intent) settle.SettleRequest {
	meta := make(map[string]string, len(in.Metadata)+1)
	for k, v := range in.Metadata {
		meta[k] = v
	}
	meta["idempotencyKey"] = in.IdempotencyKey
	return settle.SettleRequest{
		Key: in.ID, Payee: in.Payee, Amount: in.settleMinor(), Currency: in.Amount.Currency, Metadata: meta,
	}
}

// callRail runs one rail call that the client's disconnect cannot cut
// short: once a payment is on its way, we want its answer.
func (s *Service) callRail(ctx context.Context, call func(context.Context) (settle.Settlement, error)) (settle.Settlement, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.railTO)
	defer cancel()
	return call(rctx)
}

// resume finishes an intent that was left settling: it asks the rail what
// happened and, if the rail never saw the payment, sends it again under the
// same key (the decision to pay was already made and recorded), unless the
// kill switch is engaged now.
func (s *Service) resume(ctx context.Context, id, requestID string) (*Result, error) {
	if !s.claim(id) {
		return nil, ErrInFlight
	}
	defer s.release(id)
	var in *Intent
	var ctl Control
	err := s.st.View(ctx, func(r store.Reader) error {
		var err error
		if in, err = getIntent(r, id); err != nil {
			return err
		}
		ctl, err = getControl(r)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pay: resume %s: %w", id, err)
	}
	if in.Status != StatusSettling {
		return s.storedResult(ctx, in)
	}
	if s.mayBeSettlingElsewhere(in) {
		return nil, ErrInFlight
	}
	rail, err := s.rails.Get(in.Terms.Rail)
	if err != nil {
		return nil, fmt.Errorf("%w: intent %s: rail %q is not registered", ErrRailUnavailable, id, in.Terms.Rail)
	}
	if in.Hold != nil && (in.Hold.Phase == HoldPhaseAuthorize || in.Hold.RailAuthorization) {
		return s.resumeHold(ctx, in, rail, ctl, requestID)
	}
	st, err := s.callRail(ctx, func(ctx context.Context) (settle.Settlement, error) {
		if rl, ok := rail.(settle.RequestLooker); ok {
			return rl.LookupRequest(ctx, settleRequest(in))
		}
		return rail.Lookup(ctx, id)
	})
	if errors.Is(err, settle.ErrUnknownKey) {
		if ctl.KillSwitchEngaged {
			return nil, ErrFrozen
		}
		st, err = s.callRail(ctx, func(ctx context.Context) (settle.Settlement, error) {
			return rail.Settle(ctx, settleRequest(in))
		})
	}
	return s.finish(ctx, in, nil, st, err, requestID)
}

// mayBeSettlingElsewhere reports whether the first attempt to settle in,
// found settling, may still be running in another process sharing the
// store (Options.SharedStore): no attempt has answered yet (an answer
// that was not definite marks the intent UnknownOutcome), and the rail
// timeout has not passed, twice over for the processes' clocks, since it
// began settling. Resuming it then could resolve it under that attempt's
// feet: for a purchase, cancel the checkout session the attempt is
// completing. In one process the intent's claim already says so.
func (s *Service) mayBeSettlingElsewhere(in *Intent) bool {
	return s.shared && in.UnknownOutcome == nil && s.now().Before(in.UpdatedAt.Add(2*s.railTO))
}

// storedResult answers for an intent that is no longer settling: with the
// outcome stored under its idempotency key, or else (see finalIdem) with
// the one its stored state gives. in may be a copy older than that state.
func (s *Service) storedResult(ctx context.Context, in *Intent) (*Result, error) {
	var rec *idemRecord
	var cur *Intent
	err := s.st.View(ctx, func(r store.Reader) error {
		var err error
		if rec, err = getIdem(r, in.Route, in.AgentKeyID, in.IdempotencyKey); err != nil {
			return err
		}
		cur, err = getIntent(r, in.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	r, ok := replayOf(rec, cur)
	if !ok {
		return nil, fmt.Errorf("pay: intent %s is %s but has no stored outcome", in.ID, cur.Status)
	}
	return r, nil
}

// replayOf is the answer a replay of the request that created cur gets:
// the outcome stored in its idempotency record rec when final, or the
// one outcomeOf rebuilds from cur. It reports false while there is none
// (the intent is still settling or held).
func replayOf(rec *idemRecord, cur *Intent) (*Result, bool) {
	var r Result
	if rec != nil && rec.State == idemFinal && rec.Result != nil {
		r = *rec.Result
	} else if o, ok := outcomeOf(cur); ok {
		r = *o
	} else {
		return nil, false
	}
	r.Replayed = true
	return &r, true
}

// finish is transaction 2: it turns a rail answer into the intent's
// outcome. Only a settled/pending answer settles and only a decline fails;
// every other answer leaves the intent settling (ErrRailUnavailable).
// prior is in as the caller's transaction stored it, or nil (see
// intentReader); finish may then change in.
func (s *Service) finish(ctx context.Context, in *Intent, prior []byte, st settle.Settlement, callErr error, requestID string) (*Result, error) {
	// The money may have moved: the bookkeeping must not be cancelled by
	// the client going away.
	ctx = context.WithoutCancel(ctx)
	if _, _, refused := railRefusal(st, callErr); refused || railSettled(st, callErr) {
		return s.finishInTxn(ctx, in, prior, answered(st, callErr), requestID)
	}
	// Unknown outcome or rail unavailable: stays settling, marked
	// unknown so that an operator sees it (GET /operator/settling).
	reason := unknownReason(callErr)
	s.logger.WarnContext(ctx, "rail answer not definite; intent stays settling",
		slog.String("intentId", in.ID), slog.String("rail", in.Terms.Rail),
		slog.String("reason", reason), slog.Any("error", callErr))
	err := s.log.Update(ctx, func(txn store.Txn) error {
		if err := s.bumpFailures(txn, "rail_unavailable:"+in.Terms.Rail, requestID); err != nil {
			return err
		}
		return s.markUnknown(txn, in.ID, reason, requestID)
	})
	if err != nil {
		// The intent is still settling (transaction 1 is durable) and
		// the next attempt asks the rail again; but what failed now is
		// our store, which is what the caller must be told.
		s.logger.ErrorContext(ctx, "recording an unknown settlement outcome", slog.String("intentId", in.ID), slog.Any("error", err))
		return nil, fmt.Errorf("pay: recording the unknown outcome of %s: %w", in.ID, err)
	}
	return nil, fmt.Errorf("%w (intent %s)", ErrRailUnavailable, in.ID)
}

// failSettling records a definite refusal of the rail (a declined
// payment, capture or authorization) for an intent still settling;
// whoever finished it first answers from storage.
func (s *Service) failSettling(ctx context.Context, in *Intent, prior []byte, code, msg, requestID string) (*Result, error) {
	return s.finishInTxn(ctx, in, prior, answered(settle.Settlement{}, &settle.DeclineError{Code: code, Message: msg}), requestID)
}

// Reasons an outcome is unknown ([UnknownOutcome.Reason]).
const (
	UnknownReasonOutcome     = "unknown_outcome"  // the rail may have moved the money (timeout, 5xx, cut connection)
	UnknownReasonUnavailable = "rail_unavailable" // the rail could not be reached or refused to answer now
	UnknownReasonTimeout     = "timeout"          // our deadline passed before the rail answered
	UnknownReasonNoAnswer    = "no_definite_answer"
)

// unknownReason classifies an answer that was neither settled nor
// declined.
func unknownReason(callErr error) string {
	switch {
	case errors.Is(callErr, context.DeadlineExceeded):
		return UnknownReasonTimeout
	case errors.Is(callErr, settle.ErrUnavailable):
		return UnknownReasonUnavailable
	case callErr != nil:
		return UnknownReasonOutcome
	default: // a Settlement of a status other than settled, pending or declined
		return UnknownReasonNoAnswer
	}
}

// markUnknown notes on a settling intent that another attempt ended
// without a definite answer. The first one is recorded
// (payment.outcome_unknown), so the record shows when the outcome became
// unknown and why; later attempts only count, so a reconciler asking
// every minute does not flood the record.
func (s *Service) markUnknown(txn store.Txn, id, reason, requestID string) error {
	cur, err := getIntent(txn, id)
	if err != nil {
		return err
	}
	if cur.Status != StatusSettling {
		return nil
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	if cur.UnknownOutcome == nil {
		data, err := json.Marshal(map[string]string{"rail": cur.Terms.Rail, "reason": reason})
		if err != nil {
			return err
		}
		e, err := s.append(txn, audit.Record{Type: "payment.outcome_unknown", IntentID: cur.ID, Actor: systemActor, RequestID: requestID, Data: data})
		if err != nil {
			return err
		}
		cur.UnknownOutcome = &UnknownOutcome{Since: now, AuditSeq: e.Seq}
	}
	u := cur.UnknownOutcome
	u.Attempts++
	u.LastAttemptAt, u.Reason = now, reason
	cur.UpdatedAt = now
	return putIntent(txn, cur)
}

// settledData is the data of a payment.settled entry: the receipt without
// the fields that point at the entry itself.
type settledData struct {
	Receipt
	AuditSeq  uint64 `json:"auditSeq,omitempty"`
	AuditHash string `json:"auditHash,omitempty"`
}

func (s *Service) recordSettled(txn store.Txn, cur *Intent, st settle.Settlement, listed bool, requestID string, res **Result) error {
	now := s.now().UTC().Truncate(time.Microsecond)
	at := st.SettledAt
	if at.IsZero() {
		at = now
	}
	rcpt := Receipt{
		ID: ids.New(ids.Receipt), IntentID: cur.ID, IdempotencyKey: cur.IdempotencyKey,
		Payee: cur.Payee, Amount: Amount{Minor: cur.settleMinor(), Currency: cur.Amount.Currency}, Rail: cur.Terms.Rail, Reference: st.Reference,
		Terms: cur.Terms, SettledAt: at.UTC().Truncate(time.Microsecond),
	}
	data, err := json.Marshal(settledData{Receipt: rcpt})
	if err != nil {
		return err
	}
	e, err := s.append(txn, audit.Record{Type: "payment.settled", IntentID: cur.ID, Actor: systemActor, RequestID: requestID, Data: data})
	if err != nil {
		return err
	}
	rcpt.AuditSeq, rcpt.AuditHash = e.Seq, e.Hash
	if err := cur.transition(StepSettled, StatusSettled); err != nil {
		return err
	}
	cur.Receipt, cur.ReservedMinor, cur.UpdatedAt = &rcpt, 0, now
	cur.UnknownOutcome = nil
	if cur.Hold != nil {
		cur.Hold.Phase = HoldPhaseDone
	}
	if err := putIntent(txn, cur); err != nil {
		return err
	}
	if err := unlist(txn, cur, listed); err != nil {
		return err
	}
	r, _ := outcomeOf(cur)
	if err := s.finalIdem(txn, cur, r); err != nil {
		return err
	}
	if err := s.changed(txn, cur, StepSettled, requestID); err != nil {
		return err
	}
	ctl, err := getControl(txn)
	if err != nil {
		return err
	}
	if ctl.ConsecutiveFails != 0 {
		ctl.ConsecutiveFails = 0
		if err := putControl(txn, ctl); err != nil {
			return err
		}
	}
	*res = r
	return nil
}

func (s *Service) recordFailed(txn store.Txn, cur *Intent, code, msg string, listed bool, requestID string, res **Result) error {
	now := s.now().UTC().Truncate(time.Microsecond)
	data, err := json.Marshal(map[string]string{"declineCode": code, "message": msg, "rail": cur.Terms.Rail})
	if err != nil {
		return err
	}
	e, err := s.append(txn, audit.Record{Type: "payment.failed", IntentID: cur.ID, Actor: systemActor, RequestID: requestID, Data: data})
	if err != nil {
		return err
	}
	if err := s.releaseReservation(txn, cur); err != nil {
		return err
	}
	f := &Failure{IntentID: cur.ID, Rail: cur.Terms.Rail, DeclineCode: code, Message: msg, AuditSeq: e.Seq}
	if err := cur.transition(StepFailed, StatusFailed); err != nil {
		return err
	}
	cur.Failure, cur.UpdatedAt = f, now
	cur.UnknownOutcome = nil
	if cur.Hold != nil {
		cur.Hold.Phase, cur.Hold.EndedBy = HoldPhaseDone, "decline"
	}
	if err := s.changed(txn, cur, StepFailed, requestID); err != nil {
		return err
	}
	if err := putIntent(txn, cur); err != nil {
		return err
	}
	if err := unlist(txn, cur, listed); err != nil {
		return err
	}
	r, _ := outcomeOf(cur)
	if err := s.finalIdem(txn, cur, r); err != nil {
		return err
	}
	if err := s.bumpFailures(txn, "settlement_failures", requestID); err != nil {
		return err
	}
	*res = r
	return nil
}

// unlist takes cur off the settling list, if listed.
func unlist(txn store.Txn, cur *Intent, listed bool) error {
	if !listed {
		return nil
	}
	return settlingList.Remove(txn, cur.ID)
}

// releaseReservation gives an intent's reserved amount back to its
// mandate's period cap (and its session's budget).
func (s *Service) releaseReservation(txn store.Txn, cur *Intent) error {
	return s.releasePart(txn, cur, cur.ReservedMinor)
}

// releasePart gives minor of an intent's reservation back: all of it when
// the intent ends without settling, the uncaptured rest of a hold.
func (s *Service) releasePart(txn store.Txn, cur *Intent, minor int64) error {
	minor = min(minor, cur.ReservedMinor)
	if minor <= 0 || cur.PeriodKey == "" {
		return nil
	}
	total, err := getInt(txn, []byte(cur.PeriodKey))
	if err != nil {
		return err
	}
	if err := putInt(txn, []byte(cur.PeriodKey), max(0, total-minor)); err != nil {
		return err
	}
	if cur.SessionID != "" {
		if err := releaseSession(txn, cur.SessionID, minor); err != nil {
			return err
		}
	}
	cur.ReservedMinor -= minor
	return nil
}

// outcomeOf returns the answer to the request that created in when in
// ended settled or failed, built from the intent alone: such an outcome is
// not stored under the idempotency key (see finalIdem).
func outcomeOf(in *Intent) (*Result, bool) {
	switch {
	case in == nil:
		return nil, false
	case in.Receipt != nil:
		// Settled, and maybe refunded since: the request was answered
		// with the receipt.
		return &Result{Outcome: OutcomeSettled, IntentID: in.ID, RequestID: in.RequestID, Receipt: in.Receipt}, true
	case in.Failure != nil:
		return &Result{Outcome: OutcomeFailed, IntentID: in.ID, RequestID: in.RequestID, Failure: in.Failure}, true
	}
	return nil, false
}

// finalIdem stores r, the final outcome of cur, under cur's idempotency
// key, unless outcomeOf(cur) rebuilds it: a settled or failed payment
// leaves its record in_flight, and whoever reads it (a replay,
// storedResult, the sweep) finds the intent ended and answers from it.
// That keeps ~1 KB of result out of the idempotency range, whose
// client-chosen keys are the store's most expensive to compact, and a
// read and a write out of the outcome's transaction.
func (s *Service) finalIdem(txn store.Txn, cur *Intent, r *Result) error {
	if _, ok := outcomeOf(cur); ok {
		return nil
	}
	rec, err := getIdem(txn, cur.Route, cur.AgentKeyID, cur.IdempotencyKey)
	if err != nil {
		return err
	}
	if rec == nil {
		// Swept while in flight cannot happen (the sweep keeps in-flight
		// records); recreate it rather than lose the outcome.
		now := s.now().UTC().Truncate(time.Microsecond)
		rec = &idemRecord{IntentID: cur.ID, CreatedAt: now, ExpiresAt: now.Add(s.retain)}
	} else if rec.State == idemFinal {
		// The request that created the intent was already answered (held
		// for approval): its replay keeps answering what it answered.
		return nil
	}
	rec.State, rec.Result = idemFinal, r
	return putIdem(txn, cur.Route, cur.AgentKeyID, cur.IdempotencyKey, rec)
}

// bumpFailures counts one more consecutive settlement failure and trips
// the breaker at the threshold.
func (s *Service) bumpFailures(txn store.Txn, reason, requestID string) error {
	ctl, err := getControl(txn)
	if err != nil {
		return err
	}
	ctl.ConsecutiveFails++
	if ctl.ConsecutiveFails >= s.policy.BreakerAfter && s.policy.BreakerAfter > 0 && !ctl.CircuitBreakerOpen {
		return s.tripBreaker(txn, &ctl, reason, requestID)
	}
	return putControl(txn, ctl)
}

// ReconcileReport says what Reconcile did.
type ReconcileReport struct {
	Settled, Failed, StillSettling int
	// RefundsDone and RefundsPending count refunds left unresolved.
	RefundsDone, RefundsPending int
}

// Reconcile finishes every intent left settling, by asking its rail what
// happened (and re-sending a payment the rail never received). The
// reference server runs it at start-up and periodically. Intents whose
// rail still gives no definite answer stay settling and are counted.
func (s *Service) Reconcile(ctx context.Context) (ReconcileReport, error) {
	if err := s.migrateIndexes(ctx); err != nil {
		return ReconcileReport{}, err
	}
	if err := s.migrateLists(ctx); err != nil {
		return ReconcileReport{}, err
	}
	var pending []string
	err := s.st.View(ctx, func(r store.Reader) error {
		it := r.Iterate([]byte(keySettling), []byte(store.PrefixEnd([]byte(keySettling))), false)
		for it.Next() {
			pending = append(pending, string(it.Key()[len(keySettling):]))
		}
		return it.Close()
	})
	if err != nil {
		return ReconcileReport{}, fmt.Errorf("pay: reconcile: %w", err)
	}
	var rep ReconcileReport
	if rep.RefundsDone, rep.RefundsPending, err = s.reconcileRefunds(ctx); err != nil {
		return rep, fmt.Errorf("pay: reconcile refunds: %w", err)
	}
	for _, id := range pending {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		res, err := s.resume(ctx, id, "")
		switch {
		case err == nil && res.Outcome == OutcomeSettled:
			rep.Settled++
		case err == nil:
			rep.Failed++
		default:
			rep.StillSettling++
		}
	}
	return rep, nil
}

// readIntent reads an intent from the last committed state.
func (s *Service) readIntent(ctx context.Context, id string) (*Intent, error) {
	var in *Intent
	err := s.st.View(ctx, func(r store.Reader) error {
		var err error
		in, err = getIntent(r, id)
		return err
	})
	return in, err
}

// Intent returns an intent of the calling agent key. An intent of another
// key is ErrIntentNotFound, as if it did not exist.
func (s *Service) Intent(ctx context.Context, c Caller, id string) (*Intent, error) {
	return s.intentOf(ctx, id, func(in *Intent) bool { return in.AgentKeyID == c.KeyID })
}

// OperatorIntent returns any intent, whoever's it is: for a request an
// operator's signature opened (the operator's console reads the record
// without an agent credential). An agent never reads through it.
func (s *Service) OperatorIntent(ctx context.Context, id string) (*Intent, error) {
	return s.intentOf(ctx, id, func(*Intent) bool { return true })
}

// intentOf reads intent id when mine says the reader may see it, and
// answers ErrIntentNotFound otherwise, as if it did not exist.
func (s *Service) intentOf(ctx context.Context, id string, mine func(*Intent) bool) (*Intent, error) {
	in, err := s.readIntent(ctx, id)
	if err != nil {
		return nil, err
	}
	if !mine(in) {
		return nil, ErrIntentNotFound
	}
	in.Links = s.links(in.ID)
	return in, nil
}

// IntentEvents returns a page of the record entries of one intent of the
// calling agent key, oldest first. The cursor is an audit cursor
// (audit.Log.CursorAfter of the last entry's seq).
func (s *Service) IntentEvents(ctx context.Context, c Caller, id, cursor string, limit int) (audit.Page, error) {
	if _, err := s.Intent(ctx, c, id); err != nil {
		return audit.Page{}, err
	}
	return s.intentEvents(ctx, id, cursor, limit)
}

// OperatorIntentEvents is IntentEvents of any intent, for an operator
// (see [Service.OperatorIntent]).
func (s *Service) OperatorIntentEvents(ctx context.Context, id, cursor string, limit int) (audit.Page, error) {
	if _, err := s.OperatorIntent(ctx, id); err != nil {
		return audit.Page{}, err
	}
	return s.intentEvents(ctx, id, cursor, limit)
}

// intentEvents pages the entries of intent id, whose reader was checked.
func (s *Service) intentEvents(ctx context.Context, id, cursor string, limit int) (audit.Page, error) {
	if limit == 0 {
		limit = audit.DefaultPageLimit
	}
	if limit < 1 || limit > audit.MaxPageLimit {
		return audit.Page{}, audit.ErrBadLimit
	}
	var after uint64
	if cursor != "" {
		seq, err := s.log.ParseCursor(cursor)
		if err != nil {
			return audit.Page{}, err
		}
		after = seq
	}
	prefix := []byte(keyIntentEvents + id + "/")
	var seqs []uint64
	err := s.st.View(ctx, func(r store.Reader) error {
		it := r.Iterate(append(append([]byte(nil), prefix...), be8(after+1)...), store.PrefixEnd(prefix), false)
		for it.Next() && len(seqs) <= limit {
			k := it.Key()
			seqs = append(seqs, beUint64(k[len(k)-8:]))
		}
		return it.Close()
	})
	if err != nil {
		return audit.Page{}, err
	}
	page := audit.Page{Data: []audit.Entry{}}
	if len(seqs) > limit {
		seqs, page.HasMore = seqs[:limit], true
	}
	for _, seq := range seqs {
		e, err := s.log.Get(ctx, seq)
		if err != nil {
			return audit.Page{}, err
		}
		page.Data = append(page.Data, e)
	}
	if page.HasMore {
		next := s.log.CursorAfter(seqs[len(seqs)-1])
		page.NextCursor = &next
	}
	return page, nil
}

func beUint64(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}
