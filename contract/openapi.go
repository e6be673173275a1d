package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Header names the contract declares.
const (
	HeaderRequestID  = "X-Request-Id"
	HeaderRetryAfter = "Retry-After"
	HeaderSignature  = "Svc-Signature"
	HeaderOperator   = "Svc-Operator"
	HeaderSvcTags    = "X-Svc-Tags"
	// HeaderReplayed ("true") marks a response that repeats the stored
	// outcome of an earlier request (the same idempotency key, or the same
	// signed statement) instead of acting again.
	HeaderReplayed = "Idempotent-Replayed"
	// The request budget of a rate-limited caller, on every response whose
	// request spent a token of it: the bucket's size, the tokens left, and
	// when it is full again (Unix seconds).
	HeaderRateLimitLimit     = "X-RateLimit-Limit"
	HeaderRateLimitRemaining = "X-RateLimit-Remaining"
	HeaderRateLimitReset     = "X-RateLimit-Reset"
	// HeaderWWWAuthenticate carries the challenge of a refused DPoP proof
	// (RFC 9449 §7.1) on a 401.
	HeaderWWWAuthenticate = "WWW-Authenticate"
)

// replayer is implemented by response types that can be the stored
// outcome of an earlier request, answered again (see [HeaderReplayed]).
type replayer interface{ WasReplayed() bool }

var replayerType = reflect.TypeFor[replayer]()

// Security scheme names in the OpenAPI document.
const (
	SchemeAgent    = "agentBearer"
	SchemeOperator = "operatorSignature"
)

// OpenAPI returns the OpenAPI 3.1.0 document of the model for a server at
// baseURL (absolute http or https, no query; a trailing slash is dropped).
// The output is deterministic: the same model and baseURL give the same
// bytes, with object keys sorted.
//
// Besides the standard objects it carries, per operation, x-credential
// (none, agent or operator) and x-problem-codes (every code the operation
// can answer with), and at the top level x-problems: the problem registry.
// Event kinds are described as webhooks: the POST each subscribed endpoint
// receives.
func (m *Model) OpenAPI(baseURL string) ([]byte, error) {
	base, err := cleanBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	doc := map[string]any{
		"openapi":           "3.1.0",
		"jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
		"info": map[string]any{
			"title":       m.title,
			"version":     m.version,
			"description": m.description,
		},
		"servers":    []any{map[string]any{"url": base}},
		"paths":      m.paths(),
		"webhooks":   m.webhooks(),
		"components": m.components(),
		"tags":       m.tags(),
		"x-problems": m.problemRegistry(base),
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("contract: encode OpenAPI document: %w", err)
	}
	return buf.Bytes(), nil
}

func cleanBaseURL(s string) (string, error) {
	s = strings.TrimRight(s, "/")
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("contract: base URL %q is not an absolute http(s) URL without query", s)
	}
	return s, nil
}

func (m *Model) tags() []any {
	seen := make(map[string]bool)
	var names []string
	for _, op := range m.ops {
		t := opTag(op.ID)
		if !seen[t] {
			seen[t] = true
			names = append(names, t)
		}
	}
	sort.Strings(names)
	out := make([]any, 0, len(names)+1)
	for _, n := range names {
		out = append(out, map[string]any{"name": n})
	}
	if len(m.events) > 0 {
		out = append(out, map[string]any{"name": "events",
			"description": "Outbound webhook deliveries, derived from the signed record."})
	}
	return out
}

func opTag(id string) string {
	t, _, _ := strings.Cut(id, ".")
	return t
}

func ref(kind, name string) map[string]any {
	return map[string]any{"$ref": "#/components/" + kind + "/" + name}
}

func (m *Model) paths() map[string]any {
	paths := make(map[string]any)
	for _, op := range m.ops {
		item, _ := paths[op.Path].(map[string]any)
		if item == nil {
			item = make(map[string]any)
			paths[op.Path] = item
		}
		item[strings.ToLower(op.Method)] = m.operation(op)
	}
	return paths
}

func (m *Model) operation(op Operation) map[string]any {
	docs := m.opDocs[op.ID]
	params := []any{ref("parameters", "RequestId")}
	for _, p := range docs.params {
		pm := map[string]any{"name": p.name, "in": p.in, "schema": p.schema}
		if p.required {
			pm["required"] = true
		}
		if p.description != "" {
			pm["description"] = p.description
		}
		params = append(params, pm)
	}
	codes := m.ProblemCodes(op)
	o := map[string]any{
		"operationId":     op.ID,
		"summary":         op.Summary,
		"tags":            []any{opTag(op.ID)},
		"parameters":      params,
		"responses":       m.responses(op, docs, codes),
		"x-credential":    op.Credential.String(),
		"x-problem-codes": codes,
	}
	if op.Description != "" {
		o["description"] = op.Description
	}
	switch op.Credential {
	case CredentialNone:
		o["security"] = []any{} // explicitly none
	case CredentialAgent:
		o["security"] = []any{map[string]any{SchemeAgent: []any{}}}
	case CredentialOperator:
		o["security"] = []any{map[string]any{SchemeOperator: []any{}}}
	case CredentialAgentOrOperator:
		// Alternatives: either one opens the operation.
		o["security"] = []any{map[string]any{SchemeAgent: []any{}}, map[string]any{SchemeOperator: []any{}}}
	}
	if op.Body != nil {
		o["requestBody"] = map[string]any{
			"required":    true,
			"description": "JSON, at most the server's body limit (1 MiB by default). Unknown members are refused.",
			"content":     map[string]any{MediaJSON: map[string]any{"schema": docs.body}},
		}
	}
	return o
}

// The response headers are declared by rule, from what the HTTP layer
// does with every operation of a kind, so that no operation can leave one
// out:
//
//   - X-Request-Id on every response;
//   - Retry-After on the problem statuses with a retry-as-is code;
//   - X-RateLimit-* on every response of a rate-limited operation (agent
//     credential, per key; no credential, per client address) but the 401
//     of an agent operation, which is answered before a token is spent;
//     and on the 401 and 429 of an operator operation: a refused signature
//     that proves no identity spends the client address's budget; an
//     operation open to either credential declares them on every response
//     (an agent's request carries them, an operator's signed one does not:
//     a declared header may be absent);
//   - WWW-Authenticate on the 401 of an operation an agent credential
//     opens;
//   - Idempotent-Replayed on the success responses of an operation that can
//     answer from a stored outcome (see [Model.Replays]) and on its problem
//     statuses that carry one of its own codes (a stored outcome can be a
//     refusal, such as a denied payment; the codes the HTTP layer answers
//     with before the operation runs never are).
func (m *Model) responses(op Operation, docs opSchemas, codes []string) map[string]any {
	out := make(map[string]any)
	limited := op.Credential == CredentialAgent || op.Credential == CredentialNone || op.Credential == CredentialAgentOrOperator
	replays := m.Replays(op)
	rateLimit := func(h map[string]any) {
		for _, name := range []string{HeaderRateLimitLimit, HeaderRateLimitRemaining, HeaderRateLimitReset} {
			h[name] = ref("headers", name)
		}
	}
	for i, r := range op.Responses {
		headers := map[string]any{HeaderRequestID: ref("headers", HeaderRequestID)}
		if limited {
			rateLimit(headers)
		}
		if replays {
			headers[HeaderReplayed] = ref("headers", HeaderReplayed)
		}
		resp := map[string]any{
			"description": r.Description,
			"headers":     headers,
		}
		if len(r.Content) > 0 {
			content := make(map[string]any)
			for j, c := range r.Content {
				content[c.MediaType] = map[string]any{"schema": docs.response[i][j]}
			}
			resp["content"] = content
		}
		out[strconv.Itoa(r.Status)] = resp
	}
	// Group problem codes by status: one response object per status, its
	// schema narrowing code to the codes that status carries.
	byStatus := make(map[int][]string)
	for _, c := range codes {
		p := m.problems[c]
		byStatus[p.Status] = append(byStatus[p.Status], c)
	}
	for status, cs := range byStatus {
		headers := map[string]any{HeaderRequestID: ref("headers", HeaderRequestID)}
		switch op.Credential {
		case CredentialAgent:
			if status != 401 {
				rateLimit(headers)
			}
		case CredentialNone:
			rateLimit(headers)
		case CredentialOperator:
			if status == 401 || status == 429 {
				rateLimit(headers)
			}
		case CredentialAgentOrOperator:
			rateLimit(headers)
		}
		if op.Credential.AcceptsAgent() && status == 401 {
			headers[HeaderWWWAuthenticate] = ref("headers", HeaderWWWAuthenticate)
		}
		enum := make([]any, len(cs))
		var titles []string
		var members []any
		for i, c := range cs {
			enum[i] = c
			p := m.problems[c]
			titles = append(titles, fmt.Sprintf("%s (%s)", c, p.Title))
			if p.Action == ActionRetryAsIs {
				headers[HeaderRetryAfter] = ref("headers", HeaderRetryAfter)
			}
			if replays && slices.Contains(op.Problems, c) && !isCore(c) {
				headers[HeaderReplayed] = ref("headers", HeaderReplayed)
			}
			var then []any
			if ms, ok := m.memberDocs[c]; ok {
				then = append(then, ms)
			}
			if ms, ok := docs.members[c]; ok {
				then = append(then, ms)
			}
			if len(then) > 0 {
				t := then[0]
				if len(then) > 1 {
					t = map[string]any{"allOf": then}
				}
				members = append(members, map[string]any{
					"if":   map[string]any{"properties": map[string]any{"code": map[string]any{"const": c}}, "required": []any{"code"}},
					"then": t,
				})
			}
		}
		schema := ref("schemas", "Problem")
		schema["properties"] = map[string]any{"code": map[string]any{"enum": enum}}
		if len(members) > 0 {
			// The members of each code, for that code only.
			schema["allOf"] = members
		}
		out[strconv.Itoa(status)] = map[string]any{
			"description": "Problem: " + strings.Join(titles, ", "),
			"headers":     headers,
			"content":     map[string]any{MediaProblem: map[string]any{"schema": schema}},
		}
	}
	return out
}

// isCore reports whether code is one the HTTP layer answers with whatever
// the operation ([Core]).
func isCore(code string) bool {
	for _, p := range coreProblems() {
		if p.Code == code {
			return true
		}
	}
	return false
}

// Replays reports whether op can answer a request with the stored outcome
// of an earlier one, marked Idempotent-Replayed: true. That is so of an
// operation that takes an idempotency key (an Idempotency-Key header
// parameter, or an idempotencyKey member anywhere in its body) and of one
// whose response type says whether it was replayed (a WasReplayed() bool
// method, as the protocol's results have).
func (m *Model) Replays(op Operation) bool {
	if op.Params != nil {
		for _, p := range m.opDocs[op.ID].params {
			if p.in == "header" && strings.EqualFold(p.name, "Idempotency-Key") {
				return true
			}
		}
	}
	if op.Body != nil && hasMember(op.Body, "idempotencyKey", map[reflect.Type]bool{}) {
		return true
	}
	for _, r := range op.Responses {
		for _, c := range r.Content {
			for _, t := range append([]reflect.Type{c.Type}, c.OneOf...) {
				if t != nil && (t.Implements(replayerType) || reflect.PointerTo(t).Implements(replayerType)) {
					return true
				}
			}
		}
	}
	return false
}

// hasMember reports whether t, a struct, has a JSON member named name at
// any depth (through struct, pointer, slice and map types).
func hasMember(t reflect.Type, name string, seen map[reflect.Type]bool) bool {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return false
	}
	seen[t] = true
	for f := range t.Fields() {
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		n, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if n == "-" {
			continue
		}
		if n == name || hasMember(f.Type, name, seen) {
			return true
		}
	}
	return false
}

func (m *Model) components() map[string]any {
	schemas := make(map[string]any, len(m.gen.components))
	for name, s := range m.gen.components {
		schemas[name] = s
	}
	return map[string]any{
		"schemas": schemas,
		"securitySchemes": map[string]any{
			SchemeAgent: map[string]any{
				"type": "http", "scheme": "bearer",
				"description": "The agent credential: Authorization: Bearer <credential>.",
			},
			SchemeOperator: map[string]any{
				"type": "apiKey", "in": "header", "name": HeaderOperator,
				"description": "A person's detached signature over the operation id, method, URL, timestamp, " +
					"nonce and body digest (RFC 8941 dictionary: keyid, ts, nonce, sig).",
			},
		},
		"parameters": map[string]any{
			"RequestId": map[string]any{
				"name": HeaderRequestID, "in": "header",
				"description": "Caller's request id: 1 to 128 visible ASCII characters. Echoed on the response; " +
					"one is minted (req_ + ULID) when absent or invalid.",
				"schema": map[string]any{"type": "string", "minLength": 1, "maxLength": 128, "pattern": `^[\x21-\x7E]+$`},
			},
		},
		"headers": map[string]any{
			"X-Request-Id": map[string]any{
				"description": "The request id: the caller's value when valid, else a minted req_ + ULID.",
				"schema":      map[string]any{"type": "string"},
			},
			"Retry-After": map[string]any{
				"description": "Seconds to wait before sending the same request again; present whenever the problem's action is retry-as-is.",
				"schema":      map[string]any{"type": "integer", "minimum": 1},
			},
			HeaderReplayed: map[string]any{
				"description": "true when this response repeats the stored outcome of an earlier request (the same idempotency key, " +
					"or the same signed statement) instead of acting again; absent otherwise. Its body is the first response's, " +
					"requestId included.",
				"schema": map[string]any{"type": "string", "const": "true"},
			},
			HeaderRateLimitLimit: map[string]any{
				"description": "The caller's request budget: the size of its bucket (per agent key, or per client address " +
					"for operations without a credential). Sent whenever the request spent a token, refused or not.",
				"schema": map[string]any{"type": "integer", "minimum": 0},
			},
			HeaderRateLimitRemaining: map[string]any{
				"description": "Tokens left in the caller's bucket after this request.",
				"schema":      map[string]any{"type": "integer", "minimum": 0},
			},
			HeaderRateLimitReset: map[string]any{
				"description": "When the caller's bucket is full again, in Unix seconds.",
				"schema":      map[string]any{"type": "integer", "minimum": 0},
			},
			HeaderWWWAuthenticate: map[string]any{
				"description": "The challenge of a refused DPoP proof (RFC 9449 §7.1), e.g. " +
					`DPoP algs="EdDSA ES256", error="invalid_dpop_proof", error_description="jti_replayed"; ` +
					"the problem's reason member carries the same reason.",
				"schema": map[string]any{"type": "string"},
			},
		},
	}
}

func (m *Model) webhooks() map[string]any {
	out := make(map[string]any)
	for _, ev := range m.events {
		schema := maps.Clone(m.eventDocs[ev.Name])
		if _, isRef := schema["$ref"]; isRef {
			schema["properties"] = map[string]any{"type": map[string]any{"const": ev.Name}}
		}
		out[ev.Name] = map[string]any{
			"post": map[string]any{
				"operationId": "event." + ev.Name,
				"summary":     ev.Description,
				"tags":        []any{"events"},
				"description": "Delivered at least once to every active endpoint subscribed to " + ev.Name +
					". Verify Svc-Signature over the raw body before parsing it; deduplicate on id.",
				"parameters": []any{map[string]any{
					"name": HeaderSignature, "in": "header", "required": true,
					"description": "t=<unix seconds>,v1=<hex HMAC-SHA256 of \"{t}.{raw body}\" keyed by the endpoint secret>; " +
						"several v1 values during secret rotation.",
					"schema": map[string]any{"type": "string", "pattern": `^t=[0-9]+(,v1=[0-9a-f]{64})+$`},
				}},
				"requestBody": map[string]any{
					"required": true,
					"content":  map[string]any{MediaJSON: map[string]any{"schema": schema}},
				},
				"responses": map[string]any{
					"2XX": map[string]any{"description": "Received; delivery of this event ends."},
					"410": map[string]any{"description": "Gone: the endpoint is deactivated and receives no more deliveries."},
				},
			},
		}
	}
	return out
}

func (m *Model) problemRegistry(base string) map[string]any {
	out := make(map[string]any, len(m.codes))
	for _, c := range m.codes {
		p := m.problems[c]
		e := map[string]any{
			"type":        base + "/problems/" + c,
			"status":      p.Status,
			"title":       p.Title,
			"action":      string(p.Action),
			"description": p.Description,
		}
		if p.RetryAfter > 0 {
			e["retryAfter"] = p.RetryAfter
		}
		out[c] = e
	}
	return out
}
