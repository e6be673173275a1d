package protocol

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/pay"
)

// Method is one declared method of the surface: everything the route, the
// OpenAPI entry, the route × credential matrix, the MCP tool to come and
// the Go API derive from. A method is a declaration and a handler, nothing
// else; see [methods].
type Method struct {
	Namespace, Name string
	// Credential is contract.CredentialAgent, or contract.CredentialOperator
	// for an override (★), whose request carries a rationale.
	Credential contract.Credential
	Summary    string
	// Description says what the method does, what it refuses, and what it
	// records; it becomes the OpenAPI description.
	Description string
	// Request and Response are the JSON body types.
	Request, Response reflect.Type
	// Problems are the codes the method answers besides the core ones.
	Problems []string
	// Entry is the record entry type a state change appends in the same
	// transaction ("protocol.{namespace}.{method}"); "" for a read.
	Entry string
	// MovesValue marks a method that can move money (a spend, a capture,
	// a close that settles, a withdrawal).
	MovesValue bool
	// Accepted describes the method's 202 answer, when it has one.
	Accepted string

	invoke func(s *Service, ctx context.Context, call Call, req any) (any, error)
}

// ID is the operation id: "{namespace}.{method}". Operator signatures
// cover it, so it never changes once released.
func (m Method) ID() string { return m.Namespace + "." + m.Name }

// Path is the route: POST /protocol/{namespace}/{method}.
func (m Method) Path() string { return "/protocol/" + m.Namespace + "/" + m.Name }

// Invoke runs the method's handler on s with a decoded request (a pointer
// to a value of the Request type).
func (m Method) Invoke(ctx context.Context, s *Service, call Call, req any) (any, error) {
	if reflect.TypeOf(req) != reflect.PointerTo(m.Request) {
		return nil, fmt.Errorf("protocol: %s takes *%v, not %T", m.ID(), m.Request, req)
	}
	if err := call.check(m); err != nil {
		return nil, err
	}
	return m.invoke(s, ctx, call, req)
}

// decl is how a namespace declares a method: the handler is a method
// expression of *Service, so its request and response types are the
// declaration's, checked by the compiler.
type decl struct {
	ns, name    string
	cred        contract.Credential
	entry       string
	moves       bool
	summary     string
	description string
	accepted    string
	problems    []string
}

func declare[Req, Resp any](d decl, h func(*Service, context.Context, Call, *Req) (*Resp, error)) Method {
	return Method{
		Namespace: d.ns, Name: d.name, Credential: d.cred, Summary: d.summary, Description: d.description,
		Request: reflect.TypeFor[Req](), Response: reflect.TypeFor[Resp](),
		Problems: slices.Clone(d.problems), Entry: d.entry, MovesValue: d.moves, Accepted: d.accepted,
		invoke: func(s *Service, ctx context.Context, call Call, req any) (any, error) {
			return h(s, ctx, call, req.(*Req))
		},
	}
}

// Call says who calls a method: an agent key, or an operator for an
// override.
type Call struct {
	// Agent is the agent credential of an agent method.
	Agent *pay.Caller
	// Operator is the operator's signature on an override, with the
	// request's rationale.
	Operator *pay.OperatorCall
	// RequestID is written into every entry the call appends.
	RequestID string
}

// AgentCall is a Call by an agent key.
func AgentCall(c pay.Caller, requestID string) Call { return Call{Agent: &c, RequestID: requestID} }

// OperatorCall is a Call by an operator.
func OperatorCall(o pay.OperatorCall) Call { return Call{Operator: &o, RequestID: o.RequestID} }

func (c Call) check(m Method) error {
	switch m.Credential {
	case contract.CredentialOperator:
		if c.Operator == nil {
			return errOperatorOnly
		}
	default:
		if c.Agent == nil {
			return errAgentOnly
		}
	}
	return nil
}

// Overridden is implemented by the request of every override: the
// rationale the operator gives, which the record keeps.
type Overridden interface{ OverrideRationale() string }

// Override is embedded in the request of every override (★).
type Override struct {
	Rationale string `json:"rationale" validate:"required,max=2000" doc:"Why the operator overrides: at least 10 characters, written into the record with the change."`
}

// OverrideRationale returns the rationale.
func (o Override) OverrideRationale() string { return o.Rationale }

// Replayer is implemented by responses that may answer from a stored
// outcome (an idempotent repeat); the HTTP layer marks those with
// Idempotent-Replayed: true, the body byte-identical to the first.
type Replayer interface{ WasReplayed() bool }

// Acceptor is implemented by responses that may mean "accepted, not done"
// (a spend held for a person's approval): the HTTP layer answers 202.
type Acceptor interface{ IsAccepted() bool }

// Refused is the error of a money-moving method whose payment the gate
// denied or the rail declined: it carries the outcome exactly as /pay
// answers it (403 intent.denied, 402 payment.declined).
type Refused struct{ Result *pay.Result }

func (e *Refused) Error() string {
	if e.Result.Outcome == pay.OutcomeDenied {
		return "protocol: the gate denied the spend"
	}
	return "protocol: the rail declined the spend"
}

// Code returns the stable problem code of the outcome.
func (e *Refused) Code() string {
	if e.Result.Outcome == pay.OutcomeDenied {
		return pay.CodeDenied
	}
	return pay.CodeDeclined
}
