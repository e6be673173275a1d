package contract

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/countersign/countersign/internal/fielderr"
)

// Action tells a client what to do about a problem. It is part of every
// problem response, so an automated caller never has to infer intent from a
// status code.
type Action string

// The actions a problem can carry.
const (
	// ActionRetryAsIs: send the identical request again after Retry-After
	// seconds. Only used where a repeat is safe (reads, or writes guarded by
	// an idempotency key).
	ActionRetryAsIs Action = "retry-as-is"
	// ActionFixRequest: the request itself is wrong; change it before
	// sending it again.
	ActionFixRequest Action = "fix-request"
	// ActionReauthenticate: obtain or present a valid credential.
	ActionReauthenticate Action = "reauthenticate"
	// ActionAwaitOperator: a person has to act (release the kill switch,
	// approve) before the request can succeed.
	ActionAwaitOperator Action = "await-operator"
	// ActionContinueAtLink: follow the link in the problem (for example a
	// merchant's continue URL) to finish the flow.
	ActionContinueAtLink Action = "continue-at-link"
	// ActionStop: do not retry this request automatically.
	ActionStop Action = "stop"
)

// Actions returns the six defined actions.
func Actions() []Action {
	return []Action{ActionRetryAsIs, ActionFixRequest, ActionReauthenticate,
		ActionAwaitOperator, ActionContinueAtLink, ActionStop}
}

// Valid reports whether a is one of the six defined actions.
func (a Action) Valid() bool {
	for _, v := range Actions() {
		if a == v {
			return true
		}
	}
	return false
}

// JSONSchema makes Action an enum in generated schemas.
func (Action) JSONSchema() Schema {
	actions := Actions()
	enum := make([]any, len(actions))
	for i, a := range actions {
		enum[i] = string(a)
	}
	return Schema{"type": "string", "enum": enum}
}

// The problem codes the HTTP layer answers with whatever the operation:
// malformed requests, unknown routes, missing or refused credentials, rate
// limits, its own faults, and the rationale every operator action must
// state. Every model has them (see [Core]); the codes of a domain are
// declared by its package, beside its operations. A code never changes
// meaning once released; new conditions get new codes.
const (
	CodeRequestMalformedJSON        = "request.malformed_json"
	CodeRequestValidation           = "request.validation"
	CodeRequestUnknownField         = "request.unknown_field"
	CodeRequestTooLarge             = "request.too_large"
	CodeRequestUnsupportedMediaType = "request.unsupported_media_type"
	CodeRouteNotFound               = "route.not_found"
	CodeMethodNotAllowed            = "method.not_allowed"
	CodeAuthMissing                 = "auth.missing"
	CodeAuthInvalid                 = "auth.invalid"
	CodeRateLimited                 = "rate_limited"
	CodeInternal                    = "internal"
	CodeUnavailable                 = "unavailable"
	CodeStoreUnavailable            = "store.unavailable"
	CodeOperatorUnauthorized        = "operator.unauthorized"
	CodeOperatorRationaleTooShort   = "operator.rationale_too_short"
)

// ProblemType is one entry of the problem registry: what a code means and
// how it is answered. The page at {base_url}/problems/{code} shows it to
// people; the OpenAPI document lists it under x-problems.
type ProblemType struct {
	// Code is the stable machine-readable code, e.g. "audit.bad_cursor":
	// lowercase dot-separated words, underscores inside words.
	Code string
	// Status is the HTTP status code, 400–599.
	Status int
	// Title is a short summary for people that does not change from
	// occurrence to occurrence.
	Title string
	// Action is what a client should do by default. A single occurrence may
	// carry a different action (for example continue-at-link when a cart is
	// not ready), but the default is what clients should plan for.
	Action Action
	// Description is one paragraph for the problem page: when it happens and
	// what to do.
	Description string
	// RetryAfter is the default delay, in seconds, a client should wait
	// before retrying. Required (≥ 1) exactly when Action is retry-as-is;
	// an occurrence may ask for a different delay.
	RetryAfter int
	// Members is the Go type (a struct) of the members a problem of this
	// code carries besides the standard ones ([Problem.Extensions]), for
	// example intentId and reasons of a denied payment; nil when it carries
	// none. Its JSON members must not be named like a standard member, and
	// follow the usual rules: one without omitempty is always present. The
	// OpenAPI document adds them to the problem schema of every operation
	// that can answer with the code, for that code only.
	Members reflect.Type
}

var codePattern = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)

func (p ProblemType) check() error {
	switch {
	case !codePattern.MatchString(p.Code):
		return fmt.Errorf("problem code %q is not lowercase dot-separated words", p.Code)
	case p.Status < 400 || p.Status > 599:
		return fmt.Errorf("problem %s: status %d is not 4xx or 5xx", p.Code, p.Status)
	case p.Title == "":
		return fmt.Errorf("problem %s: no title", p.Code)
	case p.Description == "":
		return fmt.Errorf("problem %s: no description", p.Code)
	case !p.Action.Valid():
		return fmt.Errorf("problem %s: invalid action %q", p.Code, p.Action)
	case p.Action == ActionRetryAsIs && p.RetryAfter < 1:
		return fmt.Errorf("problem %s: retry-as-is needs a RetryAfter of at least 1 second", p.Code)
	case p.Action != ActionRetryAsIs && p.RetryAfter != 0:
		return fmt.Errorf("problem %s: RetryAfter is only for retry-as-is", p.Code)
	}
	return nil
}

// coreProblems returns the problem types of the codes above, sorted by
// code. The slice is fresh on every call.
func coreProblems() []ProblemType {
	ps := []ProblemType{
		{Code: CodeRequestMalformedJSON, Status: 400, Title: "Malformed JSON", Action: ActionFixRequest,
			Description: "The request body is not one well-formed JSON value: it is empty, cut short, not valid UTF-8, " +
				"repeats a member name, or has data after the value. Send a single JSON object encoded as UTF-8; " +
				"the detail says where parsing stopped."},
		{Code: CodeRequestValidation, Status: 400, Title: "Invalid request", Action: ActionFixRequest,
			Description: "One or more members or parameters have the wrong type or break a rule of the contract " +
				"(a range, a length, an allowed value, a required member). The errors array lists every offending " +
				"field by its JSON path with the rule it broke and a message; fix them all and send the request again."},
		{Code: CodeRequestUnknownField, Status: 400, Title: "Unknown field", Action: ActionFixRequest,
			Description: "The request carries a body member or query parameter the operation does not define. " +
				"Names are compared exactly, including case. Unknown input is refused rather than ignored so that a " +
				"misspelt limit or rule is never silently dropped on a payment path; remove or correct the named field."},
		{Code: CodeRequestTooLarge, Status: 413, Title: "Request body too large", Action: ActionFixRequest,
			Description: "The request body is larger than the server accepts (1 MiB unless the deployment says " +
				"otherwise). No part of it was processed. Send a smaller body."},
		{Code: CodeRequestUnsupportedMediaType, Status: 415, Title: "Unsupported media type", Action: ActionFixRequest,
			Description: "Request bodies must be JSON: send Content-Type: application/json (optionally with " +
				"charset=utf-8). No part of the body was processed."},
		{Code: CodeRouteNotFound, Status: 404, Title: "Not found", Action: ActionFixRequest,
			Description: "Nothing is served at this path. The OpenAPI document at /openapi.json lists every " +
				"operation this server offers; check the path against it."},
		{Code: CodeMethodNotAllowed, Status: 405, Title: "Method not allowed", Action: ActionFixRequest,
			Description: "The path exists but does not accept this HTTP method. The Allow header lists the methods " +
				"it does accept."},
		{Code: CodeAuthMissing, Status: 401, Title: "Credential missing", Action: ActionReauthenticate,
			Description: "This operation needs an agent credential and the request carried none. Send it in the " +
				"Authorization header."},
		{Code: CodeAuthInvalid, Status: 401, Title: "Credential invalid", Action: ActionReauthenticate,
			Description: "The agent credential is unknown, revoked, malformed, or its proof of possession did not " +
				"verify. Obtain a valid credential from the operator; repeating the same request will fail the same way.",
			Members: reflect.TypeFor[AuthRefusal]()},
		{Code: CodeRateLimited, Status: 429, Title: "Rate limited", Action: ActionRetryAsIs, RetryAfter: 1,
			Description: "The caller's request budget is spent for now. Wait for the number of seconds in Retry-After " +
				"(also given as retryAfter) and send the same request again; the X-RateLimit-* headers show the budget."},
		{Code: CodeInternal, Status: 500, Title: "Internal error", Action: ActionStop,
			Description: "The server failed in a way it did not anticipate, and whether the request took effect is " +
				"unknown. Do not retry blindly: a payment may or may not have been recorded. Check the record or " +
				"the intent first; a payment repeated with the same idempotencyKey is answered from the stored " +
				"result instead of moving money twice. Quote the requestId when reporting the problem."},
		{Code: CodeUnavailable, Status: 503, Title: "Service unavailable", Action: ActionRetryAsIs, RetryAfter: 5,
			Description: "The server cannot answer right now (it is starting, shutting down, or a dependency such as " +
				"its store is unavailable). Nothing was changed. Send the same request again after Retry-After seconds."},
		{Code: CodeStoreUnavailable, Status: 503, Title: "Storage refused a write", Action: ActionRetryAsIs, RetryAfter: 30,
			Description: "The server's storage refused a write (a failed fsync, a write error, a full disk), so what this " +
				"request was writing was not committed. After such a failure the server cannot know what reached the disk, " +
				"so it stops writing until it is restarted on a healthy disk; reads keep answering from the last committed " +
				"state. Send the same request again after Retry-After seconds: a payment repeated with the same " +
				"idempotencyKey is answered from its stored result if an earlier attempt did commit, and never moves money " +
				"twice."},
		{Code: CodeOperatorUnauthorized, Status: 401, Title: "Operator signature required", Action: ActionReauthenticate,
			Description: "This operation needs a valid operator signature in the Svc-Operator header: a known key, a " +
				"timestamp within five minutes, a fresh nonce, and a signature over the operation, method, URL, " +
				"timestamp, nonce and body digest. An agent credential never opens operator operations.",
			Members: reflect.TypeFor[OperatorRefusal]()},
		{Code: CodeOperatorRationaleTooShort, Status: 400, Title: "Rationale too short", Action: ActionFixRequest,
			Description: "Every operator action must state why it is taken: the rationale must have at least 10 " +
				"characters after trimming. It is written into the record with the operator's key id."},
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Code < ps[j].Code })
	return ps
}

// AuthRefusal is what an auth.invalid problem adds when a DPoP proof
// (RFC 9449) was refused: the stable reason, also given in the response's
// WWW-Authenticate challenge.
type AuthRefusal struct {
	Reason string `json:"reason,omitempty" doc:"Why the DPoP proof was refused (for example jti_replayed, missing_proof, bad_signature); present only for a refused proof."`
}

// OperatorRefusal is what an operator.unauthorized problem adds when a
// signature was checked and refused.
type OperatorRefusal struct {
	Reason string `json:"reason,omitempty" doc:"Why the operator signature was refused (for example stale_timestamp, unknown_key, bad_signature); absent when the server has no operator keys."`
}

// standardMembers are the JSON members of [Problem], which extensions
// never replace.
var standardMembers = map[string]bool{"type": true, "title": true, "status": true, "detail": true, "instance": true,
	"code": true, "action": true, "requestId": true, "retryAfter": true, "errors": true}

// problemMembers generates the schema of every problem type's Members.
func (m *Model) problemMembers() []error {
	var errs []error
	for _, c := range m.codes {
		p := m.problems[c]
		if p.Members == nil {
			continue
		}
		s, err := m.memberSchema(c, p.Members)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m.memberDocs[c] = s
	}
	return errs
}

// memberSchema generates the schema of members t of problem code, checking
// that t is a struct whose members are not named like a standard member.
func (m *Model) memberSchema(code string, t reflect.Type) (Schema, error) {
	st := t
	for st != nil && st.Kind() == reflect.Pointer {
		st = st.Elem()
	}
	if st == nil || st.Kind() != reflect.Struct {
		return nil, fmt.Errorf("problem %s: members %v are not a struct", code, t)
	}
	for _, name := range jsonMemberNames(st) {
		if standardMembers[name] {
			return nil, fmt.Errorf("problem %s: member %q is a standard problem member", code, name)
		}
	}
	s, err := m.gen.schemaFor(t)
	if err != nil {
		return nil, fmt.Errorf("problem %s: members: %w", code, err)
	}
	return s, nil
}

// jsonMemberNames returns the JSON member names of struct t, embedded
// structs' members included.
func jsonMemberNames(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			out = append(out, jsonMemberNames(ft)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

// FieldError is one failing field of a validation problem.
type FieldError = fielderr.FieldError

// Problem is the RFC 9457 problem object every error response carries, with
// Countersign's members (code, action, requestId, retryAfter, errors).
type Problem struct {
	Type       string       `json:"type" validate:"required,url" doc:"{base_url}/problems/{code}; the URL serves a page describing the problem."`
	Title      string       `json:"title" validate:"required" doc:"Short summary of the problem type."`
	Status     int          `json:"status" validate:"min=400,max=599" doc:"HTTP status code."`
	Detail     string       `json:"detail,omitempty" doc:"What went wrong in this occurrence, for people."`
	Instance   string       `json:"instance,omitempty" doc:"The request path."`
	Code       string       `json:"code" validate:"required" doc:"Stable machine-readable code; branch on this."`
	Action     Action       `json:"action" validate:"required" doc:"What the client should do next."`
	RequestID  string       `json:"requestId" validate:"required" doc:"The X-Request-Id of the request; quote it when reporting a problem."`
	RetryAfter int          `json:"retryAfter,omitempty" validate:"omitempty,min=1" doc:"Seconds to wait before retrying; present exactly when action is retry-as-is."`
	Errors     []FieldError `json:"errors,omitempty" doc:"The failing fields: every one of a validation problem, the rationale of operator.rationale_too_short."`
	// Extensions are additional members of this occurrence (for example
	// intentId, reasons and auditSeq of a denied payment). They never
	// replace the members above.
	Extensions map[string]any `json:"-"`
}

// MarshalJSON writes the problem's members followed by its extension
// members. An extension named like a standard member is dropped: the
// standard members are what clients rely on.
func (p Problem) MarshalJSON() ([]byte, error) {
	type plain Problem // no methods: avoids recursion
	b, err := json.Marshal(plain(p))
	if err != nil || len(p.Extensions) == 0 {
		return b, err
	}
	ext := make(map[string]any, len(p.Extensions))
	for k, v := range p.Extensions {
		if standardMembers[k] {
			continue
		}
		ext[k] = v
	}
	if len(ext) == 0 {
		return b, nil
	}
	eb, err := json.Marshal(ext) // map keys are sorted: deterministic output
	if err != nil {
		return nil, fmt.Errorf("contract: problem extensions: %w", err)
	}
	// Splice {"a":1} + {"b":2} into {"a":1,"b":2}.
	out := make([]byte, 0, len(b)+len(eb))
	out = append(out, b[:len(b)-1]...)
	out = append(out, ',')
	out = append(out, eb[1:]...)
	return out, nil
}
