package product_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/product"
)

var rewrite = flag.Bool("rewrite", false, "rewrite golden files in testdata")

// fixtureBase is the base URL of the fixture documents: the reference
// server's default address.
const fixtureBase = "http://127.0.0.1:8080"

// TestAssembledFixtures compares everything a client can observe of the
// assembled model with fixtures in testdata/assembled, byte for byte: the
// OpenAPI and AsyncAPI documents, and a listing of every operation,
// problem type and event kind. The fixtures were captured from the model
// as package contract declared it, before the declarations moved to their
// packages. Rewrite them after an intended change with
//
//	go test ./product -run TestAssembledFixtures -rewrite
//
// and review the diff: it is the public contract.
func TestAssembledFixtures(t *testing.T) {
	m := product.Model()
	openapi, err := m.OpenAPI(fixtureBase)
	if err != nil {
		t.Fatal(err)
	}
	asyncapi, err := m.AsyncAPI(fixtureBase)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name string
		got  []byte
	}{
		{"openapi.json", openapi},
		{"asyncapi.json", asyncapi},
		{"operations.txt", operationListing(m)},
		{"problems.txt", problemListing(m)},
		{"events.txt", eventListing(m)},
	} {
		path := filepath.Join("testdata", "assembled", f.name)
		if *rewrite {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, f.got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -rewrite to create it)", err)
		}
		if !bytes.Equal(f.got, want) {
			t.Errorf("%s differs from %s; if the change is intended, run with -rewrite and review the diff", f.name, path)
		}
	}
}

// operationListing lists every operation, sorted by id (declaration order
// is not observable on the wire), with its credential class, the full set
// of problem codes it can answer with, and the names of its types.
func operationListing(m *contract.Model) []byte {
	ops := m.Operations()
	slices.SortFunc(ops, func(a, b contract.Operation) int { return strings.Compare(a.ID, b.ID) })
	var b bytes.Buffer
	for _, op := range ops {
		fmt.Fprintf(&b, "%s %s %s\n", op.ID, op.Method, op.Path)
		fmt.Fprintf(&b, "\tcredential: %s\n", op.Credential)
		fmt.Fprintf(&b, "\tparams: %s\n", typeName(op.Params))
		fmt.Fprintf(&b, "\tbody: %s\n", typeName(op.Body))
		for _, r := range op.Responses {
			var cs []string
			for _, c := range r.Content {
				cs = append(cs, c.MediaType+" "+typeName(c.Type))
			}
			if len(cs) == 0 {
				cs = []string{"no content"}
			}
			fmt.Fprintf(&b, "\tresponse %d: %s\n", r.Status, strings.Join(cs, ", "))
		}
		fmt.Fprintf(&b, "\tproblems: %s\n", strings.Join(m.ProblemCodes(op), " "))
	}
	return b.Bytes()
}

// problemListing lists every problem type, sorted by code.
func problemListing(m *contract.Model) []byte {
	var b bytes.Buffer
	for _, p := range m.Problems() {
		fmt.Fprintf(&b, "%s %d %s retry-after=%d %q\n", p.Code, p.Status, p.Action, p.RetryAfter, p.Title)
	}
	return b.Bytes()
}

// eventListing lists every event kind in declaration order.
func eventListing(m *contract.Model) []byte {
	var b bytes.Buffer
	for _, ev := range m.Events() {
		fmt.Fprintf(&b, "%s %s %q\n", ev.Name, typeName(ev.Payload), ev.Description)
	}
	return b.Bytes()
}

// pkgQualifier matches the package names in a type's string.
var pkgQualifier = regexp.MustCompile(`\b[a-z][a-z0-9_]*\.`)

// typeName is the name of t without package qualifiers ("-" for none): the
// name the documents use, which does not change when a type moves between
// packages.
func typeName(t reflect.Type) string {
	if t == nil {
		return "-"
	}
	if t.Name() != "" {
		return t.Name()
	}
	return pkgQualifier.ReplaceAllString(t.String(), "")
}
