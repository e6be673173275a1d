package protocol

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// Namespace meter: pay-per-use. meter.open is a hold of the cap (the same
// gate, reservation and approval); meter.record accrues units within it;
// meter.close captures the accrued total exactly once (or releases the
// hold when nothing accrued).
//
// meter.record is a hot path and costs neither a settlement nor a record
// entry per call: each usage line is written durably to the store and
// folded into the meter's own hash chain (head = SHA-256(previous head ‖
// seq ‖ units ‖ usage id)); the close entry carries the chain head, the
// line count and the total, so the signed record commits to every line and
// a verifier holding the lines can recompute the head. DESIGN §9 says why.

const routeMeterOpen pay.Route = "protocol/meter.open"

// Problem codes of meters.
const (
	CodeMeterNotFound    = "meter.not_found"
	CodeMeterNotOpen     = "meter.not_open"
	CodeMeterCapExceeded = "meter.cap_exceeded"
	CodeMeterUsageReused = "meter.usage_conflict"
)

var (
	errMeterNotFound = errcode.New(CodeMeterNotFound, "protocol: no such meter")
	errMeterNotOpen  = errcode.New(CodeMeterNotOpen, "protocol: the meter is not open")
	errCapExceeded   = errcode.New(CodeMeterCapExceeded, "protocol: the usage would pass the meter's cap")
	errUsageReused   = errcode.New(CodeMeterUsageReused, "protocol: this usage id was recorded with other units")
)

// Meter statuses.
const (
	MeterPendingApproval = "pending_approval"
	MeterOpening         = "opening" // the rail is asked to authorize the cap
	MeterOpen            = "open"
	MeterClosing         = "closing" // the accrued total is with the rail
	MeterStatusClosed    = "closed"
	MeterExpired         = "expired"
	MeterDenied          = "denied"
	MeterFailed          = "failed"
	MeterDeclined        = "declined" // an operator refused it while it waited for approval
)

// meterState is what the store keeps of a meter besides its intent.
type meterState struct {
	IntentID       string    `json:"intentId"`
	UnitPriceMinor int64     `json:"unitPriceMinor"`
	Units          int64     `json:"units"`
	Lines          int64     `json:"lines"`
	ChainHead      string    `json:"chainHead"`
	LastRecordedAt time.Time `json:"lastRecordedAt,omitzero"`
	Closed         bool      `json:"closed"`
}

// Meter is a pay-per-use meter.
type Meter struct {
	ID             string       `json:"id" doc:"mtr_ followed by the intent id's suffix."`
	Status         string       `json:"status" doc:"pending_approval, opening, open, closing, closed, expired, denied, failed or declined (an operator refused it while it waited for approval)."`
	IntentID       string       `json:"intentId"`
	Payee          string       `json:"payee"`
	CapMinor       int64        `json:"capMinor"`
	Currency       string       `json:"currency"`
	UnitPriceMinor int64        `json:"unitPriceMinor"`
	Units          int64        `json:"units"`
	AccruedMinor   int64        `json:"accruedMinor"`
	Lines          int64        `json:"lines" doc:"Usage lines recorded."`
	ChainHead      string       `json:"chainHead" doc:"Hex SHA-256 head of the usage lines' hash chain; the close entry commits to it."`
	ExpiresAt      *time.Time   `json:"expiresAt,omitempty"`
	Receipt        *pay.Receipt `json:"receipt,omitempty"`
	CreatedAt      time.Time    `json:"createdAt"`
	UpdatedAt      time.Time    `json:"updatedAt"`
	Entries        []uint64     `json:"entries"`
}

func meterKey(id string) []byte { return []byte("protocol/meter/" + id) }

func meterLineKey(id, usage string) []byte { return []byte("protocol/meter-line/" + id + "/" + usage) }

func meterOf(in *pay.Intent, st *meterState, entries []uint64) Meter {
	id, _ := prefixID(in.ID, "int_", "mtr_")
	m := Meter{ID: id, IntentID: in.ID, Payee: in.Payee, CapMinor: in.Amount.Minor, Currency: in.Amount.Currency,
		Receipt: in.Receipt, CreatedAt: in.CreatedAt, UpdatedAt: in.UpdatedAt, Entries: entries}
	if m.Entries == nil {
		m.Entries = []uint64{}
	}
	if st != nil {
		m.UnitPriceMinor, m.Units, m.Lines, m.ChainHead = st.UnitPriceMinor, st.Units, st.Lines, st.ChainHead
		m.AccruedMinor = st.Units * st.UnitPriceMinor
		if st.LastRecordedAt.After(m.UpdatedAt) {
			m.UpdatedAt = st.LastRecordedAt
		}
	}
	if in.Hold != nil && !in.Hold.ExpiresAt.IsZero() {
		t := in.Hold.ExpiresAt
		m.ExpiresAt = &t
	}
	switch holdStatus(in) {
	case HoldPendingApproval:
		m.Status = MeterPendingApproval
	case HoldAuthorizing:
		m.Status = MeterOpening
	case HoldHeld:
		m.Status = MeterOpen
	case HoldCapturing:
		m.Status = MeterClosing
	case HoldStatusCaptured, HoldReleased:
		m.Status = MeterStatusClosed
	case HoldExpired:
		m.Status = MeterExpired
	case HoldDenied:
		m.Status = MeterDenied
	case HoldDeclined:
		m.Status = MeterDeclined
	default:
		m.Status = MeterFailed
	}
	return m
}

// MeterOpenRequest is the body of meter.open.
type MeterOpenRequest struct {
	Spend          pay.Instruction `json:"spend" doc:"The cap: a payment instruction of the most the meter may settle, signed for meter.open."`
	UnitPriceMinor int64           `json:"unitPriceMinor" validate:"gt=0,lt=9007199254740992" doc:"Price of one unit in minor units of the spend's currency."`
	TTLSeconds     int64           `json:"ttlSeconds" validate:"min=60,max=2592000" doc:"How long the meter stays open; the expiry sweep releases an unclosed meter's hold (nothing is settled)."`
}

// MeterOpened is the answer of meter.open, the same bytes on a replay.
type MeterOpened struct {
	MeterID        string     `json:"meterId"`
	IntentID       string     `json:"intentId"`
	Status         string     `json:"status" doc:"open, or pending_approval (202)."`
	CapMinor       int64      `json:"capMinor"`
	UnitPriceMinor int64      `json:"unitPriceMinor"`
	ExpiresAt      *time.Time `json:"expiresAt,omitempty"`
	Approval       *pay.Held  `json:"approval,omitempty"`
	replayed       bool
}

// WasReplayed reports an idempotent repeat.
func (m *MeterOpened) WasReplayed() bool { return m.replayed }

// IsAccepted reports a meter waiting for approval (202).
func (m *MeterOpened) IsAccepted() bool { return m.Status == MeterPendingApproval }

// MeterOpen opens a meter: a hold of the cap.
func (s *Service) MeterOpen(ctx context.Context, call Call, req *MeterOpenRequest) (*MeterOpened, error) {
	if req.UnitPriceMinor > req.Spend.Amount.Minor {
		return nil, fmt.Errorf("%w: unitPriceMinor is above the cap", errFieldInvalid)
	}
	meta := map[string]string{"unitPriceMinor": strconv.FormatInt(req.UnitPriceMinor, 10)}
	res, err := s.spend(ctx, call, routeMeterOpen, "meter.open", &req.Spend, req,
		&pay.HoldOptions{TTL: time.Duration(req.TTLSeconds) * time.Second}, meta)
	if err != nil {
		return nil, err
	}
	p := placedOf(res)
	id, _ := prefixID(res.IntentID, "int_", "mtr_")
	out := &MeterOpened{MeterID: id, IntentID: res.IntentID, CapMinor: req.Spend.Amount.Minor, UnitPriceMinor: req.UnitPriceMinor,
		ExpiresAt: p.ExpiresAt, Approval: p.Approval, replayed: res.Replayed, Status: MeterOpen}
	if p.Status == HoldPendingApproval {
		out.Status = MeterPendingApproval
	}
	return out, nil
}

// MeterRecordRequest is the body of meter.record.
type MeterRecordRequest struct {
	MeterID string `json:"meterId" validate:"required,max=64"`
	Units   int64  `json:"units" validate:"gt=0,lt=9007199254740992" doc:"Units used."`
	UsageID string `json:"usageId" validate:"required,max=128,printascii" doc:"The caller's id of this usage: recording it again with the same units changes nothing (a retry); with other units it is 409 meter.usage_conflict."`
}

// MeterRecorded is the answer of meter.record.
type MeterRecorded struct {
	MeterID      string `json:"meterId"`
	Units        int64  `json:"units"`
	AccruedMinor int64  `json:"accruedMinor"`
	Lines        int64  `json:"lines"`
	ChainHead    string `json:"chainHead"`
	Replayed     bool   `json:"replayed" doc:"True when this usage id was already recorded."`
}

type meterLine struct {
	Seq   int64 `json:"seq"`
	Units int64 `json:"units"`
}

// MeterRecord accrues units on an open meter, within its cap.
func (s *Service) MeterRecord(ctx context.Context, call Call, req *MeterRecordRequest) (*MeterRecorded, error) {
	intentID, ok := prefixID(req.MeterID, "mtr_", "int_")
	if !ok {
		return nil, errMeterNotFound
	}
	var out *MeterRecorded
	err := s.st.Update(ctx, func(txn store.Txn) error {
		out = nil
		in, st, err := s.meterIn(txn, call, req.MeterID, intentID)
		if err != nil {
			return err
		}
		b, err := txn.Get(meterLineKey(req.MeterID, req.UsageID))
		if err == nil {
			var l meterLine
			if err := json.Unmarshal(b, &l); err != nil {
				return err
			}
			if l.Units != req.Units {
				return errUsageReused
			}
			out = &MeterRecorded{MeterID: req.MeterID, Units: st.Units, AccruedMinor: st.Units * st.UnitPriceMinor, Lines: st.Lines, ChainHead: st.ChainHead, Replayed: true}
			return nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if in.Status != pay.StatusAuthorized || st.Closed {
			return errMeterNotOpen
		}
		units := st.Units + req.Units
		if units < st.Units || units > in.Amount.Minor/st.UnitPriceMinor {
			return fmt.Errorf("%w: %d units accrued at %d each; %d more would pass the cap %d",
				errCapExceeded, st.Units, st.UnitPriceMinor, req.Units, in.Amount.Minor)
		}
		st.Lines++
		st.Units = units
		st.ChainHead = chainNext(st.ChainHead, st.Lines, req.Units, req.UsageID)
		st.LastRecordedAt = s.clock()
		line, _ := json.Marshal(meterLine{Seq: st.Lines, Units: req.Units})
		if err := txn.Set(meterLineKey(req.MeterID, req.UsageID), line); err != nil {
			return err
		}
		if err := putJSON(txn, meterKey(req.MeterID), st); err != nil {
			return err
		}
		out = &MeterRecorded{MeterID: req.MeterID, Units: st.Units, AccruedMinor: st.Units * st.UnitPriceMinor, Lines: st.Lines, ChainHead: st.ChainHead}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// chainNext folds one usage line into a meter's chain.
func chainNext(head string, seq, units int64, usageID string) string {
	prev, _ := hex.DecodeString(head)
	h := sha256.New()
	h.Write(prev)
	var n [16]byte
	binary.BigEndian.PutUint64(n[:8], uint64(seq))
	binary.BigEndian.PutUint64(n[8:], uint64(units))
	h.Write(n[:])
	h.Write([]byte(usageID))
	return hex.EncodeToString(h.Sum(nil))
}

// UsageLine is one recorded usage of a meter, as its chain folds it.
type UsageLine struct {
	Units   int64
	UsageID string
}

// MeterChainHead recomputes a meter's chain head from its lines in the
// order they were recorded, so a verifier holding them can check the
// close entry.
func MeterChainHead(lines []UsageLine) string {
	head := ""
	for i, l := range lines {
		head = chainNext(head, int64(i+1), l.Units, l.UsageID)
	}
	return head
}

func (s *Service) meterIn(r store.Reader, call Call, meterID, intentID string) (*pay.Intent, *meterState, error) {
	in, err := s.books.Intent(r, intentID)
	if err != nil || in.AgentKeyID != call.Agent.KeyID || in.Route != routeMeterOpen {
		if err != nil && !errors.Is(err, pay.ErrIntentNotFound) {
			return nil, nil, err
		}
		return nil, nil, errMeterNotFound
	}
	var st meterState
	if err := getJSON(r, meterKey(meterID), &st); errors.Is(err, store.ErrNotFound) {
		return nil, nil, errMeterNotFound
	} else if err != nil {
		return nil, nil, err
	}
	return in, &st, nil
}

// MeterCloseRequest is the body of meter.close.
type MeterCloseRequest struct {
	MeterID        string `json:"meterId" validate:"required,max=64"`
	IdempotencyKey string `json:"idempotencyKey" validate:"required,max=255,printascii" doc:"Names the close: a repeat answers the same outcome."`
}

// MeterClosed is the answer of meter.close.
type MeterClosed struct {
	MeterID      string       `json:"meterId"`
	IntentID     string       `json:"intentId"`
	Units        int64        `json:"units"`
	AccruedMinor int64        `json:"accruedMinor"`
	Lines        int64        `json:"lines"`
	ChainHead    string       `json:"chainHead"`
	Receipt      *pay.Receipt `json:"receipt,omitempty" doc:"The settlement of the accrued total; absent when nothing accrued (the hold was released)."`
	replayed     bool
}

// WasReplayed reports an idempotent repeat.
func (m *MeterClosed) WasReplayed() bool { return m.replayed }

// MeterClose settles the accrued total exactly once: a capture of the
// meter's hold for units × unit price (a release when nothing accrued).
// Usage recorded after the close starts is refused.
func (s *Service) MeterClose(ctx context.Context, call Call, req *MeterCloseRequest) (*MeterClosed, error) {
	intentID, ok := prefixID(req.MeterID, "mtr_", "int_")
	if !ok {
		return nil, errMeterNotFound
	}
	// Stop accrual first, durably: what is closed is exactly what accrued.
	var st *meterState
	var in *pay.Intent
	err := s.st.Update(ctx, func(txn store.Txn) error {
		var err error
		if in, st, err = s.meterIn(txn, call, req.MeterID, intentID); err != nil {
			return err
		}
		if err := checkKey(txn, call, "meter.close", req.IdempotencyKey, req.MeterID); err != nil {
			return err
		}
		if st.Closed {
			return nil
		}
		if in.Status != pay.StatusAuthorized {
			return errMeterNotOpen
		}
		if st.Units > 0 {
			// Refuse here what the capture would refuse, before accrual
			// stops: a refused close changes nothing.
			if err := s.books.StillAuthorized(txn, in); err != nil {
				return err
			}
		}
		st.Closed = true
		if err := bindKey(txn, call, "meter.close", req.IdempotencyKey, req.MeterID); err != nil {
			return err
		}
		return putJSON(txn, meterKey(req.MeterID), st)
	})
	if err != nil {
		return nil, err
	}
	out := &MeterClosed{MeterID: req.MeterID, IntentID: intentID, Units: st.Units, AccruedMinor: st.Units * st.UnitPriceMinor,
		Lines: st.Lines, ChainHead: st.ChainHead}
	if out.AccruedMinor == 0 {
		cur, err := s.pay.Intent(ctx, *call.Agent, intentID)
		if err != nil {
			return nil, err
		}
		if cur.Status == pay.StatusVoided {
			out.replayed = true
			return out, nil
		}
		if _, err := s.books.Void(ctx, *call.Agent, intentID, call.RequestID, nil); err != nil {
			return nil, err
		}
		return out, nil
	}
	res, err := s.books.Capture(ctx, *call.Agent, pay.CaptureRequest{IntentID: intentID, Minor: out.AccruedMinor, IdempotencyKey: req.IdempotencyKey}, call.RequestID, nil)
	if err != nil {
		return nil, err
	}
	if res.Outcome != pay.OutcomeSettled {
		return nil, &Refused{Result: res}
	}
	out.Receipt, out.replayed = res.Receipt, res.Replayed
	return out, nil
}

// MeterRef names a meter.
type MeterRef struct {
	MeterID string `json:"meterId" validate:"required,max=64"`
}

// MeterGet returns a meter of the caller.
func (s *Service) MeterGet(ctx context.Context, call Call, req *MeterRef) (*Meter, error) {
	intentID, ok := prefixID(req.MeterID, "mtr_", "int_")
	if !ok {
		return nil, errMeterNotFound
	}
	var m Meter
	err := s.st.View(ctx, func(r store.Reader) error {
		in, st, err := s.meterIn(r, call, req.MeterID, intentID)
		if err != nil {
			return err
		}
		seqs, err := s.books.IntentEntrySeqs(r, intentID)
		if err != nil {
			return err
		}
		m = meterOf(in, st, seqs)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// meterChanged keeps the meter's own state and entries in step with its
// hold: the state is created with the decision, and every change appends
// protocol.meter.{open,close,...} with the meter's new state.
func (s *Service) meterChanged(txn store.Txn, in *pay.Intent, step pay.Step, requestID string) error {
	if err := moveHold(in, step); err != nil { // a meter is a hold
		return err
	}
	id, _ := prefixID(in.ID, "int_", "mtr_")
	var st meterState
	if step == pay.StepDecided {
		price, err := strconv.ParseInt(in.Metadata["unitPriceMinor"], 10, 64)
		if err != nil || price <= 0 {
			return fmt.Errorf("protocol: meter %s: unit price %q", id, in.Metadata["unitPriceMinor"])
		}
		st = meterState{IntentID: in.ID, UnitPriceMinor: price}
		if err := putJSON(txn, meterKey(id), &st); err != nil {
			return err
		}
	} else if err := getJSON(txn, meterKey(id), &st); err != nil {
		return err
	}
	name := map[pay.Step]string{pay.StepDecided: "open", pay.StepCapture: "close", pay.StepVoided: "close"}[step]
	if name == "" {
		name = stepNames[step]
	}
	_, err := s.recordIntent(txn, "protocol.meter."+name, in, step, requestID, meterOf(in, &st, nil))
	return err
}

func putJSON(txn store.Txn, key []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return txn.Set(key, b)
}

func getJSON(r store.Reader, key []byte, v any) error {
	b, err := r.Get(key)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
