package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/seqlist/seqlisttest"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

var operator = audit.Actor{Kind: "operator", ID: "op-test"}

func newKeys(t *testing.T) (*Keys, *audit.Log, store.Store) {
	t.Helper()
	st := &memstore.Store{}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	lg, err := audit.Open(t.Context(), st, priv, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	return New(st, lg, &Options{Now: func() time.Time { return now }}), lg, st
}

func agentID(t *testing.T) string {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(pub)
}

func TestCreateAuthenticateRevoke(t *testing.T) {
	ctx := context.Background()
	keys, lg, _ := newKeys(t)
	agent := agentID(t)
	iss, err := keys.Create(ctx, CreateRequest{Name: "billing bot", AgentIDs: []string{agent}}, operator, "req_1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(iss.Credential, "svc_ak_") {
		t.Fatalf("credential %q lacks prefix", iss.Credential)
	}
	k, err := keys.Authenticate(ctx, iss.Credential)
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	if k.ID != iss.ID || !k.MayActFor(agent) || k.MayActFor(agentID(t)) {
		t.Fatalf("key %+v", k)
	}

	// The record notes the issuance but never holds the secret.
	page, err := lg.Page(ctx, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, _ := ParseCredential(iss.Credential)
	found := false
	for _, e := range page.Data {
		if strings.Contains(string(e.Data), secret) {
			t.Fatal("record entry contains the secret")
		}
		found = found || e.Type == "agent.created"
	}
	if !found {
		t.Fatal("no agent.created entry")
	}

	if _, err := keys.Revoke(ctx, iss.ID, operator, "req_2", "rotating credentials"); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Authenticate(ctx, iss.Credential); !errors.Is(err, ErrInvalid) {
		t.Fatalf("revoked key: %v, want ErrInvalid", err)
	}
	if _, err := keys.Revoke(ctx, "ak_01JABCDEFGHJKMNPQRSTVWXYZ0", operator, "", "no such key here"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoke unknown: %v", err)
	}
}

func TestAuthenticateRefuses(t *testing.T) {
	ctx := context.Background()
	keys, _, _ := newKeys(t)
	iss, err := keys.Create(ctx, CreateRequest{Name: "a", AgentIDs: []string{agentID(t)}}, operator, "")
	if err != nil {
		t.Fatal(err)
	}
	wrongSecret := iss.Credential[:len(iss.Credential)-2] + "AA"
	if wrongSecret == iss.Credential {
		wrongSecret = iss.Credential[:len(iss.Credential)-2] + "BB"
	}
	for _, tc := range []struct {
		name, cred string
		want       error
	}{
		{"empty", "", ErrMissing},
		{"garbage", "hello", ErrInvalid},
		{"no secret", "svc_" + iss.ID + "_", ErrInvalid},
		{"wrong secret", wrongSecret, ErrInvalid},
		{"unknown id", "svc_ak_01JABCDEFGHJKMNPQRSTVWXYZ0_" + strings.Repeat("A", 43), ErrInvalid},
		{"bad ulid", "svc_ak_0000000000000000000000000U_" + strings.Repeat("A", 43), ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := keys.Authenticate(ctx, tc.cred)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			var c interface{ Code() string }
			if !errors.As(err, &c) || c.Code() == "" {
				t.Fatalf("error %v carries no code", err)
			}
		})
	}
}

func TestCreateValidates(t *testing.T) {
	keys, _, _ := newKeys(t)
	good := agentID(t)
	for name, req := range map[string]CreateRequest{
		"no name":       {AgentIDs: []string{good}},
		"no agents":     {Name: "x"},
		"upper hex":     {Name: "x", AgentIDs: []string{strings.ToUpper(good)}},
		"short agent":   {Name: "x", AgentIDs: []string{good[:10]}},
		"bad jkt":       {Name: "x", AgentIDs: []string{good}, JKT: "not-a-thumbprint"},
		"blank name":    {Name: "   ", AgentIDs: []string{good}},
		"too long name": {Name: strings.Repeat("n", 101), AgentIDs: []string{good}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := keys.Create(context.Background(), req, operator, ""); !errors.Is(err, ErrBadRequest) {
				t.Fatalf("got %v, want ErrBadRequest", err)
			}
		})
	}
}

func TestList(t *testing.T) {
	ctx := context.Background()
	keys, _, _ := newKeys(t)
	var created []string
	for i := range 5 {
		iss, err := keys.Create(ctx, CreateRequest{Name: "k" + string(rune('a'+i)), AgentIDs: []string{agentID(t)}}, operator, "")
		if err != nil {
			t.Fatal(err)
		}
		created = append(created, iss.ID)
	}
	got := listAll(t, keys)
	if strings.Join(got, ",") != strings.Join(created, ",") {
		t.Fatalf("listed %v, created %v", got, created)
	}
	for _, bad := range []string{"bogus!", "YWtfMDFKQUJDREVGR0hKS01OUFFSU1RWV1hZWjA" /* an id-ordered cursor */, "AQAAAAAAAAABaW50XzAxSkFCQ0RFRkdISktNTlBRUlNUVldYWVow" /* an intent id */} {
		if _, err := keys.List(ctx, bad, 2); !errors.Is(err, ErrBadCursor) {
			t.Fatalf("bad cursor %q: %v", bad, err)
		}
	}
}

// TestListFollowsCommitOrder: a key whose id was minted first but whose
// creation committed after a client read a page is on the client's next
// page, though its id sorts before the cursor's.
func TestListFollowsCommitOrder(t *testing.T) {
	ctx := context.Background()
	gate := &seqlisttest.Gate{Store: &memstore.Store{}}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	lg, err := audit.Open(ctx, gate, priv, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := New(gate, lg, nil)
	create := func(name string) (string, error) {
		iss, err := keys.Create(ctx, CreateRequest{Name: name, AgentIDs: []string{agentID(t)}}, operator, "")
		return iss.ID, err
	}
	var mintedFirst, page1 string
	var cursor string
	gate.Later(t, func() (err error) { mintedFirst, err = create("minted first"); return err }, func() {
		for _, name := range []string{"late 1", "late 2"} {
			if _, err := create(name); err != nil {
				t.Fatal(err)
			}
		}
		page, err := keys.List(ctx, "", 1)
		if err != nil || len(page.Data) != 1 || page.NextCursor == nil {
			t.Fatalf("page 1: %+v %v", page, err)
		}
		page1, cursor = page.Data[0].ID, *page.NextCursor
	})
	if !(mintedFirst < page1) {
		t.Fatalf("ids %s (minted first) and %s: want the first minted to sort first", mintedFirst, page1)
	}
	var rest []string
	for cursor != "" {
		page, err := keys.List(ctx, cursor, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range page.Data {
			rest = append(rest, k.ID)
		}
		cursor = ""
		if page.NextCursor != nil {
			cursor = *page.NextCursor
		}
	}
	if len(rest) != 2 || rest[1] != mintedFirst {
		t.Fatalf("after the cursor: %v, want the other late key, then %s", rest, mintedFirst)
	}
}

// TestListMigratesLegacyLayout: keys stored when List paged by id (no
// order rows, no listSeq) come first, by id, in a store opened since;
// then the keys created since, in commit order.
func TestListMigratesLegacyLayout(t *testing.T) {
	ctx := context.Background()
	keys, _, st := newKeys(t)
	legacy := []string{"ak_01JABCDEFGHJKMNPQRSTVWXYZ1", "ak_01JABCDEFGHJKMNPQRSTVWXYZ0"}
	err := st.Update(ctx, func(txn store.Txn) error {
		for _, id := range legacy {
			// As the id-ordered code stored it.
			b := `{"id":"` + id + `","name":"old","agentIds":["` + agentID(t) + `"],"createdAt":"2025-01-01T00:00:00Z","secretHash":"00"}`
			if err := txn.Set([]byte(keyPrefix+id), []byte(b)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	iss, err := keys.Create(ctx, CreateRequest{Name: "new", AgentIDs: []string{agentID(t)}}, operator, "")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // and once is enough: the second List finds the marker
		got := listAll(t, keys)
		if want := []string{legacy[1], legacy[0], iss.ID}; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("listed %v, want %v", got, want)
		}
	}
	// A revoked legacy key keeps its place.
	if _, err := keys.Revoke(ctx, legacy[0], operator, "", "gone"); err != nil {
		t.Fatal(err)
	}
	page, err := keys.List(ctx, "", 100)
	if err != nil || len(page.Data) != 3 || page.Data[1].ID != legacy[0] || page.Data[1].RevokedAt == nil {
		t.Fatalf("after revoke: %+v %v", page, err)
	}
}

// listAll pages through every key, two a page, and returns their ids.
func listAll(t *testing.T, keys *Keys) []string {
	t.Helper()
	var got []string
	cursor := ""
	for {
		page, err := keys.List(t.Context(), cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range page.Data {
			got = append(got, k.ID)
		}
		if !page.HasMore {
			return got
		}
		cursor = *page.NextCursor
	}
}
