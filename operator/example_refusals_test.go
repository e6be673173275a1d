package operator_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net/http/httptest"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/store/memstore"
)

// Refusals that prove no identity write nothing until the interval's
// summary; a trusted key's refusals are recorded, up to its rate.
func ExampleRefusalJournal() {
	ctx := context.Background()
	st := memstore.New(nil)
	defer st.Close()
	lg, err := audit.Open(ctx, st, ed25519.NewKeyFromSeed(make([]byte, 32)), nil)
	if err != nil {
		panic(err)
	}
	j, err := operator.NewRefusalJournal(lg, &operator.RefusalJournalOptions{Now: exampleNow})
	if err != nil {
		panic(err)
	}
	// Plugged into the verifier, it sees every refusal.
	_, _ = operator.NewVerifier(st, []operator.PublicKey{{KeyID: "op-alice", Public: exampleKey().Public()}},
		"https://pay.example.com", &operator.VerifierOptions{Now: exampleNow, OnRefused: j.Refused})

	req := httptest.NewRequest("POST", "/operator/kill-switch", nil)
	for range 1000 {
		j.Refused(ctx, req, "operator.kill_switch", operator.ReasonMissingHeader, "")
	}
	j.Refused(ctx, req, "operator.kill_switch", operator.ReasonBadSignature, "op-alice")
	size, _ := lg.Size(ctx)
	fmt.Println("entries after 1,001 refusals:", size)

	wrote, _ := j.Flush(ctx)
	size, _ = lg.Size(ctx)
	fmt.Println("summary written:", wrote, "entries:", size)
	s := j.Stats()
	fmt.Println("missing_header:", s.ByReason[operator.ReasonMissingHeader], "recorded:", s.Recorded, "summaries:", s.Summaries)
	// Output:
	// entries after 1,001 refusals: 1
	// summary written: true entries: 2
	// missing_header: 1000 recorded: 1 summaries: 1
}
