package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSandboxMemory walks the README's memory story over HTTP with the
// CLI: remember, supersede, recall now and as of a past moment, assemble,
// verify offline, erase as the operator, and check the erasure proof and
// that the fact is gone.
func TestSandboxMemory(t *testing.T) {
	dir := t.TempDir()
	base, stop := startServe(t, dir, "--sandbox-latency", "off")
	defer stop()
	sandbox := filepath.Join(dir, "sandbox")
	work := t.TempDir()
	cli := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	agent := []string{"--url", base, "--credential", filepath.Join(sandbox, "agent-credential.txt"),
		"--mandate", filepath.Join(sandbox, "memory-mandate.jws"), "--namespace", "demo"}
	mem := func(cmd string, extra ...string) (int, string) {
		return cli(append(append([]string{"memory", cmd}, agent...), extra...)...)
	}
	fact := filepath.Join(work, "fact.json")
	if code, out := mem("remember", "--subject", "user:ada", "--kind", "home", "--body", "Paris",
		"--valid-from", "2025-01-01T00:00:00Z", "--out", fact); code != 0 || !strings.HasPrefix(out, "201 Created") {
		t.Fatalf("remember: exit %d\n%s", code, out)
	}
	// What the store knew right when it learned of Paris.
	before := regexp.MustCompile(`"recordedAt":"([^"]+)"`).FindStringSubmatch(readFile(t, fact))[1]
	if code, out := mem("remember", "--subject", "user:ada", "--kind", "home", "--body", "Lyon",
		"--valid-from", "2026-06-01T00:00:00Z"); code != 0 {
		t.Fatalf("remember again: exit %d\n%s", code, out)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"now", nil, `"Lyon"`},
		{"as known before the move", []string{"--tx-at", before}, `"Paris"`},
		{"valid in January, as known now", []string{"--valid-at", "2026-01-15T00:00:00Z"}, `"Paris"`},
	} {
		code, out := mem("recall", append([]string{"--subject", "user:ada"}, tc.args...)...)
		if code != 0 || !strings.Contains(out, `"body": `+tc.want) || strings.Count(out, `"body": `) != 1 {
			t.Errorf("recall %s: exit %d, want one record with body %s\n%s", tc.name, code, tc.want, out)
		}
	}
	ctxFile := filepath.Join(work, "context.json")
	if code, out := mem("assemble", "--max-tokens", "200", "--query", "where is ada's home", "--out", ctxFile); code != 0 ||
		!strings.Contains(out, `"abstained": false`) {
		t.Fatalf("assemble: exit %d\n%s", code, out)
	}
	pub := filepath.Join(sandbox, "record.pub")
	for _, f := range []string{fact, ctxFile} {
		if code, out := cli("memory", "verify", "--key", pub, f); code != 0 || !strings.Contains(out, `"holds": true`) {
			t.Fatalf("verify %s: exit %d\n%s", f, code, out)
		}
	}
	tampered := filepath.Join(work, "tampered.json")
	b, _ := os.ReadFile(ctxFile)
	if err := os.WriteFile(tampered, bytes.Replace(b, []byte("Lyon"), []byte("Nice"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := cli("memory", "verify", "--key", pub, tampered); code == 0 || !strings.Contains(out, `"holds": false`) {
		t.Fatalf("a tampered context verified: exit %d\n%s", code, out)
	}

	root := regexp.MustCompile(`mem_[0-9A-Z]{26}`).FindString(readFile(t, fact))
	proof := filepath.Join(work, "erasure.json")
	if code, out := cli("memory", "forget", "--url", base, "--key", filepath.Join(sandbox, "operator.jwk.json"),
		"--mandate", filepath.Join(sandbox, "memory-mandate.jws"), "--root", root,
		"--rationale", "Ada asked to be forgotten", "--out", proof); code != 0 || !strings.HasPrefix(out, "200 OK") {
		t.Fatalf("forget: exit %d\n%s", code, out)
	}
	if code, out := cli("memory", "verify", "--key", pub, proof); code != 0 || !strings.Contains(out, `"holds": true`) {
		t.Fatalf("verify the erasure proof: exit %d\n%s", code, out)
	}
	// Paris is gone from every point of view, the remainder with it.
	for _, args := range [][]string{{"--tx-at", before}, {"--valid-at", "2026-01-15T00:00:00Z"}} {
		if code, out := mem("recall", append([]string{"--subject", "user:ada"}, args...)...); code != 0 || strings.Contains(out, "Paris") {
			t.Errorf("recall %v after erasure: exit %d\n%s", args, code, out)
		}
	}
	// An agent credential cannot erase: forget needs the operator's signature.
	credBytes := strings.TrimSpace(readFile(t, filepath.Join(sandbox, "agent-credential.txt")))
	status, _, err := postJSON(context.Background(), base+"/memory/forget", "Bearer "+credBytes, "",
		[]byte(`{"mandate":"x","rootId":"`+root+`","rationale":"an agent trying"}`))
	if err != nil || (status != 401 && status != 403) {
		t.Errorf("forget with an agent credential: %d", status)
	}
}
