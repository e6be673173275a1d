package fakemerchant

import (
	"errors"
	"io"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/countersign/countersign/commerce/acp"
)

// The fake PSP: ACP's delegate payment API over the engine's allowances.
//
// The delegate API's Error has closed type and code enums with no word
// for a missing bearer key or API-Version (the specification's own 401
// example, type and code "unauthorized", is outside them), so those two
// refusals answer their status with an empty body rather than an error
// object the schema refuses. Everything else wrong with a request is 400
// invalid_request invalid_card, with the offending member in param, as
// the specification's own examples do for a missing card field.

// pspError answers the delegate API's Error.
func pspError(w http.ResponseWriter, status int, code, message, param string) {
	acpWrite(w, status, acp.Error{Type: acp.ErrorInvalidRequest, Code: code, Message: message, Param: param})
}

func (v *acpView) delegate(w http.ResponseWriter, r *http.Request) {
	status, code, _ := v.headers(w, r)
	switch code {
	case "":
	case "idempotency_key_required":
		pspError(w, status, acp.DelegateIdempotencyKeyRequired, "Idempotency-Key header is required", "")
		return
	case "invalid_content_type":
		pspError(w, status, acp.DelegateInvalidCard, "Content-Type must be application/json", "")
		return
	default: // unauthorized, unsupported_api_version
		w.WriteHeader(status)
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		pspError(w, http.StatusBadRequest, acp.DelegateInvalidCard, "request body too large or unreadable", "")
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if v.replay(w, v.delegations, key, raw, func() {
		pspError(w, http.StatusUnprocessableEntity, acp.DelegateIdempotencyConflict,
			"Idempotency-Key has already been used with a different request body", "")
	}) {
		return
	}
	req, err := acp.ParseDelegatePaymentRequest(raw)
	if err != nil {
		var se *acp.SchemaError
		errors.As(err, &se)
		pspError(w, http.StatusBadRequest, acp.DelegateInvalidCard, se.Reason, se.Path)
		return
	}
	if !luhn(req.PaymentMethod.Number) {
		pspError(w, http.StatusBadRequest, acp.DelegateInvalidCard, "Invalid card number provided", "$.payment_method.number")
		return
	}
	al := req.Allowance
	exp, err := time.Parse(time.RFC3339Nano, strings.ToUpper(al.ExpiresAt))
	if err != nil {
		pspError(w, http.StatusBadRequest, acp.DelegateInvalidCard, "expires_at is not an RFC 3339 date-time", "$.allowance.expires_at")
		return
	}
	a, err := v.m.Delegate(al.MaxAmount, al.Currency, al.CheckoutSessionID, exp)
	if err != nil {
		pspError(w, http.StatusBadRequest, acp.DelegateInvalidCard, err.Error(), "$.allowance")
		return
	}
	md := maps.Clone(req.Metadata)
	md["merchant_id"] = al.MerchantID
	md["idempotency_key"] = key
	answer := acp.DelegatePaymentResponse{ID: a.Token, Created: v.m.Now().UTC().Format(time.RFC3339), Metadata: md}
	b := v.remember(v.delegations, key, raw, http.StatusCreated, answer)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(b)
}

// luhn reports whether number passes the Luhn check (card numbers and
// network tokens do).
func luhn(number string) bool {
	if len(number) < 12 || len(number) > 19 {
		return false
	}
	sum := 0
	for i := range len(number) {
		c := number[len(number)-1-i]
		if c < '0' || c > '9' {
			return false
		}
		d := int(c - '0')
		if i%2 == 1 {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return sum%10 == 0
}
