package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

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
	// size counts the record's entries other than operator.refusals
	// summaries, and those summaries apart: the server's ticker writes at
	// most one a minute of whatever was refused, so one may land while
	// the test runs if a minute turns then.
	size := func() (entries, summaries int) {
		t.Helper()
		_, b := get(t, base+"/audit?limit=100", "Authorization", bearer)
		var page struct {
			Data []struct {
				Type string `json:"type"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &page); err != nil || len(page.Data) == 0 || len(page.Data) == 100 {
			t.Fatalf("audit page: %v %s", err, b)
		}
		for _, e := range page.Data {
			if e.Type == operator.EntryRefusalSummary {
				summaries++
			} else {
				entries++
			}
		}
		return entries, summaries
	}
	// summariesAllowed is how many summaries the ticker may write in d.
	summariesAllowed := func(d time.Duration) int { return 1 + int(d/operator.DefaultRefusalInterval) }
	before, sumBefore := size()
	start := time.Now()
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"loadtest", "flood", "--url", base, "--n", "600", "--concurrency", "4"}, &out, &errOut); code != 0 {
		t.Fatalf("flood: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "×429") || !strings.Contains(out.String(), "×401") {
		t.Errorf("the flood should meet 401 and then 429: %s", out.String())
	}
	after, sumAfter := size()
	if after != before {
		t.Errorf("600 unauthenticated operator requests grew the record from %v to %v entries (summaries aside)", before, after)
	}
	if n := sumAfter - sumBefore; n > summariesAllowed(time.Since(start)) {
		t.Errorf("the flood wrote %d summaries in %v", n, time.Since(start))
	}

	// A trusted key's refusals: a signature over another body.
	signer := ss.signer
	before, sumBefore = size()
	start = time.Now()
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
	after, sumAfter = size()
	if grew := after - before; grew != operator.DefaultRefusalKeyBurst {
		t.Errorf("30 refusals by a trusted key wrote %v entries, want its burst of %d", grew, operator.DefaultRefusalKeyBurst)
	}
	if n := sumAfter - sumBefore; n > summariesAllowed(time.Since(start)) {
		t.Errorf("30 refusals wrote %d summaries in %v", n, time.Since(start))
	}
}
