package contract

// Part is one package's share of a [Definition]: the operations whose
// behaviour lives in the package, the problem types of its codes, the
// event kinds it emits and the validate rules its types use. Each domain
// package offers its declarations as a function returning a Part (for
// example audit.Contract); one place assembles the parts of a whole API
// (package product for Countersign), and [Build] checks them together, so
// an operation can name a problem code or a type of another part.
type Part struct {
	// Name says who declares the part, normally the package name ("pay").
	// Build names the parts in its errors: an operation id, problem code,
	// event kind or rule declared by two parts is reported with both names.
	Name       string
	Operations []Operation
	Problems   []ProblemType
	Events     []EventKind
	Rules      []Rule
}

// Core returns the part every model needs: the problem types of the codes
// the HTTP layer answers with whatever the operation (request.*,
// route.not_found, method.not_allowed, auth.missing, auth.invalid,
// rate_limited, internal, unavailable, operator.unauthorized and
// operator.rationale_too_short). [Build] refuses a definition without
// them. It declares no operations.
func Core() Part {
	return Part{Name: "contract", Problems: coreProblems()}
}

// Shared shapes of operations declared by several packages. Their names
// are component names of the OpenAPI document (RationaleRequest) or
// parameters every list takes (PageParams), so they are declared once,
// here.

// PageParams are the paging parameters of a list: an opaque cursor and a
// page size.
type PageParams struct {
	Cursor string `query:"cursor" validate:"omitempty,max=256" doc:"Opaque cursor: the nextCursor of the previous page."`
	Limit  int    `query:"limit" default:"20" validate:"min=1,max=100" doc:"Items per page, 1 to 100."`
}

// RationaleRequest is the body of operator actions that need nothing but
// the operator's reason.
type RationaleRequest struct {
	Rationale string `json:"rationale" validate:"required,max=2000" doc:"Why, in at least 10 characters; written into the record."`
}
