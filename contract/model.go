package contract

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Credential is the class of credential an operation requires.
//
// The zero value is invalid on purpose: an operation that does not say who
// may call it cannot be registered.
type Credential int

const (
	credentialUnset Credential = iota
	// CredentialNone: no credential. Such operations reveal nothing private
	// and are rate limited per client address.
	CredentialNone
	// CredentialAgent: an agent credential in the Authorization header.
	CredentialAgent
	// CredentialOperator: an operator signature in the Svc-Operator header.
	// Nothing else opens these operations.
	CredentialOperator
	// CredentialAgentOrOperator: an agent credential, or instead an
	// operator signature (a read an operator's console makes of what
	// agents read: the record, an intent). A request that carries the
	// Svc-Operator header is the operator's, and the signature alone
	// decides it (an agent credential beside it is not looked at); any
	// other request is an agent's. An operator signature opens these as it
	// opens an operator operation; an agent credential still opens no
	// CredentialOperator operation.
	CredentialAgentOrOperator
)

// String returns "none", "agent", "operator" or "agent-or-operator" (the
// x-credential value in the OpenAPI document), or "unset" for the invalid
// zero value.
func (c Credential) String() string {
	switch c {
	case CredentialNone:
		return "none"
	case CredentialAgent:
		return "agent"
	case CredentialOperator:
		return "operator"
	case CredentialAgentOrOperator:
		return "agent-or-operator"
	case credentialUnset:
		return "unset"
	}
	return fmt.Sprintf("Credential(%d)", int(c))
}

// Valid reports whether c is one of the four defined classes.
func (c Credential) Valid() bool {
	return c == CredentialNone || c == CredentialAgent || c == CredentialOperator || c == CredentialAgentOrOperator
}

// AcceptsAgent reports whether an agent credential opens operations of
// class c.
func (c Credential) AcceptsAgent() bool {
	return c == CredentialAgent || c == CredentialAgentOrOperator
}

// AcceptsOperator reports whether an operator signature opens operations
// of class c.
func (c Credential) AcceptsOperator() bool {
	return c == CredentialOperator || c == CredentialAgentOrOperator
}

// Media types used by the model.
const (
	MediaJSON    = "application/json"
	MediaProblem = "application/problem+json"
	MediaText    = "text/plain"
	MediaHTML    = "text/html"
	// MediaEventStream is a Server-Sent Events stream (WHATWG HTML).
	MediaEventStream = "text/event-stream"
)

// Operation declares one HTTP operation.
type Operation struct {
	// ID is the stable operation id, served as operationId: lowercase
	// dot-separated words, e.g. "audit.list". Operator signatures cover it,
	// so it never changes once released. Ids starting with "event." are
	// reserved for event kinds.
	ID string
	// Method is the upper-case HTTP method: GET, POST, PUT, PATCH or DELETE.
	Method string
	// Path is the path in Go 1.22 ServeMux pattern syntax, e.g.
	// "/audit/entries/{seq}". Wildcards name path parameters.
	Path string
	// Summary is one line for people; Description may say more.
	Summary     string
	Description string
	// Credential says who may call the operation. Required.
	Credential Credential
	// MovesValue marks an operation that can move money (a payment, an
	// approval, a refund, a purchase): such an operation passes the gate,
	// or is an operator's override of it. Projected into the deployment's
	// ADP disclosure (tools[].movesValue, access gated); not into
	// /openapi.json, whose shape it does not change.
	MovesValue bool
	// Params is a struct type whose fields carry `path`, `query` or
	// `header` tags; nil when the operation takes no parameters. Every
	// wildcard of Path must have a `path` field and vice versa.
	Params reflect.Type
	// Body is the type of the JSON request body; nil when there is none.
	Body reflect.Type
	// Responses are the success responses; the first is the usual one.
	Responses []Response
	// Problems are the problem codes specific to this operation. Codes
	// every operation of its kind can answer with (internal, rate_limited,
	// the request.* codes when it takes input, auth.* or
	// operator.unauthorized by credential) are implied; see
	// [Model.ProblemCodes].
	Problems []string
	// ProblemMembers adds, for this operation only, members to a problem
	// code's (see [ProblemType.Members]): the Go struct type of the members
	// this operation's problems of that code may carry besides the code's
	// own, for example the cart of a purchase refused as intent.malformed.
	// Each code must be one this operation can answer with.
	ProblemMembers map[string]reflect.Type
}

// Response declares one success response of an operation.
type Response struct {
	// Status is the HTTP status code, 100–399.
	Status int
	// Description is required by OpenAPI; say what the response means.
	Description string
	// Content lists the representations, the default first. Empty means
	// no body (e.g. 204).
	Content []Content
}

// Content is one representation of a response.
type Content struct {
	// MediaType, e.g. [MediaJSON].
	MediaType string
	// Type is the Go type encoded as JSON. Nil means a text body (a string
	// schema) for non-JSON media types and an arbitrary JSON object for
	// JSON ones, unless OneOf is set.
	Type reflect.Type
	// OneOf, instead of Type, declares a body that is exactly one of these
	// Go types (a oneOf schema): for a response whose shape depends on
	// what the request acted on, such as an approval that settles a
	// payment (a Receipt) or places a hold (its authorization). The types'
	// schemas must not overlap: each must refuse the others' bodies.
	OneOf []reflect.Type
}

// JSON returns a response with one application/json representation of t.
func JSON(status int, description string, t reflect.Type) Response {
	return Response{Status: status, Description: description, Content: []Content{{MediaType: MediaJSON, Type: t}}}
}

// JSONOneOf returns a response with one application/json representation
// that is exactly one of ts (see [Content.OneOf]).
func JSONOneOf(status int, description string, ts ...reflect.Type) Response {
	return Response{Status: status, Description: description, Content: []Content{{MediaType: MediaJSON, OneOf: ts}}}
}

// EventKind declares one kind of outbound event.
type EventKind struct {
	// Name is the kind, e.g. "payment.settled".
	Name string
	// Description says when the event is sent.
	Description string
	// Payload is the Go type of the delivered JSON body, normally [Event].
	Payload reflect.Type
}

// Definition is the raw declaration of a model, checked by [Build]: its
// own declarations followed by those of its Parts. A whole API is normally
// assembled from parts, one per package, with [Core] among them; a small
// one (a test, an example) may declare everything in the Definition's own
// fields.
type Definition struct {
	// Title, Version and Description fill the OpenAPI info object.
	Title       string
	Version     string
	Description string
	Operations  []Operation
	Events      []EventKind
	Problems    []ProblemType
	// Rules are custom validate tags, registered on the model's validator
	// and projected into schemas.
	Rules []Rule
	// Parts are declarations made elsewhere, in order. Operations and event
	// kinds keep the order of the definition's own declarations, then of
	// the parts.
	Parts []Part
}

// parts returns the definition's own declarations as a first, unnamed part,
// followed by its Parts.
func (d Definition) parts() []Part {
	own := Part{Operations: d.Operations, Problems: d.Problems, Events: d.Events, Rules: d.Rules}
	return append([]Part{own}, d.Parts...)
}

// declaredTwice describes a declaration made twice, naming who made each
// (the parts' names; "" is the definition itself).
func declaredTwice(what, first, second string) error {
	name := func(n string) string {
		if n == "" {
			return "the definition"
		}
		return n
	}
	if first == second {
		if first == "" {
			return fmt.Errorf("%s declared twice", what)
		}
		return fmt.Errorf("%s declared twice by %s", what, first)
	}
	return fmt.Errorf("%s declared twice, by %s and by %s", what, name(first), name(second))
}

// Model is a checked, immutable [Definition]: the operations, event kinds
// and problem types of one API, with the validator and the JSON Schemas
// derived from them. It is safe for concurrent use.
type Model struct {
	title, version, description string

	ops      []Operation
	byID     map[string]int
	events   []EventKind
	problems map[string]ProblemType
	codes    []string // sorted

	validator  *ruleValidator
	gen        *schemaGen
	opDocs     map[string]opSchemas
	eventDocs  map[string]Schema
	memberDocs map[string]Schema // problem code → schema of its Members
}

// opSchemas are the pre-generated schemas of one operation.
type opSchemas struct {
	params   []paramDoc
	body     Schema
	response [][]Schema        // per Responses[i].Content[j]
	members  map[string]Schema // per ProblemMembers code
}

var (
	idPattern      = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$`)
	segmentPattern = regexp.MustCompile(`^(\{[A-Za-z_][A-Za-z0-9_]*(\.\.\.)?\}|[A-Za-z0-9._~!$&'()*+,;=:@-]+)$`)
)

// Build checks def and returns the model. It fails, with every problem
// found joined into one error, when an operation has no valid credential
// class, an id, a method+path, a problem code, an event kind or a rule is
// declared twice (naming the parts that declare it), path parameters do
// not match the pattern, a problem code is not in the registry, or a
// schema cannot be generated from a type.
func Build(def Definition) (*Model, error) {
	m := &Model{
		title:       def.Title,
		version:     def.Version,
		description: def.Description,
		byID:        make(map[string]int),
		problems:    make(map[string]ProblemType),
		opDocs:      make(map[string]opSchemas),
		eventDocs:   make(map[string]Schema),
		memberDocs:  make(map[string]Schema),
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if m.title == "" || m.version == "" {
		fail("definition needs a title and a version")
	}

	parts := def.parts()
	codeBy := make(map[string]string) // code → name of the part declaring it
	for _, part := range parts {
		for _, p := range part.Problems {
			if err := p.check(); err != nil {
				errs = append(errs, err)
				continue
			}
			if other, dup := codeBy[p.Code]; dup {
				errs = append(errs, declaredTwice("problem code "+p.Code, other, part.Name))
				continue
			}
			codeBy[p.Code] = part.Name
			m.problems[p.Code] = p
			m.codes = append(m.codes, p.Code)
		}
	}
	sort.Strings(m.codes)
	for _, c := range []string{CodeInternal, CodeRateLimited, CodeRouteNotFound, CodeMethodNotAllowed,
		CodeRequestMalformedJSON, CodeRequestValidation, CodeRequestUnknownField, CodeRequestTooLarge,
		CodeRequestUnsupportedMediaType, CodeAuthMissing, CodeAuthInvalid, CodeOperatorUnauthorized, CodeUnavailable} {
		if _, ok := m.problems[c]; !ok {
			fail("problem registry lacks %s, which the HTTP layer itself answers with (add contract.Core to the parts)", c)
		}
	}

	var rules []Rule
	ruleBy := make(map[string]string)
	for _, part := range parts {
		for _, r := range part.Rules {
			if other, dup := ruleBy[r.Tag]; dup && r.Tag != "" {
				errs = append(errs, declaredTwice("rule "+r.Tag, other, part.Name))
				continue
			}
			ruleBy[r.Tag] = part.Name
			rules = append(rules, r)
		}
	}
	v, err := newValidator(rules)
	if err != nil {
		errs = append(errs, err)
		return nil, fmt.Errorf("contract: invalid definition: %w", errors.Join(errs...))
	}
	m.validator = v
	m.gen = newSchemaGen(v.rules)
	if _, err := m.gen.schemaFor(reflect.TypeFor[Problem]()); err != nil {
		fail("problem schema: %v", err)
	}
	errs = append(errs, m.problemMembers()...)

	routes := make(map[string]string) // method+path → operation id
	opBy := make(map[string]string)   // operation id → name of its part
	for _, part := range parts {
		for _, op := range part.Operations {
			if other, dup := opBy[op.ID]; dup {
				errs = append(errs, declaredTwice("operation id "+op.ID, other, part.Name))
				continue
			}
			if err := m.addOperation(op, routes); err != nil {
				errs = append(errs, err)
				continue
			}
			opBy[op.ID] = part.Name
		}
	}
	eventBy := make(map[string]string) // event kind → name of its part
	for _, part := range parts {
		for _, ev := range part.Events {
			switch other, dup := eventBy[ev.Name]; {
			case !idPattern.MatchString(ev.Name):
				fail("event kind %q is not lowercase dot-separated words", ev.Name)
				continue
			case dup:
				errs = append(errs, declaredTwice("event kind "+ev.Name, other, part.Name))
				continue
			case ev.Description == "":
				fail("event kind %s: no description", ev.Name)
			case ev.Payload == nil:
				fail("event kind %s: no payload type", ev.Name)
				continue
			}
			eventBy[ev.Name] = part.Name
			s, err := m.gen.schemaFor(ev.Payload)
			if err != nil {
				fail("event kind %s: %v", ev.Name, err)
				continue
			}
			m.eventDocs[ev.Name] = s
			m.events = append(m.events, ev)
		}
	}
	if err := m.gen.err(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("contract: invalid definition: %w", errors.Join(errs...))
	}
	return m, nil
}

func (m *Model) addOperation(op Operation, routes map[string]string) error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("operation %s: "+format, append([]any{op.ID}, args...)...))
	}
	if !idPattern.MatchString(op.ID) {
		return fmt.Errorf("operation id %q is not lowercase dot-separated words", op.ID)
	}
	if strings.HasPrefix(op.ID, "event.") {
		return fmt.Errorf("operation id %q: the event. prefix is reserved for event kinds", op.ID)
	}
	if !op.Credential.Valid() {
		fail("no valid credential class (got %s)", op.Credential)
	}
	switch op.Method {
	case "GET", "POST", "PUT", "PATCH", "DELETE":
	default:
		fail("method %q is not GET, POST, PUT, PATCH or DELETE", op.Method)
	}
	if op.Summary == "" {
		fail("no summary")
	}
	wild, err := pathWildcards(op.Path)
	if err != nil {
		fail("%v", err)
	} else {
		key := op.Method + " " + normalizePath(op.Path)
		if other, dup := routes[key]; dup {
			fail("route %s %s is already declared by %s", op.Method, op.Path, other)
		}
		routes[key] = op.ID
	}
	if op.Body != nil && (op.Method == "GET" || op.Method == "DELETE") {
		fail("a %s operation cannot have a request body", op.Method)
	}
	for _, c := range op.Problems {
		if _, ok := m.problems[c]; !ok {
			fail("problem code %s is not in the registry", c)
		}
	}
	if len(op.Responses) == 0 {
		fail("no success response")
	}
	docs := opSchemas{}
	if len(op.ProblemMembers) > 0 {
		docs.members = make(map[string]Schema, len(op.ProblemMembers))
		codes := m.ProblemCodes(op)
		for c, t := range op.ProblemMembers {
			s, err := m.memberSchema(c, t)
			switch {
			case !slices.Contains(codes, c):
				fail("problem members for %s, which the operation does not answer with", c)
			case err != nil:
				fail("%v", err)
			default:
				docs.members[c] = s
			}
		}
	}
	if op.Params != nil {
		ps, err := m.gen.params(op.Params)
		if err != nil {
			fail("params: %v", err)
		}
		docs.params = ps
		var have []string
		for _, p := range ps {
			if p.in == "path" {
				have = append(have, p.name)
			}
		}
		sort.Strings(have)
		if wild != nil && !slices.Equal(have, wild) {
			fail("path parameters %v do not match the wildcards %v of %s", have, wild, op.Path)
		}
	} else if len(wild) > 0 {
		fail("path %s has wildcards %v but no Params type", op.Path, wild)
	}
	if op.Body != nil {
		s, err := m.gen.schemaFor(op.Body)
		if err != nil {
			fail("body: %v", err)
		}
		docs.body = s
	}
	statuses := make(map[int]bool)
	for _, r := range op.Responses {
		if r.Status < 100 || r.Status > 399 {
			fail("success status %d is not 1xx–3xx", r.Status)
		}
		if statuses[r.Status] {
			fail("status %d declared twice", r.Status)
		}
		statuses[r.Status] = true
		if r.Description == "" {
			fail("response %d has no description", r.Status)
		}
		var row []Schema
		media := make(map[string]bool)
		for _, c := range r.Content {
			if c.MediaType == "" || media[c.MediaType] {
				fail("response %d: empty or repeated media type %q", r.Status, c.MediaType)
			}
			media[c.MediaType] = true
			s, err := m.gen.contentSchema(c)
			if err != nil {
				fail("response %d %s: %v", r.Status, c.MediaType, err)
			}
			row = append(row, s)
		}
		docs.response = append(docs.response, row)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	m.byID[op.ID] = len(m.ops)
	op.Problems = slices.Clone(op.Problems)
	op.Responses = slices.Clone(op.Responses)
	m.ops = append(m.ops, op)
	m.opDocs[op.ID] = docs
	return nil
}

// pathWildcards checks a ServeMux path and returns its wildcard names,
// sorted.
func pathWildcards(path string) ([]string, error) {
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("path %q does not start with /", path)
	}
	if path == "/" {
		return []string{}, nil
	}
	segs := strings.Split(path[1:], "/")
	names := []string{}
	seen := make(map[string]bool)
	for i, s := range segs {
		if !segmentPattern.MatchString(s) {
			return nil, fmt.Errorf("path %q: segment %q is not a literal or a {wildcard}", path, s)
		}
		if strings.HasPrefix(s, "{") {
			name := strings.TrimSuffix(strings.Trim(s, "{}"), "...")
			if strings.HasSuffix(s, "...}") && i != len(segs)-1 {
				return nil, fmt.Errorf("path %q: {%s...} must be the last segment", path, name)
			}
			if seen[name] {
				return nil, fmt.Errorf("path %q: wildcard %s used twice", path, name)
			}
			seen[name] = true
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// normalizePath replaces wildcard names so that /a/{x} and /a/{y}, which
// ServeMux refuses to register together, compare equal.
func normalizePath(path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") {
			if strings.HasSuffix(s, "...}") {
				segs[i] = "{...}"
			} else {
				segs[i] = "{}"
			}
		}
	}
	return strings.Join(segs, "/")
}

// Operations returns the operations in declaration order.
func (m *Model) Operations() []Operation { return slices.Clone(m.ops) }

// Operation returns the operation with the given id.
func (m *Model) Operation(id string) (Operation, bool) {
	i, ok := m.byID[id]
	if !ok {
		return Operation{}, false
	}
	return m.ops[i], true
}

// Events returns the event kinds in declaration order.
func (m *Model) Events() []EventKind { return slices.Clone(m.events) }

// Problem returns the registry entry of a code.
func (m *Model) Problem(code string) (ProblemType, bool) {
	p, ok := m.problems[code]
	return p, ok
}

// Problems returns the problem registry, sorted by code.
func (m *Model) Problems() []ProblemType {
	out := make([]ProblemType, len(m.codes))
	for i, c := range m.codes {
		out[i] = m.problems[c]
	}
	return out
}

// ProblemCodes returns, sorted, every problem code op can answer with: its
// declared codes plus the implied ones. Every operation can answer
// internal and rate_limited, and request.validation and
// request.unknown_field (a malformed or undeclared query parameter is
// refused even where none are declared); one with a body adds
// request.malformed_json, request.too_large and
// request.unsupported_media_type; an agent operation adds auth.missing and
// auth.invalid; an operator operation adds operator.unauthorized (an
// operation open to either adds all three). An
// operation that takes a body or a credential adds store.unavailable: it
// writes (what it does, an operator signature's nonce, a DPoP proof's
// jti), and a write the storage refused is answered so.
func (m *Model) ProblemCodes(op Operation) []string {
	set := map[string]bool{CodeInternal: true, CodeRateLimited: true,
		CodeRequestValidation: true, CodeRequestUnknownField: true}
	if op.Body != nil || op.Credential != CredentialNone {
		// A store that stopped (store.unavailable) or cannot commit for
		// the moment (unavailable: a database restarting, contention).
		set[CodeStoreUnavailable] = true
		set[CodeUnavailable] = true
	}
	if op.Body != nil {
		for _, c := range []string{CodeRequestMalformedJSON, CodeRequestValidation, CodeRequestUnknownField,
			CodeRequestTooLarge, CodeRequestUnsupportedMediaType} {
			set[c] = true
		}
	}
	if op.Credential.AcceptsAgent() {
		set[CodeAuthMissing] = true
		set[CodeAuthInvalid] = true
	}
	if op.Credential.AcceptsOperator() {
		set[CodeOperatorUnauthorized] = true
	}
	for _, c := range op.Problems {
		set[c] = true
	}
	out := make([]string, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// Validate checks v, a struct or a pointer to one, against its validate
// tags with the model's validator. It returns nil, a [*ValidationError]
// listing every failing field, or an error for a value that cannot be
// validated at all (a programming error).
func (m *Model) Validate(v any) error { return m.validator.Validate(v) }

// Schema returns the JSON Schema generated for t, as it appears in the
// OpenAPI document: a {"$ref": "#/components/schemas/Name"} for a named
// struct, the schema itself otherwise. It fails for types that cannot be
// projected.
func (m *Model) Schema(t reflect.Type) (Schema, error) {
	// Schemas are generated at Build; a type not used by the model is
	// generated on a copy so the model stays immutable.
	g := m.gen.clone()
	s, err := g.schemaFor(t)
	if err == nil {
		err = g.err()
	}
	return s, err
}
