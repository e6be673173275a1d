package httpserver

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store/memstore"
)

// testMemory is a real memory store over its own memstore and record, with
// one record remembered, and a mandate for allowAll's agent.
type memoryFixture struct {
	svc     *memory.Service
	mandate string
	root    memory.RecordArtifact // forget erases it
	kept    memory.RecordArtifact // verify checks it
}

func testMemory(t testing.TB) memoryFixture {
	t.Helper()
	st := memstore.New(nil)
	_, recKey, _ := ed25519.GenerateKey(nil)
	lg, err := audit.Open(t.Context(), st, recKey, &audit.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	opPub, opKey, _ := ed25519.GenerateKey(nil)
	mv, err := pay.NewMandateVerifier([]pay.OperatorKey{{KeyID: "op", Public: opPub}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := memory.New(memory.Options{Store: st, Log: lg, Mandates: mv, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	tok, err := memory.SignMandate(memory.MandateClaims{ID: "mm-routes", Agent: strings.Repeat("ab", 32),
		IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour), Namespace: "routes",
		CanRead: true, CanWrite: true, CanErase: true}, opKey, "op")
	if err != nil {
		t.Fatal(err)
	}
	f := memoryFixture{svc: svc, mandate: tok}
	for i, dst := range []*memory.RecordArtifact{&f.root, &f.kept} {
		r, err := svc.Remember(t.Context(), memory.Caller{}, memory.RememberRequest{Mandate: tok,
			IdempotencyKey: fmt.Sprintf("seed-%d", i), Namespace: "routes", Subject: fmt.Sprintf("s%d", i), Kind: "note",
			Body: json.RawMessage(`{"text":"the sky is blue"}`), ValidFrom: now.Add(-time.Hour),
			Source: memory.Source{Kind: "tool", Ref: "seed"}}, "req_seed")
		if err != nil {
			t.Fatal(err)
		}
		*dst = r.Artifact
	}
	return f
}

// memoryRouteCases are the happy paths of the memory operations.
func memoryRouteCases(t testing.TB, f memoryFixture) []routeCase {
	body := func(v map[string]any) string {
		v["mandate"] = f.mandate
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	kept, err := json.Marshal(f.kept)
	if err != nil {
		t.Fatal(err)
	}
	verify, _ := json.Marshal(map[string]any{"artifact": json.RawMessage(kept)})
	taint, _ := json.Marshal(map[string]any{"source": map[string]string{"kind": "url", "ref": "https://evil.example"}, "rationale": "routine check by ops"})
	holds := func(t *testing.T, b []byte) {
		var v memory.Verification
		if err := json.Unmarshal(b, &v); err != nil || !v.Holds || v.Records != 1 {
			t.Errorf("verification %s", b)
		}
	}
	return []routeCase{
		{op: "memory.remember", method: "POST", target: "/memory/remember", status: 201, media: contract.MediaJSON,
			body: body(map[string]any{"idempotencyKey": "r1", "namespace": "routes", "subject": "s9", "kind": "note",
				"body": map[string]any{"a": 1}, "validFrom": "2026-01-01T00:00:00Z", "source": map[string]string{"kind": "agent", "ref": "me"}})},
		{op: "memory.recall", method: "POST", target: "/memory/recall", status: 200, media: contract.MediaJSON,
			body: body(map[string]any{"namespace": "routes", "limit": 5})},
		{op: "memory.assemble", method: "POST", target: "/memory/assemble", status: 200, media: contract.MediaJSON,
			body: body(map[string]any{"namespace": "routes", "budget": map[string]int{"maxTokens": 200}, "query": "sky"})},
		{op: "memory.verify", method: "POST", target: "/memory/verify", status: 200, media: contract.MediaJSON,
			body: string(verify), check: holds},
		{op: "memory.forget", method: "POST", target: "/memory/forget", status: 200, media: contract.MediaJSON,
			body: body(map[string]any{"rootId": f.root.Record.ID, "rationale": "the person asked to be forgotten"})},
		{op: "memory.taint", method: "POST", target: "/memory/taint", status: 200, media: contract.MediaJSON, body: string(taint)},
	}
}
