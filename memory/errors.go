package memory

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Problem codes of the memory store.
const (
	CodeInvalid          = "memory.invalid"           // 400: a field breaks a rule
	CodeMandateInvalid   = "memory.mandate_invalid"   // 403: the mandate does not verify, expired, revoked or is not the caller's
	CodeRightMissing     = "memory.right_missing"     // 403: the mandate lacks the right or the namespace
	CodeAsOfFloor        = "memory.as_of_floor"       // 403: txAt before the mandate's asOfFloor
	CodeNotFound         = "memory.not_found"         // 404: no such record
	CodeErased           = "memory.erased"            // 410: the record was erased
	CodeBadCursor        = "memory.bad_cursor"        // 400
	CodeIdempotencyReuse = "memory.idempotency_reuse" // 422: key reused with another request
)

// Sentinels matched by every *Error of the code; check with errors.Is.
var (
	ErrInvalid          = errors.New(CodeInvalid)
	ErrMandateInvalid   = errors.New(CodeMandateInvalid)
	ErrRightMissing     = errors.New(CodeRightMissing)
	ErrAsOfFloor        = errors.New(CodeAsOfFloor)
	ErrNotFound         = errors.New(CodeNotFound)
	ErrErased           = errors.New(CodeErased)
	ErrBadCursor        = errors.New(CodeBadCursor)
	ErrIdempotencyReuse = errors.New(CodeIdempotencyReuse)
)

var sentinels = map[string]error{
	CodeInvalid: ErrInvalid, CodeMandateInvalid: ErrMandateInvalid, CodeRightMissing: ErrRightMissing,
	CodeAsOfFloor: ErrAsOfFloor, CodeNotFound: ErrNotFound, CodeErased: ErrErased,
	CodeBadCursor: ErrBadCursor, CodeIdempotencyReuse: ErrIdempotencyReuse,
}

// Error is a refusal of the memory store: a stable code (see the Code
// constants), a message for the client and, for mandate refusals, the
// precise reason.
type Error struct {
	code   string
	msg    string
	reason string
	field  string
	cause  error
}

func (e *Error) Error() string { return "memory: " + e.msg }

// Code is the problem code.
func (e *Error) Code() string { return e.code }

// Reason is the precise reason of a mandate refusal ("" otherwise).
func (e *Error) Reason() string { return e.reason }

// ProblemExtensions adds the reason or the offending field to the problem.
func (e *Error) ProblemExtensions() map[string]any {
	m := map[string]any{}
	if e.reason != "" {
		m["reason"] = e.reason
	}
	if e.field != "" {
		m["field"] = e.field
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// Unwrap matches the code's sentinel and the cause.
func (e *Error) Unwrap() []error {
	out := []error{sentinels[e.code]}
	if e.cause != nil {
		out = append(out, e.cause)
	}
	return out
}

func fail(code, format string, args ...any) *Error {
	return &Error{code: code, msg: fmt.Sprintf(format, args...)}
}

func invalid(field, format string, args ...any) *Error {
	return &Error{code: CodeInvalid, field: field, msg: field + ": " + fmt.Sprintf(format, args...)}
}

// refusedMandate is a memory.mandate_invalid refusal; cause (the mandate
// verifier's refusal, a pay error) stays in the chain for logs, and the
// memory code, first in the chain, is what a client is answered.
func refusedMandate(reason string, cause error) *Error {
	return &Error{code: CodeMandateInvalid, reason: reason, cause: cause, msg: "the memory mandate is not valid: " + reason}
}

// Limits of what a record may hold.
const (
	MaxNameLen      = 256      // bytes of a namespace, subject or kind
	MaxBodyLen      = 64 << 10 // bytes of a body
	MaxEdges        = 32       // edges of one record
	MaxKeyLen       = 255      // bytes of an idempotency key
	MaxRationaleLen = 1024
)

// validName checks a namespace, subject or kind: 1 to 256 bytes of UTF-8
// without control characters (they would break the index keys).
func validName(s string) error {
	switch {
	case s == "":
		return errors.New("is required")
	case len(s) > MaxNameLen:
		return fmt.Errorf("is longer than %d bytes", MaxNameLen)
	case !utf8.ValidString(s):
		return errors.New("is not valid UTF-8")
	case strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return errors.New("contains a control character")
	}
	return nil
}
