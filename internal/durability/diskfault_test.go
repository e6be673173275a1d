package durability

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pebblestore"
)

// faultKind is a way for the disk to fail.
type faultKind string

const (
	// faultFsync: one fsync of the write-ahead log fails (EIO); later
	// ones succeed, as they do on Linux after the kernel has dropped the
	// pages it could not write. The store must not believe them.
	faultFsync faultKind = "fsync"
	// faultWrite: one write to the write-ahead log fails (EIO); later
	// ones succeed.
	faultWrite faultKind = "write"
	// faultFull: the disk is full: from then on every write, create and
	// preallocation of any file fails with ENOSPC.
	faultFull faultKind = "enospc"
)

// injector fails the disk in one way, at one commit: counting the syncs of
// the write-ahead log since it was armed, it breaks the stage-th (fsync)
// or the writes that belong to it (write, enospc).
type injector struct {
	kind faultKind

	mu     sync.Mutex
	armed  bool
	stage  int // the commit, counted from 1 after arming, that fails
	synced int // write-ahead log syncs since arming
	fired  int // faults injected
	last   errorfs.Op
}

func (in *injector) String() string { return "durability." + string(in.kind) }

func (in *injector) arm(stage int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.armed, in.stage, in.synced, in.fired = true, stage, 0, 0
}

func (in *injector) injected() (int, errorfs.Op) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.fired, in.last
}

func isLog(path string) bool { return strings.HasSuffix(path, ".log") }

func (in *injector) MaybeError(op errorfs.Op) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.armed {
		return nil
	}
	var err error
	switch op.Kind {
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
		if !isLog(op.Path) {
			break
		}
		in.synced++
		if in.kind == faultFsync && in.synced == in.stage {
			err = &os.PathError{Op: "fsync", Path: op.Path, Err: syscall.EIO}
		}
	case errorfs.OpFileWrite, errorfs.OpFileWriteAt:
		switch {
		case in.kind == faultWrite && isLog(op.Path) && in.synced == in.stage-1 && in.fired == 0:
			err = &os.PathError{Op: "write", Path: op.Path, Err: syscall.EIO}
		case in.kind == faultFull && in.synced >= in.stage-1:
			err = &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
	case errorfs.OpCreate, errorfs.OpReuseForWrite, errorfs.OpFilePreallocate, errorfs.OpLink, errorfs.OpMkdirAll:
		if in.kind == faultFull && in.synced >= in.stage-1 {
			err = &os.PathError{Op: "create", Path: op.Path, Err: syscall.ENOSPC}
		}
	}
	if err != nil {
		in.fired++
		in.last = op
	}
	return err
}

// stageNames say which of the commits of a payment a stage breaks. On a
// rail with a ledger of its own a payment commits three times: the
// decision, the rail's ledger, the outcome.
var stageNames = map[int]string{1: "decision", 2: "rail-ledger", 3: "outcome"}

// Under a shared log (fake.Options.SharedLog) a rail without latency or
// faults answers at once (settle.InstantSettler): the decision, the rail's
// entry and the outcome are one transaction, and so one commit, the only
// stage to break. (On a rail that takes time the decision is a deferred
// commit, the rail's entry is written in the outcome's transaction, and
// the committer holds deferred commits back for the transaction that
// waits, pebblestore's deferredHold: one commit too, or two on a machine
// slow enough for the hold to end first, the first still the one broken.)
var sharedStageNames = map[int]string{1: "one-commit"}

// TestDiskFault breaks the disk under the money path — an fsync error, a
// write error, a full disk — at each commit of a payment, and checks that
// the store fails stop, that the payment service reports an error and no
// outcome, that nothing half-written is visible, and that a restart on a
// healthy disk (the same files as the process left them, or what a power
// cut would leave of them) recovers to a consistent state that takes new
// payments.
func TestDiskFault(t *testing.T) {
	for _, ledger := range []string{"shared-log", "own-log"} {
		for _, kind := range []faultKind{faultFsync, faultWrite, faultFull} {
			names := stageNames
			if ledger == "shared-log" {
				names = sharedStageNames
			}
			for stage := 1; stage <= len(names); stage++ {
				t.Run(fmt.Sprintf("%s/%s/%s", ledger, kind, names[stage]), func(t *testing.T) {
					diskFault(t, kind, stage, worldOptions{ownLog: ledger == "own-log"})
				})
			}
		}
	}
}

func diskFault(t *testing.T, kind faultKind, stage int, o worldOptions) {
	ctx := t.Context()
	mem := vfs.NewCrashableMem()
	inj := &injector{kind: kind}
	clk := newClock()
	id, err := newIdentity(rand.New(rand.NewPCG(uint64(stage), 0x6469736b)), clk)
	if err != nil {
		t.Fatal(err)
	}
	w, err := openWorld(ctx, errorfs.Wrap(mem, inj), id, clk, o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.close() }() // nil once closed below

	// Acknowledged before the fault: settled payments, a held one, a refund.
	acks := newAcks()
	var settled, held paid
	for i, minor := range []int64{1_200, 3_400, confirmAbove + 500, 5_600} {
		key := fmt.Sprintf("before-%d", i)
		body, err := id.instruction(key, minor)
		if err != nil {
			t.Fatal(err)
		}
		res, err := w.svc.Pay(ctx, id.caller, body, "", "req_"+key)
		if err != nil {
			t.Fatalf("payment %s before the fault: %v", key, err)
		}
		p := paid{key: key, body: body, res: *res}
		acks.pay(p)
		if res.Outcome == pay.OutcomeHeld {
			held = p
		} else {
			settled = p
		}
	}
	part := int64(1_000)
	rf, err := w.svc.Refund(ctx, pay.RefundRequest{IntentID: settled.res.IntentID, AmountMinor: &part, Rationale: "returned"},
		pay.OperatorCall{Operator: operatorID, Rationale: "the customer returned part"})
	if err != nil {
		t.Fatal(err)
	}
	acks.refund(refunded{intentID: settled.res.IntentID, minor: part, res: *rf})
	before, err := allIntents(ctx, w.st)
	if err != nil {
		t.Fatal(err)
	}

	// The fault, during a payment. A payment that ends before the stage's
	// commit is simply acknowledged, and the next one tries again.
	var (
		failing  []byte
		failingK string
		res      *pay.Result
		fired    int
		op       errorfs.Op
	)
	for try := 0; fired == 0; try++ {
		if try == 10 {
			t.Fatalf("no fault was injected in ten payments (the last answered %+v, %v)", res, err)
		}
		failingK = fmt.Sprintf("during-%d", try)
		if failing, err = id.instruction(failingK, 2_500); err != nil {
			t.Fatal(err)
		}
		inj.arm(stage)
		res, err = w.svc.Pay(ctx, id.caller, failing, "", "req_"+failingK)
		if fired, op = inj.injected(); fired == 0 {
			if err != nil || res.Outcome != pay.OutcomeSettled {
				t.Fatalf("a payment with no fault injected: %+v, %v", res, err)
			}
			acks.pay(paid{key: failingK, body: failing, res: *res})
			if before, err = allIntents(ctx, w.st); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("fault on %s %s; the payment answered: %v", kindName(op.Kind), op.Path, err)
	if err == nil {
		t.Fatalf("the payment whose commit %d failed answered %+v and no error", stage, res)
	}
	if !errors.Is(err, pebblestore.ErrFailed) && !errors.Is(err, pay.ErrRailUnavailable) {
		t.Errorf("the payment failed with %v; want an error matching pebblestore.ErrFailed (or, when the rail's own commit "+
			"failed, pay.ErrRailUnavailable)", err)
	}

	// The store has failed: every later commit is refused, whatever the
	// disk does now.
	err = w.st.Update(ctx, func(txn store.Txn) error { return txn.Set([]byte("durability/probe"), []byte("x")) })
	if !errors.Is(err, pebblestore.ErrFailed) {
		t.Errorf("a commit after the fault: %v, want pebblestore.ErrFailed", err)
	}
	later, err := id.instruction("later", 700)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := w.svc.Pay(ctx, id.caller, later, "", "req_later"); !errors.Is(err, pebblestore.ErrFailed) {
		t.Errorf("a new payment after the fault: %+v, %v; want pebblestore.ErrFailed", res, err)
	}
	if res, err := w.svc.Refund(ctx, pay.RefundRequest{IntentID: settled.res.IntentID, Rationale: "returned"},
		pay.OperatorCall{Operator: operatorID, Rationale: "the customer returned the rest"}); !errors.Is(err, pebblestore.ErrFailed) {
		t.Errorf("a refund after the fault: %+v, %v; want pebblestore.ErrFailed", res, err)
	}
	if res, err := w.svc.Approve(ctx, pay.ApproveRequest{IntentID: held.res.IntentID, Challenge: held.res.Held.Challenge,
		MandateID: held.res.Held.MandateID, Rationale: "checked", Acknowledged: true},
		pay.OperatorCall{Operator: operatorID, Rationale: "checked with the vendor"}); !errors.Is(err, pebblestore.ErrFailed) {
		t.Errorf("an approval after the fault: %+v, %v; want pebblestore.ErrFailed", res, err)
	}

	// Reads serve the last durable state: nothing of the failed commit,
	// the record whole.
	checkNothingHalfWritten(t, ctx, w, before, failingK, stage)

	// A power cut now keeps what was synced; a process restart keeps what
	// was written too. Restart on a healthy disk both ways.
	cutFS := mem.CrashClone(vfs.CrashCloneCfg{})
	if err := w.close(); err != nil {
		t.Logf("closing the failed store: %v", err)
	}
	w = nil
	for _, restart := range []struct {
		name string
		fs   vfs.FS
	}{{"process restart", mem}, {"power cut", cutFS}} {
		rclk := newClock()
		rclk.base = clk.Now().Add(1)
		exp := expectation{acks: acks.snapshot()}
		rep := recoverAndCheck(ctx, restart.fs, id, rclk, exp, o)
		if !rep.ok() {
			t.Errorf("%s after the fault:%s", restart.name, rep)
		}
		// The payment that failed, retried as is, gets one answer, and
		// the rail moved its money at most once.
		rw, err := openWorld(ctx, restart.fs, id, rclk, o)
		if err != nil {
			t.Fatalf("%s: %v", restart.name, err)
		}
		res, err := rw.svc.Pay(ctx, id.caller, failing, "", "req_retry")
		if err != nil || res.Outcome != pay.OutcomeSettled {
			t.Errorf("%s: the failed payment retried as is: %+v, %v", restart.name, res, err)
		} else if again, err := rw.svc.Pay(ctx, id.caller, failing, "", "req_retry2"); err != nil || !again.Replayed ||
			again.IntentID != res.IntentID {
			t.Errorf("%s: a second retry: %+v, %v; want a replay of %s", restart.name, again, err, res.IntentID)
		}
		r := &report{}
		if intents, err := allIntents(ctx, rw.st); err != nil {
			t.Error(err)
		} else {
			checkBooks(ctx, r, rw, intents)
		}
		if !r.ok() {
			t.Errorf("%s, after the retry:%s", restart.name, r)
		}
		if err := rw.close(); err != nil {
			t.Errorf("%s: close: %v", restart.name, err)
		}
	}
}

// checkNothingHalfWritten reads the failed store: the record verifies, the
// intents that existed are as they were, and the payment whose commit
// failed is absent or (its decision durable, its outcome not) settling.
func checkNothingHalfWritten(t *testing.T, ctx context.Context, w *world, before map[string]*pay.Intent, failingKey string, stage int) {
	t.Helper()
	size, err := w.log.Size(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.log.Verify(ctx, 1, size, audit.Full, nil); err != nil {
		t.Errorf("the record of the failed store: %v", err)
	}
	now, err := allIntents(ctx, w.st)
	if err != nil {
		t.Fatal(err)
	}
	for id, in := range now {
		old, ok := before[id]
		switch {
		case ok && (old.Status != in.Status || old.RefundedMinor != in.RefundedMinor):
			t.Errorf("intent %s was %s (refunded %d), reads %s (refunded %d) after the fault", id, old.Status, old.RefundedMinor,
				in.Status, in.RefundedMinor)
		case !ok && in.IdempotencyKey != failingKey:
			t.Errorf("intent %s (%s) appeared after the fault", id, in.IdempotencyKey)
		case !ok && stage == 1:
			t.Errorf("intent %s is readable though its decision's commit failed: %s", id, in.Status)
		case !ok && in.Status != pay.StatusSettling:
			t.Errorf("the failed payment reads %s; want settling (its decision durable, its outcome not)", in.Status)
		}
	}
}

func kindName(k errorfs.OpKind) string {
	switch k {
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
		return "sync"
	case errorfs.OpFileWrite, errorfs.OpFileWriteAt:
		return "write"
	}
	return fmt.Sprintf("op %d", k)
}
