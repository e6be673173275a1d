package httpserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/httpserver"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/product"
)

// goLeak matches what a problem's detail or reason must never carry: the
// vocabulary of Go (encoding/json's "Go value of type", a Go type or
// package-qualified name, a validator namespace such as
// "QuoteRequest.lines[0].id") instead of the wire's.
var goLeak = regexp.MustCompile(`Go (value|struct|type)|json: |map\[|\[\]\w|\binterface \{|\bstruct \{|` +
	`\b(pay|auth|contract|memory|protocol|identity|commerce|webhook|audit|operator|httpserver|json|time|big)\.[A-Z]\w*|` +
	`\b[A-Z]\w*(Request|Params|Body|Claims)\.\w`)

// hostileBody is one way of spoiling a valid body.
type hostileBody struct {
	name string
	body []byte
}

// hostileBodies derives, from a valid JSON body, every spoiled variant the
// suite sends: no body, not JSON, the wrong top-level type, each member
// missing, each member of the wrong JSON type, each number out of range,
// a body past the size limit.
func hostileBodies(t testing.TB, valid []byte) []hostileBody {
	t.Helper()
	out := []hostileBody{
		{"empty", nil},
		{"whitespace", []byte("  \n")},
		{"not_json", []byte("{not json")},
		{"truncated", valid[:len(valid)/2]},
		{"top_level_array", []byte("[]")},
		{"top_level_string", []byte(`"x"`)},
		{"top_level_number", []byte("42")},
		{"top_level_null", []byte("null")},
		{"trailing_data", append(slices.Clone(valid), []byte(" {}")...)},
		{"duplicate_member", dupFirst(valid)},
		{"invalid_utf8", []byte("{\"a\":\"\xff\"}")},
		{"oversized", append(append([]byte(`{"pad":"`), bytes.Repeat([]byte("x"), httpserver.DefaultMaxBodyBytes+1)...), `"}`...)},
	}
	var obj map[string]any
	if json.Unmarshal(valid, &obj) != nil || obj == nil {
		return out
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	with := func(k string, v any) []byte {
		m := make(map[string]any, len(obj))
		for kk, vv := range obj {
			m[kk] = vv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	for _, k := range keys {
		out = append(out, hostileBody{"missing_" + k, with(k, nil)}, hostileBody{"null_" + k, with(k, raw("null"))})
		switch v := obj[k].(type) {
		case string:
			out = append(out, hostileBody{"mistyped_" + k, with(k, 123)},
				hostileBody{"huge_" + k, with(k, strings.Repeat("x", 70_000))},
				hostileBody{"control_chars_" + k, with(k, "a\u0000b\u202e")})
		case float64:
			out = append(out, hostileBody{"mistyped_" + k, with(k, "12")},
				hostileBody{"zero_" + k, with(k, 0)},
				hostileBody{"negative_" + k, with(k, -1)},
				hostileBody{"beyond_2^53_" + k, with(k, raw("9007199254740993"))},
				hostileBody{"beyond_int64_" + k, with(k, raw("9223372036854775808"))},
				hostileBody{"fraction_" + k, with(k, 1.5)},
				hostileBody{"exponent_" + k, with(k, raw("1e400"))})
			_ = v
		case bool:
			out = append(out, hostileBody{"mistyped_" + k, with(k, "true")})
		case []any:
			out = append(out, hostileBody{"mistyped_" + k, with(k, map[string]any{})},
				hostileBody{"wrong_items_" + k, with(k, []any{42, "x", nil})})
			// The first item's members, one by one: missing and mistyped.
			if first, ok := firstObject(v); ok {
				for _, ik := range sortedMembers(first) {
					item := func(val any) []any {
						m := merge(first, ik, val)
						if val == nil {
							delete(m, ik)
						}
						return append([]any{m}, v[1:]...)
					}
					wrongType := any("x")
					if _, isString := first[ik].(string); isString {
						wrongType = 7
					}
					out = append(out, hostileBody{"missing_" + k + "[0]." + ik, with(k, item(nil))},
						hostileBody{"mistyped_" + k + "[0]." + ik, with(k, item(wrongType))})
				}
			}
		case map[string]any:
			out = append(out, hostileBody{"mistyped_" + k, with(k, "x")},
				hostileBody{"empty_object_" + k, with(k, map[string]any{})},
				hostileBody{"unknown_member_in_" + k, with(k, merge(v, "zzUnknown", 1))})
		}
	}
	out = append(out, hostileBody{"unknown_member", with("zzUnknown", 1)})
	return out
}

func firstObject(v []any) (map[string]any, bool) {
	if len(v) == 0 {
		return nil, false
	}
	m, ok := v[0].(map[string]any)
	return m, ok
}

func sortedMembers(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func merge(m map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for kk, vv := range m {
		out[kk] = vv
	}
	out[k] = v
	return out
}

// dupFirst repeats the first member of an object body.
func dupFirst(b []byte) []byte {
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil || len(obj) == 0 {
		return []byte(`{"a":1,"a":2}`)
	}
	for k, v := range obj {
		name, _ := json.Marshal(k)
		return []byte(fmt.Sprintf(`{%s:%s,%s}`, name, v, b[1:]))
	}
	return nil
}

// TestHostileInput sends, to every operation of the contract that takes a
// body or parameters, every spoiled variant of a valid request, carrying a
// valid credential, and the same without a credential and with a wrong
// one. Every answer must be a success or a problem whose code the
// contract declares for the operation, at that code's status; never a
// 5xx; never Go's vocabulary in a detail or reason; and a request without
// a valid credential must change nothing in the store.
func TestHostileInput(t *testing.T) {
	if testing.Short() {
		t.Skip("thousands of requests")
	}
	model := product.Model()
	var sent, problems, successes int
	for _, op := range model.Operations() {
		if op.Body == nil && op.Params == nil {
			continue
		}
		t.Run(op.ID, func(t *testing.T) {
			// A fresh stack per operation: a spoiled request that is still
			// valid (a member that was optional) may act, and must not
			// change what the next operation meets.
			fx := newMatrixFixture(t)
			b := builder{params: matrixParams(fx), bodies: matrixBodies(fx), byOp: matrixOpBodies(fx)}
			declared := map[string]bool{}
			for _, c := range model.ProblemCodes(op) {
				declared[c] = true
			}
			signer := mustSigner(t)(fx.keys.ops[0].signer(matrixClock, matrixBase))
			credential := func(w wire) wire {
				switch op.Credential {
				case contract.CredentialAgent:
					return w.with("Authorization", "Bearer "+fx.cred)
				case contract.CredentialOperator:
					return w.with(operator.HeaderName, sign(t, signer, op.ID, w))
				}
				return w
			}
			check := func(name string, w wire, credentialed bool) {
				t.Helper()
				before := fx.state(t)
				res := fx.send(t, w)
				sent++
				if res.status >= 500 {
					t.Errorf("%s: %d %s\n%.400s", name, res.status, res.Code, res.body)
					return
				}
				// Nothing the server says about the request speaks Go: not
				// a problem, not a verification's reason or failure in a 200.
				if m := goLeak.FindString(said(res)); m != "" {
					t.Errorf("%s: the answer speaks Go (%q): %.600s", name, m, res.body)
				}
				if res.status < 400 {
					successes++
				} else {
					problems++
					if res.media != contract.MediaProblem {
						t.Errorf("%s: %d with %q, want a problem", name, res.status, res.media)
						return
					}
					if !declared[res.Code] {
						t.Errorf("%s: code %q is not declared for %s", name, res.Code, op.ID)
					}
					if p, ok := model.Problem(res.Code); ok && p.Status != res.status {
						t.Errorf("%s: code %q at %d, the contract says %d", name, res.Code, res.status, p.Status)
					}
				}
				if !credentialed && fx.state(t) != before {
					t.Errorf("%s: a request without a valid credential changed the store", name)
				}
			}
			base := b.build(t, op, false)
			if op.Credential != contract.CredentialNone {
				check("no_credential", base, false)
				wrong := base.with("Authorization", "Bearer svc_ak_01JABCDEFGHJKMNPQRSTVWXYZ0_wrong")
				if op.Credential == contract.CredentialOperator {
					wrong = base.with(operator.HeaderName, `keyid="op-nobody", ts=1, nonce="AAAAAAAAAAAAAAAAAAAAAA", sig=:AAAA:`)
				}
				check("wrong_credential", wrong, false)
			}
			if op.Body != nil {
				for _, hb := range hostileBodies(t, base.body) {
					w := base
					w.body = hb.body
					check(hb.name, credential(w), true)
					if op.Credential != contract.CredentialNone {
						check(hb.name+"/no_credential", w, false)
					}
				}
				w := base
				w.header = w.header.Clone()
				w.header.Set("Content-Type", "text/plain")
				check("wrong_media_type", credential(w), true)
			}
			for _, p := range declaredParams(op) {
				if p.in == "header" {
					continue
				}
				for _, v := range []string{"", "x", "-1", "0", "9223372036854775808", strings.Repeat("9", 400), "%00", "\u202e"} {
					if _, err := strconv.ParseUint(v, 10, 64); streams(op) && (err == nil || v == "") {
						// A valid start opens an endless stream; the stream's
						// own tests cover it (sse_test.go).
						continue
					}
					w := b.build(t, op, false)
					switch p.in {
					case "path":
						w.path = strings.Replace(w.path, "/"+urlPathSegment(t, b, op, p.name), "/"+escapeSegment(v), 1)
					case "query":
						w.query = setQuery(w.query, p.name, v)
					}
					check(fmt.Sprintf("param_%s=%q", p.name, v), credential(w), true)
				}
			}
		})
	}
	t.Logf("hostile input: %d requests, %d problems, %d successes", sent, problems, successes)
}

// said is what an answer says about the request: the whole of a problem,
// and the reason, failure, detail and message members of anything else
// (a success body may quote what the client stored, which is its own
// business).
func said(res response) string {
	if res.media == contract.MediaProblem {
		return string(res.body)
	}
	var v any
	if json.Unmarshal(res.body, &v) != nil {
		return ""
	}
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, vv := range x {
				switch k {
				case "reason", "failure", "detail", "message":
					if s, ok := vv.(string); ok {
						b.WriteString(s + "\n")
						continue
					}
				}
				walk(vv)
			}
		case []any:
			for _, vv := range x {
				walk(vv)
			}
		}
	}
	walk(v)
	return b.String()
}

// streams reports an operation whose success is an event stream.
func streams(op contract.Operation) bool {
	for _, r := range op.Responses {
		for _, c := range r.Content {
			if c.MediaType == "text/event-stream" {
				return true
			}
		}
	}
	return false
}

// urlPathSegment is the escaped value the builder puts in a path parameter.
func urlPathSegment(t testing.TB, b builder, op contract.Operation, name string) string {
	t.Helper()
	v, ok := b.params[paramKey{op.Params, "path", name}]
	if !ok {
		t.Fatalf("%s: no value for path parameter %s", op.ID, name)
	}
	return url.PathEscape(v.value)
}

func escapeSegment(v string) string {
	if v == "" {
		return "%20" // an empty segment would be a different route
	}
	return url.PathEscape(v)
}

func setQuery(raw, name, v string) string {
	q, _ := url.ParseQuery(raw)
	q.Set(name, v)
	return q.Encode()
}

// TestZeroIsNotAbsent: where the contract says an optional number is at
// least 1 (or above 0), sending 0 is refused at that member; leaving it
// out is what absent means.
func TestZeroIsNotAbsent(t *testing.T) {
	model := product.Model()
	for _, tc := range []struct{ op, member string }{
		{"memory.recall", "limit"},
		{"delivery.dispute", "claimMinor"},
		{"custody.ledger", "limit"},
	} {
		t.Run(tc.op, func(t *testing.T) {
			op, ok := model.Operation(tc.op)
			if !ok {
				t.Fatalf("no operation %s", tc.op)
			}
			fx := newMatrixFixture(t)
			b := builder{params: matrixParams(fx), bodies: matrixBodies(fx), byOp: matrixOpBodies(fx)}
			w := b.build(t, op, false)
			var body map[string]any
			if err := json.Unmarshal(w.body, &body); err != nil {
				t.Fatal(err)
			}
			body[tc.member] = 0
			w.body, _ = json.Marshal(body)
			switch op.Credential {
			case contract.CredentialAgent:
				w = w.with("Authorization", "Bearer "+fx.cred)
			case contract.CredentialOperator:
				w = w.with(operator.HeaderName, sign(t, mustSigner(t)(fx.keys.ops[0].signer(matrixClock, matrixBase)), op.ID, w))
			}
			// A signed operator request spends its nonce, whatever comes
			// after: the record is what must not change.
			before := fx.state(t).size
			res := fx.send(t, w)
			var p struct {
				Errors []struct{ Field string }
			}
			_ = json.Unmarshal(res.body, &p)
			if res.status != 400 || res.Code != contract.CodeRequestValidation || len(p.Errors) != 1 || p.Errors[0].Field != tc.member {
				t.Errorf("%s with %s: 0: %d %s %s, want 400 request.validation at %s", tc.op, tc.member, res.status, res.Code, res.body, tc.member)
			}
			if after := fx.state(t).size; after != before {
				t.Errorf("a refused request grew the record from %d to %d entries", before, after)
			}
		})
	}
}
