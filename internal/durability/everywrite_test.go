package durability

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/webhook"
)

// cutter takes a clone of mem before every write, sync, create, rename
// or removal the store makes while it is armed: a power cut at each point
// of one operation, rather than at random ones. It is an errorfs injector
// that never injects.
type cutter struct {
	mem *vfs.MemFS
	rng *rand.Rand

	mu    sync.Mutex
	armed bool
	exp   expectation
	cuts  []cut
	at    time.Time
}

func (c *cutter) String() string { return "durability.cutter" }

func (c *cutter) MaybeError(op errorfs.Op) error {
	if op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.armed {
		return nil
	}
	// Alternately only what was synced, and that plus a random share of
	// the rest.
	percent := 0
	if len(c.cuts)%2 == 1 {
		percent = 1 + c.rng.IntN(99)
	}
	c.cuts = append(c.cuts, cut{n: len(c.cuts), percent: percent, exp: c.exp, at: c.at,
		fs: c.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: percent, RNG: c.rng})})
	return nil
}

// arm starts cutting at every write, holding clones to exp.
func (c *cutter) arm(exp expectation, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed, c.exp, c.at = true, exp, at
}

// disarm stops cutting and returns the clones taken since arm.
func (c *cutter) disarm() []cut {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = false
	out := c.cuts
	c.cuts = nil
	return out
}

// TestPowerCutAtEveryWrite cuts the power before every write the store
// makes during one payment, one approval, one refund, one webhook
// delivery pass, one shred (flush, compaction and the overwriting of
// obsolete logs) and one payment after it, and after the last, and checks
// each clone as TestPowerCut does. Half the clones keep only what was
// synced, half a seeded random share of the rest too.
func TestPowerCutAtEveryWrite(t *testing.T) {
	ctx := t.Context()
	mem := vfs.NewCrashableMem()
	rng := rand.New(rand.NewPCG(20261125, 1))
	c := &cutter{mem: mem, rng: rng}
	clk := newClock()
	id, err := newIdentity(rng, clk)
	if err != nil {
		t.Fatal(err)
	}
	w, err := openWorld(ctx, errorfs.Wrap(mem, c), id, clk, worldOptions{webhooks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	created, err := w.eps.Create(ctx, webhook.CreateRequest{URL: receiver.URL + "/hook", Events: []string{"payment.settled"}},
		audit.Actor{Kind: "operator", ID: operatorID}, "req_setup", "the durability receiver")
	if err != nil {
		t.Fatal(err)
	}
	after, err := w.log.Size(ctx)
	if err != nil {
		t.Fatal(err)
	}

	acks := newAcks()
	var held, settled paid
	payOne := func(key string, minor int64) paid {
		t.Helper()
		body, err := id.instruction(key, minor)
		if err != nil {
			t.Fatal(err)
		}
		res, err := w.svc.Pay(ctx, id.caller, body, "", "req_"+key)
		if err != nil {
			t.Fatalf("pay %s: %v", key, err)
		}
		p := paid{key: key, body: body, res: *res}
		acks.pay(p)
		return p
	}
	for i := range 12 {
		settled = payOne(fmt.Sprintf("setup-%d", i), int64(500+i))
	}
	held = payOne("setup-held", confirmAbove+1)
	if _, err := w.disp.Tick(ctx); err != nil {
		t.Fatal(err)
	}

	expect := func() expectation {
		exp := expectation{acks: acks.snapshot(), endpoint: created.ID, after: after}
		if exp.delivered, err = deliveredEvents(ctx, w); err != nil {
			t.Fatal(err)
		}
		if exp.seen, err = newestEntry(ctx, w); err != nil {
			t.Fatal(err)
		}
		return exp
	}
	var all []cut
	step := func(name string, do func()) {
		t.Helper()
		c.arm(expect(), clk.Now())
		do()
		cuts := c.disarm()
		t.Logf("%s: %d writes, a cut before each", name, len(cuts))
		for i := range cuts {
			cuts[i].n = len(all) + i
		}
		all = append(all, cuts...)
	}
	step("payment", func() { payOne("cut-payment", 2_345) })
	step("approval", func() {
		res, err := w.svc.Approve(ctx, pay.ApproveRequest{IntentID: held.res.IntentID, Challenge: held.res.Held.Challenge,
			MandateID: held.res.Held.MandateID, Rationale: "checked with the vendor", Acknowledged: true},
			pay.OperatorCall{Operator: operatorID, RequestID: "req_approve", Rationale: "checked with the vendor"})
		if err != nil || res.Outcome != pay.OutcomeSettled {
			t.Fatalf("approve: %+v, %v", res, err)
		}
		acks.approve(approved{intentID: held.res.IntentID, receipt: *res.Receipt})
	})
	step("refund", func() {
		part := int64(200)
		res, err := w.svc.Refund(ctx, pay.RefundRequest{IntentID: settled.res.IntentID, AmountMinor: &part, Rationale: "returned"},
			pay.OperatorCall{Operator: operatorID, RequestID: "req_refund", Rationale: "the customer returned part"})
		if err != nil {
			t.Fatalf("refund: %v", err)
		}
		acks.refund(refunded{intentID: settled.res.IntentID, minor: part, res: *res})
	})
	step("webhook delivery", func() {
		if _, err := w.disp.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	})
	step("shred", func() {
		if err := w.st.Shred(ctx, [][2][]byte{{[]byte("durability/"), []byte("durability0")}}); err != nil {
			t.Fatal(err)
		}
	})
	step("payment after the shred", func() { payOne("cut-after-shred", 1_234) })
	// And after the last write: only what was synced.
	all = append(all, cut{n: len(all), exp: expect(), at: clk.Now(), fs: mem.CrashClone(vfs.CrashCloneCfg{})})

	e := &epoch{id: id, cfg: epochConfig{}}
	for i, rep := range e.checkCuts(ctx, all) {
		if !rep.ok() {
			t.Errorf("cut before write %d (unsynced kept %d%%, %d acknowledged, %d entries):%s",
				i, all[i].percent, all[i].exp.acks.len(), rep.entries, rep)
		}
	}
}
