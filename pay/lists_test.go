package pay

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/seqlist"
	"github.com/countersign/countersign/internal/seqlist/seqlisttest"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
)

// listFn reads one page of an operator's list as intent ids.
type listFn func(h *harness, cursor string, limit int) (ids []string, next *string, err error)

func heldIDs(h *harness, cursor string, limit int) ([]string, *string, error) {
	p, err := h.svc.Held(context.Background(), cursor, limit)
	var out []string
	for _, d := range p.Data {
		out = append(out, d.IntentID)
	}
	return out, p.NextCursor, err
}

// heldOfIDs reads the held list of the harness's agent key.
func heldOfIDs(h *harness, cursor string, limit int) ([]string, *string, error) {
	held, next, err := h.svc.HeldOf(context.Background(), h.caller.KeyID, cursor, limit)
	var out []string
	for _, in := range held {
		out = append(out, in.ID)
	}
	return out, next, err
}

func settlingIDs(h *harness, cursor string, limit int) ([]string, *string, error) {
	p, err := h.svc.Settling(context.Background(), cursor, limit)
	var out []string
	for _, d := range p.Data {
		out = append(out, d.ID)
	}
	return out, p.NextCursor, err
}

// listCases are the operator's lists, with how a payment gets onto each.
var listCases = []struct {
	name  string
	list  listFn
	minor int64         // a payment of this much goes onto the list
	rail  *fake.Options // the rail that keeps it there
	order string        // the list's order rows
}{
	{"held", heldIDs, 20_000, nil, keyHeldOrder},
	{"held of a key", heldOfIDs, 20_000, nil, keyHeldOrder},
	{"settling", settlingIDs, 1250, &fake.Options{Fault: func(fake.Op, any) error { return settle.ErrUnavailable }}, keySettlingOrder},
}

// onto pays so that the payment goes onto the list (held, or settling with
// its outcome unknown).
func onto(h *harness, key string, minor int64) error {
	_, err := h.pay(h.instruction(key, minor, nil))
	if errors.Is(err, ErrRailUnavailable) {
		return nil
	}
	return err
}

// readAll pages through a list, limit items at a time.
func readAll(t *testing.T, h *harness, list listFn, limit int) []string {
	t.Helper()
	return readFrom(t, h, list, "", limit)
}

// readFrom pages through a list from cursor, limit items at a time.
func readFrom(t *testing.T, h *harness, list listFn, cursor string, limit int) []string {
	t.Helper()
	var all []string
	for {
		ids, next, err := list(h, cursor, limit)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ids...)
		if next == nil {
			return all
		}
		cursor = *next
	}
}

// TestListsFollowCommitOrder: a payment whose id was minted first but
// whose transaction committed after an operator read a page is on the
// operator's next page, though its id sorts before the cursor's.
func TestListsFollowCommitOrder(t *testing.T) {
	for _, tc := range listCases {
		t.Run(tc.name, func(t *testing.T) {
			gate := &seqlisttest.Gate{}
			h := newHarness(t, harnessConfig{rail: tc.rail, wrap: func(st store.Store) store.Store {
				gate.Store = st
				return gate
			}})
			var page1 []string
			var cursor string
			gate.Later(t, func() error { return onto(h, "minted-first", tc.minor) }, func() {
				for _, k := range []string{"late-1", "late-2"} {
					if err := onto(h, k, tc.minor); err != nil {
						t.Fatal(err)
					}
				}
				ids, next, err := tc.list(h, "", 1)
				if err != nil || len(ids) != 1 || next == nil {
					t.Fatalf("page 1: %v %v %v", ids, next, err)
				}
				page1, cursor = ids, *next
			})
			rest := readFrom(t, h, tc.list, cursor, 1)
			if len(rest) != 2 {
				t.Fatalf("after the cursor: %v, want the other late one and the one minted first", rest)
			}
			if mintedFirst := rest[1]; !(mintedFirst < page1[0]) {
				t.Fatalf("%s committed last, %s first: want the one committed last to sort first by id", mintedFirst, page1[0])
			}
		})
	}
}

// TestListsMigrateLegacyLayout: a store written when the lists were sets
// keyed by id (pay/held/<id> → empty) is brought to the commit-order
// layout by the next service over it: its intents come first, by id, then
// every intent listed since; an intent that leaves the list before the
// migration ran leaves it cleanly.
func TestListsMigrateLegacyLayout(t *testing.T) {
	for _, tc := range listCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			h := newHarness(t, harnessConfig{rail: tc.rail})
			for _, k := range []string{"old-1", "old-2", "old-3"} {
				if err := onto(h, k, tc.minor); err != nil {
					t.Fatal(err)
				}
			}
			old := readAll(t, h, tc.list, 10)
			if len(old) != 3 {
				t.Fatalf("before: %v", old)
			}
			// Rewrite the store as the id-ordered code left it.
			list := heldList
			if tc.order == keySettlingOrder {
				list = settlingList
			}
			err := h.st.Update(ctx, func(txn store.Txn) error {
				for _, p := range []string{keyHeldOrder, keySettlingOrder} {
					if err := deleteUnder(txn, p); err != nil {
						return err
					}
				}
				for _, id := range old {
					if err := txn.Set([]byte(list.Member+id), nil); err != nil {
						return err
					}
				}
				return txn.Delete([]byte(keyListLayout))
			})
			if err != nil {
				t.Fatal(err)
			}
			h.svc = h.newService() // a restarted process
			if tc.order == keyHeldOrder {
				// One leaves the list before any list or reconcile
				// migrated it.
				// Read inside the transaction: the store may run the
				// function again, and expire changes the intent it gets.
				if err := h.log.Update(ctx, func(txn store.Txn) error {
					in, err := getIntent(txn, old[1])
					if err != nil {
						return err
					}
					return h.svc.expire(txn, in, "")
				}); err != nil {
					t.Fatal(err)
				}
				old = slices.Delete(old, 1, 2)
			}
			if err := onto(h, "new-1", tc.minor); err != nil {
				t.Fatal(err)
			}
			all := readAll(t, h, tc.list, 2)
			want := old // by id, as they were listed
			if len(all) != len(want)+1 || !slices.Equal(all[:len(want)], want) || slices.Contains(want, all[len(want)]) {
				t.Fatalf("after migration %v, want the legacy ones by id %v, then the new one", all, want)
			}
			for _, id := range want {
				if seq, ok, err := readSeq(h, list, id); err != nil || !ok || seq != 0 {
					t.Fatalf("legacy %s at seq %d (%v %v), want 0", id, seq, ok, err)
				}
			}
			// Once per store: a second service finds the marker.
			h.svc = h.newService()
			if again := readAll(t, h, tc.list, 100); !slices.Equal(again, all) {
				t.Fatalf("second open: %v, want %v", again, all)
			}
		})
	}
}

func readSeq(h *harness, list seqlist.Index, id string) (seq uint64, ok bool, err error) {
	err = h.st.View(context.Background(), func(r store.Reader) error {
		seq, ok, err = list.Seq(r, id)
		return err
	})
	return seq, ok, err
}

// TestListCursors: a cursor no page returned is refused.
func TestListCursors(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	for _, tc := range []struct{ name, cursor string }{
		{"not base64url", "!!"},
		{"an id-ordered cursor", "aW50XzAxSkFCQ0RFRkdISktNTlBRUlNUVldYWVow"}, // base64url("int_01JABCDEFGHJKMNPQRSTVWXYZ0")
		{"not an intent id", seqlist.Pos{Seq: 3, ID: "ak_01JABCDEFGHJKMNPQRSTVWXYZ0"}.Cursor()},
		{"too short", "AQ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, list := range listCases {
				if _, _, err := list.list(h, tc.cursor, 1); !errors.Is(err, audit.ErrBadCursor) {
					t.Errorf("%s: %v", list.name, err)
				}
			}
		})
	}
}
