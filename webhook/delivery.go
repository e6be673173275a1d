package webhook

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/ids"
	"github.com/countersign/countersign/store"
)

// Delivery states.
const (
	// StatePending: the delivery is waiting for its next attempt.
	StatePending = "pending"
	// StateDelivered: a 2xx answered an attempt.
	StateDelivered = "delivered"
	// StateFailed: the schedule ran out, the receiver answered 410 Gone,
	// or the endpoint was inactive when the delivery came due.
	StateFailed = "failed"
)

// Store layout of deliveries (see the package documentation):
//
//	webhook/cursor                                  last record seq tailed (8 bytes BE)
//	webhook/outbox/<ep>/<due BE8><seq BE8><kind>     a pending delivery, due at <due> (unix ns)
//	webhook/dlv/<ep>/<seq BE8><kind>                 the delivery record (JSON)
//	webhook/expire/<at BE8><ep><seq BE8><kind>       a finished record's end of retention
var (
	cursorKey    = []byte("webhook/cursor")
	outboxPrefix = []byte("webhook/outbox/")
	dlvPrefix    = []byte("webhook/dlv/")
	expirePrefix = []byte("webhook/expire/")
)

// endpointIDLen is the length of every endpoint id: "we_" and a ULID.
const endpointIDLen = len(ids.Endpoint) + 26

func be8(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// epPrefix returns prefix + ep + "/".
func epPrefix(prefix []byte, ep string) []byte {
	k := make([]byte, 0, len(prefix)+len(ep)+1)
	k = append(k, prefix...)
	k = append(k, ep...)
	return append(k, '/')
}

func outboxKey(ep string, due int64, seq uint64, kind string) []byte {
	k := epPrefix(outboxPrefix, ep)
	k = binary.BigEndian.AppendUint64(k, uint64(due))
	k = binary.BigEndian.AppendUint64(k, seq)
	return append(k, kind...)
}

// parseOutboxSuffix parses <due BE8><seq BE8><kind>.
func parseOutboxSuffix(b []byte) (due int64, seq uint64, kind string, ok bool) {
	if len(b) <= 16 {
		return 0, 0, "", false
	}
	return int64(binary.BigEndian.Uint64(b)), binary.BigEndian.Uint64(b[8:]), string(b[16:]), true
}

func dlvKey(ep string, seq uint64, kind string) []byte {
	k := epPrefix(dlvPrefix, ep)
	k = binary.BigEndian.AppendUint64(k, seq)
	return append(k, kind...)
}

func expireKey(at int64, ep string, seq uint64, kind string) []byte {
	k := make([]byte, 0, len(expirePrefix)+8+len(ep)+8+len(kind))
	k = append(k, expirePrefix...)
	k = binary.BigEndian.AppendUint64(k, uint64(at))
	k = append(k, ep...)
	k = binary.BigEndian.AppendUint64(k, seq)
	return append(k, kind...)
}

func parseExpireKey(k []byte) (at int64, ep string, seq uint64, kind string, ok bool) {
	b, found := bytes.CutPrefix(k, expirePrefix)
	if !found || len(b) <= 8+endpointIDLen+8 {
		return 0, "", 0, "", false
	}
	at = int64(binary.BigEndian.Uint64(b))
	ep = string(b[8 : 8+endpointIDLen])
	seq = binary.BigEndian.Uint64(b[8+endpointIDLen:])
	return at, ep, seq, string(b[8+endpointIDLen+8:]), true
}

// record is the stored form of a delivery under webhook/dlv/.
type record struct {
	Type     string `json:"type"`
	Seq      uint64 `json:"seq"`
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	// Failures counts failed attempts in the current schedule: the index
	// of the next delay in Schedule.
	Failures int `json:"failures"`
	// Once marks a manual retry of a finished delivery: one attempt, and
	// failed again if it does not succeed.
	Once          bool       `json:"once,omitempty"`
	LastStatus    int        `json:"lastStatus,omitempty"`
	LastError     string     `json:"lastError,omitempty"`
	LastAttemptAt *time.Time `json:"lastAttemptAt,omitempty"`
	// Due (unix ns) names the outbox key while pending.
	Due         int64      `json:"due,omitempty"`
	CreatedAt   time.Time  `json:"createdAt"`
	CompletedAt *time.Time `json:"completedAt,omitempty"`
	// ExpireAt (unix ns) names the expire key once finished; 0 keeps the
	// record for ever.
	ExpireAt int64 `json:"expireAt,omitempty"`
}

func getRecord(r store.Reader, ep string, seq uint64, kind string) (record, error) {
	b, err := r.Get(dlvKey(ep, seq, kind))
	if err != nil {
		return record{}, err
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return record{}, fmt.Errorf("delivery %s %d %s: %w", ep, seq, kind, err)
	}
	return rec, nil
}

func putRecord(txn store.Txn, ep string, rec *record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return txn.Set(dlvKey(ep, rec.Seq, rec.Type), b)
}

// Delivery is the state of one event's delivery to one endpoint.
type Delivery struct {
	EndpointID string `json:"endpointId"`
	EventID    string `json:"eventId"`
	EventType  string `json:"eventType"`
	Sequence   uint64 `json:"sequence" doc:"The entry's sequence number."`
	State      string `json:"state" validate:"oneof=pending delivered failed"`
	Attempts   int    `json:"attempts"`
	// LastStatus is the HTTP status of the last attempt; 0 when it got no
	// response (or there was none yet).
	LastStatus int `json:"lastStatus,omitempty" doc:"HTTP status of the last attempt; absent when there was no response."`
	// LastError says why the last attempt failed, for a person. It never
	// holds the url's query or a response body.
	LastError     string     `json:"lastError,omitempty"`
	LastAttemptAt *time.Time `json:"lastAttemptAt,omitempty"`
	NextAttempt   *time.Time `json:"nextAttempt,omitempty" doc:"When a pending delivery is next attempted."`
	CreatedAt     time.Time  `json:"createdAt"`
	CompletedAt   *time.Time `json:"completedAt,omitempty" doc:"When it was delivered or failed."`
}

func (rec *record) view(ep string) Delivery {
	d := Delivery{
		EndpointID: ep, EventID: EventID(rec.Seq, rec.Type), EventType: rec.Type, Sequence: rec.Seq,
		State: rec.State, Attempts: rec.Attempts, LastStatus: rec.LastStatus, LastError: rec.LastError,
		LastAttemptAt: rec.LastAttemptAt, CreatedAt: rec.CreatedAt, CompletedAt: rec.CompletedAt,
	}
	if rec.State == StatePending {
		t := time.Unix(0, rec.Due).UTC()
		d.NextAttempt = &t
	}
	return d
}

// DeliveryPage is one page of an endpoint's deliveries, newest event
// first.
type DeliveryPage struct {
	Data       []Delivery `json:"data"`
	HasMore    bool       `json:"hasMore"`
	NextCursor *string    `json:"nextCursor"`
}

// Deliveries returns up to limit deliveries of an endpoint, newest event
// first, after cursor ("" for the first page; otherwise a NextCursor of
// this listing). Finished deliveries are kept for
// DispatcherOptions.Retention. Errors: ErrNotFound, ErrBadCursor,
// ErrBadLimit.
func (d *Dispatcher) Deliveries(ctx context.Context, endpointID, cursor string, limit int) (DeliveryPage, error) {
	limit, err := checkLimit(limit)
	if err != nil {
		return DeliveryPage{}, fmt.Errorf("webhook: deliveries: %w", err)
	}
	prefix := epPrefix(dlvPrefix, endpointID)
	upper := store.PrefixEnd(prefix)
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || len(b) <= 8 || !knownKind(string(b[8:])) {
			return DeliveryPage{}, fmt.Errorf("webhook: deliveries: %w", ErrBadCursor)
		}
		upper = append(bytes.Clone(prefix), b...) // exclusive: strictly older
	}
	p := DeliveryPage{Data: []Delivery{}}
	var last []byte
	err = d.st.View(ctx, func(r store.Reader) error {
		p.Data, p.HasMore, last = p.Data[:0], false, nil
		if _, err := getEndpoint(r, endpointID); err != nil {
			return err
		}
		it := r.Iterate(prefix, upper, true)
		defer it.Close()
		for it.Next() {
			if len(p.Data) == limit {
				p.HasMore = true
				break
			}
			var rec record
			if err := json.Unmarshal(it.Value(), &rec); err != nil {
				return fmt.Errorf("delivery %q: %w", it.Key(), err)
			}
			p.Data = append(p.Data, rec.view(endpointID))
			last = bytes.Clone(it.Key()[len(prefix):])
		}
		return it.Err()
	})
	if err != nil {
		return DeliveryPage{}, fmt.Errorf("webhook: deliveries: %w", err)
	}
	if p.HasMore {
		c := base64.RawURLEncoding.EncodeToString(last)
		p.NextCursor = &c
	}
	return p, nil
}

// Retry makes an endpoint's delivery of an event due now and records
// webhook.delivery_retried. A pending delivery keeps its place in the
// schedule; a delivered or failed one gets one more attempt (and is failed
// again if that does not succeed). Errors: ErrNotFound (no endpoint),
// ErrInactive (activate the endpoint first), ErrDeliveryNotFound.
func (d *Dispatcher) Retry(ctx context.Context, endpointID, eventID string, actor audit.Actor, requestID, rationale string) (Delivery, error) {
	seq, kind, ok := ParseEventID(eventID)
	if !ok {
		return Delivery{}, fmt.Errorf("webhook: retry: %w: malformed event id", ErrDeliveryNotFound)
	}
	now := d.now().UTC()
	data, err := json.Marshal(map[string]string{"endpointId": endpointID, "eventId": eventID})
	if err != nil {
		return Delivery{}, fmt.Errorf("webhook: retry: %w", err)
	}
	var out Delivery
	err = d.log.Update(ctx, func(txn store.Txn) error {
		ep, err := getEndpoint(txn, endpointID)
		if err != nil {
			return err
		}
		if !ep.Active {
			return ErrInactive
		}
		rec, err := getRecord(txn, endpointID, seq, kind)
		if errors.Is(err, store.ErrNotFound) {
			return ErrDeliveryNotFound
		}
		if err != nil {
			return err
		}
		if rec.State == StatePending {
			if err := txn.Delete(outboxKey(endpointID, rec.Due, seq, kind)); err != nil {
				return err
			}
		} else {
			if rec.ExpireAt != 0 {
				if err := txn.Delete(expireKey(rec.ExpireAt, endpointID, seq, kind)); err != nil {
					return err
				}
			}
			rec.Once, rec.ExpireAt, rec.CompletedAt = true, 0, nil
		}
		rec.State, rec.Due = StatePending, now.UnixNano()
		if err := txn.Set(outboxKey(endpointID, rec.Due, seq, kind), nil); err != nil {
			return err
		}
		if err := putRecord(txn, endpointID, &rec); err != nil {
			return err
		}
		if _, err := d.log.Append(txn, audit.Record{
			Type: EntryDeliveryRetried, Actor: actor, RequestID: requestID, Rationale: rationale, Data: data,
		}); err != nil {
			return err
		}
		out = rec.view(endpointID)
		return nil
	})
	if err != nil {
		return Delivery{}, fmt.Errorf("webhook: retry: %w", err)
	}
	d.mu.Lock()
	if q := d.queues[endpointID]; q != nil {
		q.low = 0 // see epQueue.low
	}
	d.mu.Unlock()
	d.markDirty()
	return out, nil
}
