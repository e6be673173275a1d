// Package fielderr is the one shape of "this field is wrong" shared by the
// contract's request validation and the payment instruction's decoder, so
// a client sees the same errors member whichever layer refused its input.
package fielderr

import "strings"

// FieldError is one reason a request is refused.
type FieldError struct {
	// Field is the JSON path of the member ("amount.minor", "lines[0].sku"),
	// the name of a query, path or header parameter, or empty for the body
	// as a whole.
	Field string `json:"field" doc:"JSON path of the member (amount.minor, lines[0].sku) or the parameter name."`
	// Rule is the rule that failed: a validate tag ("min", "oneof",
	// "required"), "type" for a value of the wrong type, "unknown" for a
	// member that does not exist, or a grammar rule of the decoder.
	Rule string `json:"rule" validate:"required" doc:"The rule that failed, e.g. required, min, oneof, or type for a value of the wrong type."`
	// Message says what is wrong, for people.
	Message string `json:"message" validate:"required" doc:"What is wrong, for people."`
}

// Join formats fields after prefix as "field message; field message".
func Join(prefix string, fields []FieldError) string {
	var b strings.Builder
	b.WriteString(prefix)
	for i, f := range fields {
		if i > 0 {
			b.WriteString("; ")
		}
		if f.Field != "" {
			b.WriteString(f.Field)
			b.WriteString(" ")
		}
		b.WriteString(f.Message)
	}
	return b.String()
}
