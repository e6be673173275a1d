package protocol

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/countersign/countersign/internal/seqlist"
	"github.com/countersign/countersign/internal/seqlist/seqlisttest"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// TestListPageFollowsCommitOrder: in each list, an item put after a
// client took a cursor, whose id sorts before the cursor's, is on the
// client's next page. The items here are bare order rows: disputes,
// evidence and claims are minted inside their transactions, so one
// process cannot commit them out of id order through the API; two
// processes (a clock behind, or the same millisecond) can.
func TestListPageFollowsCommitOrder(t *testing.T) {
	for _, tc := range []struct {
		prefix, idPrefix string
	}{
		{disputesOf("ab"), "dsp_"},
		{evidenceOrder("obl_01JABCDEFGHJKMNPQRSTVWXYZ0"), "evd_"},
		{claimsOf("ak_01JABCDEFGHJKMNPQRSTVWXYZ0"), "clm_"},
		{obligationsOf("ak_01JABCDEFGHJKMNPQRSTVWXYZ0"), "obl_"},
	} {
		t.Run(tc.idPrefix, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			early, late := tc.idPrefix+"01JABCDEFGHJKMNPQRSTVWXYZ0", tc.idPrefix+"01JABCDEFGHJKMNPQRSTVWXYZ1"
			put := func(seq uint64, id string) {
				if err := h.st.Update(t.Context(), func(txn store.Txn) error {
					return txn.Set(seqlist.Key(tc.prefix, seq, id), nil)
				}); err != nil {
					t.Fatal(err)
				}
			}
			list := func(cursor string) ([]string, string) {
				t.Helper()
				got, next, err := listPage(t.Context(), h.svc, tc.prefix, tc.idPrefix, cursor, 1,
					func(_ store.Reader, id string) (string, bool, error) { return id, true, nil })
				if err != nil {
					t.Fatal(err)
				}
				return got, next
			}
			put(1000, late)
			put(1001, tc.idPrefix+"01JABCDEFGHJKMNPQRSTVWXYZ2")
			first, cursor := list("")
			if !slices.Equal(first, []string{late}) || cursor == "" {
				t.Fatalf("page 1: %v %q", first, cursor)
			}
			put(1002, early) // committed last, minted first
			var rest []string
			for cursor != "" {
				var page []string
				page, cursor = list(cursor)
				rest = append(rest, page...)
			}
			if want := []string{tc.idPrefix + "01JABCDEFGHJKMNPQRSTVWXYZ2", early}; !slices.Equal(rest, want) {
				t.Fatalf("after the cursor: %v, want %v", rest, want)
			}
			for _, bad := range []string{late, "!!", seqlist.Pos{Seq: 1, ID: "xyz_01JABCDEFGHJKMNPQRSTVWXYZ0"}.Cursor()} {
				if _, _, err := listPage(t.Context(), h.svc, tc.prefix, tc.idPrefix, bad, 1,
					func(_ store.Reader, id string) (string, bool, error) { return id, true, nil }); err != errBadCursor {
					t.Errorf("cursor %q: %v", bad, err)
				}
			}
		})
	}
}

// TestObligationListFollowsCommitOrder: an obligation's id is its
// intent's, minted before the deciding transaction, so one whose id was
// minted first can commit after a client read a page; it is on the
// client's next page, though its id sorts before the cursor's.
func TestObligationListFollowsCommitOrder(t *testing.T) {
	gate := &seqlisttest.Gate{Store: memstore.New(&memstore.Options{RetryRate: 0.05})}
	h := newHarness(t, harnessConfig{store: gate})
	ctx := t.Context()
	req := oblRequest(h, railCard, 1_000, ClassSelf, time.Hour, nil)
	var mintedFirst, page1, cursor string
	gate.Later(t, func() error {
		o, err := h.svc.ObligationCreate(ctx, h.call(), req)
		if err == nil {
			mintedFirst = o.ObligationID
		}
		return err
	}, func() {
		oblCreate(t, h, railCard, 2_000, ClassSelf)
		oblCreate(t, h, railCard, 3_000, ClassSelf)
		p, err := h.svc.ObligationList(ctx, h.call(), &ObligationListRequest{Limit: 1})
		if err != nil || len(p.Obligations) != 1 || p.NextCursor == "" {
			t.Fatalf("page 1: %+v %v", p, err)
		}
		page1, cursor = p.Obligations[0].ID, p.NextCursor
	})
	if !(mintedFirst < page1) {
		t.Fatalf("ids %s (minted first) and %s: want the first minted to sort first", mintedFirst, page1)
	}
	var rest []string
	for cursor != "" {
		p, err := h.svc.ObligationList(ctx, h.call(), &ObligationListRequest{Cursor: cursor, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range p.Obligations {
			rest = append(rest, o.ID)
		}
		cursor = p.NextCursor
	}
	if len(rest) != 2 || rest[1] != mintedFirst {
		t.Fatalf("after the cursor: %v, want the other late obligation, then %s", rest, mintedFirst)
	}
}

// TestListsMigrateLegacyLayout: a store written when the lists paged by id
// (index rows group/id) is brought to the order rows by the next process
// over it, each item at the first entry its object lists, so the lists
// read as they did; the old rows are gone (evidence keeps its by-subject
// rows, which the clearing reads), and items made since come after.
func TestListsMigrateLegacyLayout(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	insFundPool(t, h, 9_000)
	for range 2 {
		o := oblCleared(t, h, railWire, 2_000)
		p := insBind(t, h, o.ObligationID, 1_000)
		d := dspOpen(t, h, o.ObligationID, 0)
		if _, err := h.svc.ClaimFile(ctx, h.call(), &ClaimFileRequest{PolicyID: p.ID, DisputeID: d.ID, AmountMinor: 100}); err != nil {
			t.Fatal(err)
		}
	}
	subject := oblCreate(t, h, railCard, 1_000, ClassSelf).ObligationID
	oblMustSubmit(t, h, subject, ClassWit, "part 1")
	oblMustSubmit(t, h, subject, ClassSelf, "part 2")

	type lists struct{ disputes, claims, obligations, evidence []string }
	read := func() lists {
		t.Helper()
		var l lists
		for cursor := "first"; cursor != ""; {
			p, err := h.svc.DisputeList(ctx, h.call(), &DisputeListRequest{Cursor: strings.TrimPrefix(cursor, "first"), Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range p.Disputes {
				l.disputes = append(l.disputes, d.ID)
			}
			cursor = p.NextCursor
		}
		for cursor := "first"; cursor != ""; {
			p, err := h.svc.ClaimList(ctx, h.call(), &ClaimListRequest{Cursor: strings.TrimPrefix(cursor, "first"), Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range p.Claims {
				l.claims = append(l.claims, c.ID)
			}
			cursor = p.NextCursor
		}
		for cursor := "first"; cursor != ""; {
			p, err := h.svc.ObligationList(ctx, h.call(), &ObligationListRequest{Cursor: strings.TrimPrefix(cursor, "first"), Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range p.Obligations {
				l.obligations = append(l.obligations, o.ID)
			}
			cursor = p.NextCursor
		}
		for cursor := "first"; cursor != ""; {
			p, err := h.svc.EvidenceList(ctx, h.call(), &EvidenceListRequest{Subject: subject, Cursor: strings.TrimPrefix(cursor, "first"), Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range p.Evidence {
				l.evidence = append(l.evidence, e.ID)
			}
			cursor = p.NextCursor
		}
		return l
	}
	before := read()
	if len(before.disputes) != 2 || len(before.claims) != 2 || len(before.obligations) != 3 || len(before.evidence) != 2 {
		t.Fatalf("before: %+v", before)
	}

	// Rewrite the store as the id-ordered code left it.
	err := h.st.Update(ctx, func(txn store.Txn) error {
		for _, m := range []struct{ from, to string }{
			{keyDisputesOf, "protocol/dispute-by-agent/"},
			{keyClaimsOf, "protocol/claims-by-key/"},
			{keyObligationsOf, "protocol/obl-by-key/"},
			{keyEvidenceOrder, ""}, // only the by-subject rows were there
		} {
			rows, err := rowsUnder(txn, m.from)
			if err != nil {
				return err
			}
			for _, r := range rows {
				if err := txn.Delete([]byte(r.key)); err != nil {
					return err
				}
				if m.to == "" {
					continue
				}
				rest := r.key[len(m.from):]
				i := strings.IndexByte(rest, '/') + 1
				p, ok := seqlist.Split(m.from+rest[:i], []byte(r.key))
				if !ok {
					t.Fatalf("order row %q", r.key)
				}
				if err := txn.Set([]byte(m.to+rest[:i]+p.ID), []byte(r.value)); err != nil {
					return err
				}
			}
		}
		return txn.Delete([]byte(keyListLayout))
	})
	if err != nil {
		t.Fatal(err)
	}

	h.restart() // a process of this version over that store
	if got := read(); !cmp.Equal(got, before, cmp.AllowUnexported(lists{})) {
		t.Fatalf("after migration %+v, want %+v", got, before)
	}
	err = h.st.View(ctx, func(r store.Reader) error {
		for _, old := range []string{"protocol/dispute-by-agent/", "protocol/claims-by-key/", "protocol/obl-by-key/"} {
			if rows, err := rowsUnder(r, old); err != nil || len(rows) != 0 {
				t.Errorf("left under %s: %v %v", old, rows, err)
			}
		}
		if rows, err := rowsUnder(r, string(evidenceBySubject(subject))); err != nil || len(rows) != 2 {
			t.Errorf("evidence by subject: %v %v", rows, err)
		}
		_, err := r.Get([]byte(keyListLayout))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	o := oblCreate(t, h, railCard, 1_000, ClassSelf)
	if got := read().obligations; !slices.Equal(got, append(before.obligations, o.ObligationID)) {
		t.Fatalf("a new obligation: %v, want it last after %v", got, before.obligations)
	}
}

type storeRow struct{ key, value string }

func rowsUnder(r store.Reader, prefix string) ([]storeRow, error) {
	var out []storeRow
	it := r.Iterate([]byte(prefix), store.PrefixEnd([]byte(prefix)), false)
	for it.Next() {
		out = append(out, storeRow{string(it.Key()), string(it.Value())})
	}
	return out, it.Close()
}
