package contract

import (
	"net/url"
	"strings"
	"testing"
)

func BenchmarkDecodeJSON(b *testing.B) {
	body := `{"amount":{"minor":1250,"currency":"USD"},"lines":[{"sku":"A1","quantity":2},{"sku":"B2","quantity":1}],` +
		`"rail":"acp","meta":{"k":"v"},"at":"2026-11-22T10:00:00Z"}`
	b.ReportAllocs()
	for b.Loop() {
		var o order
		if err := DecodeJSON(strings.NewReader(body), &o); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	m := testModel(b)
	o := mustOrder(&testing.T{}, validOrder)
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Validate(&o); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeParams(b *testing.B) {
	q := url.Values{"cursor": {"Mg"}, "limit": {"50"}}
	b.ReportAllocs()
	for b.Loop() {
		var p PageParams
		if err := DecodeParams(&p, ParamSource{Query: q}); err != nil {
			b.Fatal(err)
		}
	}
}
