package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/countersign/countersign/console"
)

// A server embedding the console serves it beside its API.
func ExampleBeside() {
	page, err := console.Handler(console.Config{
		BaseURL:   "https://pay.example.com",
		RecordKey: "countersign.local/record/5fc35ea3+cdf07af3+Ab2RUZxcGGZSz2bbOFgvhYel8qwjMYREdiPWDK3aER4U",
	})
	if err != nil {
		panic(err)
	}
	api := http.NotFoundHandler() // the API's handler
	mux := console.Beside(page, api)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/console/config.json", nil))
	fmt.Println(rec.Code, rec.Body.String())
	// Output: 200 {"baseURL":"https://pay.example.com","recordKey":"countersign.local/record/5fc35ea3+cdf07af3+Ab2RUZxcGGZSz2bbOFgvhYel8qwjMYREdiPWDK3aER4U","sandbox":false}
}

// The console's page, with the policy every answer carries.
func ExampleHandler() {
	page, err := console.Handler(console.Config{
		BaseURL:   "https://pay.example.com",
		RecordKey: "countersign.local/record/5fc35ea3+cdf07af3+Ab2RUZxcGGZSz2bbOFgvhYel8qwjMYREdiPWDK3aER4U",
	})
	if err != nil {
		panic(err)
	}
	rec := httptest.NewRecorder()
	page.ServeHTTP(rec, httptest.NewRequest("GET", "/console/", nil))
	fmt.Println(rec.Code, rec.Header().Get("Content-Security-Policy") == console.CSP)
	// Output: 200 true
}
