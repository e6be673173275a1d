package pay

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// TestIntentReader checks that reading an intent back through an
// intentReader answers what getIntent answers: the intent in hand only
// while the stored bytes are the ones it was stored as, and only once,
// since the function that gets it may change it and run again.
func TestIntentReader(t *testing.T) {
	ctx := context.Background()
	stored := &Intent{ID: "int_1", Status: StatusSettling, Payee: "acct:a", Amount: Amount{Minor: 5, Currency: "USD"}, Refunds: []Refund{}}
	prior, err := json.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	changed := *stored
	changed.Status = StatusFailed
	tests := []struct {
		name       string
		prior      []byte
		store      *Intent // what is stored when the reader reads; nil for nothing
		want       *Intent
		wantInHand bool // the first get answers the intent in hand
	}{
		{"unchanged", prior, stored, stored, true},
		{"changed since", prior, &changed, &changed, false},
		{"no prior", nil, stored, stored, false},
		{"gone", prior, nil, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := memstore.New(nil)
			if tc.store != nil {
				if err := st.Update(ctx, func(txn store.Txn) error { return putIntent(txn, tc.store) }); err != nil {
					t.Fatal(err)
				}
			}
			inHand := &Intent{}
			if err := json.Unmarshal(prior, inHand); err != nil {
				t.Fatal(err)
			}
			rd := newIntentReader(inHand, tc.prior)
			for i := range 2 {
				var got *Intent
				err := st.View(ctx, func(r store.Reader) error {
					var err error
					got, err = rd.get(r)
					return err
				})
				if tc.want == nil {
					if !errors.Is(err, ErrIntentNotFound) {
						t.Fatalf("get %d: err = %v, want ErrIntentNotFound", i, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("get %d: %v", i, err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("get %d (-want +got):\n%s", i, diff)
				}
				if wantInHand := tc.wantInHand && i == 0; (got == inHand) != wantInHand {
					t.Errorf("get %d answered the intent in hand: %v, want %v", i, got == inHand, wantInHand)
				}
				got.Status = StatusDenied // a function's change must not reach the next run
			}
		})
	}
}

// TestIntentJSONRoundTrip: an intent decoded from its JSON is the intent
// encoded, with every field set. intentReader relies on it: it answers with
// the intent in hand instead of decoding the bytes it was stored as. A
// field hidden from JSON, or one whose encoding loses something, fails here
// unless it is listed below with the reason no stored intent's reader
// needs it.
func TestIntentJSONRoundTrip(t *testing.T) {
	transient := cmpopts.IgnoreFields(gate.Decision{},
		// The gate's word to the transaction deciding a denial; decide
		// reads it from its own Decision, never from an intent.
		"TripBreaker",
	)
	var in Intent
	fill(t, reflect.ValueOf(&in).Elem(), 0)
	b, err := json.Marshal(&in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeIntent(in.ID, b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&in, got, transient); diff != "" {
		t.Fatalf("decoded intent differs (-encoded +decoded):\n%s", diff)
	}

	// Empty maps and slices may come back nil (omitempty), and the other
	// way round; no reader of an intent tells the two apart (none
	// compares them with nil), so they count as equal.
	empty := Intent{ID: "int_empty", Metadata: map[string]string{}, Tags: []string{}, Refunds: nil,
		Decision: gate.Decision{Reasons: []gate.Reason{}}}
	b, err = json.Marshal(&empty)
	if err != nil {
		t.Fatal(err)
	}
	if got, err = decodeIntent(empty.ID, b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&empty, got, transient, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("decoded empty intent differs (-encoded +decoded):\n%s", diff)
	}
}

// fill sets every field reachable from v to a value other than its zero
// value, as a stored intent can hold it (times in UTC to the microsecond).
func fill(t *testing.T, v reflect.Value, depth int) {
	t.Helper()
	if depth > 8 {
		t.Fatalf("fill: %s nests too deep", v.Type())
	}
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(time.Date(2026, 11, 27, 12, 0, 0, 123456000, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x-" + v.Type().Name())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), depth+1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(t, v.Index(0), depth+1)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k, depth+1)
		fill(t, e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if !v.Type().Field(i).IsExported() {
				t.Fatalf("fill: %s.%s is unexported: JSON cannot carry it", v.Type(), v.Type().Field(i).Name)
			}
			fill(t, v.Field(i), depth+1)
		}
	default:
		t.Fatalf("fill: no value for %s", v.Type())
	}
}
