package protocol

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
)

var allSteps = []step{stepRecord, stepAccept, stepDispute, stepOpen, stepRespond, stepResolve}

// walkMachine tries every (from, step, to) over statuses: each row of m
// moves; every other change is refused, leaves the status as it was, and
// carries the step's refusal (none where the step has none).
func walkMachine[S ~string](t *testing.T, m machine[S], statuses []S) {
	t.Helper()
	refusal := map[step]error{}
	listed := map[string]bool{}
	for _, r := range m.rows {
		refusal[r.step] = r.refusal
		listed[fmt.Sprint(r.from, "|", r.step, "|", r.to)] = true
	}
	for _, from := range append([]S{""}, statuses...) {
		for _, st := range allSteps {
			for _, to := range append([]S{""}, statuses...) {
				cur := from
				err := m.move(&cur, st, to)
				if listed[fmt.Sprint(from, "|", st, "|", to)] {
					if err != nil || cur != to {
						t.Errorf("%s: %q -%s-> %q is listed but: %v", m.name, from, st, to, err)
					}
					continue
				}
				var me *moveError
				if !errors.As(err, &me) || cur != from {
					t.Errorf("%s: %q -%s-> %q is not listed but: %v (now %q)", m.name, from, st, to, err, cur)
					continue
				}
				if want := refusal[st]; (want == nil) != (errors.Unwrap(err) == nil) || (want != nil && !errors.Is(err, want)) {
					t.Errorf("%s: %q -%s-> %q refused with %v, want %v", m.name, from, st, to, err, want)
				}
			}
		}
	}
}

func TestMachines(t *testing.T) {
	walkMachine(t, deliveryMachine, []DeliveryStatus{DeliveryRecorded, DeliveryAccepted, DeliveryDisputed})
	walkMachine(t, disputeMachine, []DisputeStatus{DisputeOpen, DisputeResponded, DisputeResolved})
}

// moves counts the moves the package's tests make, so that TestMain can
// check that every row of every machine is reached by a real flow.
var moves = struct {
	sync.Mutex
	seen map[string]bool
}{seen: map[string]bool{}}

func TestMain(m *testing.M) {
	observeMove = func(machine, from string, st step, to string) {
		moves.Lock()
		moves.seen[fmt.Sprint(machine, "|", from, "|", st, "|", to)] = true
		moves.Unlock()
	}
	code := m.Run()
	if f := flag.Lookup("test.run"); code == 0 && f != nil && f.Value.String() == "" && !testing.Short() {
		// The whole suite ran: each row must have happened in some flow.
		var missing []string
		check := func(name string, rows []string) {
			for _, r := range rows {
				if !moves.seen[name+"|"+r] {
					missing = append(missing, name+" "+r)
				}
			}
		}
		check(deliveryMachine.name, rowKeys(deliveryMachine))
		check(disputeMachine.name, rowKeys(disputeMachine))
		if len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: transitions no test reaches: %v\n", missing)
			code = 1
		}
	}
	os.Exit(code)
}

func rowKeys[S ~string](m machine[S]) []string {
	var out []string
	for _, r := range m.rows {
		out = append(out, fmt.Sprint(r.from, "|", r.step, "|", r.to))
	}
	return out
}
