package auth_test

import (
	"fmt"

	"github.com/countersign/countersign/auth"
)

func ExampleParseTags() {
	fmt.Printf("%q\n", auth.ParseTags("team=growth, project=alpha"))
	// Malformed tokens are dropped, repeats kept once.
	fmt.Printf("%q\n", auth.ParseTags(" team=growth ,bad tag,, team=growth,cost-center:42"))
	fmt.Printf("%q\n", auth.ParseTags(""))
	// Output:
	// ["team=growth" "project=alpha"]
	// ["team=growth" "cost-center:42"]
	// []
}

func ExampleValidTag() {
	fmt.Println(auth.ValidTag("team=growth"), auth.ValidTag("team growth"))
	// Output:
	// true false
}
