package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/operator"
)

// TestUnauthenticatedFloodWritesNothing floods the real server's operator
// routes with requests that prove no identity ("loadtest flood"): the
// record does not grow, and the flood meets 429. Refusals by a trusted key
// (a signature over another body) are recorded one by one up to the key's
// burst, then counted.
func TestUnauthenticatedFloodWritesNothing(t *testing.T) {
	ss := startSandbox(t)
	base, bearer := ss.base, ss.bearer
	size := func() float64 {
		t.Helper()
		_, b := get(t, base+"/audit/checkpoint", "Authorization", bearer)
		var cp struct{ TreeSize float64 }
		if err := json.Unmarshal(b, &cp); err != nil || cp.TreeSize == 0 {
			t.Fatalf("checkpoint: %v %s", err, b)
		}
		return cp.TreeSize
	}
	before := size()
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"loadtest", "flood", "--url", base, "--n", "600", "--concurrency", "4"}, &out, &errOut); code != 0 {
		t.Fatalf("flood: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "×429") || !strings.Contains(out.String(), "×401") {
		t.Errorf("the flood should meet 401 and then 429: %s", out.String())
	}
	if after := size(); after != before {
		t.Errorf("600 unauthenticated operator requests grew the record from %v to %v entries", before, after)
	}

	// A trusted key's refusals: a signature over another body.
	signer := ss.signer
	before = size()
	for range 30 {
		req, _ := http.NewRequest(http.MethodPost, base+"/operator/kill-switch", strings.NewReader(`{"engaged":true,"rationale":"tampered on the way"}`))
		req.Header.Set("Content-Type", "application/json")
		if err := signer.Sign(req, "operator.kill_switch", []byte(`{"engaged":false,"rationale":"what the operator signed"}`)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("tampered body: %d", resp.StatusCode)
		}
	}
	if grew := size() - before; grew != float64(operator.DefaultRefusalKeyBurst) {
		t.Errorf("30 refusals by a trusted key wrote %v entries, want its burst of %d", grew, operator.DefaultRefusalKeyBurst)
	}
}
