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
	var got []string
	cursor := ""
	for {
		page, err := keys.List(ctx, cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range page.Data {
			got = append(got, k.ID)
		}
		if !page.HasMore {
			break
		}
		cursor = *page.NextCursor
	}
	if strings.Join(got, ",") != strings.Join(created, ",") {
		t.Fatalf("listed %v, created %v", got, created)
	}
	if _, err := keys.List(ctx, "bogus!", 2); !errors.Is(err, ErrBadCursor) {
		t.Fatalf("bad cursor: %v", err)
	}
}
