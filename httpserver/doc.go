// Package httpserver is the thin net/http wiring of the reference server:
// routes built from the contract, middleware, problem rendering. It holds
// no business logic; every handler decodes its input through package
// contract, calls one library method with the request's context, and
// encodes the result or maps the error to a problem.
//
// # Routes
//
// [New] registers one handler per operation of the [contract.Model] on its
// own http.ServeMux, with the operation's Go 1.22 method and path pattern.
// The model is [Config.Model], by default product.Model(): every domain
// package's declarations assembled by package product, which this package
// imports and which never imports it. Each operation id is bound to
// exactly one handler function; New fails if an operation has no handler
// or a handler has no operation, so a contract and a server cannot
// disagree about the surface.
//
// # What every response carries
//
//   - X-Request-Id: the caller's value when it is 1–128 visible ASCII
//     characters, otherwise a minted "req_" + ULID. It is set before any
//     handler runs, so panics, 404, 405, 413 and 415 carry it too; read it
//     with [RequestID].
//   - On errors, an RFC 9457 problem (application/problem+json) with type
//     {base_url}/problems/{code}, title, status, detail, instance (the
//     request path), code, action, requestId, and errors[] for validation
//     problems. When the action is retry-as-is the body has retryAfter and
//     the response a Retry-After header. 5xx bodies never contain the
//     underlying error's text.
//
// # Limits and input rules
//
// Request bodies are limited to [Config.MaxBodyBytes] (1 MiB by default;
// 413 request.too_large), must be application/json (415
// request.unsupported_media_type), exactly one JSON value with no unknown
// members (400 request.malformed_json or request.unknown_field). Query
// parameters the operation does not declare are refused the same way.
//
// # Errors
//
// Handlers return errors; one function maps them to problems. Besides the
// request errors of package contract and the sentinels of package audit,
// it understands any error (found with errors.As) with a method
//
//	Code() string // a code of the model's problem registry
//
// such as those made with internal/errcode. Its message becomes the detail
// of a 4xx problem (minus a leading "package: "); 5xx problems never show
// it. Such an error may also have
//
//	ProblemExtensions() map[string]any // extra members: intentId, reasons, ...
//	RetryAfter() time.Duration         // this occurrence's delay, for retry-as-is
//	ProblemAction() string             // this occurrence's action, e.g. continue-at-link
//
// An error with an unregistered code, or none, is a 500 internal problem
// (action stop), logged at Error with the request id.
//
// # Metrics
//
// With [Config.Metrics] (a *metrics.Metrics), every request is observed
// once, after its response is complete: the operation id it was routed to
// ([UnmatchedOperation] for 404 and 405, so unknown paths add no series),
// its status and its duration. Observers are looked up per operation when
// New builds the routes; a request costs a map lookup and the observer's
// atomic updates, and no allocation. The server never serves metrics
// itself, to any credential: they are the operator's, on a listener of
// their own (countersign serve --metrics-addr).
//
// # Credentials
//
// Operations of class agent go through [Config.Authenticator]. Without one
// they are open only in sandbox mode: New refuses a production
// configuration without an authenticator. Operations of class operator need
// [Config.Operators]; without it they answer 401 operator.unauthorized.
package httpserver
