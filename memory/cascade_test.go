package memory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// build remembers the nodes of a shape in order, each with a body that
// names it, and returns the records by node name.
func (f *fixture) build(nodes []node) ([]Record, map[string]Record) {
	f.t.Helper()
	recs := make([]Record, len(nodes))
	byName := map[string]Record{}
	for i, n := range nodes {
		x := fact{subject: n.subject, body: "secret body of " + n.name, source: n.source}
		if x.subject == "" {
			x.subject = "subject " + n.name
		}
		for _, e := range n.edges {
			x.edges = append(x.edges, Edge{Type: e.typ, To: recs[e.to].ID})
		}
		recs[i] = f.mustRemember("ns", x)
		byName[n.name] = recs[i]
	}
	return recs, byName
}

// visible reports whether r comes back from recall at its own valid and
// recording time, from recall now, or from assemble.
func (f *fixture) visible(r Record) bool {
	f.t.Helper()
	for _, q := range []RecallRequest{
		{Subject: r.Subject, ValidAt: ptr(r.ValidFrom), TxAt: ptr(r.RecordedAt), Limit: 100},
		{ValidAt: ptr(r.ValidFrom), TxAt: ptr(r.RecordedAt), Limit: 100},
		{ValidAt: ptr(r.ValidFrom), Limit: 100},
	} {
		recs, err := f.recallAll(r.Namespace, q)
		if err != nil {
			f.t.Fatal(err)
		}
		if slices.Contains(ids_(recs), r.ID) {
			return true
		}
	}
	c, err := f.svc.Assemble(f.t.Context(), f.caller, AssembleRequest{Mandate: f.mandate(r.Namespace, nil), Namespace: r.Namespace,
		Budget: Budget{MaxTokens: 1_000_000}, ValidAt: ptr(r.ValidFrom), ExcludeTainted: ptr(false)})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, it := range c.Items {
		if it.Record.ID == r.ID {
			return true
		}
	}
	for _, o := range c.Omitted {
		if o.ID == r.ID {
			return true
		}
	}
	return false
}

// rawContains reports which store keys hold needle in their key or value.
func (f *fixture) rawContains(needle []byte) []string {
	f.t.Helper()
	var hits []string
	err := f.st.View(f.t.Context(), func(r store.Reader) error {
		it := r.Iterate(nil, nil, false)
		defer it.Close()
		for it.Next() {
			if bytes.Contains(it.Key(), needle) || bytes.Contains(it.Value(), needle) {
				hits = append(hits, string(it.Key()))
			}
		}
		return it.Err()
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return hits
}

// checkErased checks an erasure proof and the store after it: the proof
// lists exactly want (root first, once each, with the content digests),
// verifies, matches its memory.erased entry; the erased records are gone
// from every answer, their bodies from every record entry, their keys,
// ciphertexts and index entries from the store, and a tombstone answers
// for each.
func (f *fixture) checkErased(proof ErasureProof, root Record, want []Record, kept []Record) {
	f.t.Helper()
	got := erasedIDs(proof.Erased)
	if len(got) == 0 || got[0] != root.ID || proof.RootID != root.ID || proof.Namespace != root.Namespace {
		f.t.Fatalf("proof of %s: root %s, erased %v", root.ID, proof.RootID, got)
	}
	if !sameSet(got, ids_(want)) || len(got) != len(want) {
		f.t.Fatalf("erased %v, want %v", got, ids_(want))
	}
	for _, e := range proof.Erased {
		for _, w := range want {
			if w.ID == e.ID && w.Seal.ContentDigest != e.ContentDigest {
				f.t.Fatalf("%s erased with digest %s, sealed with %s", e.ID, e.ContentDigest, w.Seal.ContentDigest)
			}
		}
	}
	if v := Verify(f.svc.VerifierKey(), marshalTB(f.t, proof)); !v.Holds || v.Type != ArtifactErasure {
		f.t.Fatalf("the erasure proof does not verify: %+v", v)
	}
	if proof.Entry.Type != EntryErased || proof.Entry.Actor.Kind != "operator" {
		f.t.Fatalf("entry %+v", proof.Entry)
	}
	var data erasedData
	if err := json.Unmarshal(proof.Entry.Data, &data); err != nil || data.RootID != root.ID || !slices.Equal(data.Erased, proof.Erased) {
		f.t.Fatalf("memory.erased data %s", proof.Entry.Data)
	}
	// The entry names ids and digests, nothing else.
	var members map[string]json.RawMessage
	_ = json.Unmarshal(proof.Entry.Data, &members)
	if len(members) != 3 {
		f.t.Fatalf("memory.erased data has members %v", members)
	}
	for _, raw := range data.Erased {
		var m map[string]any
		b, _ := json.Marshal(raw)
		_ = json.Unmarshal(b, &m)
		if len(m) != 2 {
			f.t.Fatalf("an erased item has more than id and digest: %s", b)
		}
	}
	// No record entry, and no byte of the store, holds an erased body;
	// nothing but the tombstone (and edges of records that remain) names
	// an erased id.
	for _, e := range f.entries(0) {
		b := marshalTB(f.t, e)
		for _, w := range want {
			if bytes.Contains(b, []byte(strings.Trim(string(w.Body), `"`))) {
				f.t.Fatalf("record entry %d holds the body of %s: %s", e.Seq, w.ID, b)
			}
		}
	}
	for _, w := range want {
		if hits := f.rawContains([]byte(strings.Trim(string(w.Body), `"`))); len(hits) != 0 {
			f.t.Fatalf("the store holds the body of erased %s under %q", w.ID, hits)
		}
		for _, k := range f.rawContains([]byte(w.ID)) {
			// Values may name the id (edges of records that remain, the
			// record entries, the idempotency key's outcome); a key only
			// when it is the tombstone.
			if strings.Contains(k, w.ID) && k != keyErased+w.ID {
				f.t.Fatalf("the store keeps %q for erased %s", k, w.ID)
			}
		}
		if f.visible(w) {
			f.t.Fatalf("erased %s is still answered", w.ID)
		}
		_, err := f.forget(w.Namespace, w.ID)
		if !errors.Is(err, ErrErased) {
			f.t.Fatalf("forget of erased %s: %v", w.ID, err)
		}
	}
	for _, k := range kept {
		if !f.visible(k) {
			f.t.Fatalf("%s (%s) was not to be erased", k.ID, k.Body)
		}
	}
}

func TestForgetShapes(t *testing.T) {
	cases := []struct {
		name  string
		nodes []node
		root  string
		erase []string
	}{
		{name: "single", nodes: []node{{name: "A"}, {name: "X"}}, root: "A", erase: []string{"A"}},
		{name: "chain", nodes: []node{{name: "A"}, {name: "B", edges: []nedge{{EdgeDerivedFrom, 0}}}, {name: "C", edges: []nedge{{EdgeDerivedFrom, 1}}}},
			root: "A", erase: []string{"A", "B", "C"}},
		{name: "chain from the middle", nodes: []node{{name: "A"}, {name: "B", edges: []nedge{{EdgeDerivedFrom, 0}}}, {name: "C", edges: []nedge{{EdgeDerivedFrom, 1}}}},
			root: "B", erase: []string{"B", "C"}},
		{name: "chain from the end", nodes: []node{{name: "A"}, {name: "B", edges: []nedge{{EdgeDerivedFrom, 0}}}, {name: "C", edges: []nedge{{EdgeDerivedFrom, 1}}}},
			root: "C", erase: []string{"C"}},
		{name: "diamond", nodes: []node{{name: "A"}, {name: "B", edges: []nedge{{EdgeDerivedFrom, 0}}}, {name: "C", edges: []nedge{{EdgeDerivedFrom, 0}}},
			{name: "D", edges: []nedge{{EdgeDerivedFrom, 1}, {EdgeDerivedFrom, 2}}}, {name: "E", edges: []nedge{{EdgeDerivedFrom, 3}}}},
			root: "A", erase: []string{"A", "B", "C", "D", "E"}},
		{name: "half a diamond", nodes: []node{{name: "A"}, {name: "B", edges: []nedge{{EdgeDerivedFrom, 0}}}, {name: "C", edges: []nedge{{EdgeDerivedFrom, 0}}},
			{name: "D", edges: []nedge{{EdgeDerivedFrom, 1}, {EdgeDerivedFrom, 2}}}},
			root: "B", erase: []string{"B", "D"}},
		{name: "derived from the root and something else", nodes: []node{{name: "A"}, {name: "X"}, {name: "B", edges: []nedge{{EdgeDerivedFrom, 0}, {EdgeDerivedFrom, 1}}}},
			root: "A", erase: []string{"A", "B"}},
		{name: "cites only", nodes: []node{{name: "A"}, {name: "B", edges: []nedge{{EdgeCites, 0}}}, {name: "C", edges: []nedge{{EdgeDerivedFrom, 1}}}},
			root: "A", erase: []string{"A"}},
		{name: "cites and derived_from", nodes: []node{{name: "A"}, {name: "B", edges: []nedge{{EdgeCites, 0}, {EdgeDerivedFrom, 0}}}},
			root: "A", erase: []string{"A", "B"}},
		{name: "superseded by", nodes: []node{{name: "A", subject: "same"}, {name: "B", subject: "same", edges: []nedge{{EdgeSupersedes, 0}}}},
			root: "A", erase: []string{"A"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			recs, byName := f.build(tc.nodes)
			var want, kept []Record
			for _, r := range recs {
				if slices.Contains(tc.erase, nodeName(byName, r.ID)) {
					want = append(want, r)
				} else {
					kept = append(kept, r)
				}
			}
			proof, err := f.forget("ns", byName[tc.root].ID)
			if err != nil {
				t.Fatal(err)
			}
			f.checkErased(proof, byName[tc.root], want, kept)
		})
	}
}

// TestForgetRemainders: erasing a clipped record erases its remainders
// (derived from it), not the record that clipped it; erasing the record
// that clipped it leaves the remainders.
func TestForgetRemainders(t *testing.T) {
	for _, root := range []string{"paris", "berlin"} {
		t.Run(root, func(t *testing.T) {
			f := newFixture(t, nil)
			paris := f.mustRemember("ns", fact{subject: "user:1", body: "lives in Paris", from: t0.Add(-48 * time.Hour)})
			f.clock.Advance(time.Minute)
			berlin := f.mustRemember("ns", fact{subject: "user:1", body: "lives in Berlin", from: t0, to: ptr(t0.Add(time.Hour))})
			var remainders []Record
			for _, va := range []time.Time{t0.Add(-time.Hour), t0.Add(2 * time.Hour)} {
				recs, err := f.recallAll("ns", RecallRequest{Subject: "user:1", ValidAt: &va})
				if err != nil || len(recs) != 1 || recs[0].Edges[0] != (Edge{Type: EdgeDerivedFrom, To: paris.ID}) {
					t.Fatalf("remainder at %s: %+v %v", va, recs, err)
				}
				remainders = append(remainders, recs[0])
			}
			if root == "paris" {
				proof, err := f.forget("ns", paris.ID)
				if err != nil {
					t.Fatal(err)
				}
				f.checkErased(proof, paris, append([]Record{paris}, remainders...), []Record{berlin})
				// Nothing of Paris at any point of view.
				for _, tx := range []time.Time{paris.RecordedAt, berlin.RecordedAt, f.clock.Now()} {
					for h := -72; h <= 72; h++ {
						recs, err := f.recallAll("ns", RecallRequest{ValidAt: ptr(t0.Add(time.Duration(h) * time.Hour)), TxAt: ptr(tx)})
						if err != nil {
							t.Fatal(err)
						}
						for _, r := range recs {
							if strings.Contains(string(r.Body), "Paris") {
								t.Fatalf("Paris is back: %+v", r)
							}
						}
					}
				}
				return
			}
			proof, err := f.forget("ns", berlin.ID)
			if err != nil {
				t.Fatal(err)
			}
			f.checkErased(proof, berlin, []Record{berlin}, append([]Record{paris}, remainders...))
		})
	}
}

// TestForgetRefusals: erased root (410), unknown root (404), malformed
// id (400), and a mandate that does not cover the root's namespace; none
// changes anything.
func TestForgetRefusals(t *testing.T) {
	f := newFixture(t, nil)
	a := f.mustRemember("ns", fact{subject: "s", body: "x"})
	gone := f.mustRemember("ns", fact{subject: "t", body: "y"})
	if _, err := f.forget("ns", gone.ID); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		root string
		tok  string
		code string
		want error
	}{
		{"erased", gone.ID, f.mandate("ns", nil), CodeErased, ErrErased},
		{"unknown", newID(), f.mandate("ns", nil), CodeNotFound, ErrNotFound},
		{"malformed", "mem_x", f.mandate("ns", nil), CodeInvalid, ErrInvalid},
		{"empty", "", f.mandate("ns", nil), CodeInvalid, ErrInvalid},
		{"another kind of id", "int_" + newID()[4:], f.mandate("ns", nil), CodeInvalid, ErrInvalid},
		{"another namespace", a.ID, f.mandate("other", nil), CodeRightMissing, ErrRightMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size, before := f.size(), f.snapshot("ns")
			_, err := f.svc.Forget(t.Context(), ForgetRequest{Mandate: tc.tok, RootID: tc.root, Rationale: "the person asked for it"}, f.op())
			if c, _ := code(err); !errors.Is(err, tc.want) || c != tc.code {
				t.Fatalf("err = %v (%s), want %s", err, c, tc.code)
			}
			if f.size() != size || f.snapshot("ns") != before {
				t.Fatal("a refused forget changed the store")
			}
		})
	}
}

// TestEdgeRefusals: an edge must name a live record of the namespace, so
// an edge to a record that does not exist yet — the only way to write a
// cycle — is refused, as are edges to erased records and malformed edges.
func TestEdgeRefusals(t *testing.T) {
	f := newFixture(t, nil)
	a := f.mustRemember("ns", fact{subject: "s", body: "x"})
	elsewhere := f.mustRemember("other", fact{subject: "s", body: "x"})
	gone := f.mustRemember("ns", fact{subject: "t", body: "y"})
	if _, err := f.forget("ns", gone.ID); err != nil {
		t.Fatal(err)
	}
	future := newID() // an id no record has yet: a cycle would need it
	for _, tc := range []struct {
		name   string
		x      fact
		want   error
		field  string
		nEdges int
	}{
		{"derived_from an unknown id", fact{edges: []Edge{{Type: EdgeDerivedFrom, To: future}}}, ErrNotFound, "edges[0].to", 0},
		{"cites an unknown id", fact{edges: []Edge{{Type: EdgeCites, To: a.ID}, {Type: EdgeCites, To: future}}}, ErrNotFound, "edges[1].to", 0},
		{"supersedes an unknown id", fact{edges: []Edge{{Type: EdgeSupersedes, To: future}}}, ErrNotFound, "edges[0].to", 0},
		{"a malformed id", fact{edges: []Edge{{Type: EdgeCites, To: "not an id"}}}, ErrNotFound, "edges[0].to", 0},
		{"derived_from an erased record", fact{edges: []Edge{{Type: EdgeDerivedFrom, To: gone.ID}}}, ErrErased, "edges[0].to", 0},
		{"another namespace", fact{edges: []Edge{{Type: EdgeCites, To: elsewhere.ID}}}, ErrInvalid, "edges[0].to", 0},
		{"an unknown type", fact{edges: []Edge{{Type: "reply_to", To: a.ID}}}, ErrInvalid, "edges[0].type", 0},
		{"twice", fact{edges: []Edge{{Type: EdgeCites, To: a.ID}, {Type: EdgeCites, To: a.ID}}}, ErrInvalid, "edges[1]", 0},
		{"a record source that does not exist", fact{source: Source{Kind: "record", Ref: future}}, ErrNotFound, "", 0},
		{"a record source that was erased", fact{source: Source{Kind: "record", Ref: gone.ID}}, ErrErased, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.x.subject, tc.x.body = "u", "refused"
			size, before := f.size(), f.snapshot("ns")
			_, err := f.remember("ns", tc.x)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			var me *Error
			if errors.As(err, &me) && tc.field != "" && me.ProblemExtensions()["field"] != tc.field {
				t.Fatalf("field %v, want %s", me.ProblemExtensions(), tc.field)
			}
			if f.size() != size || f.snapshot("ns") != before {
				t.Fatal("a refused remember changed the store")
			}
		})
	}
	// Too many edges.
	var many []Edge
	for i := 0; i <= MaxEdges; i++ {
		many = append(many, Edge{Type: EdgeCites, To: fmt.Sprintf("mem_%d", i)})
	}
	if _, err := f.remember("ns", fact{subject: "u", body: "x", edges: many}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("%d edges: %v", len(many), err)
	}
}

// TestForgetReplay: a replay of the remember that wrote an erased record
// answers memory.erased, not the record, and writes nothing; the key stays
// bound to the request.
func TestForgetReplay(t *testing.T) {
	f := newFixture(t, nil)
	a := f.mustRemember("ns", fact{subject: "s", body: "to forget", key: "k-erase"})
	proof, err := f.forget("ns", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	size := f.size()
	_, err = f.remember("ns", fact{subject: "s", body: "to forget", key: "k-erase"})
	if c, _ := code(err); !errors.Is(err, ErrErased) || c != CodeErased || !strings.Contains(err.Error(), fmt.Sprint(proof.Entry.Seq)) {
		t.Fatalf("replay of an erased record: %v", err)
	}
	if _, err := f.remember("ns", fact{subject: "s", body: "something else", key: "k-erase"}); !errors.Is(err, ErrIdempotencyReuse) {
		t.Fatalf("another request under the key: %v", err)
	}
	if f.size() != size {
		t.Fatal("the replay appended record entries")
	}
}

// TestForgetWithSealKey: with a seal key the stored body keys are sealed;
// erasure still removes them, and nothing readable remains.
func TestForgetWithSealKey(t *testing.T) {
	f := newFixture(t, &Options{SealKey: bytes.Repeat([]byte{7}, 32)})
	a := f.mustRemember("ns", fact{subject: "s", body: "sealed secret"})
	b := f.mustRemember("ns", fact{subject: "t", body: "derived secret", edges: []Edge{{Type: EdgeDerivedFrom, To: a.ID}}})
	if hits := f.rawContains([]byte(keyBody + a.ID)); len(hits) != 1 {
		t.Fatalf("the raw scan does not see the ciphertext: %q", hits)
	}
	if hits := f.rawContains([]byte("secret")); len(hits) != 0 {
		t.Fatalf("a body is stored in the clear under %q", hits)
	}
	proof, err := f.forget("ns", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	f.checkErased(proof, a, []Record{a, b}, nil)
}
