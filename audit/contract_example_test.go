package audit_test

import (
	"fmt"

	"github.com/countersign/countersign/audit"
)

// The package's declarations for the contract model; package product
// assembles them with the other packages'.
func ExampleContract() {
	part := audit.Contract()
	for _, op := range part.Operations {
		fmt.Println(op.ID, op.Method, op.Path, op.Credential)
	}
	for _, pt := range part.Problems {
		fmt.Println(pt.Code, pt.Status, pt.Action)
	}
	fmt.Println(len(part.Events), "event kinds")
	// Output:
	// audit.list GET /audit agent-or-operator
	// audit.checkpoint GET /audit/checkpoint agent-or-operator
	// audit.entry GET /audit/entries/{seq} agent-or-operator
	// audit.consistency GET /audit/consistency agent-or-operator
	// audit.stream GET /audit/stream agent
	// audit.bad_cursor 400 fix-request
	// audit.not_found 404 fix-request
	// audit.out_of_range 400 fix-request
	// 0 event kinds
}
