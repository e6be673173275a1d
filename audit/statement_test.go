package audit_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/gowebpki/jcs"
)

func TestStatements(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	lg, err := audit.Open(t.Context(), memstore.New(nil), key, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := sha256.Sum256([]byte("an artifact"))
	sig, err := lg.SignStatement("memory.page", d)
	if err != nil {
		t.Fatal(err)
	}
	vk := lg.VerifierKey()
	if err := audit.VerifyStatement(vk, "memory.page", d, sig); err != nil {
		t.Fatalf("a statement does not verify: %v", err)
	}
	other := sha256.Sum256([]byte("another artifact"))
	_, otherKey, _ := ed25519.GenerateKey(nil)
	otherLog, _ := audit.Open(t.Context(), memstore.New(nil), otherKey, nil)
	for name, check := range map[string]error{
		"another purpose": audit.VerifyStatement(vk, "memory.context", d, sig),
		"another digest":  audit.VerifyStatement(vk, "memory.page", other, sig),
		"another key":     audit.VerifyStatement(otherLog.VerifierKey(), "memory.page", d, sig),
		"not base64":      audit.VerifyStatement(vk, "memory.page", d, "!!"),
	} {
		if !errors.Is(check, audit.ErrTampered) {
			t.Errorf("%s: %v, want ErrTampered", name, check)
		}
	}
	for _, bad := range []string{"", "has space", string(make([]byte, audit.MaxStatementPurpose+1))} {
		if _, err := lg.SignStatement(bad, d); err == nil {
			t.Errorf("purpose %q accepted", bad)
		}
	}
	// An entry's signature covers its 32 hash bytes alone; it never passes
	// for a statement, whatever the purpose.
	var e audit.Entry
	err = lg.Update(t.Context(), func(txn store.Txn) error {
		var err error
		e, err = lg.Append(txn, audit.Record{Type: "test.entry", Actor: audit.Actor{Kind: "system", ID: "t"}, Signed: true})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.VerifyEntry(vk, e); err != nil {
		t.Fatalf("a fresh entry does not verify: %v", err)
	}
	// An entry appended without Signed has no signature of its own: the
	// checkpoint covers it, and VerifyEntry says so.
	var plain audit.Entry
	err = lg.Update(t.Context(), func(txn store.Txn) error {
		var err error
		plain, err = lg.Append(txn, audit.Record{Type: "test.entry", Actor: audit.Actor{Kind: "system", ID: "t"}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.VerifyEntry(vk, plain); plain.Sig != "" || !errors.Is(err, audit.ErrNoSignature) {
		t.Fatalf("an entry without Signed: sig %q, VerifyEntry %v; want none and ErrNoSignature", plain.Sig, err)
	}
	raw, _ := hex.DecodeString(e.Hash)
	var h [32]byte
	copy(h[:], raw)
	if err := audit.VerifyStatement(vk, "test.entry", h, e.Sig); err == nil {
		t.Fatal("an entry signature verified as a statement")
	}
	e.Type = "test.other"
	if err := audit.VerifyEntry(vk, e); !errors.Is(err, audit.ErrTampered) {
		t.Fatalf("a changed entry: %v", err)
	}
}

// A statement signs an artifact the deployment hands out (a memory page,
// say) with the record key; anyone holding the verifier key checks it.
func ExampleLog_SignStatement() {
	_, key, _ := ed25519.GenerateKey(nil)
	lg, _ := audit.Open(context.Background(), memstore.New(nil), key, nil)
	digest := sha256.Sum256([]byte(`{"type":"memory.page","data":[]}`))
	sig, _ := lg.SignStatement("memory.page", digest)
	fmt.Println(audit.VerifyStatement(lg.VerifierKey(), "memory.page", digest, sig) == nil)
	fmt.Println(audit.VerifyStatement(lg.VerifierKey(), "memory.record", digest, sig) == nil)
	// Output:
	// true
	// false
}

// VerifyEntry checks one entry signed on its own (Record.Signed) with the
// verifier key alone: its hash and its signature (not its place in the
// log: see VerifyInclusion, which verifies every entry).
func ExampleVerifyEntry() {
	_, key, _ := ed25519.GenerateKey(nil)
	lg, _ := audit.Open(context.Background(), memstore.New(nil), key, nil)
	var e audit.Entry
	_ = lg.Update(context.Background(), func(txn store.Txn) error {
		var err error
		e, err = lg.Append(txn, audit.Record{Type: "memory.recorded", Actor: audit.Actor{Kind: "agent", ID: "ak_1"}, Signed: true})
		return err
	})
	fmt.Println(audit.VerifyEntry(lg.VerifierKey(), e) == nil)
	e.Actor.ID = "ak_2"
	fmt.Println(audit.VerifyEntry(lg.VerifierKey(), e) == nil)
	// Output:
	// true
	// false
}

// AppendCanonical writes a served entry's RFC 8785 form directly, for
// artifacts that embed entries and are signed over their canonical bytes;
// it equals what a general canonicaliser makes of the entry's JSON.
func ExampleAppendCanonical() {
	_, key, _ := ed25519.GenerateKey(nil)
	lg, _ := audit.Open(context.Background(), memstore.New(nil), key, nil)
	var e audit.Entry
	_ = lg.Update(context.Background(), func(txn store.Txn) error {
		var err error
		e, err = lg.Append(txn, audit.Record{Type: "memory.recorded", Actor: audit.Actor{Kind: "agent", ID: "ak_1"},
			Data: json.RawMessage(`{"namespace":"a<b","id":"mem_1"}`)})
		return err
	})
	direct, _ := audit.AppendCanonical(nil, &e)
	raw, _ := json.Marshal(e) // escapes '<' as \u003c
	general, _ := jcs.Transform(raw)
	fmt.Println(bytes.Equal(direct, general))
	// Output:
	// true
}
