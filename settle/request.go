package settle

import (
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxAmount is the largest amount a request may carry: 2^53-1 minor units,
// so that every JSON client keeps amounts exact and sums of two amounts
// cannot overflow an int64.
const MaxAmount int64 = 1<<53 - 1

// Request limits, enforced by Validate. The metadata limits follow the
// common practice of card processors, so a rail can pass metadata through.
const (
	maxKeyLen           = 255
	maxPayeeLen         = 512
	maxCurrencyLen      = 255
	maxMetadataKeys     = 50
	maxMetadataKeyLen   = 40
	maxMetadataValueLen = 500
	maxNameLen          = 64
)

// SettleRequest asks a rail to pay.
//
// Two requests are the same request for idempotency when their Key, Payee,
// Amount and Currency are equal (see [SettleRequest.Matches]). Metadata is
// descriptive: the rail keeps the first call's and does not compare it, so a
// retry that rebuilds its metadata differently is still a retry.
type SettleRequest struct {
	// Key is the caller's idempotency key for the payment; Countersign
	// uses the intent id. 1 to 255 bytes of visible ASCII (0x21-0x7e).
	Key string
	// Payee identifies who is paid, e.g. "acct:seller.example". 1 to 512
	// bytes of UTF-8 without control characters.
	Payee string
	// Amount is in minor units of Currency: 1 to [MaxAmount].
	Amount int64
	// Currency is an ISO 4217 code or a CAIP-19 asset id: 1 to 255 bytes
	// of visible ASCII. Rails may accept fewer currencies.
	Currency string
	// Metadata is passed to the rail as is: at most 50 entries, keys of 1
	// to 40 bytes of visible ASCII, values of at most 500 bytes of UTF-8.
	// It must not hold secrets. Optional.
	Metadata map[string]string
}

// Validate checks the request against the limits documented on its fields.
// Errors match [ErrInvalidRequest]. Rails call it before sending anything.
func (r SettleRequest) Validate() error {
	if err := checkID("key", r.Key); err != nil {
		return err
	}
	if err := checkText("payee", r.Payee, maxPayeeLen); err != nil {
		return err
	}
	if r.Payee == "" {
		return invalid("empty payee")
	}
	if err := checkAmount(r.Amount); err != nil {
		return err
	}
	if r.Currency == "" || len(r.Currency) > maxCurrencyLen || !visibleASCII(r.Currency) {
		return invalid("currency must be 1 to %d bytes of visible ASCII", maxCurrencyLen)
	}
	return checkMetadata(r.Metadata)
}

// Matches reports whether o is the same request as r for idempotency: equal
// Key, Payee, Amount and Currency. Metadata is not compared.
func (r SettleRequest) Matches(o SettleRequest) bool {
	return r.Key == o.Key && r.Payee == o.Payee && r.Amount == o.Amount && r.Currency == o.Currency
}

// RefundRequest asks a rail to return money from a settled payment.
//
// Two refund requests are the same request for idempotency when their
// RefundID, Key and Amount are equal (see [RefundRequest.Matches]).
type RefundRequest struct {
	// RefundID is the caller's idempotency key for this refund; each
	// partial refund of a payment needs its own. Same syntax as a
	// [SettleRequest] Key. Refund ids and payment keys are separate
	// namespaces.
	RefundID string
	// Key is the Key of the settled payment to refund.
	Key string
	// Amount to return, in minor units of the payment's currency: 1 to
	// [MaxAmount]. The refunds of one payment may not sum to more than its
	// amount.
	Amount int64
	// Metadata as for [SettleRequest.Metadata]; not compared on replay.
	Metadata map[string]string
}

// Validate checks the request against the limits documented on its fields.
// Errors match [ErrInvalidRequest].
func (r RefundRequest) Validate() error {
	if err := checkID("refund id", r.RefundID); err != nil {
		return err
	}
	if err := checkID("key", r.Key); err != nil {
		return err
	}
	if err := checkAmount(r.Amount); err != nil {
		return err
	}
	return checkMetadata(r.Metadata)
}

// Matches reports whether o is the same refund request as r for
// idempotency: equal RefundID, Key and Amount. Metadata is not compared.
func (r RefundRequest) Matches(o RefundRequest) bool {
	return r.RefundID == o.RefundID && r.Key == o.Key && r.Amount == o.Amount
}

// RefundResult is a rail's record of one refund.
type RefundResult struct {
	// RefundID and Key are those of the request.
	RefundID string
	Key      string
	// Reference is the rail's own id for the refund.
	Reference string
	// Amount refunded by this refund, in minor units of Currency (the
	// payment's currency).
	Amount   int64
	Currency string
	// Refunded is the sum of the payment's refunds including this one, as
	// of when this refund was made. It equals the payment's amount when
	// the payment is now fully refunded.
	Refunded int64
	// RefundedAt is when the rail made the refund.
	RefundedAt time.Time
}

// ValidateKey reports whether key is a valid payment key or refund id: 1 to
// 255 bytes of visible ASCII (0x21-0x7e). Errors match [ErrInvalidRequest].
func ValidateKey(key string) error {
	return checkID("key", key)
}

// ValidateName reports whether name is a valid rail name: 1 to 64 bytes,
// lowercase ASCII letters, digits, '-', '.' and '_', starting with a letter
// or digit. Names appear in mandates, URLs and store keys.
func ValidateName(name string) error {
	if name == "" || len(name) > maxNameLen {
		return fmt.Errorf("settle: invalid rail name %q: want 1 to %d bytes", name, maxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case (c == '-' || c == '.' || c == '_') && i > 0:
		default:
			return fmt.Errorf("settle: invalid rail name %q: want [a-z0-9][a-z0-9._-]*", name)
		}
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidRequest}, args...)...)
}

// checkID checks an idempotency key. It quotes nothing of the value beyond
// its length: keys are not secret, but a malformed one may be huge.
func checkID(what, id string) error {
	if id == "" || len(id) > maxKeyLen || !visibleASCII(id) {
		return invalid("%s must be 1 to %d bytes of visible ASCII", what, maxKeyLen)
	}
	return nil
}

func checkAmount(a int64) error {
	if a < 1 || a > MaxAmount {
		return invalid("amount %d out of range [1, %d]", a, MaxAmount)
	}
	return nil
}

func checkText(what, s string, limit int) error {
	if len(s) > limit || !utf8.ValidString(s) {
		return invalid("%s must be at most %d bytes of UTF-8", what, limit)
	}
	for _, c := range s {
		if unicode.IsControl(c) {
			return invalid("%s contains a control character", what)
		}
	}
	return nil
}

func checkMetadata(m map[string]string) error {
	if len(m) > maxMetadataKeys {
		return invalid("metadata has %d entries, more than %d", len(m), maxMetadataKeys)
	}
	for k, v := range m {
		if k == "" || len(k) > maxMetadataKeyLen || !visibleASCII(k) {
			return invalid("metadata keys must be 1 to %d bytes of visible ASCII", maxMetadataKeyLen)
		}
		if len(v) > maxMetadataValueLen || !utf8.ValidString(v) {
			return invalid("metadata value of %q must be at most %d bytes of UTF-8", k, maxMetadataValueLen)
		}
	}
	return nil
}

func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
