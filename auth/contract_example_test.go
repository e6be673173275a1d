package auth_test

import (
	"fmt"

	"github.com/countersign/countersign/auth"
)

// The package's declarations for the contract model; package product
// assembles them with the other packages'.
func ExampleContract() {
	part := auth.Contract()
	for _, op := range part.Operations {
		fmt.Println(op.ID, op.Method, op.Path, op.Credential)
	}
	for _, pt := range part.Problems {
		fmt.Println(pt.Code, pt.Status, pt.Action)
	}
	fmt.Println(len(part.Events), "event kinds")
	// Output:
	// usage.get GET /usage agent
	// operator.agents.create POST /operator/agents operator
	// operator.agents.list GET /operator/agents operator
	// operator.agents.revoke DELETE /operator/agents/{id} operator
	// auth.bad_request 400 fix-request
	// auth.bad_cursor 400 fix-request
	// auth.key_not_found 404 fix-request
	// usage.bad_window 400 fix-request
	// 0 event kinds
}
