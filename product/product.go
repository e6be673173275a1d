// Package product is the assembly of the whole Countersign product: every
// domain package's declarations in one [contract.Definition]. It is
// imported by the server, the CLI, and later the MCP server.
//
// # Where declarations live
//
// Package contract is the model's vocabulary and machinery only; it imports
// no domain package. Each domain package declares its own operations,
// problem types and event kinds, beside the behaviour they describe, as a
// function returning a [contract.Part]: audit.Contract, pay.Contract,
// auth.Contract, webhook.Contract, identity.Contract, commerce.Contract. [Definition] lists those parts, after
// [contract.Core] (the problem types the HTTP layer answers with whatever
// the operation) and before the operations that describe the product
// itself (its OpenAPI and AsyncAPI documents, its problem pages, its
// liveness), which are declared here because they are about the whole.
//
// A new package adds its operations in two steps: it exports a Contract
// function returning its Part, and [Definition] lists that part (the
// reference server then needs a handler for each new operation, and
// refuses to start without one). Build
// refuses an operation id, problem code, event kind or rule declared twice,
// naming both parts, a route declared twice, and an operation naming a
// problem code no part declares. The fixtures in testdata/assembled pin
// what clients observe; rewrite them after an intended change with
//
//	go test ./product -run TestAssembledFixtures -rewrite
//
// and review the diff.
//
// # Import direction
//
// product imports contract and the domain packages, never httpserver or
// anything else that speaks a protocol: httpserver imports product (for its
// default model and the types of the operations declared here), and so will
// the MCP server, without pulling in the HTTP server. The domain packages
// import contract, never product.
package product

import (
	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/commerce"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/identity"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/protocol"
	"github.com/countersign/countersign/webhook"
	"github.com/countersign/countersign/x402/fetch"
)

// Version is the version of the contract this release declares, served as
// info.version of the OpenAPI and AsyncAPI documents.
const Version = "0.1.0"

// Definition returns the definition of this release: every operation,
// event kind and problem type, part by part in a stable order. The value
// is fresh on every call, so a caller (a test, a deployment with extra
// operations) may append to it before passing it to [contract.Build].
func Definition() contract.Definition {
	return contract.Definition{
		Title:   "Countersign",
		Version: Version,
		Description: "Payments and purchases by automated agents under human oversight. An agent submits " +
			"a signed payment instruction; a deny-first gate decides; every decision lands in a signed, " +
			"hash-linked record; money moves only when the gate allows it or an operator approves it.\n\n" +
			"Errors are RFC 9457 problems (application/problem+json) carrying a stable code and an action; " +
			"x-problems lists every code. Every response carries X-Request-Id.",
		Parts: []contract.Part{
			contract.Core(),
			audit.Contract(),
			pay.Contract(),
			auth.Contract(),
			webhook.Contract(),
			identity.Contract(),
			commerce.Contract(),
			fetch.Contract(),
			memory.Contract(),
			protocol.Contract(),
			served(),
		},
	}
}

// Model returns the model of this release: [Definition] built with
// [contract.Build]. It panics if that definition is invalid, which the
// package's tests rule out.
func Model() *contract.Model {
	m, err := contract.Build(Definition())
	if err != nil {
		panic(err)
	}
	return m
}
