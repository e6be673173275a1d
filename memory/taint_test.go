package memory

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"
)

// find returns record id as the store hands it out now (recall at its
// own valid and recording time), failing when it is not there.
func (f *fixture) find(r Record) Record {
	f.t.Helper()
	recs, err := f.recallAll(r.Namespace, RecallRequest{Subject: r.Subject, ValidAt: ptr(r.ValidFrom), TxAt: ptr(r.RecordedAt), Limit: 100})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, x := range recs {
		if x.ID == r.ID {
			return x
		}
	}
	f.t.Fatalf("%s is not recalled at its own times", r.ID)
	return Record{}
}

// taintEntries maps record ids to the memory.tainted entries naming them.
func (f *fixture) taintEntries() map[string][]taintedData {
	f.t.Helper()
	out := map[string][]taintedData{}
	seqs := map[string][]uint64{}
	for _, e := range f.entries(0) {
		if e.Type != EntryTainted {
			continue
		}
		var d taintedData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			f.t.Fatal(err)
		}
		out[d.ID] = append(out[d.ID], d)
		seqs[d.ID] = append(seqs[d.ID], e.Seq)
	}
	return out
}

// checkTaint checks that exactly the records in want are tainted, each
// with one memory.tainted entry that its Taint points at and agrees with.
func (f *fixture) checkTaint(recs []Record, want map[string]Taint) {
	f.t.Helper()
	entries := f.taintEntries()
	for _, r := range recs {
		got := f.find(r)
		w, tainted := want[r.ID]
		if !tainted {
			if got.Taint != nil || len(entries[r.ID]) != 0 {
				f.t.Errorf("%s (%s) is tainted: %+v, entries %v", r.ID, r.Body, got.Taint, entries[r.ID])
			}
			continue
		}
		if got.Taint == nil {
			f.t.Errorf("%s (%s) is not tainted", r.ID, r.Body)
			continue
		}
		if got.Taint.Reason != w.Reason || got.Taint.Origin != w.Origin {
			f.t.Errorf("%s (%s): taint %s from %s, want %s from %s", r.ID, r.Body, got.Taint.Reason, got.Taint.Origin, w.Reason, w.Origin)
		}
		if len(entries[r.ID]) != 1 {
			f.t.Errorf("%s (%s): %d memory.tainted entries", r.ID, r.Body, len(entries[r.ID]))
			continue
		}
		e, err := f.log.Get(f.t.Context(), got.Taint.AuditSeq)
		if err != nil {
			f.t.Fatal(err)
		}
		var d taintedData
		if e.Type != EntryTainted || json.Unmarshal(e.Data, &d) != nil || d.ID != r.ID || d.Reason != got.Taint.Reason || d.Origin != got.Taint.Origin {
			f.t.Errorf("%s: auditSeq %d is %s %s", r.ID, got.Taint.AuditSeq, e.Type, e.Data)
		}
	}
}

func TestTaintPolicyOnSourceKinds(t *testing.T) {
	g := newFixture(t, nil)
	if _, err := New(Options{Store: g.st, Log: g.log, UntrustedSourceKinds: []string{"website"}}); err == nil {
		t.Fatal("an unknown source kind was accepted")
	}
	f := newFixture(t, &Options{UntrustedSourceKinds: []string{"url", "tool"}})
	for _, tc := range []struct {
		src     Source
		tainted bool
	}{
		{Source{Kind: "agent", Ref: "agent-1"}, false},
		{Source{Kind: "operator", Ref: "op"}, false},
		{Source{Kind: "url", Ref: "https://example.com/a"}, true},
		{Source{Kind: "tool", Ref: "web-search"}, true},
	} {
		t.Run(tc.src.Kind, func(t *testing.T) {
			r := f.mustRemember("ns", fact{subject: "from-" + tc.src.Kind, body: "said by " + tc.src.Ref, source: tc.src})
			want := map[string]Taint{}
			if tc.tainted {
				if r.Taint == nil {
					t.Fatal("the answer of remember is not marked tainted")
				}
				want[r.ID] = Taint{Reason: TaintUntrustedSource, Origin: tc.src.Kind + ":" + tc.src.Ref}
			}
			f.checkTaint([]Record{r}, want)
		})
	}
	// A record citing one from an untrusted kind inherits its taint.
	u := f.mustRemember("ns", fact{subject: "u", body: "from a page", source: Source{Kind: "url", Ref: "https://example.com/b"}})
	c := f.mustRemember("ns", fact{subject: "c", body: "cites the page", edges: []Edge{{Type: EdgeCites, To: u.ID}}})
	f.checkTaint([]Record{c}, map[string]Taint{c.ID: {Reason: TaintInherited, Origin: u.ID}})
}

// node is a record of a taint shape: edges name earlier nodes by index.
type node struct {
	name    string
	subject string
	source  Source
	edges   []nedge
}

type nedge struct {
	typ string
	to  int
}

func TestTaintPropagation(t *testing.T) {
	scraper := Source{Kind: "tool", Ref: "scraper"}
	type want map[string][2]string // node name → reason, origin (a node name, or a source kind:ref as is)
	cases := []struct {
		name  string
		nodes []node
		// taint the source, or the node by index
		source *Source
		record int
		want   want
	}{
		{name: "derived_from chain", nodes: []node{{name: "A"}, {name: "B", edges: []nedge{{EdgeDerivedFrom, 0}}}, {name: "C", edges: []nedge{{EdgeDerivedFrom, 1}}}},
			record: 0, want: want{"A": {TaintUntrustedSource, "operator:op"}, "B": {TaintInherited, "A"}, "C": {TaintInherited, "B"}}},
		{name: "derived_from chain from the middle", nodes: []node{{name: "A"}, {name: "B", edges: []nedge{{EdgeDerivedFrom, 0}}}, {name: "C", edges: []nedge{{EdgeDerivedFrom, 1}}}},
			record: 1, want: want{"B": {TaintUntrustedSource, "operator:op"}, "C": {TaintInherited, "B"}}},
		{name: "cites chain", nodes: []node{{name: "A"}, {name: "B", edges: []nedge{{EdgeCites, 0}}}, {name: "C", edges: []nedge{{EdgeCites, 1}}}},
			record: 0, want: want{"A": {TaintUntrustedSource, "operator:op"}, "B": {TaintInherited, "A"}, "C": {TaintInherited, "B"}}},
		{name: "mixed chain", nodes: []node{{name: "A"}, {name: "B", edges: []nedge{{EdgeCites, 0}}}, {name: "C", edges: []nedge{{EdgeDerivedFrom, 1}}}, {name: "D", edges: []nedge{{EdgeCites, 2}}}},
			record: 0, want: want{"A": {TaintUntrustedSource, "operator:op"}, "B": {TaintInherited, "A"}, "C": {TaintInherited, "B"}, "D": {TaintInherited, "C"}}},
		{name: "diamond", nodes: []node{{name: "A"}, {name: "B", edges: []nedge{{EdgeDerivedFrom, 0}}}, {name: "C", edges: []nedge{{EdgeCites, 0}}},
			{name: "D", edges: []nedge{{EdgeDerivedFrom, 1}, {EdgeCites, 2}}}, {name: "E", edges: []nedge{{EdgeDerivedFrom, 3}}}},
			record: 0, want: want{"A": {TaintUntrustedSource, "operator:op"}, "B": {TaintInherited, "A"}, "C": {TaintInherited, "A"}, "D": {TaintInherited, "B|C"}, "E": {TaintInherited, "D"}}},
		{name: "double edge to one record", nodes: []node{{name: "A"}, {name: "B", edges: []nedge{{EdgeDerivedFrom, 0}, {EdgeCites, 0}}}},
			record: 0, want: want{"A": {TaintUntrustedSource, "operator:op"}, "B": {TaintInherited, "A"}}},
		{name: "taint flows downstream only", nodes: []node{{name: "A"}, {name: "B", edges: []nedge{{EdgeCites, 0}}}, {name: "C", edges: []nedge{{EdgeDerivedFrom, 1}}}},
			record: 1, want: want{"B": {TaintUntrustedSource, "operator:op"}, "C": {TaintInherited, "B"}}},
		{name: "supersedes carries no taint", nodes: []node{{name: "A", subject: "same"}, {name: "B", subject: "same", edges: []nedge{{EdgeSupersedes, 0}}}},
			record: 0, want: want{"A": {TaintUntrustedSource, "operator:op"}}},
		{name: "a source and its dependents", nodes: []node{{name: "S1", source: scraper}, {name: "S2", source: scraper}, {name: "X"},
			{name: "B", edges: []nedge{{EdgeDerivedFrom, 0}}}, {name: "C", edges: []nedge{{EdgeCites, 1}, {EdgeCites, 2}}}, {name: "D", edges: []nedge{{EdgeCites, 2}}}},
			source: &scraper, want: want{"S1": {TaintUntrustedSource, "tool:scraper"}, "S2": {TaintUntrustedSource, "tool:scraper"},
				"B": {TaintInherited, "S1"}, "C": {TaintInherited, "S2"}}},
		{name: "a source reached twice", nodes: []node{{name: "S1", source: scraper}, {name: "S2", source: scraper, edges: []nedge{{EdgeDerivedFrom, 0}}}},
			source: &scraper, want: want{"S1": {TaintUntrustedSource, "tool:scraper"}, "S2": {TaintUntrustedSource + "|" + TaintInherited, "tool:scraper|S1"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			recs := make([]Record, len(tc.nodes))
			byName := map[string]Record{}
			for i, n := range tc.nodes {
				x := fact{subject: n.subject, body: "fact " + n.name, source: n.source}
				if x.subject == "" {
					x.subject = "subject " + n.name
				}
				for _, e := range n.edges {
					x.edges = append(x.edges, Edge{Type: e.typ, To: recs[e.to].ID})
				}
				recs[i] = f.mustRemember("ns", x)
				byName[n.name] = recs[i]
			}
			seq := f.size()
			q := TaintRequest{Source: tc.source, Rationale: "found to be wrong"}
			if tc.source == nil {
				q.RecordID = recs[tc.record].ID
			}
			out, err := f.svc.Taint(t.Context(), q, f.op())
			if err != nil {
				t.Fatal(err)
			}
			// The answer lists exactly the newly tainted records, and
			// each got one entry.
			var wantIDs []string
			for name := range tc.want {
				wantIDs = append(wantIDs, byName[name].ID)
			}
			if !sameSet(out.Tainted, wantIDs) || len(out.Tainted) != len(wantIDs) {
				t.Fatalf("tainted %v, want %v", out.Tainted, wantIDs)
			}
			if got := len(f.entries(seq)); got != len(wantIDs) {
				t.Fatalf("%d record entries for %d tainted records", got, len(wantIDs))
			}
			// Reasons and origins: where the taint may arrive by one of
			// several paths first, any of them will do.
			for _, r := range recs {
				got := f.find(r)
				name := nodeName(byName, r.ID)
				w, ok := tc.want[name]
				if !ok {
					continue
				}
				if got.Taint == nil {
					t.Fatalf("%s is not tainted", name)
				}
				origin := got.Taint.Origin
				if n := nodeName(byName, origin); n != "" {
					origin = n
				}
				if !slices.Contains(splitBar(w[0]), got.Taint.Reason) || !slices.Contains(splitBar(w[1]), origin) {
					t.Errorf("%s: %s from %s, want %s from %s", name, got.Taint.Reason, origin, w[0], w[1])
				}
			}
			exact := map[string]Taint{}
			for _, r := range recs {
				if _, ok := tc.want[nodeName(byName, r.ID)]; ok {
					g := f.find(r)
					exact[r.ID] = Taint{Reason: g.Taint.Reason, Origin: g.Taint.Origin}
				}
			}
			f.checkTaint(recs, exact)

			// Tainting again changes nothing and records nothing.
			seq = f.size()
			again, err := f.svc.Taint(t.Context(), q, f.op())
			if err != nil || len(again.Tainted) != 0 {
				t.Fatalf("tainting again: %+v %v", again, err)
			}
			if f.size() != seq {
				t.Fatal("tainting again appended record entries")
			}
			f.checkTaint(recs, exact)
		})
	}
}

func nodeName(byName map[string]Record, id string) string {
	for n, r := range byName {
		if r.ID == id {
			return n
		}
	}
	return ""
}

func splitBar(s string) []string {
	var out []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '|' {
			i++
		}
		out = append(out, s[:i])
		if i == len(s) {
			break
		}
		s = s[i+1:]
	}
	return out
}

// TestTaintRemainders: the remainders of a record carry its taint, both
// when the record is tainted before it is clipped and after.
func TestTaintRemainders(t *testing.T) {
	f := newFixture(t, nil)
	a := f.mustRemember("ns", fact{subject: "user:1", body: "lives in Paris", from: t0.Add(-48 * time.Hour)})
	if _, err := f.svc.Taint(t.Context(), TaintRequest{RecordID: a.ID, Rationale: "found to be wrong"}, f.op()); err != nil {
		t.Fatal(err)
	}
	b := f.mustRemember("ns", fact{subject: "user:1", body: "lives in Berlin", from: t0, to: ptr(t0.Add(time.Hour))})
	if b.Taint != nil {
		t.Fatalf("a record superseding a tainted one is tainted: %+v", b.Taint)
	}
	var remainders []Record
	for _, va := range []time.Time{t0.Add(-time.Hour), t0.Add(2 * time.Hour)} {
		recs, err := f.recallAll("ns", RecallRequest{Subject: "user:1", ValidAt: &va})
		if err != nil || len(recs) != 1 {
			t.Fatalf("recall at %s: %v %v", va, ids_(recs), err)
		}
		remainders = append(remainders, recs[0])
	}
	want := map[string]Taint{a.ID: {Reason: TaintUntrustedSource, Origin: "operator:op"}}
	for _, r := range remainders {
		want[r.ID] = Taint{Reason: TaintInherited, Origin: a.ID}
	}
	f.checkTaint(append([]Record{a, b}, remainders...), want)

	// Clipped first, tainted later: the remainders are dependents.
	c := f.mustRemember("ns", fact{subject: "user:2", body: "likes tea", from: t0.Add(-48 * time.Hour)})
	d := f.mustRemember("ns", fact{subject: "user:2", body: "likes coffee", from: t0.Add(-time.Hour), to: ptr(t0)})
	out, err := f.svc.Taint(t.Context(), TaintRequest{RecordID: c.ID, Rationale: "found to be wrong"}, f.op())
	if err != nil || len(out.Tainted) != 3 || out.Tainted[0] != c.ID {
		t.Fatalf("taint of a clipped record: %+v %v", out, err)
	}
	if f.find(d).Taint != nil {
		t.Fatal("the record that clipped it is tainted")
	}
}

// TestTaintAtWrite: records written after the marking are tainted when
// written: from the marked source, or deriving from, citing or sourced
// from a tainted record.
func TestTaintAtWrite(t *testing.T) {
	f := newFixture(t, nil)
	scraper := Source{Kind: "tool", Ref: "scraper"}
	old := f.mustRemember("ns", fact{subject: "old", body: "scraped before", source: scraper})
	if _, err := f.svc.Taint(t.Context(), TaintRequest{Source: &scraper, Rationale: "the scraper was fooled"}, f.op()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		x      fact
		reason string
		origin string
	}{
		{"from the marked source", fact{subject: "new", body: "scraped after", source: scraper}, TaintUntrustedSource, "tool:scraper"},
		{"another ref of the kind", fact{subject: "other-tool", body: "from another tool", source: Source{Kind: "tool", Ref: "calculator"}}, "", ""},
		{"citing", fact{subject: "cites", body: "cites it", edges: []Edge{{Type: EdgeCites, To: old.ID}}}, TaintInherited, old.ID},
		{"deriving", fact{subject: "derives", body: "derives from it", edges: []Edge{{Type: EdgeDerivedFrom, To: old.ID}}}, TaintInherited, old.ID},
		{"sourced from the record", fact{subject: "record-source", body: "says so", source: Source{Kind: "record", Ref: old.ID}}, TaintInherited, old.ID},
		{"superseding only", fact{subject: "unrelated", body: "supersedes it", edges: []Edge{{Type: EdgeSupersedes, To: old.ID}}}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seq := f.size()
			r := f.mustRemember("ns", tc.x)
			want := map[string]Taint{}
			if tc.reason != "" {
				want[r.ID] = Taint{Reason: tc.reason, Origin: tc.origin}
				if r.Taint == nil || r.Taint.Reason != tc.reason {
					t.Fatalf("the answer of remember: %+v", r.Taint)
				}
			}
			f.checkTaint([]Record{r}, want)
			n := 0
			for _, e := range f.entries(seq) {
				if e.Type == EntryTainted {
					n++
				}
			}
			if n != len(want) {
				t.Fatalf("%d memory.tainted entries", n)
			}
		})
	}
}

// TestTaintExclusion: recall returns tainted records marked unless told
// to exclude them; assemble excludes them unless told not to.
func TestTaintExclusion(t *testing.T) {
	f := newFixture(t, nil)
	clean := f.mustRemember("ns", fact{subject: "tea", body: "likes tea"})
	bad := f.mustRemember("ns", fact{subject: "coffee", body: "likes coffee", source: Source{Kind: "url", Ref: "https://example.com"}})
	if _, err := f.svc.Taint(t.Context(), TaintRequest{Source: &Source{Kind: "url", Ref: "https://example.com"}, Rationale: "a spoofed page"}, f.op()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		exclude bool
		want    []string
	}{{false, []string{bad.ID, clean.ID}}, {true, []string{clean.ID}}} {
		recs, err := f.recallAll("ns", RecallRequest{ExcludeTainted: tc.exclude})
		if err != nil || !slices.Equal(ids_(recs), tc.want) {
			t.Fatalf("recall excludeTainted=%v: %v %v", tc.exclude, ids_(recs), err)
		}
		for _, r := range recs {
			if (r.Taint != nil) != (r.ID == bad.ID) {
				t.Fatalf("%s taint %+v", r.ID, r.Taint)
			}
		}
	}
	for _, tc := range []struct {
		exclude *bool
		items   []string
		omitted []Omission
	}{
		{nil, []string{clean.ID}, []Omission{{ID: bad.ID, Reason: "tainted"}}},
		{ptr(true), []string{clean.ID}, []Omission{{ID: bad.ID, Reason: "tainted"}}},
		{ptr(false), []string{bad.ID, clean.ID}, nil},
	} {
		c, err := f.svc.Assemble(t.Context(), f.caller, AssembleRequest{Mandate: f.mandate("ns", nil), Namespace: "ns", Budget: Budget{MaxTokens: 1000}, ExcludeTainted: tc.exclude})
		if err != nil {
			t.Fatal(err)
		}
		var items []string
		for _, it := range c.Items {
			items = append(items, it.Record.ID)
		}
		if !slices.Equal(items, tc.items) || len(c.Omitted) != len(tc.omitted) || c.ExcludeTainted != (tc.exclude == nil || *tc.exclude) {
			t.Fatalf("assemble exclude=%v: items %v omitted %+v", tc.exclude, items, c.Omitted)
		}
		for i, o := range tc.omitted {
			if c.Omitted[i].ID != o.ID || c.Omitted[i].Reason != o.Reason {
				t.Fatalf("omitted %+v", c.Omitted)
			}
		}
	}
}

func TestTaintRequestRefusals(t *testing.T) {
	f := newFixture(t, nil)
	r := f.mustRemember("ns", fact{subject: "s", body: "x"})
	gone := f.mustRemember("ns", fact{subject: "t", body: "y"})
	if _, err := f.forget("ns", gone.ID); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		q    TaintRequest
		want error
	}{
		{"neither", TaintRequest{Rationale: "why not at all"}, ErrInvalid},
		{"both", TaintRequest{Source: &Source{Kind: "url", Ref: "x"}, RecordID: r.ID, Rationale: "why not at all"}, ErrInvalid},
		{"bad kind", TaintRequest{Source: &Source{Kind: "website", Ref: "x"}, Rationale: "why not at all"}, ErrInvalid},
		{"bad ref", TaintRequest{Source: &Source{Kind: "url", Ref: ""}, Rationale: "why not at all"}, ErrInvalid},
		{"bad id", TaintRequest{RecordID: "mem_nope", Rationale: "why not at all"}, ErrInvalid},
		{"unknown id", TaintRequest{RecordID: newID(), Rationale: "why not at all"}, ErrNotFound},
		{"erased id", TaintRequest{RecordID: gone.ID, Rationale: "why not at all"}, ErrErased},
	} {
		size := f.size()
		if _, err := f.svc.Taint(t.Context(), tc.q, f.op()); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if f.size() != size {
			t.Errorf("%s: a refused taint appended record entries", tc.name)
		}
	}
}

// TestTaintReachesRecordSourcedLater: a record whose source is another
// record (kind record) inherits that record's taint when written; it must
// also when the source record is tainted after it was written, or a
// record's taint would depend on the order of events.
func TestTaintReachesRecordSourcedLater(t *testing.T) {
	f := newFixture(t, nil)
	x := f.mustRemember("ns", fact{subject: "x", body: "the original"})
	y := f.mustRemember("ns", fact{subject: "y", body: "restated from x", source: Source{Kind: "record", Ref: x.ID}})
	z := f.mustRemember("ns", fact{subject: "z", body: "derived from y", edges: []Edge{{Type: EdgeDerivedFrom, To: y.ID}}})
	out, err := f.svc.Taint(t.Context(), TaintRequest{RecordID: x.ID, Rationale: "found to be wrong"}, f.op())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.Tainted, []string{x.ID, y.ID, z.ID}) {
		t.Fatalf("tainted %v, want x, y, z", out.Tainted)
	}
	f.checkTaint([]Record{x, y, z}, map[string]Taint{
		x.ID: {Reason: TaintUntrustedSource, Origin: "operator:op"},
		y.ID: {Reason: TaintInherited, Origin: x.ID},
		z.ID: {Reason: TaintInherited, Origin: y.ID},
	})
}
