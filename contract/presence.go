package contract

import (
	"errors"
	"io"
	"reflect"

	"github.com/go-playground/validator/v10"
)

// DecodeJSON decodes a request body into dst as [DecodeJSON] does, then
// validates it as [Model.Validate] does, and also judges every member the
// client sent as its type's zero value (0, "", false) on a field that is
// omitted from JSON when zero: validator's omitempty would skip such a
// field, reading an explicit zero as absent, while the served schema
// (minimum: 1, say) refuses it. Here the zero is a value like any other:
// "limit": 0 against validate:"omitempty,min=1" is a request.validation
// problem at "limit", as the contract says.
func (m *Model) DecodeJSON(r io.Reader, dst any) error {
	zeros, err := decodeJSON(r, dst)
	if err != nil {
		return err
	}
	if err := m.validator.Validate(dst); err != nil {
		return err
	}
	var errs []FieldError
	for _, z := range zeros {
		if fe, ok := m.validator.zeroFails(z); ok {
			errs = append(errs, fe)
		}
	}
	if len(errs) > 0 {
		return &ValidationError{Errors: errs}
	}
	return nil
}

// zeroFails runs z's rules on its zero value. A tag whose rules need the
// enclosing struct (cross-field rules) cannot run alone; validator panics
// or errors on those, and they are left to Validate, which already ran.
func (v *ruleValidator) zeroFails(z presentZero) (fe FieldError, failed bool) {
	defer func() {
		if recover() != nil {
			failed = false
		}
	}()
	err := v.v.Var(reflect.Zero(z.t).Interface(), z.tag)
	var verrs validator.ValidationErrors
	if err == nil || !errors.As(err, &verrs) || len(verrs) == 0 {
		return FieldError{}, false
	}
	return FieldError{Field: z.path, Rule: verrs[0].Tag(), Message: v.message(verrs[0])}, true
}
