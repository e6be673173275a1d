package mcpserver

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/countersign/countersign/commerce"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/x402/fetch"
)

// signing says what the server completes and signs in a tool's request
// before sending it, so that the agent never handles a JWS.
type signing int

const (
	signNone     signing = iota
	signPayment          // the body is a pay.Instruction (POST /pay)
	signPurchase         // the body is a commerce.PurchaseRequest (POST /buy)
	signFetch            // the body is a fetch.Request (POST /x402/fetch)
	signSpend            // the body's "spend" is a pay.Instruction signed for the method
)

// mandateKind says which of the agent's mandates fills a request's
// top-level "mandate" member when the agent leaves it out.
type mandateKind int

const (
	mandateNone    mandateKind = iota
	mandatePayment             // session.open, mandate.verify
	mandateMemory              // memory.*
)

// ToolSpec is one tool generated from one operation of the contract model.
type ToolSpec struct {
	// Name is the tool's name: the operation id with dots as underscores
	// (pay_create, commerce_buy, hold_place), the form every MCP client
	// accepts.
	Name string
	// Operation is the operation the tool calls.
	Operation contract.Operation
	// InputSchema is the tool's input: a self-contained JSON Schema (draft
	// 2020-12) object, its references under $defs.
	InputSchema map[string]any
	// Description is the operation's summary and description, and what
	// the tool fills in for the agent.
	Description string

	params      []paramSpec // path and query parameters, by name
	signing     signing
	mandate     mandateKind
	idempotent  bool // the request carries an idempotency key the tool may derive
	idemInSpend bool // ... inside "spend" rather than at the top level
	idemHeader  bool // ... also sent as the Idempotency-Key header
	selfSource  bool // a memory fact's source defaults to the agent itself
	hasBody     bool
}

type paramSpec struct {
	name string
	in   string // path or query
}

// Excluded is an operation of the model that is no tool, and why.
type Excluded struct {
	Operation string
	Reason    string
}

// exclusion returns why op is no tool, or "" when it is one. The rules,
// in order:
//
//  1. Operator operations (contract.CredentialOperator): an agent never
//     acts for a person. Approving, declining, refunding, the kill switch,
//     erasing memory, resolving disputes, issuing keys: none is a tool.
//  2. Operations that take no credential: the server's documents
//     (/openapi.json, /asyncapi.json, /problems/{code}), its liveness, the
//     public disclosure (served as a resource instead) and a counterparty's
//     side of the ADP handshake and of the offline memory check. They are
//     not the agent acting as itself.
//  3. Streams (a text/event-stream answer, /audit/stream): a tool call
//     answers once. The stream is served as a resource subscription.
//
// Everything an agent credential opens otherwise is a tool: pay, quote,
// buy, resolve, verify, disclose, memory, the protocol surface's agent
// methods, intent and record reads, usage.
func exclusion(op contract.Operation) string {
	switch {
	case op.Credential == contract.CredentialOperator:
		return "operator action: a person's, never an agent's"
	case !op.Credential.AcceptsAgent():
		return "no credential: a document or another party's side, not the agent acting"
	case streams(op):
		return "a stream: served as the subscribable resource " + intentsURI
	}
	return ""
}

func streams(op contract.Operation) bool {
	for _, r := range op.Responses {
		for _, c := range r.Content {
			if c.MediaType == contract.MediaEventStream {
				return true
			}
		}
	}
	return false
}

var (
	instructionType = reflect.TypeFor[pay.Instruction]()
	purchaseType    = reflect.TypeFor[commerce.PurchaseRequest]()
	fetchType       = reflect.TypeFor[fetch.Request]()
	rememberType    = reflect.TypeFor[memory.RememberRequest]()
)

// GenerateTools walks the model and returns a tool for every operation an
// agent may call (see the exclusion rules above), and the operations it
// left out with the reason. The input schema of each tool is the
// operation's JSON Schema from the model's OpenAPI projection (its path
// and query parameters as members, beside the body's), with what the
// tool fills in made optional: the envelope and signature of an
// instruction, purchase or spend (the server signs them), its terms (the
// rail's facts), idempotency keys (derived) and mandates (configured).
// Header parameters are the client's business (X-Request-Id,
// Idempotency-Key) and never inputs.
func GenerateTools(m *contract.Model) ([]ToolSpec, []Excluded, error) {
	raw, err := m.OpenAPI("http://countersign.invalid")
	if err != nil {
		return nil, nil, err
	}
	var doc struct {
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, nil, err
	}
	var tools []ToolSpec
	var excluded []Excluded
	for _, op := range m.Operations() {
		if why := exclusion(op); why != "" {
			excluded = append(excluded, Excluded{Operation: op.ID, Reason: why})
			continue
		}
		oa := doc.Paths[op.Path][strings.ToLower(op.Method)]
		if oa == nil {
			return nil, nil, fmt.Errorf("mcpserver: operation %s is not in the OpenAPI projection", op.ID)
		}
		t, err := toolFor(op, oa, doc.Components.Schemas)
		if err != nil {
			return nil, nil, fmt.Errorf("mcpserver: operation %s: %w", op.ID, err)
		}
		tools = append(tools, t)
	}
	return tools, excluded, nil
}

// ToolName is the name of the tool of an operation id.
func ToolName(operationID string) string { return strings.ReplaceAll(operationID, ".", "_") }

func toolFor(op contract.Operation, oa map[string]any, comps map[string]map[string]any) (ToolSpec, error) {
	t := ToolSpec{Name: ToolName(op.ID), Operation: op}
	defs := map[string]map[string]any{} // the tool's own copies, edited freely
	def := func(name string) map[string]any {
		if d, ok := defs[name]; ok {
			return d
		}
		d := deepCopy(comps[name]).(map[string]any)
		defs[name] = d
		return d
	}

	schema := map[string]any{"type": "object", "properties": map[string]any{}}
	var required []string
	if rb, ok := oa["requestBody"].(map[string]any); ok {
		t.hasBody = true
		bs, _ := dig(rb, "content", contract.MediaJSON, "schema").(map[string]any)
		if bs == nil {
			return t, fmt.Errorf("request body without a JSON schema")
		}
		if name, ok := refName(bs); ok {
			body := def(name)
			if body["type"] != "object" {
				return t, fmt.Errorf("body %s is not an object", name)
			}
			schema = deepCopy(body).(map[string]any)
			delete(defs, name) // inlined, unless referenced again below
		} else if bs["type"] == "object" {
			schema = deepCopy(bs).(map[string]any)
		} else {
			// A body that is one of several objects (identity.verify): the
			// tool's input is that object.
			schema = map[string]any{"type": "object"}
			for k, v := range bs {
				schema[k] = deepCopy(v)
			}
		}
		if r, ok := schema["required"].([]any); ok {
			for _, v := range r {
				required = append(required, v.(string))
			}
		}
		if schema["properties"] == nil && schema["oneOf"] == nil {
			schema["properties"] = map[string]any{}
		}
	}
	props, _ := schema["properties"].(map[string]any)

	// Path and query parameters become members beside the body's.
	params, _ := oa["parameters"].([]any)
	for _, p := range params {
		pm, _ := p.(map[string]any)
		in, _ := pm["in"].(string)
		if in != "path" && in != "query" {
			continue // header parameters ($ref RequestId, Idempotency-Key, Last-Event-ID)
		}
		name, _ := pm["name"].(string)
		if props == nil {
			return t, fmt.Errorf("parameter %s beside a body that is not a plain object", name)
		}
		if _, clash := props[name]; clash {
			return t, fmt.Errorf("parameter %s has the name of a body member", name)
		}
		ps, _ := deepCopy(pm["schema"]).(map[string]any)
		if ps == nil {
			ps = map[string]any{}
		}
		if d, ok := pm["description"].(string); ok {
			ps["description"] = d
		}
		props[name] = ps
		if req, _ := pm["required"].(bool); req {
			required = append(required, name)
		}
		t.params = append(t.params, paramSpec{name: name, in: in})
	}
	if hs, ok := op.Params, op.Params != nil; ok {
		for i := range hs.NumField() {
			if hs.Field(i).Tag.Get("header") == "Idempotency-Key" {
				t.idemHeader = true
			}
		}
	}

	// What the tool fills in.
	optional := func(names ...string) {
		required = slices.DeleteFunc(required, func(n string) bool { return slices.Contains(names, n) })
	}
	relaxInstruction := func(d map[string]any) {
		p, _ := d["properties"].(map[string]any)
		delete(p, "envelope")
		setRequired(d, without(d["required"], "envelope", "idempotencyKey", "purpose", "terms"))
		if ik, ok := p["idempotencyKey"].(map[string]any); ok {
			ik["description"] = idemDoc
		}
		if pp, ok := p["purpose"].(map[string]any); ok {
			pp["description"] = "Why, for the person who may approve it (one line). Default: a generic purpose naming the tool."
		}
	}
	relaxTerms := func() {
		if _, ok := comps["Terms"]; ok {
			d := def("Terms")
			setRequired(d, without(d["required"], "reversibility", "finality", "credential", "capitalSource", "presence"))
			d["description"] = "How the money moves. Only rail is needed: the rest defaults to the rail's facts " +
				"(sandbox rails, acp and ucp are known), the credential in use, the payer's own capital and delegated presence."
		}
	}
	relaxAmount := func() {
		if _, ok := comps["Amount"]; ok {
			d := def("Amount")
			setRequired(d, without(d["required"], "currency"))
			if p, ok := dig(d, "properties", "currency").(map[string]any); ok {
				p["description"] = "ISO 4217 code (USD) or CAIP-19 asset id; default USD."
			}
		}
	}
	switch {
	case op.Body == instructionType:
		relaxAmount()
		t.signing, t.idempotent = signPayment, true
		delete(props, "envelope")
		optional("envelope", "idempotencyKey", "purpose", "terms")
		relaxTerms()
	case op.Body == purchaseType:
		t.signing, t.idempotent = signPurchase, true
		delete(props, "envelope")
		optional("envelope", "idempotencyKey", "purpose", "terms")
		relaxTerms()
	case op.Body == fetchType:
		t.signing, t.idempotent = signFetch, true
		delete(props, "envelope")
		optional("envelope", "idempotencyKey", "purpose", "terms", "bodyDigest")
		relaxTerms()
	case op.Body != nil && hasSpend(op.Body):
		t.signing, t.idempotent, t.idemInSpend = signSpend, true, true
		relaxAmount()
		relaxInstruction(def("Instruction"))
		relaxTerms()
	}
	if props != nil {
		if p, ok := props["idempotencyKey"].(map[string]any); ok {
			t.idempotent = true
			p["description"] = idemDoc
			optional("idempotencyKey")
		}
		if m, ok := props["mandate"].(map[string]any); ok && m["type"] == "string" {
			t.mandate = mandatePayment
			if strings.HasPrefix(op.ID, "memory.") {
				t.mandate = mandateMemory
			}
			m["description"] = "Optional: the configured mandate when omitted. " + fmt.Sprint(m["description"])
			optional("mandate")
		}
	}
	if op.Body == rememberType {
		// Who said it: the agent itself, unless it says otherwise (the CLI's
		// default too).
		if p, ok := props["source"].(map[string]any); ok {
			t.selfSource = true
			p["description"] = "Who said it, {kind, ref}; default {\"kind\":\"agent\",\"ref\":<this agent's id>}."
			optional("source")
		}
	}
	if t.signing == signPayment || t.signing == signPurchase || t.signing == signFetch {
		if p, ok := props["purpose"].(map[string]any); ok {
			p["description"] = "Why, for the person who may approve it (one line). Default: a generic purpose naming the tool."
		}
	}
	if len(required) > 0 {
		schema["required"] = toAny(required)
	} else {
		delete(schema, "required")
	}

	// Every reference the schema reaches, under $defs.
	rewriteRefs(schema)
	all := map[string]any{}
	var pending []string
	collectRefs(schema, &pending)
	for len(pending) > 0 {
		name := pending[0]
		pending = pending[1:]
		if _, done := all[name]; done {
			continue
		}
		if _, ok := comps[name]; !ok {
			return t, fmt.Errorf("reference to unknown schema %s", name)
		}
		d := def(name)
		rewriteRefs(d)
		all[name] = d
		collectRefs(d, &pending)
	}
	if len(all) > 0 {
		schema["$defs"] = all
	}
	t.InputSchema = schema
	t.Description = describe(op, t)
	return t, nil
}

const idemDoc = "Optional. Omitted, the tool derives it from this call (tool, arguments and MCP session): a retry of the " +
	"same call replays the first answer and never acts twice. To repeat the same request on purpose, give a new key."

func hasSpend(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if name == "spend" && ft == instructionType {
			return true
		}
	}
	return false
}

func describe(op contract.Operation, t ToolSpec) string {
	var b strings.Builder
	b.WriteString(op.Summary)
	if !strings.HasSuffix(op.Summary, ".") {
		b.WriteString(".")
	}
	if op.Description != "" {
		b.WriteString("\n\n" + op.Description)
	}
	b.WriteString("\n\n")
	switch t.signing {
	case signPayment, signPurchase, signFetch:
		b.WriteString("The tool signs the request with the agent's key under its mandate: give what to pay, buy or fetch, never an envelope or signature. ")
	case signSpend:
		b.WriteString("The tool signs spend with the agent's key for this method: give payee and amount (and rail), never an envelope or signature. ")
	}
	if op.MovesValue {
		b.WriteString("This can move money. A settled answer is final; an answer with outcome approval_pending means a person must approve it first: " +
			"tell the user, and call " + waitToolName + " with its intentId to learn the decision. ")
	}
	b.WriteString("A refusal is a tool error carrying the problem's code, detail and action " +
		"(fix-request: change the arguments; retry-as-is: call again unchanged after retryAfter; await-operator: a person must act; " +
		"continue-at-link: hand the link to the user; reauthenticate or stop: do not retry, tell the user).")
	fmt.Fprintf(&b, " (Countersign operation %s, %s %s.)", op.ID, op.Method, op.Path)
	return b.String()
}

// Helpers on decoded JSON.

func dig(m map[string]any, keys ...string) any {
	var cur any = m
	for _, k := range keys {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[k]
	}
	return cur
}

func refName(s map[string]any) (string, bool) {
	r, ok := s["$ref"].(string)
	if !ok {
		return "", false
	}
	name, ok := strings.CutPrefix(r, "#/components/schemas/")
	return name, ok
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// rewriteRefs points every #/components/schemas/X at #/$defs/X.
func rewriteRefs(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); k == "$ref" && ok {
				x[k] = strings.Replace(s, "#/components/schemas/", "#/$defs/", 1)
				continue
			}
			if k == "$defs" {
				continue
			}
			rewriteRefs(e)
		}
	case []any:
		for _, e := range x {
			rewriteRefs(e)
		}
	}
}

func collectRefs(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == "$defs" {
				continue
			}
			if s, ok := x[k].(string); k == "$ref" && ok {
				if name, ok := strings.CutPrefix(s, "#/$defs/"); ok {
					*out = append(*out, name)
				}
				continue
			}
			collectRefs(x[k], out)
		}
	case []any:
		for _, e := range x {
			collectRefs(e, out)
		}
	}
}

func without(req any, names ...string) []any {
	r, _ := req.([]any)
	var out []any
	for _, v := range r {
		if s, _ := v.(string); !slices.Contains(names, s) {
			out = append(out, v)
		}
	}
	return out
}

// setRequired sets a schema's required list, or removes it when empty
// (an empty list is allowed but says nothing).
func setRequired(d map[string]any, req []any) {
	if len(req) == 0 {
		delete(d, "required")
		return
	}
	d["required"] = req
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
