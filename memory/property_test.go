package memory

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	flagHistories = flag.Int("memory.histories", 0, "random histories TestTwoClocksProperty runs (0: 20, or 4 under the race detector)")
	flagOps       = flag.Int("memory.ops", 30, "operations in each random history of TestTwoClocksProperty")
	flagSeed      = flag.Uint64("memory.seed", 0, "run only the history of this seed (0: seeds 1 to -memory.histories)")
)

// TestTwoClocksProperty runs random histories of remember (overlapping or
// not, open or closed, with supersedes, derived_from and cites edges),
// clock advances, replays and forgets against the store and against a
// brute-force reference model written from the documented rules, then
// compares Recall with the model at every interesting (validAt, txAt).
func TestTwoClocksProperty(t *testing.T) {
	n := *flagHistories
	if n == 0 {
		n = 20
		if raceDetector {
			n = 4
		}
	}
	var seeds []uint64
	if *flagSeed != 0 {
		seeds = append(seeds, *flagSeed)
	} else {
		for i := 1; i <= n; i++ {
			seeds = append(seeds, uint64(i))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			h := newHistory(t, seed)
			h.run(*flagOps)
			h.check()
		})
	}
}

// mrec is a record of the reference model.
type mrec struct {
	id, ns, subject, kind, body string
	from                        time.Time
	to                          *time.Time
	recordedAt                  time.Time
	supersededAt                *time.Time
	edges                       []Edge
	digest                      string
	erased                      bool
}

func (r *mrec) overlaps(from time.Time, to *time.Time) bool {
	return (to == nil || r.from.Before(*to)) && (r.to == nil || r.to.After(from))
}

// model is the reference: plain slices, the documented rules, no index.
type model struct {
	recs []*mrec
	byID map[string]*mrec
}

func (m *model) add(r *mrec) {
	m.recs = append(m.recs, r)
	m.byID[r.id] = r
}

// piece is a remainder the model expects: the part of of's valid time the
// new record does not cover.
type piece struct {
	of   *mrec
	from time.Time
	to   *time.Time
}

// consolidate is the documented rule: the new record supersedes the
// current records of its (namespace, subject) whose valid time overlaps
// it, and the current records its supersedes edges name; each overlapped
// record of the subject not named by a supersedes edge keeps the parts of
// its valid time the new record does not cover, as remainders. Superseded
// records come in id order, each one's remainders before then after.
func (m *model) consolidate(ns, subject string, from time.Time, to *time.Time, edges []Edge) ([]*mrec, []piece) {
	stated := map[string]bool{}
	for _, e := range edges {
		if e.Type == EdgeSupersedes {
			stated[e.To] = true
		}
	}
	var sup []*mrec
	for _, r := range m.recs {
		if r.erased || r.supersededAt != nil || r.ns != ns {
			continue
		}
		if stated[r.id] || r.subject == subject && r.overlaps(from, to) {
			sup = append(sup, r)
		}
	}
	slices.SortFunc(sup, func(a, b *mrec) int { return strings.Compare(a.id, b.id) })
	var pieces []piece
	for _, o := range sup {
		if o.subject != subject || stated[o.id] {
			continue
		}
		if o.from.Before(from) {
			pieces = append(pieces, piece{of: o, from: o.from, to: ptr(from)})
		}
		if to != nil && (o.to == nil || o.to.After(*to)) {
			pieces = append(pieces, piece{of: o, from: *to, to: o.to})
		}
	}
	return sup, pieces
}

// cascade is what erasing root takes: root and every live record derived
// from an erased one, transitively.
func (m *model) cascade(root string) []string {
	order := []string{root}
	seen := map[string]bool{root: true}
	for i := 0; i < len(order); i++ {
		for _, r := range m.recs {
			if r.erased || seen[r.id] {
				continue
			}
			if slices.Contains(r.edges, Edge{Type: EdgeDerivedFrom, To: order[i]}) {
				seen[r.id] = true
				order = append(order, r.id)
			}
		}
	}
	return order
}

// recall is the documented answer: records of ns (and subject), not
// erased, recorded at or before txAt and not superseded by then, valid at
// validAt.
func (m *model) recall(ns, subject string, validAt, txAt time.Time) map[string]*mrec {
	out := map[string]*mrec{}
	for _, r := range m.recs {
		if r.erased || r.ns != ns || subject != "" && r.subject != subject {
			continue
		}
		if r.recordedAt.After(txAt) || r.supersededAt != nil && !r.supersededAt.After(txAt) {
			continue
		}
		if validAt.Before(r.from) || r.to != nil && !validAt.Before(*r.to) {
			continue
		}
		out[r.id] = r
	}
	return out
}

// history is one random history, run against a fresh store and the model.
type history struct {
	t        *testing.T
	f        *fixture
	rng      *rand.Rand
	m        *model
	log      []string // what happened, for the failure message
	seq      uint64   // the last record entry read
	requests []rememberedRequest
	vbase    time.Time
}

type rememberedRequest struct {
	q  RememberRequest
	id string
}

var (
	propNamespaces = []string{"ns", "ns", "ns", "ns", "other"} // mostly ns
	propSubjects   = []string{"s0", "s1", "s2"}
)

func newHistory(t *testing.T, seed uint64) *history {
	return &history{t: t, f: newFixture(t, nil), rng: rand.New(rand.NewPCG(seed, 0x6d656d)),
		m: &model{byID: map[string]*mrec{}}, vbase: t0.Add(-10 * time.Hour)}
}

func (h *history) fatalf(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf("%s\nhistory:\n  %s", fmt.Sprintf(format, args...), strings.Join(h.log, "\n  "))
}

func (h *history) logf(format string, args ...any) {
	h.log = append(h.log, fmt.Sprintf(format, args...))
}

// bound is a valid-time bound: on an hour grid, sometimes off it.
func (h *history) bound(k int) time.Time {
	t := h.vbase.Add(time.Duration(k) * time.Hour)
	if h.rng.IntN(16) == 0 {
		t = t.Add(time.Duration(1+h.rng.IntN(59)) * time.Minute)
	}
	return t
}

func (h *history) live(ns string) []*mrec {
	var out []*mrec
	for _, r := range h.m.recs {
		if !r.erased && r.ns == ns {
			out = append(out, r)
		}
	}
	return out
}

func (h *history) run(ops int) {
	for i := 0; i < ops; i++ {
		switch x := h.rng.IntN(100); {
		case x < 60:
			h.remember(i)
		case x < 75:
			d := []time.Duration{time.Microsecond, time.Millisecond, time.Second, time.Minute, time.Hour}[h.rng.IntN(5)]
			h.f.clock.Advance(d)
			h.logf("advance %s", d)
		case x < 88:
			h.forget()
		default:
			h.replay()
		}
	}
}

func (h *history) remember(i int) {
	ns := propNamespaces[h.rng.IntN(len(propNamespaces))]
	subject := propSubjects[h.rng.IntN(len(propSubjects))]
	k1 := h.rng.IntN(8)
	from := h.bound(k1)
	var to *time.Time
	if h.rng.IntN(4) != 0 {
		t := h.bound(k1 + 1 + h.rng.IntN(8-k1))
		if !t.After(from) {
			t = from.Add(time.Hour)
		}
		to = &t
	}
	var edges []Edge
	if live := h.live(ns); len(live) > 0 {
		for _, typ := range []string{EdgeSupersedes, EdgeDerivedFrom, EdgeCites} {
			if h.rng.IntN(5) == 0 {
				e := Edge{Type: typ, To: live[h.rng.IntN(len(live))].id}
				if !slices.Contains(edges, e) {
					edges = append(edges, e)
				}
			}
		}
	}
	body := fmt.Sprintf("fact %d of %s", i, subject)
	bj, _ := json.Marshal(body)
	q := RememberRequest{Mandate: h.f.mandate(ns, nil), IdempotencyKey: fmt.Sprintf("op-%d", i), Namespace: ns,
		Subject: subject, Kind: "fact", Body: bj, ValidFrom: from, ValidTo: to,
		Source: Source{Kind: "agent", Ref: h.f.agent}, Edges: edges}
	sup, pieces := h.m.consolidate(ns, subject, from, to, edges)

	out, err := h.f.svc.Remember(h.t.Context(), h.f.caller, q, "req_prop")
	h.logf("remember #%d %s/%s [%s, %s) edges %v → %s (supersedes %v, %d remainders)", i, ns, subject,
		formatTime(from), fmtOpt(to), edges, out.Artifact.Record.ID, mrecIDs(sup), len(pieces))
	if err != nil {
		h.fatalf("remember: %v", err)
	}
	if out.Replayed {
		h.fatalf("a new idempotency key was answered as a replay")
	}
	rec := out.Artifact.Record
	now := rec.RecordedAt

	// The record entries of the transaction name the remainders and the
	// digests; the model decides what they must be.
	digests := map[string]string{}
	var cons *consolidatedData
	for _, e := range h.f.entries(h.seq) {
		h.seq = e.Seq
		switch e.Type {
		case EntryRecorded:
			var d recordedData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				h.fatalf("%s: %v", e.Type, err)
			}
			digests[d.ID] = d.ContentDigest
		case EntryConsolidated:
			var d consolidatedData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				h.fatalf("%s: %v", e.Type, err)
			}
			cons = &d
		}
	}
	if len(sup) == 0 {
		if cons != nil {
			h.fatalf("memory.consolidated %+v where the model supersedes nothing", *cons)
		}
	} else {
		if cons == nil || cons.ID != rec.ID {
			h.fatalf("no memory.consolidated for %s (model supersedes %v)", rec.ID, mrecIDs(sup))
		}
		if !slices.Equal(cons.Superseded, mrecIDs(sup)) {
			h.fatalf("superseded %v, model %v", cons.Superseded, mrecIDs(sup))
		}
		if len(cons.Remainders) != len(pieces) {
			h.fatalf("remainders %v, model expects %d", cons.Remainders, len(pieces))
		}
	}
	if len(digests) != 1+len(pieces) {
		h.fatalf("%d memory.recorded entries for one remember with %d remainders", len(digests), len(pieces))
	}
	wantEdges := slices.Clone(edges)
	for _, o := range sup {
		if e := (Edge{Type: EdgeSupersedes, To: o.id}); !slices.Contains(wantEdges, e) {
			wantEdges = append(wantEdges, e)
		}
	}
	if !sameEdges(rec.Edges, wantEdges) {
		h.fatalf("edges of %s: %v, model %v", rec.ID, rec.Edges, wantEdges)
	}

	for _, o := range sup {
		o.supersededAt = &now
	}
	for j, p := range pieces {
		id := cons.Remainders[j]
		h.m.add(&mrec{id: id, ns: p.of.ns, subject: p.of.subject, kind: p.of.kind, body: p.of.body, from: p.from, to: p.to,
			recordedAt: now, edges: []Edge{{Type: EdgeDerivedFrom, To: p.of.id}}, digest: digests[id]})
	}
	h.m.add(&mrec{id: rec.ID, ns: ns, subject: subject, kind: "fact", body: string(bj), from: from, to: to,
		recordedAt: now, edges: wantEdges, digest: digests[rec.ID]})
	if rec.Seal.ContentDigest != digests[rec.ID] {
		h.fatalf("the record's digest is not the one its memory.recorded entry commits")
	}
	h.requests = append(h.requests, rememberedRequest{q: q, id: rec.ID})
}

// replay sends an earlier request again under its idempotency key: the
// same record comes back, or memory.erased when it was erased, and nothing
// changes.
func (h *history) replay() {
	if len(h.requests) == 0 {
		return
	}
	r := h.requests[h.rng.IntN(len(h.requests))]
	q := r.q
	q.Mandate = h.f.mandate(q.Namespace, nil)
	before := h.f.size()
	out, err := h.f.svc.Remember(h.t.Context(), h.f.caller, q, "req_prop")
	h.logf("replay %s → %v", r.id, err)
	if h.m.byID[r.id].erased {
		if !errors.Is(err, ErrErased) {
			h.fatalf("replay of erased %s: %v", r.id, err)
		}
	} else if err != nil || !out.Replayed || out.Artifact.Record.ID != r.id {
		h.fatalf("replay of %s: %+v, %v", r.id, out, err)
	}
	if after := h.f.size(); after != before {
		h.fatalf("a replay appended %d record entries", after-before)
	}
}

func (h *history) forget() {
	var live []*mrec
	for _, ns := range []string{"ns", "other"} {
		live = append(live, h.live(ns)...)
	}
	if len(live) == 0 {
		return
	}
	root := live[h.rng.IntN(len(live))]
	want := h.m.cascade(root.id)
	proof, err := h.f.forget(root.ns, root.id)
	h.logf("forget %s → %v (model %v)", root.id, erasedIDs(proof.Erased), want)
	if err != nil {
		h.fatalf("forget: %v", err)
	}
	got := erasedIDs(proof.Erased)
	if len(got) == 0 || got[0] != root.id {
		h.fatalf("the root is not the first erased id: %v", got)
	}
	if !sameSet(got, want) {
		h.fatalf("erased %v, model %v", got, want)
	}
	for _, e := range proof.Erased {
		if d := h.m.byID[e.ID].digest; d != e.ContentDigest {
			h.fatalf("erased %s with digest %s, recorded %s", e.ID, e.ContentDigest, d)
		}
		h.m.byID[e.ID].erased = true
	}
	for _, e := range h.f.entries(h.seq) {
		h.seq = e.Seq
	}
}

// check compares Recall with the model at every interesting point.
func (h *history) check() {
	h.t.Helper()
	now := h.f.clock.Now()
	txs := map[time.Time]bool{t0.Add(-time.Hour): true, now: true}
	vas := map[time.Time]bool{h.vbase.Add(-time.Hour): true}
	addAround := func(set map[time.Time]bool, t time.Time) {
		for _, d := range []time.Duration{-time.Microsecond, 0, time.Microsecond} {
			set[t.Add(d)] = true
		}
	}
	for _, r := range h.m.recs {
		addAround(txs, r.recordedAt)
		if r.supersededAt != nil {
			addAround(txs, *r.supersededAt)
		}
		addAround(vas, r.from)
		if r.to != nil {
			addAround(vas, *r.to)
		}
	}
	delete(txs, now.Add(time.Microsecond)) // the future: refused, not a point of view
	txList, vaList := sortedTimes(txs), sortedTimes(vas)
	tokens := map[string]string{"ns": h.f.mandate("ns", nil), "other": h.f.mandate("other", nil)}

	queries := 0
	for ti, ta := range txList {
		current := map[string]Record{} // ns/subject records known at ta, across every validAt
		for vi, va := range vaList {
			// Unfiltered on both namespaces; with a subject filter on one
			// subject, another at each point, so every subject is covered.
			subject := propSubjects[(ti+vi)%len(propSubjects)]
			queriesHere := []struct{ ns, subject string }{{"ns", ""}, {"ns", subject}}
			if (ti+vi)%3 == 0 { // the other namespace has few records: a third of the points
				queriesHere = append(queriesHere, struct{ ns, subject string }{"other", ""})
			}
			for _, q := range queriesHere {
				limit := 100
				if (ti+vi)%3 == 0 { // a third of the points read one, two or three records a page
					limit = 1 + (ti+vi)/3%3
				}
				got, err := h.f.recallAll(q.ns, RecallRequest{Mandate: tokens[q.ns], ValidAt: ptr(va), TxAt: ptr(ta), Subject: q.subject, Limit: limit})
				queries++
				if err != nil {
					h.fatalf("recall %s/%q at (validAt %s, txAt %s): %v", q.ns, q.subject, formatTime(va), formatTime(ta), err)
				}
				h.compare(q.ns, q.subject, va, ta, got)
				if q.subject == "" {
					bySubject := map[string]string{}
					for _, r := range got {
						if other, dup := bySubject[r.Subject]; dup {
							h.fatalf("at (validAt %s, txAt %s) %s and %s of subject %s are both current", formatTime(va), formatTime(ta), other, r.ID, r.Subject)
						}
						bySubject[r.Subject] = r.ID
						current[r.ID] = r
					}
				}
			}
		}
		// The current records of a subject never overlap in valid time.
		recs := make([]Record, 0, len(current))
		for _, r := range current {
			recs = append(recs, r)
		}
		for i := range recs {
			for j := i + 1; j < len(recs); j++ {
				a, b := &recs[i], &recs[j]
				if a.Namespace == b.Namespace && a.Subject == b.Subject && a.overlaps(b.ValidFrom, b.ValidTo) {
					h.fatalf("at txAt %s, %s [%s, %s) and %s [%s, %s) of %s overlap", formatTime(ta),
						a.ID, formatTime(a.ValidFrom), fmtOpt(a.ValidTo), b.ID, formatTime(b.ValidFrom), fmtOpt(b.ValidTo), a.Subject)
				}
			}
		}
	}
	// The model keeps its own invariant too (a check of the model).
	for _, ta := range txList {
		var cur []*mrec
		for _, r := range h.m.recs {
			if !r.erased && !r.recordedAt.After(ta) && (r.supersededAt == nil || r.supersededAt.After(ta)) {
				cur = append(cur, r)
			}
		}
		for i, a := range cur {
			for _, b := range cur[i+1:] {
				if a.ns == b.ns && a.subject == b.subject && a.overlaps(b.from, b.to) {
					h.fatalf("the model is wrong: %s and %s overlap at %s", a.id, b.id, formatTime(ta))
				}
			}
		}
	}
	h.t.Logf("%d records (%d erased), %d transaction times × %d valid times, %d recalls",
		len(h.m.recs), countErased(h.m.recs), len(txList), len(vaList), queries)
}

func (h *history) compare(ns, subject string, va, ta time.Time, got []Record) {
	h.t.Helper()
	want := h.m.recall(ns, subject, va, ta)
	where := fmt.Sprintf("recall %s/%q at (validAt %s, txAt %s)", ns, subject, formatTime(va), formatTime(ta))
	seen := map[string]bool{}
	for i, r := range got {
		// No look-ahead, whatever the model says.
		if r.RecordedAt.After(ta) {
			h.fatalf("%s: %s was recorded at %s, after txAt", where, r.ID, formatTime(r.RecordedAt))
		}
		if r.SupersededAt != nil && !r.SupersededAt.After(ta) {
			h.fatalf("%s: %s was superseded at %s, not after txAt", where, r.ID, formatTime(*r.SupersededAt))
		}
		if seen[r.ID] {
			h.fatalf("%s: %s twice", where, r.ID)
		}
		seen[r.ID] = true
		if i > 0 && got[i-1].RecordedAt.Before(r.RecordedAt) {
			h.fatalf("%s: not newest recording first", where)
		}
		m, ok := want[r.ID]
		if !ok {
			h.fatalf("%s: %s %s is not in the model's answer %v", where, r.ID, r.Body, mapIDs(want))
		}
		if string(r.Body) != m.body || r.Subject != m.subject || r.Namespace != ns || !r.ValidFrom.Equal(m.from) ||
			!eqOpt(r.ValidTo, m.to) || !r.RecordedAt.Equal(m.recordedAt) || !eqOpt(r.SupersededAt, m.supersededAt) ||
			r.Seal.ContentDigest != m.digest || !sameEdges(r.Edges, m.edges) {
			h.fatalf("%s: %s is\n  %s %s [%s, %s) tx [%s, %s) %v\nthe model has\n  %s %s [%s, %s) tx [%s, %s) %v", where, r.ID,
				r.Subject, r.Body, formatTime(r.ValidFrom), fmtOpt(r.ValidTo), formatTime(r.RecordedAt), fmtOpt(r.SupersededAt), r.Edges,
				m.subject, m.body, formatTime(m.from), fmtOpt(m.to), formatTime(m.recordedAt), fmtOpt(m.supersededAt), m.edges)
		}
	}
	if len(got) != len(want) {
		h.fatalf("%s: got %v, the model %v", where, ids_(got), mapIDs(want))
	}
}

func sortedTimes(set map[time.Time]bool) []time.Time {
	out := make([]time.Time, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

func fmtOpt(t *time.Time) string {
	if t == nil {
		return "∞"
	}
	return formatTime(*t)
}

func eqOpt(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

func sameEdges(a, b []Edge) bool {
	if len(a) != len(b) {
		return false
	}
	for _, e := range a {
		if !slices.Contains(b, e) {
			return false
		}
	}
	return true
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

func mrecIDs(rs []*mrec) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.id
	}
	return out
}

func mapIDs(m map[string]*mrec) []string {
	out := make([]string, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func erasedIDs(es []Erased) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func countErased(rs []*mrec) int {
	n := 0
	for _, r := range rs {
		if r.erased {
			n++
		}
	}
	return n
}

// TestRecallRequestRefusals: the request checks of recall, table-driven;
// none is a partial answer.
func TestRecallRequestRefusals(t *testing.T) {
	f := newFixture(t, nil)
	f.mustRemember("ns", fact{subject: "a", body: "x"})
	f.mustRemember("ns", fact{subject: "b", body: "y"})
	p, err := f.recall("ns", RecallRequest{Limit: 1})
	if err != nil || !p.HasMore || p.NextCursor == nil {
		t.Fatalf("first page: %+v %v", p, err)
	}
	good := *p.NextCursor
	for _, tc := range []struct {
		name string
		q    RecallRequest
		want error
	}{
		{"limit too big", RecallRequest{Limit: 101}, ErrInvalid},
		{"negative limit", RecallRequest{Limit: -1}, ErrInvalid},
		{"txAt in the future", RecallRequest{TxAt: ptr(f.clock.Now().Add(time.Second))}, ErrInvalid},
		{"subject with a control character", RecallRequest{Subject: "a\x00"}, ErrInvalid},
		{"subject too long", RecallRequest{Subject: strings.Repeat("s", MaxNameLen+1)}, ErrInvalid},
		{"kind with a control character", RecallRequest{Kind: "note\n"}, ErrInvalid},
		{"cursor not base64", RecallRequest{Cursor: "!!"}, ErrBadCursor},
		{"cursor too short", RecallRequest{Cursor: "AAAA"}, ErrBadCursor},
		{"cursor with a bad id", RecallRequest{Cursor: good[:len(good)-2] + "__"}, ErrBadCursor},
		{"cursor padded", RecallRequest{Cursor: good + "="}, ErrBadCursor},
	} {
		if _, err := f.recall("ns", tc.q); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := f.svc.Recall(t.Context(), f.caller, RecallRequest{Mandate: f.mandate("ns", nil), Namespace: "n\x01s"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("namespace with a control character: %v", err)
	}
	if _, err := f.assemble(AssembleRequest{Subject: "a\x00", Budget: Budget{MaxTokens: 10}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("assemble of a subject with a control character: %v", err)
	}
	// The good cursor continues where the first page stopped.
	q, err := f.recall("ns", RecallRequest{Limit: 1, Cursor: good})
	if err != nil || len(q.Data) != 1 || q.Data[0].ID == p.Data[0].ID || q.HasMore {
		t.Fatalf("second page: %+v %v", q, err)
	}
}
