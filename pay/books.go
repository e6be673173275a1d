package pay

import (
	"context"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/store"
)

// Books is how an [Extension] joins the money path's transactions: it
// spends through routes of its own (holds, meters, purchases), runs its
// bookkeeping inside the transactions that change its intents (the
// within callbacks), and appends its own entries about an intent so that
// they page with pay's. Only [New] makes one, and hands it to each
// extension's Attach: what takes a store.Txn or a within callback is
// there, not on [Service], whose exported methods are the money path's
// public API (Pay, PayInstruction, Approve, Refund, reads). An extension
// keeps its Books for its lifetime; the methods are safe for concurrent
// use.
type Books struct{ s *Service }

// Authorize runs an instruction of the extension's route through the
// same structure, mandate and envelope checks, gate, record, idempotency
// and two-phase settlement as a payment. sg describes the request the
// agent signed when it is not the instruction itself (a purchase names
// what to buy, a protocol spend is signed for its method; its zero value
// means the instruction's own signature), and may ask for a hold instead
// of a settlement (sg.Hold).
func (b *Books) Authorize(ctx context.Context, route Route, c Caller, in *Instruction, sg Signed, headerKey, requestID string) (*Result, error) {
	return b.s.authorizeSigned(ctx, route, c, in, sg, headerKey, requestID)
}

// CheckSigned runs the envelope checks of [Books.Authorize] ahead of it,
// for an extension that must know the agent's request is genuine before
// it acts on it outside (an x402 fetch makes the request it was asked
// to): the agent's signature of typ over signed, the mandate, and that c
// may act for the agent. A refusal is recorded as Authorize records it
// (a gate.decision entry at the envelope stage, under idempotencyKey)
// and returned; the verified mandate otherwise.
func (b *Books) CheckSigned(ctx context.Context, route Route, c Caller, env Envelope, typ string, signed []byte, idempotencyKey, requestID string) (*Mandate, error) {
	m, err := VerifySignedEnvelope(env, typ, signed, b.s.mandates)
	if err == nil && !c.mayActFor(env.Agent) {
		err = &UnauthorizedError{Reason: ReasonAgentNotPermitted}
	}
	if err != nil {
		return nil, b.s.refuse(ctx, c, route, &Instruction{IdempotencyKey: idempotencyKey, Envelope: env}, "envelope", err, requestID)
	}
	return m, nil
}

// Prior answers a request made again: the outcome stored under c's
// idempotencyKey on route, when that key has one (Result.Replayed set).
// For a key whose first request is still held, deciding or settling, res
// is nil and intentID names its intent: [Books.Authorize] with the same
// request then answers (in flight, or the first request's settlement
// resumed), whatever the instruction says of payee and amount. Both are
// empty for a key never used. A key used with another digest is
// ErrIdempotencyConflict. It lets an extension skip work outside (a
// request to a merchant or a resource) that a repeated request does not
// need, and must not redo while the first one's outcome is unknown.
func (b *Books) Prior(ctx context.Context, route Route, c Caller, idempotencyKey, digest string) (res *Result, intentID string, err error) {
	err = b.s.st.View(ctx, func(r store.Reader) error {
		rec, err := getIdem(r, route, c.KeyID, idempotencyKey)
		if err != nil || rec == nil {
			return err
		}
		if rec.Digest != digest {
			return ErrIdempotencyConflict
		}
		intentID = rec.IntentID
		var cur *Intent
		if rec.State != idemFinal || rec.Result == nil {
			if cur, err = getIntent(r, rec.IntentID); err != nil {
				return err
			}
		}
		res, _ = replayOf(rec, cur)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return res, intentID, nil
}

// Capture settles part or all of an authorized hold of the caller's agent
// key, through the same two-phase settlement as a payment. within, when
// not nil, runs inside the transaction that starts the capture. The kill
// switch stops a capture (ErrFrozen, nothing changed), and so does a
// revoked mandate or agent identity.
func (b *Books) Capture(ctx context.Context, c Caller, req CaptureRequest, requestID string, within func(store.Txn, *Intent) error) (*Result, error) {
	return b.s.captureHold(ctx, c, req, requestID, within)
}

// Void releases an authorized hold of the caller's agent key without
// capturing it: the reservation goes back to the mandate's budget and, on
// a rail that authorizes, the rail's hold is voided first. within, when
// not nil, runs inside the transaction that records it.
func (b *Books) Void(ctx context.Context, c Caller, intentID, requestID string, within func(store.Txn, *Intent) error) (*Intent, error) {
	return b.s.voidHold(ctx, c, intentID, requestID, within)
}

// StillAuthorized is what a capture re-checks before money moves, for an
// extension that must refuse before changing its own state (the meter's
// close).
func (b *Books) StillAuthorized(r store.Reader, in *Intent) error { return b.s.stillAuthorized(r, in) }

// Refund is [Service.Refund] with within run inside the transaction that
// starts the refund, after the refund is minted and before it is stored:
// the extension's books move with it (a dispute's resolution marks its
// refund started), and an error from within refuses the refund with
// nothing written.
func (b *Books) Refund(ctx context.Context, req RefundRequest, call OperatorCall, within func(store.Txn, *Intent, Refund) error) (*RefundResult, error) {
	return b.s.refundWithin(ctx, req, call, within)
}

// RevokeIdentity revokes an agent identity (64 lower-case hex digits) for
// good. Revoking twice returns the first revocation and changes nothing.
// within runs in the same transaction when the revocation is new.
func (b *Books) RevokeIdentity(ctx context.Context, agent string, call OperatorCall, within func(store.Txn, IdentityRevocation) error) (IdentityRevocation, bool, error) {
	return b.s.revokeIdentity(ctx, agent, call, within)
}

// OpenSession verifies the mandate and opens a session under it for the
// caller's agent key. The budget may not exceed the mandate's period cap,
// and the session ends at the latest when the mandate expires. within runs
// in the same transaction.
func (b *Books) OpenSession(ctx context.Context, c Caller, req OpenSession, within func(store.Txn, *Session) error) (*Session, error) {
	return b.s.openSession(ctx, c, req, within)
}

// CloseSession closes an open session of the caller's agent key: later
// instructions naming it are denied; intents already under it finish as
// they would have. within runs in the same transaction.
func (b *Books) CloseSession(ctx context.Context, c Caller, id string, within func(store.Txn, *Session) error) (*Session, error) {
	return b.s.closeSession(ctx, c, id, within)
}

// ExpireSessions moves every open session whose lifetime has passed to
// expired, calling within for each in the same transaction, and returns
// how many.
func (b *Books) ExpireSessions(ctx context.Context, within func(store.Txn, *Session) error) (int, error) {
	return b.s.expireSessions(ctx, within)
}

// AppendIntentEntry appends an entry about an intent inside txn and
// indexes it under the intent, so GET /intents/{id}/events pages it with
// pay's own.
func (b *Books) AppendIntentEntry(txn store.Txn, r audit.Record) (audit.Entry, error) {
	return b.s.appendIntentEntry(txn, r)
}

// IntentEntrySeqs returns the sequence numbers of the entries about an
// intent, oldest first, in the caller's transaction or view.
func (b *Books) IntentEntrySeqs(r store.Reader, id string) ([]uint64, error) {
	return intentEntrySeqs(r, id)
}

// Intent reads an intent in the caller's transaction or view, whoever it
// belongs to; the extension checks ownership.
func (b *Books) Intent(r store.Reader, id string) (*Intent, error) { return getIntent(r, id) }

// Frozen reports, read in r, whether the operator's kill switch is
// engaged: for a rail that must not sign or send a payment once settlement
// is frozen, checked inside the transaction that records it is about to
// (a kill switch engaged concurrently is then ordered before or after
// that transaction, never in between).
func (b *Books) Frozen(r store.Reader) (bool, error) {
	c, err := getControl(r)
	return c.KillSwitchEngaged, err
}
