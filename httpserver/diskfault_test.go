package httpserver_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/product"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store/pebblestore"
)

// diskFault is an errorfs injector that, once armed, breaks the disk in
// one way: the next fsync of the write-ahead log fails, the next write to
// it fails, or every write fails with ENOSPC (a full disk).
type diskFault struct {
	kind  string
	armed atomic.Bool
	fired atomic.Int32
}

func (d *diskFault) String() string { return "diskfault." + d.kind }

func (d *diskFault) MaybeError(op errorfs.Op) error {
	if !d.armed.Load() {
		return nil
	}
	wal := strings.HasSuffix(op.Path, ".log")
	var err error
	switch {
	case d.kind == "fsync" && wal && (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSyncTo):
		err = &os.PathError{Op: "fsync", Path: op.Path, Err: syscall.EIO}
	case d.kind == "write" && wal && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt):
		err = &os.PathError{Op: "write", Path: op.Path, Err: syscall.EIO}
	case d.kind == "enospc" && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && op.Kind != errorfs.OpRemove:
		d.fired.Add(1)
		return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC} // the disk stays full
	}
	if err != nil && d.fired.Add(1) == 1 {
		return err
	}
	// A transient fault: later operations succeed, and the store must not
	// believe them.
	return nil
}

// TestDiskFaultAnswersStoreUnavailable: the reference server's stack on a
// Pebble store whose disk fails (an fsync error, a write error, a full
// disk) answers POST /pay with 503 store.unavailable, action retry-as-is
// and a Retry-After, for that payment and every later one, while reads
// keep answering; restarted on the healthy disk, the same requests sent
// again as they were succeed.
func TestDiskFaultAnswersStoreUnavailable(t *testing.T) {
	pt, ok := product.Model().Problem(contract.CodeStoreUnavailable)
	if !ok {
		t.Fatalf("the product registers no %s problem", contract.CodeStoreUnavailable)
	}
	for _, kind := range []string{"fsync", "write", "enospc"} {
		t.Run(kind, func(t *testing.T) {
			mem := vfs.NewMem()
			fault := &diskFault{kind: kind}
			open := func(fs vfs.FS) *pebblestore.Store {
				st, err := pebblestore.Open("store", &pebblestore.Options{FS: fs, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				return st
			}
			keys := newMatrixKeys(t)
			st := open(errorfs.Wrap(mem, fault))
			stack := newMatrixStack(t, st, keys)

			pub, agentKey, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			agent := hex.EncodeToString(pub)
			issued, err := stack.keys.Create(t.Context(), auth.CreateRequest{Name: "disk-agent", AgentIDs: []string{agent}},
				audit.Actor{Kind: "operator", ID: keys.ops[0].kid}, "req_seed")
			if err != nil {
				t.Fatal(err)
			}
			mandate, err := pay.SignMandate(pay.MandateClaims{
				ID: "mdt-disk", Agent: agent, IssuedAt: matrixClock().Add(-time.Hour), ExpiresAt: matrixClock().Add(24 * time.Hour),
				Payees: []string{"*"}, Currency: "USD", PerTxCapMinor: 50_000, PerPeriodCapMinor: 1_000_000, Period: gate.Day,
				Rails: []string{fake.SandboxCard}, ConfirmAboveMinor: 10_000, IrreversibleConfirmAboveMinor: 10_000,
			}, keys.ops[0].priv, keys.ops[0].kid)
			if err != nil {
				t.Fatal(err)
			}
			payWire := func(key string) wire {
				in := &pay.Instruction{
					IdempotencyKey: key, Payee: "acct:seller.example", Amount: pay.Amount{Minor: 1_250, Currency: "USD"},
					Purpose: "disk fault " + key,
					Terms: pay.Terms{Rail: fake.SandboxCard, Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
						Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
					Envelope: pay.Envelope{Agent: agent, Mandate: mandate},
				}
				if err := pay.SignInstruction(in, agentKey); err != nil {
					t.Fatal(err)
				}
				b, err := json.Marshal(in)
				if err != nil {
					t.Fatal(err)
				}
				return wire{method: http.MethodPost, path: "/pay", body: b, header: http.Header{
					"Content-Type": {contract.MediaJSON}, "Authorization": {"Bearer " + issued.Credential}}}
			}
			serve := func(h http.Handler, w wire) (*httptest.ResponseRecorder, contract.Problem) {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, w.request(t))
				var p contract.Problem
				if rec.Header().Get("Content-Type") == contract.MediaProblem {
					if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
						t.Fatalf("problem does not decode: %v\n%s", err, rec.Body)
					}
				}
				return rec, p
			}

			before := payWire("before")
			rec, _ := serve(stack.h, before)
			if rec.Code != http.StatusOK {
				t.Fatalf("a payment before the fault: %d\n%s", rec.Code, rec.Body)
			}
			var receipt pay.Receipt
			if err := json.Unmarshal(rec.Body.Bytes(), &receipt); err != nil {
				t.Fatal(err)
			}

			fault.armed.Store(true)
			during, after := payWire("during"), payWire("after")
			for _, w := range []wire{during, after, during} {
				rec, p := serve(stack.h, w)
				if rec.Code != http.StatusServiceUnavailable || p.Code != contract.CodeStoreUnavailable ||
					p.Action != contract.ActionRetryAsIs || p.RetryAfter != pt.RetryAfter ||
					rec.Header().Get("Retry-After") != fmt.Sprint(pt.RetryAfter) {
					t.Fatalf("a payment after the disk failed: %d %s %s retryAfter %d, Retry-After %q; want 503 %s %s %d\n%s",
						rec.Code, p.Code, p.Action, p.RetryAfter, rec.Header().Get("Retry-After"),
						contract.CodeStoreUnavailable, contract.ActionRetryAsIs, pt.RetryAfter, rec.Body)
				}
				if strings.Contains(p.Detail, syscall.EIO.Error()) || strings.Contains(p.Detail, "pebble") {
					t.Errorf("the detail shows the server's internals: %q", p.Detail)
				}
			}
			if fault.fired.Load() == 0 {
				t.Fatal("no fault was injected")
			}
			// Reads keep answering from the last committed state.
			get := wire{method: http.MethodGet, path: "/intents/" + receipt.IntentID,
				header: http.Header{"Authorization": {"Bearer " + issued.Credential}}}
			if rec, _ := serve(stack.h, get); rec.Code != http.StatusOK {
				t.Errorf("reading a settled payment after the fault: %d\n%s", rec.Code, rec.Body)
			}

			// Restart on the healthy disk: the same requests, sent again as
			// they were, succeed.
			_ = stack.log.Close()
			if err := st.Close(); err != nil {
				t.Logf("closing the failed store: %v", err)
			}
			st2 := open(mem)
			t.Cleanup(func() { _ = st2.Close() })
			restarted := newMatrixStack(t, st2, keys)
			for _, w := range []wire{before, during, after} {
				if rec, _ := serve(restarted.h, w); rec.Code != http.StatusOK {
					t.Errorf("after the restart, %s sent again: %d\n%s", w.path, rec.Code, rec.Body)
				}
			}
			if err := restarted.rail.CheckLedger(context.Background()); err != nil {
				t.Error(err)
			}
			if n, err := restarted.rail.Count(context.Background()); err != nil || n != 3 {
				t.Errorf("the rail holds %d payments (%v), want 3", n, err)
			}
		})
	}
}
