package webhook

import (
	"context"
	"slices"
	"testing"

	"github.com/countersign/countersign/internal/seqlist/seqlisttest"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// listAll pages through eps's endpoints from cursor, limit at a time.
func listAll(t *testing.T, eps *Endpoints, cursor string, limit int) []string {
	t.Helper()
	var out []string
	for {
		p, err := eps.List(context.Background(), cursor, limit)
		if err != nil {
			t.Fatal(err)
		}
		for _, ep := range p.Data {
			out = append(out, ep.ID)
		}
		if p.NextCursor == nil {
			return out
		}
		cursor = *p.NextCursor
	}
}

// TestListFollowsCommitOrder: an endpoint whose id was minted first but
// whose creation committed after a client read a page is on the client's
// next page, though its id sorts before the cursor's.
func TestListFollowsCommitOrder(t *testing.T) {
	ctx := context.Background()
	gate := &seqlisttest.Gate{Store: memstore.New(&memstore.Options{RetryRate: 0.2})}
	e := newEnv(t, envOptions{st: gate})
	var mintedFirst, page1, cursor string
	gate.Later(t, func() error {
		c, err := e.eps.Create(ctx, CreateRequest{URL: "https://a.example/hook", Events: []string{"*"}}, operator, "", "first")
		mintedFirst = c.ID
		return err
	}, func() {
		e.create("https://b.example/hook", "*")
		e.create("https://c.example/hook", "*")
		p, err := e.eps.List(ctx, "", 1)
		if err != nil || len(p.Data) != 1 || p.NextCursor == nil {
			t.Fatalf("page 1: %+v %v", p, err)
		}
		page1, cursor = p.Data[0].ID, *p.NextCursor
	})
	if !(mintedFirst < page1) {
		t.Fatalf("ids %s (minted first) and %s: want the first minted to sort first", mintedFirst, page1)
	}
	if rest := listAll(t, e.eps, cursor, 1); len(rest) != 2 || rest[1] != mintedFirst {
		t.Fatalf("after the cursor: %v, want the other late endpoint, then %s", rest, mintedFirst)
	}
}

// TestListMigratesLegacyLayout: endpoints stored when List paged by id
// (no order rows) are listed by the next Endpoints over the store at their
// CreatedSeq (0 for one stored before the record kept it), tombstones
// left out; endpoints created since follow, and a migrated endpoint that
// is deleted leaves the list.
func TestListMigratesLegacyLayout(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, envOptions{})
	var ids []string
	for _, u := range []string{"https://a.example/h", "https://b.example/h", "https://c.example/h", "https://d.example/h"} {
		ids = append(ids, e.create(u, "*").ID)
	}
	if err := e.eps.Delete(ctx, ids[3], operator, "", "gone"); err != nil {
		t.Fatal(err)
	}
	// Rewrite the store as the id-ordered code left it; ids[2] predates
	// CreatedSeq.
	err := e.st.Update(ctx, func(txn store.Txn) error {
		var rows [][]byte
		it := txn.Iterate([]byte(endpointOrder), store.PrefixEnd([]byte(endpointOrder)), false)
		for it.Next() {
			rows = append(rows, append([]byte(nil), it.Key()...))
		}
		if err := it.Close(); err != nil {
			return err
		}
		for _, k := range append(rows, []byte(endpointLayout)) {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		se, err := getEndpoint(txn, ids[2])
		if err != nil {
			return err
		}
		se.CreatedSeq = 0
		return putEndpoint(txn, &se)
	})
	if err != nil {
		t.Fatal(err)
	}

	eps, err := NewEndpoints(e.st, e.log, &Options{SealKey: testSealKey(), AllowLoopbackHTTP: true, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	c, err := eps.Create(ctx, CreateRequest{URL: "https://e.example/h", Events: []string{"*"}}, operator, "", "new")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{ids[2], ids[0], ids[1], c.ID}
	if got := listAll(t, eps, "", 2); !slices.Equal(got, want) {
		t.Fatalf("after migration %v, want %v", got, want)
	}
	if err := eps.Delete(ctx, ids[2], operator, "", "gone too"); err != nil {
		t.Fatal(err)
	}
	if got := listAll(t, eps, "", 100); !slices.Equal(got, want[1:]) {
		t.Fatalf("after deleting a migrated endpoint %v, want %v", got, want[1:])
	}
}
