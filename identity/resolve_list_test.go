package identity

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"slices"
	"testing"

	"github.com/countersign/countersign/store"
)

// partyIDs pages through the registry from cursor, limit at a time.
func partyIDs(t *testing.T, d *deployment, cursor string, limit int) []string {
	t.Helper()
	var out []string
	for {
		p, err := d.svc.Counterparties(t.Context(), cursor, limit)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Data {
			out = append(out, r.ID)
		}
		if p.NextCursor == nil {
			return out
		}
		cursor = *p.NextCursor
	}
}

func register(t *testing.T, d *deployment, id string, key byte) {
	t.Helper()
	reg := Registration{ID: id, BaseURL: "https://" + id + ".example", AgentID: DIDKey(ed25519.PublicKey(bytes.Repeat([]byte{key}, 32)))}
	if _, err := d.svc.Register(t.Context(), reg, OperatorCall{Operator: "op", Rationale: "a partner"}); err != nil {
		t.Fatal(err)
	}
}

// TestCounterpartiesFollowCommitOrder: a counterparty registered after a
// client read a page is on the client's next page, though its id sorts
// before the cursor's (registry ids are chosen by the operator, so any
// order of ids can commit in any order).
func TestCounterpartiesFollowCommitOrder(t *testing.T) {
	d := newDeployment(t, nil)
	register(t, d, "peer-m", 1)
	register(t, d, "peer-z", 2)
	p, err := d.svc.Counterparties(t.Context(), "", 1)
	if err != nil || len(p.Data) != 1 || p.Data[0].ID != "peer-m" || p.NextCursor == nil {
		t.Fatalf("page 1: %+v %v", p, err)
	}
	register(t, d, "peer-a", 3)
	if rest := partyIDs(t, d, *p.NextCursor, 1); !slices.Equal(rest, []string{"peer-z", "peer-a"}) {
		t.Fatalf("after the cursor: %v, want peer-z, then peer-a (registered last)", rest)
	}
}

// TestCounterpartiesMigrateLegacyLayout: registrations stored when the
// registry paged by id (no order rows) are listed at the AuditSeq they
// keep, those stored before it was kept (0) first, by id; registrations
// made since follow.
func TestCounterpartiesMigrateLegacyLayout(t *testing.T) {
	d := newDeployment(t, nil)
	register(t, d, "peer-c", 1)
	register(t, d, "peer-b", 2)
	err := d.st.Update(t.Context(), func(txn store.Txn) error {
		var rows [][]byte
		it := txn.Iterate([]byte(keyPartyOrder), store.PrefixEnd([]byte(keyPartyOrder)), false)
		for it.Next() {
			rows = append(rows, append([]byte(nil), it.Key()...))
		}
		if err := it.Close(); err != nil {
			return err
		}
		for _, k := range append(rows, []byte(keyPartyLayout)) {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		// Two registered before AuditSeq was kept.
		for _, id := range []string{"peer-y", "peer-x"} {
			b, err := json.Marshal(Registration{ID: id, Kind: "agent", BaseURL: "https://" + id + ".example",
				AgentID: DIDKey(ed25519.PublicKey(bytes.Repeat([]byte{id[5]}, 32)))})
			if err != nil {
				return err
			}
			if err := txn.Set([]byte(keyParty+id), b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	register(t, d, "peer-a", 3)
	want := []string{"peer-x", "peer-y", "peer-c", "peer-b", "peer-a"}
	for range 2 {
		if got := partyIDs(t, d, "", 2); !slices.Equal(got, want) {
			t.Fatalf("after migration %v, want %v", got, want)
		}
	}
}
