package acp

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/countersign/countersign/commerce/acp/acptest"
)

// exampleRules says which rule (and which $defs entry of which bundle)
// judges each curated example.
type judged struct {
	rule     rule
	def      string
	delegate bool // the delegate payment bundle
}

var (
	jSession   = judged{ruleCheckoutSession, "CheckoutSession", false}
	jWithOrder = judged{ruleCheckoutSessionWithOrder, "CheckoutSessionWithOrder", false}
	jCreate    = judged{ruleCheckoutSessionCreateRequest, "CheckoutSessionCreateRequest", false}
	jUpdate    = judged{ruleCheckoutSessionUpdateRequest, "CheckoutSessionUpdateRequest", false}
	jComplete  = judged{ruleCheckoutSessionCompleteRequest, "CheckoutSessionCompleteRequest", false}
	jCancel    = judged{ruleCancelSessionRequest, "CancelSessionRequest", false}
	jAuthRes   = judged{ruleAuthenticationResult, "AuthenticationResult", false}
	jError     = judged{ruleError, "Error", false}
	jDPRequest = judged{ruleDelegatePaymentRequest, "DelegatePaymentRequest", true}
	jDPResp    = judged{ruleDelegatePaymentResponse, "DelegatePaymentResponse", true}
	jDPError   = judged{ruleDelegateError, "Error", true}
)

// judge names the rule for an example, by its name; ok is false for the
// examples outside this package (webhooks, discovery).
func judge(name string) (judged, bool) {
	switch {
	case strings.HasPrefix(name, "webhook_"), strings.HasPrefix(name, "discovery_"):
		return judged{}, false
	case name == "delegate_payment_request":
		return jDPRequest, true
	case name == "delegate_payment_success_response":
		return jDPResp, true
	case strings.HasPrefix(name, "delegate_payment_error_"):
		return jDPError, true
	case name == "complete_checkout_session_response":
		return jWithOrder, true
	case strings.HasPrefix(name, "complete_") && strings.HasSuffix(name, "_request"),
		strings.HasPrefix(name, "complete_checkout_session_request"):
		return jComplete, true
	case strings.HasPrefix(name, "create_") && strings.Contains(name, "_request"):
		return jCreate, true
	case strings.HasPrefix(name, "update_") && strings.HasSuffix(name, "_request"):
		return jUpdate, true
	case strings.HasPrefix(name, "cancel_") && strings.Contains(name, "_request"):
		return jCancel, true
	case strings.HasPrefix(name, "authentication_result"):
		return jAuthRes, true
	case strings.HasPrefix(name, "error_"):
		return jError, true
	case strings.HasSuffix(name, "_response"), strings.HasPrefix(name, "checkout_session_"):
		return jSession, true
	}
	return judged{}, false
}

// invalidExamples are the curated examples the protocol's own schema
// refuses (our rules and the bundle agree on each):
// create_multi_item_checkout_request lacks the required capabilities;
// create_multi_item_checkout_response puts capabilities inside protocol,
// uses a total type base_amount outside the enum and lacks capabilities;
// authentication_result_denied_example has outcome_details without the
// required three_ds_cryptogram.
var invalidExamples = []string{"create_multi_item_checkout_request", "create_multi_item_checkout_response",
	"authentication_result_denied_example"}

func bundle(t *testing.T, s *acptest.Schemas, j judged, doc []byte) error {
	t.Helper()
	if j.delegate {
		return s.Delegate(t, j.def, doc)
	}
	return s.Checkout(t, j.def, doc)
}

// TestExamples checks every curated example against our rules and the
// bundle: both must agree, and only the known-bad examples may fail.
func TestExamples(t *testing.T) {
	s := acptest.Load(t)
	ex := s.Examples(t)
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range ex {
			if !yield(k) {
				return
			}
		}
	})
	checked := 0
	for _, name := range names {
		j, ok := judge(name)
		if !ok {
			continue
		}
		checked++
		t.Run(name, func(t *testing.T) {
			doc := []byte(ex[name])
			ours := validate(doc, j.rule)
			theirs := bundle(t, s, j, doc)
			if (ours == nil) != (theirs == nil) {
				t.Fatalf("rules and bundle disagree on %s: ours %v, bundle %v", j.def, ours, theirs)
			}
			want := !slices.Contains(invalidExamples, name)
			if (ours == nil) != want {
				t.Fatalf("valid = %v, want %v: %v", ours == nil, want, ours)
			}
		})
	}
	if checked < 25 {
		t.Fatalf("checked %d examples, want all of them", checked)
	}
}

// TestExamplesDecode decodes the curated examples through the Parse
// functions: responses as the client reads them, requests into the request
// types; and re-encoding what was decoded is accepted again.
func TestExamplesDecode(t *testing.T) {
	s := acptest.Load(t)
	ex := s.Examples(t)
	parsers := map[string]func([]byte) (any, error){
		"CheckoutSession":                func(b []byte) (any, error) { return ParseCheckoutSession(b) },
		"CheckoutSessionWithOrder":       func(b []byte) (any, error) { return ParseCheckoutSessionWithOrder(b) },
		"CheckoutSessionCreateRequest":   func(b []byte) (any, error) { return ParseCheckoutSessionCreateRequest(b) },
		"CheckoutSessionUpdateRequest":   func(b []byte) (any, error) { return ParseCheckoutSessionUpdateRequest(b) },
		"CheckoutSessionCompleteRequest": func(b []byte) (any, error) { return ParseCheckoutSessionCompleteRequest(b) },
		"CancelSessionRequest":           func(b []byte) (any, error) { return ParseCancelSessionRequest(b) },
		"DelegatePaymentRequest":         func(b []byte) (any, error) { return ParseDelegatePaymentRequest(b) },
		"DelegatePaymentResponse":        func(b []byte) (any, error) { return ParseDelegatePaymentResponse(b) },
	}
	for name, raw := range ex {
		j, ok := judge(name)
		if !ok || slices.Contains(invalidExamples, name) {
			continue
		}
		p := parsers[j.def]
		if j.def == "Error" {
			p = func(b []byte) (any, error) { return ParseError(b) }
			if j.delegate {
				p = func(b []byte) (any, error) { return ParseDelegatePaymentError(b) }
			}
		}
		if p == nil {
			continue // AuthenticationResult: a part of a request, checked above
		}
		t.Run(name, func(t *testing.T) {
			v, err := p(raw)
			if err != nil {
				t.Fatal(err)
			}
			again, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p(again); err != nil {
				t.Fatalf("re-encoded %s refused: %v\n%s", j.def, err, again)
			}
			if err := bundle(t, s, j, again); err != nil {
				t.Fatalf("re-encoded %s refused by the bundle: %v", j.def, err)
			}
		})
	}
}

// TestMutationsAgree mutates the curated examples at random (a member
// removed, replaced by a value of another type, or added) and checks our
// rules and the bundle agree on every mutant.
func TestMutationsAgree(t *testing.T) {
	s := acptest.Load(t)
	ex := s.Examples(t)
	rng := rand.New(rand.NewPCG(1, 2))
	values := []any{nil, "x", "", json.Number("1"), json.Number("-1"), json.Number("0"), json.Number("1.5"),
		true, []any{}, map[string]any{}, "2026-13-01T00:00:00Z", "2026-01-01T00:00:00Z", "not a uri",
		"https://example.com/x", "a@b.co", "usd", "USD", "shipping", "error", "total", "ready_for_payment"}
	n, disagree := 0, 0
	names := make([]string, 0, len(ex))
	for k := range ex {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		j, ok := judge(name)
		if !ok {
			continue
		}
		for range 150 {
			var doc any
			d := json.NewDecoder(strings.NewReader(string(ex[name])))
			d.UseNumber()
			if err := d.Decode(&doc); err != nil {
				t.Fatal(err)
			}
			doc = mutate(rng, doc, values)
			b, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			n++
			ours, theirs := validate(b, j.rule), bundle(t, s, j, b)
			if (ours == nil) != (theirs == nil) {
				disagree++
				if disagree <= 10 {
					t.Errorf("%s mutant: ours %v, bundle %v\n%s", name, ours, theirs, b)
				}
			}
		}
	}
	t.Logf("%d mutants, %d disagreements", n, disagree)
}

// mutate changes one randomly chosen place of doc.
func mutate(rng *rand.Rand, doc any, values []any) any {
	// Collect the containers and pick one member or element.
	type place struct {
		obj map[string]any
		arr []any
		key string
		idx int
	}
	var places []place
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				places = append(places, place{obj: x, key: k})
				walk(x[k])
			}
			places = append(places, place{obj: x, key: ""}) // add a member
		case []any:
			for i, e := range x {
				places = append(places, place{arr: x, idx: i})
				walk(e)
			}
		}
	}
	walk(doc)
	if len(places) == 0 {
		return values[rng.IntN(len(values))]
	}
	p := places[rng.IntN(len(places))]
	val := values[rng.IntN(len(values))]
	switch {
	case p.obj != nil && p.key == "":
		p.obj[fmt.Sprintf("zz_%d", rng.IntN(3))] = val
	case p.obj != nil && rng.IntN(3) == 0:
		delete(p.obj, p.key)
	case p.obj != nil:
		p.obj[p.key] = val
	default:
		p.arr[p.idx] = val
	}
	return doc
}

// TestRulesStricter lists where our rules refuse what the bundle accepts,
// on purpose.
func TestRulesStricter(t *testing.T) {
	s := acptest.Load(t)
	base := string(acptest.Load(t).Examples(t)["create_checkout_session_response"])
	tests := []struct {
		name, doc string
	}{
		// encoding/json would merge duplicate members: what is used must be
		// what was checked.
		{"duplicate member", strings.Replace(base, `"status":`, `"status": "canceled", "status":`, 1)},
		// An integer written as 300.0 does not decode into an int64.
		{"integer with a fraction", strings.Replace(base, `"amount": 300`, `"amount": 300.0`, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.doc == base {
				t.Fatal("the mutation did not apply")
			}
			if err := s.Checkout(t, "CheckoutSession", []byte(tt.doc)); err != nil {
				t.Fatalf("the bundle refuses it too: %v", err)
			}
			if err := validate([]byte(tt.doc), ruleCheckoutSession); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// TestSchemaErrorPath checks refusals name the member, as ACP's param.
func TestSchemaErrorPath(t *testing.T) {
	err := validate([]byte(`{"line_items":[{"id":"a","quantity":2}],"currency":"usd","capabilities":{}}`), ruleCheckoutSessionCreateRequest)
	var se *SchemaError
	if !errors.As(err, &se) || se.Path != "$.line_items[0].quantity" {
		t.Fatalf("err = %v", err)
	}
}
