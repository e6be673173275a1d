// Package errcode gives domain errors a stable, machine-readable code.
//
// Domain packages never speak HTTP. They return errors that carry a code
// (for example "auth.invalid"); the HTTP layer looks the code up in the
// contract's problem registry to choose the status, title and action. A
// caller embedding the library branches on the package's exported sentinels
// with errors.Is, or reads the code through the Code method:
//
//	var c interface{ Code() string }
//	if errors.As(err, &c) { ... c.Code() ... }
package errcode

// Error is a sentinel error with a stable code. Wrap it with fmt.Errorf and
// %w to add detail; errors.Is still matches the sentinel and errors.As still
// finds the code.
type Error struct {
	code string
	msg  string
}

// New returns a sentinel error with the given code and message. The message
// should start with the package name, as every error of this module does.
func New(code, msg string) *Error { return &Error{code: code, msg: msg} }

// Error returns the message.
func (e *Error) Error() string { return e.msg }

// Code returns the stable code, e.g. "auth.invalid".
func (e *Error) Code() string { return e.code }
