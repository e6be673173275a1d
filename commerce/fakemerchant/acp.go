package fakemerchant

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/commerce/acp"
	"github.com/countersign/countersign/commerce/cart"
)

// ACPHandlerID is the id of the fake's one payment handler
// (dev.acp.tokenized.card): it takes the fake PSP's delegated tokens.
const ACPHandlerID = "card_tokenized"

// ACPHandler serves the ACP 2026-04-17 view of the merchant and its fake
// PSP:
//
//	POST /checkout_sessions                         create (201)
//	GET  /checkout_sessions/{id}                    get
//	POST /checkout_sessions/{id}                    update
//	POST /checkout_sessions/{id}/complete           complete (200 with the order)
//	POST /checkout_sessions/{id}/cancel             cancel (405 when closed)
//	POST /agentic_commerce/delegate_payment         the PSP: a vault token (201)
//
// Requests must carry API-Version 2026-04-17, the bearer key when
// Options.APIKey is set, and on POSTs an Idempotency-Key; bodies are
// checked against the protocol's schema (400 with the offending member in
// param), except that an item may carry a quantity (default 1): the
// protocol's examples send one though its schema has none. An item listed
// twice is one line of quantity two. A create replayed with the same
// Idempotency-Key and body answers the first answer again (with
// Idempotent-Replayed: true); with another body, 422 idempotency_conflict.
// X-Fake-Scenario on create picks the session's scenario.
//
// Scenarios: out of stock is not_ready_for_payment with an out_of_stock
// error message; escalation is requires_escalation with continue_url;
// authentication is authentication_required with authentication_metadata
// and continue_url, and completing it answers 400 requires_3ds; a declined
// payment answers 402 payment_declined and leaves the session open;
// complete_5xx answers 500 processing_error; timeout_then_success
// completes, then holds the answer for HangFor; expiry shows status
// expired; slow delays every answer about the session by SlowDelay; a
// surge-priced session costs PriceIncrease more per unit from its first
// read on, with a price_change warning; never_ready is
// not_ready_for_payment without a message and completes all the same;
// missing_info is not_ready_for_payment with a missing error message.
func (m *Merchant) ACPHandler() http.Handler {
	v := &acpView{m: m, creates: map[string]acpReplay{}, delegations: map[string]acpReplay{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /checkout_sessions", v.guard(v.create))
	mux.HandleFunc("GET /checkout_sessions/{id}", v.guard(v.get))
	mux.HandleFunc("POST /checkout_sessions/{id}", v.guard(v.update))
	mux.HandleFunc("POST /checkout_sessions/{id}/complete", v.guard(v.complete))
	mux.HandleFunc("POST /checkout_sessions/{id}/cancel", v.guard(v.cancel))
	mux.HandleFunc("POST /agentic_commerce/delegate_payment", v.delegate)
	return http.MaxBytesHandler(mux, 1<<20)
}

// acpReplay is a stored answer to an idempotent request.
type acpReplay struct {
	request []byte // the request body, canonical
	status  int
	body    []byte
}

type acpView struct {
	m *Merchant

	mu          sync.Mutex // guards the maps: stored answers by idempotency key
	creates     map[string]acpReplay
	delegations map[string]acpReplay
}

// acpError answers the checkout API's Error.
func acpError(w http.ResponseWriter, status int, typ, code, message, param string) {
	acpWrite(w, status, acp.Error{Type: typ, Code: code, Message: message, Param: param})
}

func acpWrite(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"type":"processing_error","code":"internal_error","message":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// authorized checks the bearer key, when one is configured.
func (v *acpView) authorized(r *http.Request) bool {
	key := v.m.APIKey()
	if key == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(key)) == 1
}

// headers checks the headers every request must carry, echoes
// Request-Id and Idempotency-Key, and reports the problem, if any, as
// (status, code, message).
func (v *acpView) headers(w http.ResponseWriter, r *http.Request) (int, string, string) {
	if id := r.Header.Get("Request-Id"); id != "" {
		w.Header().Set("Request-Id", id)
	}
	key := r.Header.Get("Idempotency-Key")
	if key != "" {
		w.Header().Set("Idempotency-Key", key)
	}
	switch {
	case !v.authorized(r):
		w.Header().Set("WWW-Authenticate", `Bearer realm="fakemerchant"`)
		return http.StatusUnauthorized, "unauthorized", "a valid bearer key is required"
	case r.Header.Get("API-Version") != acp.Version:
		return http.StatusBadRequest, "unsupported_api_version", "API-Version must be " + acp.Version
	case r.Method == http.MethodPost && (key == "" || len(key) > 255):
		return http.StatusBadRequest, "idempotency_key_required", "Idempotency-Key header is required"
	case r.Method == http.MethodPost && r.ContentLength != 0 && !isJSON(r.Header.Get("Content-Type")):
		return http.StatusBadRequest, "invalid_content_type", "Content-Type must be application/json"
	}
	return 0, "", ""
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// guard answers header problems in the checkout API's error shape.
func (v *acpView) guard(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if status, code, msg := v.headers(w, r); status != 0 {
			acpError(w, status, acp.ErrorInvalidRequest, code, msg, "")
			return
		}
		h(w, r)
	}
}

// acpBody reads a request body and takes the quantities out of its items
// (the quirk: ACP's Item has no quantity, its examples send one), so the
// rest can be checked against the schema. quantities holds, per member
// name holding items ("line_items"), each item's quantity (1 when absent).
func acpBody(r *http.Request) (body []byte, quantities []int64, err error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, nil, &acp.SchemaError{Path: "$", Reason: "request body too large or unreadable"}
	}
	var doc map[string]json.RawMessage
	if json.Unmarshal(b, &doc) != nil || doc["line_items"] == nil {
		return b, nil, nil // the schema check reports what is wrong
	}
	var items []map[string]json.RawMessage
	if json.Unmarshal(doc["line_items"], &items) != nil {
		return b, nil, nil
	}
	for i, it := range items {
		q := int64(1)
		if raw, ok := it["quantity"]; ok {
			if json.Unmarshal(raw, &q) != nil || q < 1 || q > 10_000 {
				return nil, nil, &acp.SchemaError{Path: fmt.Sprintf("$.line_items[%d].quantity", i), Reason: "want an integer from 1 to 10000"}
			}
			delete(it, "quantity")
		}
		quantities = append(quantities, q)
	}
	doc["line_items"], _ = json.Marshal(items)
	b, _ = json.Marshal(doc)
	return b, quantities, nil
}

// lines turns items into lines: an item listed twice is one line of
// quantity two, in order of first appearance.
func acpLines(items []acp.Item, quantities []int64) []cart.LineRequest {
	var out []cart.LineRequest
	for i, it := range items {
		q := int64(1)
		if i < len(quantities) {
			q = quantities[i]
		}
		j := slices.IndexFunc(out, func(l cart.LineRequest) bool { return l.ID == it.ID })
		if j < 0 {
			out = append(out, cart.LineRequest{ID: it.ID, Quantity: q})
			continue
		}
		out[j].Quantity += q
	}
	return out
}

func badRequest(w http.ResponseWriter, err error) {
	var se *acp.SchemaError
	if errors.As(err, &se) {
		acpError(w, http.StatusBadRequest, acp.ErrorInvalidRequest, "invalid", se.Reason, se.Path)
		return
	}
	acpError(w, http.StatusBadRequest, acp.ErrorInvalidRequest, "invalid", "malformed request", "")
}

// canonical is a body's JSON with members sorted, for comparing requests
// (ACP's equivalence: key order does not matter, array order does).
func canonical(b []byte) []byte {
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return b
	}
	c, _ := json.Marshal(v)
	return c
}

// replay answers a stored answer to the same key, or a conflict; ok is
// false when the key is new.
func (v *acpView) replay(w http.ResponseWriter, store map[string]acpReplay, key string, body []byte, conflict func()) bool {
	v.mu.Lock()
	prev, ok := store[key]
	v.mu.Unlock()
	if !ok {
		return false
	}
	if !bytes.Equal(prev.request, canonical(body)) {
		conflict()
		return true
	}
	w.Header().Set("Idempotent-Replayed", "true")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(prev.status)
	_, _ = w.Write(prev.body)
	return true
}

func (v *acpView) remember(store map[string]acpReplay, key string, body []byte, status int, answer any) []byte {
	b, _ := json.Marshal(answer)
	if status < 500 {
		v.mu.Lock()
		store[key] = acpReplay{request: canonical(body), status: status, body: b}
		v.mu.Unlock()
	}
	return b
}

func (v *acpView) create(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		badRequest(w, err)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if v.replay(w, v.creates, key, raw, func() {
		acpError(w, http.StatusUnprocessableEntity, acp.ErrorInvalidRequest, "idempotency_conflict",
			"Idempotency-Key has already been used with a different request body", "")
	}) {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	body, qty, err := acpBody(r)
	if err != nil {
		badRequest(w, err)
		return
	}
	req, err := acp.ParseCheckoutSessionCreateRequest(body)
	if err != nil {
		badRequest(w, err)
		return
	}
	sc := Scenario(r.Header.Get("X-Fake-Scenario"))
	if sc != "" && !knownScenario(sc) {
		acpError(w, http.StatusBadRequest, acp.ErrorInvalidRequest, "invalid", "unknown X-Fake-Scenario", "")
		return
	}
	s, err := v.m.Create("acp", acp.Version, req.Currency, acpLines(req.LineItems, qty), sc)
	if err != nil {
		v.engineError(w, err)
		return
	}
	s, err = v.m.Update(s.ID, func(s *Session) error {
		applyBuyer(s, req.Buyer, req.FulfillmentDetails)
		s.Discounts = discountCodes(req.Coupons, req.Discounts)
		return nil
	})
	if err != nil {
		v.engineError(w, err)
		return
	}
	v.m.Delay(r, s)
	b := v.remember(v.creates, key, raw, http.StatusCreated, v.render(s, false))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(b)
}

func knownScenario(sc Scenario) bool {
	switch sc {
	case ScenarioReady, ScenarioOutOfStock, ScenarioEscalation, ScenarioAuthentication, ScenarioDeclined,
		ScenarioSlow, ScenarioCompleteFails, ScenarioTimeoutThenSuccess, ScenarioExpires, ScenarioPriceChanges:
		return true
	}
	return false
}

func applyBuyer(s *Session, b *acp.Buyer, fd *acp.FulfillmentDetails) {
	if b != nil {
		s.Email = b.Email
	}
	if fd == nil {
		return
	}
	if fd.Email != "" {
		s.Email = fd.Email
	}
	if a := fd.Address; a != nil {
		s.Address = &cart.Address{Name: a.Name, Line1: a.LineOne, Line2: a.LineTwo, City: a.City,
			State: a.State, PostalCode: a.PostalCode, Country: a.Country}
	}
}

func discountCodes(coupons []string, d *acp.DiscountsRequest) []string {
	codes := slices.Clone(coupons)
	if d != nil {
		codes = append(codes, d.Codes...)
	}
	for i, c := range codes {
		codes[i] = strings.ToUpper(c) // codes are case-insensitive
	}
	return codes
}

// peek reads a session without counting a read (price_changes counts
// reads).
func (v *acpView) peek(id string) (Session, error) {
	v.m.mu.Lock()
	defer v.m.mu.Unlock()
	s, ok := v.m.sessions[id]
	if !ok {
		return Session{}, ErrNoSession
	}
	return v.m.copy(s), nil
}

func (v *acpView) get(w http.ResponseWriter, r *http.Request) {
	s, err := v.m.Read(r.PathValue("id"))
	if err != nil {
		v.engineError(w, err)
		return
	}
	v.m.Delay(r, s)
	acpWrite(w, http.StatusOK, v.render(s, false))
}

func (v *acpView) update(w http.ResponseWriter, r *http.Request) {
	body, qty, err := acpBody(r)
	if err != nil {
		badRequest(w, err)
		return
	}
	req, err := acp.ParseCheckoutSessionUpdateRequest(body)
	if err != nil {
		badRequest(w, err)
		return
	}
	id := r.PathValue("id")
	if s, err := v.peek(id); err == nil {
		v.m.Delay(r, s)
	}
	s, err := v.m.Update(id, func(s *Session) error {
		if req.LineItems != nil {
			lines := acpLines(req.LineItems, qty)
			for _, l := range lines {
				if _, ok := Find(l.ID); !ok {
					return fmt.Errorf("%w: %s", ErrUnknownItem, l.ID)
				}
			}
			if len(lines) == 0 {
				return fmt.Errorf("%w: no line items", ErrBadRequest)
			}
			s.Lines = lines
		}
		for _, so := range req.SelectedFulfillmentOptions {
			if so.OptionID != "standard" && so.OptionID != "express" {
				return fmt.Errorf("%w: no fulfillment option %q", ErrBadRequest, so.OptionID)
			}
			s.Fulfillment = so.OptionID
		}
		applyBuyer(s, req.Buyer, req.FulfillmentDetails)
		if req.Coupons != nil || req.Discounts != nil {
			s.Discounts = discountCodes(req.Coupons, req.Discounts)
		}
		return nil
	})
	if err != nil {
		v.engineError(w, err)
		return
	}
	acpWrite(w, http.StatusOK, v.render(s, false))
}

func (v *acpView) cancel(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		badRequest(w, err)
		return
	}
	if len(bytes.TrimSpace(b)) > 0 {
		if _, err := acp.ParseCancelSessionRequest(b); err != nil {
			badRequest(w, err)
			return
		}
	}
	id := r.PathValue("id")
	if s, err := v.peek(id); err == nil {
		v.m.Delay(r, s)
	}
	s, err := v.m.Cancel(id)
	switch {
	case errors.Is(err, ErrClosed):
		acpError(w, http.StatusMethodNotAllowed, acp.ErrorInvalidRequest, "not_cancelable",
			"the checkout session is already completed, canceled or expired", "")
		return
	case err != nil:
		v.engineError(w, err)
		return
	}
	acpWrite(w, http.StatusOK, v.render(s, false))
}

func (v *acpView) complete(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		badRequest(w, err)
		return
	}
	req, err := acp.ParseCheckoutSessionCompleteRequest(b)
	if err != nil {
		badRequest(w, err)
		return
	}
	id := r.PathValue("id")
	s, err := v.peek(id)
	if err != nil {
		v.engineError(w, err)
		return
	}
	v.m.Delay(r, s)
	pd := req.PaymentData
	if pd.Instrument == nil || pd.HandlerID != ACPHandlerID {
		acpError(w, http.StatusBadRequest, acp.ErrorInvalidRequest, "unsupported",
			"only the "+ACPHandlerID+" handler with a delegated token is accepted", "$.payment_data.handler_id")
		return
	}
	_, hang, err := v.m.Complete(id, pd.Instrument.Credential.Token, r.Header.Get("Idempotency-Key"), true)
	if err != nil {
		v.completeError(w, id, err)
		return
	}
	if hang {
		v.m.Hang(r)
	}
	s, err = v.peek(id)
	if err != nil {
		v.engineError(w, err)
		return
	}
	acpWrite(w, http.StatusOK, v.render(s, true))
}

// completeError answers a refused completion.
func (v *acpView) completeError(w http.ResponseWriter, id string, err error) {
	s, _ := v.peek(id)
	switch {
	case IsServerFault(err):
		acpError(w, http.StatusInternalServerError, acp.ErrorProcessingError, "internal_error",
			"the merchant could not complete the checkout", "")
	case errors.Is(err, ErrDeclined):
		acpError(w, http.StatusPaymentRequired, acp.ErrorInvalidRequest, "payment_declined",
			"the card was declined", "$.payment_data")
	case errors.Is(err, ErrBadToken):
		acpError(w, http.StatusPaymentRequired, acp.ErrorInvalidRequest, "payment_token_invalid",
			"the payment token is unknown, used, expired, for another session or below the total", "$.payment_data.instrument.credential.token")
	case errors.Is(err, ErrNotReady):
		switch v.m.Status(s) {
		case cart.StatusAuth:
			acpError(w, http.StatusBadRequest, acp.ErrorInvalidRequest, "requires_3ds",
				"This checkout session requires issuer authentication. The request must include 'authentication_result'.",
				"$.authentication_result")
		case cart.StatusEscalation:
			acpError(w, http.StatusBadRequest, acp.ErrorInvalidRequest, "requires_escalation",
				"the buyer must continue at the merchant", "")
		default:
			acpError(w, http.StatusBadRequest, acp.ErrorInvalidRequest, "not_ready_for_payment",
				"the checkout session is not ready for payment", "")
		}
	case errors.Is(err, ErrClosed):
		switch v.m.Status(s) {
		case cart.StatusExpired:
			acpError(w, http.StatusBadRequest, acp.ErrorInvalidRequest, "expired", "the checkout session has expired", "")
		case cart.StatusCanceled:
			acpError(w, http.StatusBadRequest, acp.ErrorInvalidRequest, "canceled", "the checkout session was canceled", "")
		default:
			acpError(w, http.StatusBadRequest, acp.ErrorInvalidRequest, "already_completed",
				"the checkout session was completed under another Idempotency-Key", "")
		}
	default:
		v.engineError(w, err)
	}
}

// engineError answers an engine error in the checkout API's shape.
func (v *acpView) engineError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrNoSession):
		acpError(w, http.StatusNotFound, acp.ErrorInvalidRequest, "not_found", "no such checkout session", "")
	case errors.Is(err, ErrUnknownItem):
		acpError(w, http.StatusBadRequest, acp.ErrorInvalidRequest, "invalid_item", err.Error(), "$.line_items")
	case errors.Is(err, ErrClosed):
		acpError(w, http.StatusBadRequest, acp.ErrorInvalidRequest, "invalid_status",
			"the checkout session is completed, canceled or expired", "")
	case errors.Is(err, ErrBadRequest):
		acpError(w, http.StatusBadRequest, acp.ErrorInvalidRequest, "invalid", err.Error(), "")
	default:
		acpError(w, http.StatusInternalServerError, acp.ErrorProcessingError, "internal_error", "internal error", "")
	}
}

// acpStatus is the ACP word for a neutral status.
var acpStatus = map[cart.Status]string{
	cart.StatusReady:      acp.StatusReadyForPayment,
	cart.StatusIncomplete: acp.StatusNotReadyForPayment,
	cart.StatusEscalation: acp.StatusRequiresEscalation,
	cart.StatusAuth:       acp.StatusAuthenticationRequired,
	cart.StatusCompleted:  acp.StatusCompleted,
	cart.StatusCanceled:   acp.StatusCanceled,
	cart.StatusExpired:    acp.StatusExpired,
}

func amountTotal(typ, text string, amount int64) acp.Total {
	return acp.Total{Type: typ, DisplayText: text, Amount: amount}
}

// render is session s as ACP's CheckoutSession (with its order, for a
// completion's answer).
func (v *acpView) render(s Session, withOrder bool) acp.CheckoutSession {
	m := v.m
	base := m.BaseURL()
	st := m.Status(s)
	lines, options, t := m.Price(s)
	cs := acp.CheckoutSession{
		ID:       s.ID,
		Protocol: &acp.ProtocolVersion{Version: acp.Version},
		Capabilities: acp.Capabilities{Payment: &acp.PaymentCapability{Handlers: []acp.PaymentHandler{{
			ID: ACPHandlerID, Name: "dev.acp.tokenized.card", DisplayName: "Card", Version: "2026-01-22",
			Spec: "https://acp.dev/handlers/tokenized.card", RequiresDelegatePayment: true,
			PSP: "fakemerchant", ConfigSchema: "https://acp.dev/schemas/handlers/tokenized.card/config.json",
			InstrumentSchemas: []string{"https://acp.dev/schemas/handlers/tokenized.card/instrument.json"},
			Config:            json.RawMessage(`{"psp_url":` + quoteJSON(base) + `}`),
		}}}},
		Status:    acpStatus[st],
		Currency:  strings.ToLower(s.Currency),
		LineItems: []acp.LineItem{}, FulfillmentOptions: []acp.FulfillmentOption{},
		Totals:   []acp.Total{amountTotal(acp.TotalItemsBaseAmount, "Items", t.Subtotal)},
		Messages: []acp.Message{},
		Links: []acp.Link{
			{Type: "terms_of_use", URL: base + "/legal/terms"},
			{Type: "return_policy", URL: base + "/legal/returns"},
		},
		CreatedAt: s.CreatedAt.UTC().Format(time.RFC3339),
		ExpiresAt: s.ExpiresAt.UTC().Format(time.RFC3339),
	}
	ids := []string{}
	for i, l := range lines {
		unit := l.Unit
		li := acp.LineItem{ID: l.ID, Item: acp.Item{ID: l.ItemID}, Quantity: l.Quantity, Name: l.Title,
			UnitAmount: &unit, AvailabilityStatus: "in_stock",
			Totals: []acp.Total{amountTotal(acp.TotalItemsBaseAmount, "Base amount", l.Subtotal)}}
		if l.Discount != 0 {
			li.Totals = append(li.Totals, amountTotal(acp.TotalItemsDiscount, "Discount", l.Discount))
		}
		li.Totals = append(li.Totals,
			amountTotal(acp.TotalSubtotal, "Subtotal", l.Subtotal-l.Discount),
			amountTotal(acp.TotalTax, "Tax", l.Tax),
			amountTotal(acp.TotalTotal, "Total", l.Total))
		if st == cart.StatusIncomplete && v.soldOut(s, i) {
			li.AvailabilityStatus = "out_of_stock"
			li.AvailableQuantity = new(int64)
			cs.Messages = append(cs.Messages, acp.Message{Type: acp.MessageTypeError, Code: "out_of_stock",
				Severity: "high", Resolution: "requires_buyer_input", Param: fmt.Sprintf("$.line_items[%d]", i),
				ContentType: "plain", Content: l.Title + " is out of stock."})
		}
		cs.LineItems = append(cs.LineItems, li)
		ids = append(ids, l.ID)
	}
	if st == cart.StatusIncomplete && s.Scenario == ScenarioMissingInfo {
		cs.Messages = append(cs.Messages, acp.Message{Type: acp.MessageTypeError, Code: "missing",
			Severity: "high", Resolution: "requires_buyer_input", Param: "$.buyer.phone_number",
			ContentType: "plain", Content: "The buyer's phone number is required."})
	}
	for _, o := range options {
		cs.FulfillmentOptions = append(cs.FulfillmentOptions, acp.FulfillmentOption{Type: acp.FulfillmentShipping,
			ID: o.ID, Title: o.Title, Carrier: "USPS", Totals: []acp.Total{amountTotal(acp.TotalTotal, "Shipping", o.Amount)}})
		if o.Selected {
			cs.SelectedFulfillmentOptions = []acp.SelectedFulfillmentOption{{Type: acp.FulfillmentShipping, OptionID: o.ID, ItemIDs: ids}}
		}
	}
	if t.Discount != 0 {
		cs.Totals = append(cs.Totals, amountTotal(acp.TotalItemsDiscount, "Discount", t.Discount))
	}
	cs.Totals = append(cs.Totals,
		amountTotal(acp.TotalSubtotal, "Subtotal", t.Subtotal-t.Discount),
		amountTotal(acp.TotalFulfillment, "Shipping", t.Shipping),
		amountTotal(acp.TotalTax, "Tax", t.Tax),
		amountTotal(acp.TotalTotal, "Total", t.Total))
	if s.Email != "" {
		cs.Buyer = &acp.Buyer{Email: s.Email}
	}
	if s.Email != "" || s.Address != nil {
		fd := &acp.FulfillmentDetails{Email: s.Email}
		if a := s.Address; a != nil {
			fd.Name = a.Name
			fd.Address = &acp.Address{Name: a.Name, LineOne: a.Line1, LineTwo: a.Line2, City: a.City,
				State: a.State, Country: a.Country, PostalCode: a.PostalCode}
		}
		cs.FulfillmentDetails = fd
	}
	for _, code := range s.Discounts {
		if code != DiscountCode {
			cs.Messages = append(cs.Messages, acp.Message{Type: acp.MessageTypeWarning, Code: "discount_code_invalid",
				ContentType: "plain", Content: "The discount code " + code + " is not valid."})
		}
	}
	switch st {
	case cart.StatusEscalation:
		cs.ContinueURL = m.ContinueURL(s)
		cs.Messages = append(cs.Messages, acp.Message{Type: acp.MessageTypeInfo, Resolution: "requires_buyer_input",
			ContentType: "plain", Content: "This checkout must be finished by the buyer at the merchant."})
	case cart.StatusAuth:
		cs.ContinueURL = m.ContinueURL(s)
		cs.Capabilities.Interventions = &acp.InterventionCapabilities{Required: []string{"3ds"}, Enforcement: "always"}
		cs.AuthenticationMetadata = &acp.AuthenticationMetadata{
			AcquirerDetails: acp.AcquirerDetails{AcquirerBIN: "400000", AcquirerCountry: "US",
				AcquirerMerchantID: "fakemerchant", MerchantName: "Countersign fake merchant"},
			DirectoryServer: "visa",
		}
		cs.Messages = append(cs.Messages, acp.Message{Type: acp.MessageTypeInfo, Resolution: "requires_buyer_review",
			ContentType: "plain", Content: "The card issuer requires 3-D Secure authentication."})
	case cart.StatusExpired:
		cs.Messages = append(cs.Messages, acp.Message{Type: acp.MessageTypeError, Code: "expired",
			ContentType: "plain", Content: "This checkout session has expired."})
	}
	if s.Scenario == ScenarioPriceChanges && s.Reads > 0 && st == cart.StatusReady {
		cs.Messages = append(cs.Messages, acp.Message{Type: acp.MessageTypeWarning, Code: "price_change",
			ContentType: "plain", Content: "Prices changed since this checkout was opened."})
	}
	if withOrder && s.Order != nil {
		cs.Order = &acp.Order{ID: s.Order.ID, CheckoutSessionID: s.ID, PermalinkURL: s.Order.Permalink,
			Status: s.Order.Status, OrderNumber: strings.TrimPrefix(s.Order.ID, "ord_")}
	}
	return cs
}

// soldOut reports whether line i of s is what makes it out of stock: its
// item's scenario, or the first line when X-Fake-Scenario forced it.
func (v *acpView) soldOut(s Session, i int) bool {
	it, _ := Find(s.Lines[i].ID)
	if it.Scenario == ScenarioOutOfStock {
		return true
	}
	return i == 0 && s.Scenario == ScenarioOutOfStock && !slices.ContainsFunc(s.Lines, func(l cart.LineRequest) bool {
		it, _ := Find(l.ID)
		return it.Scenario == ScenarioOutOfStock
	})
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
