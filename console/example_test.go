package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/countersign/countersign/console"
)

// A server embedding the console routes /console and everything under
// console.Prefix to it, and the rest to its API.
func ExampleHandler() {
	page, err := console.Handler(console.Config{
		BaseURL:   "https://pay.example.com",
		RecordKey: "countersign.local/record/5fc35ea3+cdf07af3+Ab2RUZxcGGZSz2bbOFgvhYel8qwjMYREdiPWDK3aER4U",
	})
	if err != nil {
		panic(err)
	}
	api := http.NotFoundHandler() // the API's handler
	mux := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/console" || strings.HasPrefix(r.URL.Path, console.Prefix) {
			page.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/console/config.json", nil))
	fmt.Println(rec.Code, rec.Body.String())
	// Output: 200 {"baseURL":"https://pay.example.com","recordKey":"countersign.local/record/5fc35ea3+cdf07af3+Ab2RUZxcGGZSz2bbOFgvhYel8qwjMYREdiPWDK3aER4U","sandbox":false}
}
