package acp

// The Parse functions check a document against the protocol's schema and
// only then decode it. An error is a *SchemaError naming the first place
// the document departs from the schema; the result is nil with it.

// ParseCheckoutSession parses a session response (CheckoutSession: create,
// update, get and cancel answers).
func ParseCheckoutSession(data []byte) (*CheckoutSession, error) {
	return parse[CheckoutSession](data, ruleCheckoutSession)
}

// ParseCheckoutSessionWithOrder parses a completion's response
// (CheckoutSessionWithOrder: a session whose order is required).
func ParseCheckoutSessionWithOrder(data []byte) (*CheckoutSession, error) {
	return parse[CheckoutSession](data, ruleCheckoutSessionWithOrder)
}

// ParseError parses the checkout API's error body.
func ParseError(data []byte) (*Error, error) { return parse[Error](data, ruleError) }

// ParseDelegatePaymentResponse parses the PSP's delegate_payment answer.
func ParseDelegatePaymentResponse(data []byte) (*DelegatePaymentResponse, error) {
	return parse[DelegatePaymentResponse](data, ruleDelegatePaymentResponse)
}

// ParseDelegatePaymentError parses the delegate payment API's error body,
// whose type and code are closed enums.
func ParseDelegatePaymentError(data []byte) (*Error, error) {
	return parse[Error](data, ruleDelegateError)
}

// ParseCheckoutSessionCreateRequest parses the body of
// POST /checkout_sessions.
func ParseCheckoutSessionCreateRequest(data []byte) (*CheckoutSessionCreateRequest, error) {
	return parse[CheckoutSessionCreateRequest](data, ruleCheckoutSessionCreateRequest)
}

// ParseCheckoutSessionUpdateRequest parses the body of
// POST /checkout_sessions/{id}.
func ParseCheckoutSessionUpdateRequest(data []byte) (*CheckoutSessionUpdateRequest, error) {
	return parse[CheckoutSessionUpdateRequest](data, ruleCheckoutSessionUpdateRequest)
}

// ParseCheckoutSessionCompleteRequest parses the body of
// POST /checkout_sessions/{id}/complete.
func ParseCheckoutSessionCompleteRequest(data []byte) (*CheckoutSessionCompleteRequest, error) {
	return parse[CheckoutSessionCompleteRequest](data, ruleCheckoutSessionCompleteRequest)
}

// ParseCancelSessionRequest parses the body of
// POST /checkout_sessions/{id}/cancel.
func ParseCancelSessionRequest(data []byte) (*CancelSessionRequest, error) {
	return parse[CancelSessionRequest](data, ruleCancelSessionRequest)
}

// ParseDelegatePaymentRequest parses the body of
// POST /agentic_commerce/delegate_payment.
func ParseDelegatePaymentRequest(data []byte) (*DelegatePaymentRequest, error) {
	return parse[DelegatePaymentRequest](data, ruleDelegatePaymentRequest)
}

func parse[T any](data []byte, r rule) (*T, error) {
	v := new(T)
	if err := decodeChecked(data, r, v); err != nil {
		return nil, err
	}
	return v, nil
}
