package memory

import (
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/webhook"
)

// TestEventsComeFromTheRecord: every memory change is an entry of the
// signed record, and the webhook events derived from those entries are
// the four memory kinds — none of them carrying a body.
func TestEventsComeFromTheRecord(t *testing.T) {
	f := newFixture(t, nil)
	const secret = "the-body-never-leaves-the-store"
	a := f.mustRemember("ns", fact{subject: "s", body: secret})
	f.mustRemember("ns", fact{subject: "s", body: secret + "-v2"})
	if _, err := f.svc.Taint(t.Context(), TaintRequest{RecordID: a.ID, Rationale: "checked and found wrong"}, f.op()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Forget(t.Context(), ForgetRequest{Mandate: f.mandate("ns", nil), RootID: a.ID, Rationale: "asked to be forgotten"}, f.op()); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for e, err := range f.log.Entries(t.Context(), 1, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(e.Data), secret) {
			t.Fatalf("entry %d (%s) carries a body: %s", e.Seq, e.Type, e.Data)
		}
		for _, ev := range webhook.Derive(e) {
			if strings.HasPrefix(ev.Type, "memory.") && !slices.Contains(kinds, ev.Type) {
				kinds = append(kinds, ev.Type)
			}
		}
	}
	slices.Sort(kinds)
	want := []string{EntryConsolidated, EntryErased, EntryRecorded, EntryTainted}
	if !slices.Equal(kinds, want) {
		t.Fatalf("event kinds %v, want %v", kinds, want)
	}
}
