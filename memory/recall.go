package memory

import (
	"context"
	"encoding/base64"
	"time"

	"github.com/countersign/countersign/internal/ids"
	"github.com/countersign/countersign/store"
)

// RecallRequest is the body of POST /memory/recall.
type RecallRequest struct {
	Mandate        string     `json:"mandate" validate:"required,max=8192" doc:"A memory mandate granting canRead over the namespace."`
	Namespace      string     `json:"namespace" validate:"required,max=256"`
	ValidAt        *time.Time `json:"validAt,omitempty" doc:"The valid time to look at. Default: now."`
	TxAt           *time.Time `json:"txAt,omitempty" doc:"The transaction time to look from: what the store knew then, no later knowledge. Default: now; never after now, never before the mandate's asOfFloor."`
	Subject        string     `json:"subject,omitempty" validate:"max=256"`
	Kind           string     `json:"kind,omitempty" validate:"max=256"`
	Limit          int        `json:"limit,omitempty" validate:"omitempty,min=1,max=100" doc:"1 to 100, default 20."`
	Cursor         string     `json:"cursor,omitempty" validate:"max=200" doc:"nextCursor of the previous page (with the same query)."`
	ExcludeTainted bool       `json:"excludeTainted,omitempty" doc:"Leave tainted records out (they are returned, marked, by default)."`
}

// view is a resolved point of view: namespace, the two clocks and the
// filters, after the mandate allowed it.
type view struct {
	ns, subject, kind string
	validAt, txAt     time.Time
	excludeTainted    bool
}

// authorizeRead checks a read (recall, assemble): the mandate grants
// canRead over ns, and the point of view it asks for is allowed.
func (s *Service) authorizeRead(token string, c *Caller, ns string, validAt, txAt *time.Time) (*Mandate, time.Time, time.Time, error) {
	m, err := s.authorize(token, c, ns, rightRead)
	if err != nil {
		return nil, time.Time{}, time.Time{}, err
	}
	va, ta, err := s.pointOfView(m, validAt, txAt)
	return m, va, ta, err
}

// pointOfView checks the clocks against now and the mandate's floor.
func (s *Service) pointOfView(m *Mandate, validAt, txAt *time.Time) (time.Time, time.Time, error) {
	now := s.stamp()
	va, ta := now, now
	if validAt != nil {
		va = validAt.UTC().Truncate(time.Microsecond)
	}
	if txAt != nil {
		ta = txAt.UTC().Truncate(time.Microsecond)
	}
	if ta.After(now) {
		return va, ta, invalid("txAt", "is after the server's clock (%s): the store cannot know the future", formatTime(now))
	}
	if floor := m.Claims.AsOfFloor; !floor.IsZero() && ta.Before(floor) {
		return va, ta, &Error{code: CodeAsOfFloor, reason: "as_of_floor",
			msg: "txAt " + formatTime(ta) + " is before the mandate's asOfFloor " + formatTime(floor)}
	}
	return va, ta, nil
}

// Recall answers the records valid at validAt as the store knew them at
// txAt (POST /memory/recall): a record recorded after txAt is invisible,
// one superseded after txAt is still returned; an erased record is never
// returned. Newest recording first, at most limit, as a page signed by
// the record key.
func (s *Service) Recall(ctx context.Context, c Caller, q RecallRequest) (RecallPage, error) {
	if err := validName(q.Namespace); err != nil {
		return RecallPage{}, invalid("namespace", "%v", err)
	}
	if err := validFilters(q.Subject, q.Kind); err != nil {
		return RecallPage{}, err
	}
	if q.Limit == 0 {
		q.Limit = 20
	}
	if q.Limit < 1 || q.Limit > 100 {
		return RecallPage{}, invalid("limit", "must be 1 to 100")
	}
	m, va, ta, err := s.authorizeRead(q.Mandate, &c, q.Namespace, q.ValidAt, q.TxAt)
	if err != nil {
		return RecallPage{}, err
	}
	vw := view{ns: q.Namespace, subject: q.Subject, kind: q.Kind, validAt: va, txAt: ta, excludeTainted: q.ExcludeTainted}
	after, err := decodeCursor(q.Cursor)
	if err != nil {
		return RecallPage{}, err
	}
	p := RecallPage{Namespace: q.Namespace, ValidAt: formatTime(va), TxAt: formatTime(ta), Subject: q.Subject, Kind: q.Kind,
		ExcludeTainted: q.ExcludeTainted, Cursor: q.Cursor, Data: []Record{}}
	err = s.st.View(ctx, func(r store.Reader) error {
		if err := checkRevoked(r, m); err != nil {
			return err
		}
		p.Data = p.Data[:0]
		p.HasMore, p.NextCursor = false, nil
		var last []byte
		return s.scan(r, vw, after, func(st *stored, pos []byte) (bool, error) {
			if len(p.Data) == q.Limit {
				p.HasMore = true
				c := base64.RawURLEncoding.EncodeToString(last)
				p.NextCursor = &c
				return false, nil
			}
			rec, err := s.hydrate(r, st)
			if err != nil {
				return false, err
			}
			p.Data = append(p.Data, rec)
			last = pos
			return true, nil
		})
	})
	if err != nil {
		return RecallPage{}, err
	}
	if err := s.signPage(&p); err != nil {
		return RecallPage{}, err
	}
	return p, nil
}

// scan calls fn with every record visible from vw, newest recording
// first, starting after the position after (nil: from the newest). pos
// is the record's position, the cursor of a page that ends with it. fn
// returns false to stop.
//
// Only records recorded at or before txAt are read: the index is ordered
// by (namespace[, subject], recordedAt, id) and the scan starts at txAt.
func (s *Service) scan(r store.Reader, vw view, after []byte, fn func(st *stored, pos []byte) (bool, error)) error {
	var prefix string
	if vw.subject != "" {
		prefix = subjectPrefix(vw.ns, vw.subject)
	} else {
		prefix = keyNS + vw.ns + "\x00"
	}
	lo := []byte(prefix)
	hi := cat(prefix, string(be8(vw.txAt.Add(time.Microsecond))))
	if after != nil {
		if c := cat(prefix, string(after)); string(c) < string(hi) {
			hi = c
		}
	}
	it := r.Iterate(lo, hi, true)
	defer it.Close()
	for it.Next() {
		if !vw.admitsSummary(it.Value()) {
			continue
		}
		pos := append([]byte(nil), it.Key()[len(prefix):]...)
		id := string(pos[8:])
		st, err := getStored(r, id)
		if err != nil {
			return err
		}
		if st == nil || !vw.admits(st) {
			continue
		}
		more, err := fn(st, pos)
		if err != nil || !more {
			return err
		}
	}
	return it.Err()
}

func (vw view) admits(st *stored) bool {
	rec := Record{ValidFrom: st.ValidFrom, ValidTo: st.ValidTo, RecordedAt: st.RecordedAt, SupersededAt: st.SupersededAt}
	if !rec.knownAt(vw.txAt) || !rec.validAt(vw.validAt) {
		return false
	}
	if vw.kind != "" && st.Kind != vw.kind {
		return false
	}
	return !(vw.excludeTainted && st.Taint != nil)
}

// validFilters checks the optional subject and kind filters of a read
// as names: a filter with a control character would build an index
// prefix that reaches into the keys of another subject (0x00 separates
// the parts of a key), so it is refused rather than scanned.
func validFilters(subject, kind string) error {
	if subject != "" {
		if err := validName(subject); err != nil {
			return invalid("subject", "%v", err)
		}
	}
	if kind != "" {
		if err := validName(kind); err != nil {
			return invalid("kind", "%v", err)
		}
	}
	return nil
}

// decodeCursor parses a page cursor: base64url of the 8-byte recording
// time and the id of the last record of the previous page.
func decodeCursor(c string) ([]byte, error) {
	if c == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(c)
	if err != nil || len(b) <= 8 || !ids.Valid(ids.Memory, string(b[8:])) {
		return nil, fail(CodeBadCursor, "the cursor is not one a recall returned")
	}
	return b, nil
}
