package identity

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
)

func TestSignRevocation(t *testing.T) {
	f := loadInterop(t)
	key := interopKey(t, f)
	want := f.Revocations[0].Record
	got, err := SignRevocation(key, want.ID, want.Reason, mustTime(t, want.RevokedAt))
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("SignRevocation = %+v, want the fixture's %+v", got, want)
	}
	for name, edit := range map[string]func(*SignedRevocation){
		"id":         func(r *SignedRevocation) { r.ID = "disc_other" },
		"revokedAt":  func(r *SignedRevocation) { r.RevokedAt = "2026-06-24T12:30:00.001Z" },
		"public key": func(r *SignedRevocation) { r.PublicKey = adpHex(adpKey(50)) },
	} {
		r := got
		edit(&r)
		if err := VerifyRevocation(r); !errors.Is(err, ErrInvalidSignature) {
			t.Errorf("%s edited: %v, want ErrInvalidSignature", name, err)
		}
	}
	for name, edit := range map[string]func(*SignedRevocation){
		"short key":       func(r *SignedRevocation) { r.PublicKey = r.PublicKey[:10] },
		"short signature": func(r *SignedRevocation) { r.Signature = r.Signature[:10] },
		"bad utf-8":       func(r *SignedRevocation) { r.Reason = "\xff" },
	} {
		r := got
		edit(&r)
		if err := VerifyRevocation(r); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	if _, err := SignRevocation(key[:4], "x", "y", adpNow); err == nil {
		t.Error("short key accepted")
	}
}

func TestRevocationList(t *testing.T) {
	var l RevocationList
	if l.IsRevoked("a") || l.Status("a").Revoked {
		t.Fatal("zero list revokes")
	}
	l.Revoke("disc_1", "superseded", adpNow)
	l.Revoke("agent_1", "key compromised", adpNow)
	l.Revoke("disc_1", "withdrawn", adpNow) // replaces, keeps its place
	if !l.IsRevoked("disc_1") || l.IsRevoked("disc_2") {
		t.Error("IsRevoked")
	}
	if s := l.Status("disc_1"); s != (RevocationStatus{Revoked: true, Reason: "withdrawn", RevokedAt: "2026-06-24T12:30:00.000Z"}) {
		t.Errorf("status %+v", s)
	}
	b, err := json.Marshal(&l)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"id":"disc_1","reason":"withdrawn","revokedAt":"2026-06-24T12:30:00.000Z"},` +
		`{"id":"agent_1","reason":"key compromised","revokedAt":"2026-06-24T12:30:00.000Z"}]`
	if string(b) != want {
		t.Errorf("JSON %s\nwant %s", b, want)
	}
	var back RevocationList
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(back.Entries()) != fmt.Sprint(l.Entries()) {
		t.Errorf("round trip %v", back.Entries())
	}
	for _, bad := range []string{`{}`, `[1]`, `[{"id":"a"}]`, `[{"id":"a","reason":"r","revokedAt":"t","x":1}]`,
		`[{"id":1,"reason":"r","revokedAt":"t"}]`, `[{"id":"a","id":"b","reason":"r","revokedAt":"t"}]`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("Unmarshal(%s) succeeded", bad)
		}
	}
	if len(back.Entries()) != 2 {
		t.Error("a failed Unmarshal changed the list")
	}
	// A list plugs into a policy as the revocation oracle.
	key := adpKey(51)
	l.Revoke(DIDKey(adpPub(key)), "retired", adpNow)
	d := Verify(adpSigned(t, key, nil), Policy{Now: adpNow, IsRevoked: l.IsRevoked})
	if d.Outcome != OutcomeRefuse || d.Failed[0] != CheckRevocation {
		t.Errorf("revoked agent: %+v", d.Checks)
	}
}

func TestRevocationListConcurrent(t *testing.T) {
	var l RevocationList
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				id := fmt.Sprintf("id-%d-%d", i, j)
				l.Revoke(id, "r", adpNow)
				if !l.IsRevoked(id) {
					t.Errorf("%s not revoked", id)
				}
				_ = l.Status(id)
			}
		})
	}
	wg.Wait()
	if len(l.Entries()) != 800 {
		t.Errorf("%d entries", len(l.Entries()))
	}
}
