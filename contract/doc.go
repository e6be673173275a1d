// Package contract is the vocabulary and machinery of Countersign's one
// model of its public surface: every HTTP operation, every outbound event
// kind and every problem (error) type. Everything a client can observe is
// projected from a [Model], so the parts cannot drift apart:
//
//   - the HTTP routes (package httpserver binds one handler per operation id),
//   - the OpenAPI 3.1 document served at GET /openapi.json ([Model.OpenAPI])
//     and the AsyncAPI 3.0 document at GET /asyncapi.json ([Model.AsyncAPI]),
//   - request decoding and validation ([DecodeJSON], [DecodeParams],
//     [Model.Validate]),
//   - the problem registry behind every error response ([ProblemType]).
//
// The package speaks no HTTP: it never imports net/http. Status codes are
// plain integers in the problem registry, and the model names the Go types
// of parameters, bodies and responses, not handlers.
//
// # Who declares what
//
// The package sits below the domain packages and imports none of them (a
// test enforces it). Each domain package declares its own operations,
// problem types (its codes as exported constants, which its sentinel
// errors carry too) and event kinds, as a function returning a [Part];
// package product assembles the parts of the whole product into one
// [Definition]. The package itself declares only what is not any domain's:
// the problem types the HTTP layer answers with whatever the operation
// ([Core]: request.*, route.not_found, method.not_allowed, auth.missing,
// auth.invalid, rate_limited, internal, unavailable, operator.unauthorized
// and operator.rationale_too_short), and two shapes several packages'
// operations share ([PageParams], [RationaleRequest]).
//
// # Operations
//
// An [Operation] declares an id ("audit.list"), a method and a path in Go
// 1.22 ServeMux pattern syntax ("/audit/entries/{seq}"), the [Credential]
// class a caller must present, the Go types of its parameters, request body
// and responses, and the problem codes it can answer with. The zero
// Credential is invalid, so an operation that does not say who may call it
// cannot be registered. [Build] checks a [Definition] as a whole, all its
// parts together (unique ids, routes, problem codes and event kinds, with
// both parts named when two declare the same; path parameters that match
// the pattern; problem codes that exist; schemas that can be generated) and
// returns an immutable [Model]. product.Model returns the model of this
// release.
//
// # Schemas from Go types
//
// JSON Schemas (2020-12, as OpenAPI 3.1 uses) are generated from the Go
// types by reflection. Member names and optionality come from `json` tags
// (a member without omitempty/omitzero, or with validate:"required", is
// required); named structs become components referenced with $ref; slices
// are arrays, maps are objects with additionalProperties, pointers are
// nullable (type [T, "null"]), json.RawMessage is any value and time.Time a
// date-time string. Constraints are written once, as `validate` tags of
// github.com/go-playground/validator/v10, and projected into the schema
// (min/max/len, gt/gte/lt/lte, oneof, url, email, uuid, ... ; dive applies
// the rest to items). A `doc` tag becomes the description, and a `default`
// tag on a parameter becomes its default. A tag without a schema projection
// is a build error rather than a silently looser schema. A type can take
// over its own schema by implementing [SchemaProvider].
//
// # Decoding and validation
//
// [DecodeJSON] decodes exactly one JSON value, refuses unknown members
// (compared case-sensitively), duplicate members, invalid UTF-8 and
// trailing data, and reports a wrong type with the JSON path of the member
// ("lines[0].quantity") as a [*ValidationError] with rule "type".
// [DecodeParams] fills a parameter struct from path, query and header values
// by its `path`, `query` and `header` tags. [Model.Validate] runs the
// validate tags with the one validator the model owns and reports every
// failing field as a [FieldError] with a JSON path and a message for people.
package contract
