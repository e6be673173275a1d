package ucp

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/commerce/cart"
)

// checkoutStatuses is the status enum of both versions.
var checkoutStatuses = []string{"incomplete", "requires_escalation", "ready_for_complete", "complete_in_progress", "completed", "canceled"}

// decoded is a validated checkout response: a session, or (2026-04-08
// only) an error response.
type decoded struct {
	Checkout *Checkout
	Error    *ErrorResponse
	// Handlers are the payment handlers the response carries
	// (payment.handlers in 2026-01-11, ucp.payment_handlers in 2026-04-08).
	Handlers []PaymentHandler
	// Ignored are the violations of parts the client never uses (see
	// Profile.Ignored).
	Ignored []string
}

// decodeCheckout validates raw against version's checkout response schema
// and returns it. Errors match cart.ErrInvalidResponse; nothing is
// returned with an error.
func decodeCheckout(version string, raw []byte) (decoded, error) {
	doc, err := parseJSON(raw)
	if err != nil {
		return decoded{}, fmt.Errorf("%w: %v", cart.ErrInvalidResponse, err)
	}
	var d decoded
	switch version {
	case V20260111:
		c := &checker{}
		co, hs := checkCheckout0111(c, doc)
		if !c.ok() {
			return decoded{}, fmt.Errorf("%w: checkout (%s): %v", cart.ErrInvalidResponse, version, c.err)
		}
		d = decoded{Checkout: &co, Handlers: hs, Ignored: c.ignored}
	case V20260408:
		// checkout_response is oneOf(checkout, error_response); the two
		// cannot both hold (error_response has no id and is closed).
		c := &checker{}
		co, hs := checkCheckout0408(c, doc)
		if c.ok() {
			d = decoded{Checkout: &co, Handlers: hs, Ignored: c.ignored}
			break
		}
		ce := &checker{}
		er := checkErrorResponse0408(ce, doc)
		if !ce.ok() {
			return decoded{}, fmt.Errorf("%w: checkout (%s): %v", cart.ErrInvalidResponse, version, c.err)
		}
		d = decoded{Error: &er}
	default:
		return decoded{}, fmt.Errorf("%w: unknown version %q", cart.ErrInvalidResponse, version)
	}
	slices.Sort(d.Ignored) // registries are maps: a stable order
	return d, nil
}

func rawOf(v any) json.RawMessage {
	b, _ := json.Marshal(v) // a parsed tree always marshals
	return b
}

func optStr(c *checker, path string, m map[string]any, key string) *string {
	if s, ok := c.str(path, m, key, false); ok {
		return &s
	}
	return nil
}

// ---- shared pieces ----

func checkLinks(c *checker, m map[string]any) []Link {
	links, _ := c.array("$", m, "links", true)
	out := make([]Link, 0, len(links))
	for i, l := range links {
		p := idx("$.links", i)
		lm := c.object(p, l)
		t, _ := c.str(p, lm, "type", true)
		u, _ := c.uri(p, lm, "url", true)
		out = append(out, Link{Type: t, URL: u, Title: optStr(c, p, lm, "title")})
	}
	return out
}

func checkBuyer(c *checker, m map[string]any, v0111 bool) *Buyer {
	bm, ok := c.optObject("$", m, "buyer", false)
	if !ok {
		return nil
	}
	b := &Buyer{FirstName: optStr(c, "$.buyer", bm, "first_name"), LastName: optStr(c, "$.buyer", bm, "last_name"),
		Email: optStr(c, "$.buyer", bm, "email"), PhoneNumber: optStr(c, "$.buyer", bm, "phone_number")}
	if v0111 {
		b.FullName = optStr(c, "$.buyer", bm, "full_name")
	}
	return b
}

func checkOrder(c *checker, m map[string]any) *OrderConfirmation {
	om, ok := c.optObject("$", m, "order", false)
	if !ok {
		return nil
	}
	id, _ := c.str("$.order", om, "id", true)
	u, _ := c.uri("$.order", om, "permalink_url", true)
	return &OrderConfirmation{ID: id, PermalinkURL: u, Label: optStr(c, "$.order", om, "label")}
}

// checkMessages checks messages (message.json: oneOf error, warning,
// info, told apart by their const type).
func checkMessages(c *checker, path string, m map[string]any, required bool, severities []string, v0408 bool) []Message {
	arr, _ := c.array(path, m, "messages", required)
	out := make([]Message, 0, len(arr))
	for i, v := range arr {
		p := idx(path+".messages", i)
		mm := c.object(p, v)
		t, _ := c.enum(p, mm, "type", true, "error", "warning", "info")
		msg := Message{Type: t, Path: optStr(c, p, mm, "path")}
		msg.Content, _ = c.str(p, mm, "content", true)
		if ct, ok := c.enum(p, mm, "content_type", false, "plain", "markdown"); ok {
			msg.ContentType = &ct
		}
		code, hasCode := c.str(p, mm, "code", t != "info")
		if hasCode {
			msg.Code = &code
		}
		switch t {
		case "error":
			if s, ok := c.enum(p, mm, "severity", true, severities...); ok {
				msg.Severity = &s
			}
		case "warning":
			if v0408 {
				c.str(p, mm, "presentation", false)
				c.uri(p, mm, "image_url", false)
				c.uri(p, mm, "url", false)
			}
		}
		out = append(out, msg)
	}
	return out
}

func checkItem(c *checker, path string, m map[string]any) Item {
	im, _ := c.optObject(path, m, "item", true)
	p := path + ".item"
	var it Item
	it.ID, _ = c.str(p, im, "id", true)
	it.Title, _ = c.str(p, im, "title", true)
	it.Price, _ = c.integer(p, im, "price", true, true, 0)
	if u, ok := c.uri(p, im, "image_url", false); ok {
		it.ImageURL = &u
	}
	return it
}

// ---- 2026-01-11 ----

var severities0111 = []string{"recoverable", "requires_buyer_input", "requires_buyer_review"}
var totalTypes = []string{"items_discount", "subtotal", "discount", "fulfillment", "tax", "fee", "total"}

func checkTotals0111(c *checker, path string, m map[string]any) []Total {
	arr, _ := c.array(path, m, "totals", true)
	out := make([]Total, 0, len(arr))
	for i, v := range arr {
		p := idx(path+".totals", i)
		tm := c.object(p, v)
		var t Total
		t.Type, _ = c.enum(p, tm, "type", true, totalTypes...)
		t.DisplayText = optStr(c, p, tm, "display_text")
		t.Amount, _ = c.integer(p, tm, "amount", true, true, 0)
		out = append(out, t)
	}
	return out
}

func checkCheckout0111(c *checker, doc any) (Checkout, []PaymentHandler) {
	m := c.object("$", doc)
	var co Checkout
	u, _ := c.optObject("$", m, "ucp", true)
	c.pattern("$.ucp", u, "version", true, versionRE)
	caps, _ := c.array("$.ucp", u, "capabilities", true)
	for i, cv := range caps {
		checkCapability0111(c, idx("$.ucp.capabilities", i), cv, false)
	}
	co.UCP = rawOf(u)
	co.ID, _ = c.str("$", m, "id", true)
	items, _ := c.array("$", m, "line_items", true)
	co.LineItems = make([]LineItem, 0, len(items))
	for i, v := range items {
		p := idx("$.line_items", i)
		lm := c.object(p, v)
		var li LineItem
		li.ID, _ = c.str(p, lm, "id", true)
		li.Item = checkItem(c, p, lm)
		li.Quantity, _ = c.integer(p, lm, "quantity", true, true, 1)
		li.Totals = checkTotals0111(c, p, lm)
		li.ParentID = optStr(c, p, lm, "parent_id")
		co.LineItems = append(co.LineItems, li)
	}
	co.Buyer = checkBuyer(c, m, true)
	co.Status, _ = c.enum("$", m, "status", true, checkoutStatuses...)
	co.Currency, _ = c.str("$", m, "currency", true)
	co.Totals = checkTotals0111(c, "$", m)
	if _, ok := m["messages"]; ok {
		co.Messages = checkMessages(c, "$", m, false, severities0111, false)
	}
	co.Links = checkLinks(c, m)
	if _, ok := c.dateTime("$", m, "expires_at", false); ok {
		co.ExpiresAt = optStr(c, "$", m, "expires_at")
	}
	if s, ok := c.uri("$", m, "continue_url", false); ok {
		co.ContinueURL = &s
	}
	pay, _ := c.optObject("$", m, "payment", true)
	var handlers []PaymentHandler
	hs, _ := c.array("$.payment", pay, "handlers", true)
	for i, h := range hs {
		handlers = append(handlers, checkHandler0111(c, idx("$.payment.handlers", i), h))
	}
	c.str("$.payment", pay, "selected_instrument_id", false)
	ins, _ := c.array("$.payment", pay, "instruments", false)
	for i, v := range ins {
		checkCardInstrument0111(c, idx("$.payment.instruments", i), v)
	}
	co.Payment = rawOf(pay)
	co.Order = checkOrder(c, m)
	if co.Order == nil && co.Status == "completed" {
		co.Order = flatOrder0111(c, m)
	}
	return co, handlers
}

// flatOrder0111 reads the order of a completed 2026-01-11 session that
// names it in top-level order_id and order_permalink_url (the shape of the
// protocol's drafts, which merchants built on them still send; members the
// schema leaves open) instead of order. Both must be there and valid,
// checked as order's members are: the id is what the receipt states.
func flatOrder0111(c *checker, m map[string]any) *OrderConfirmation {
	if _, ok := m["order_id"]; !ok {
		return nil
	}
	id, _ := c.str("$", m, "order_id", true)
	u, _ := c.uri("$", m, "order_permalink_url", true)
	if !c.ok() {
		return nil
	}
	return &OrderConfirmation{ID: id, PermalinkURL: u}
}

// checkCardInstrument0111 checks payment_instrument.json of 2026-01-11:
// oneOf [card_payment_instrument].
func checkCardInstrument0111(c *checker, p string, v any) {
	m := c.object(p, v)
	c.str(p, m, "id", true)
	c.str(p, m, "handler_id", true)
	c.enum(p, m, "type", true, "card")
	c.str(p, m, "brand", true)
	c.str(p, m, "last_digits", true)
	c.integer(p, m, "expiry_month", false, false, 0)
	c.integer(p, m, "expiry_year", false, false, 0)
	c.str(p, m, "rich_text_description", false)
	c.uri(p, m, "rich_card_art", false)
	checkPostalAddress(c, p, m, "billing_address")
	if cm, ok := c.optObject(p, m, "credential", false); ok {
		t, _ := c.str(p+".credential", cm, "type", true)
		// payment_credential is oneOf(token_credential_resp,
		// card_credential); a valid card credential also satisfies the
		// open token credential, so it can never pass the oneOf. We refuse
		// every credential of type "card" (stricter, and a merchant has no
		// business echoing card data anyway).
		if t == "card" {
			c.failf(p+".credential", "card credentials are refused")
		}
	}
}

func checkPostalAddress(c *checker, p string, m map[string]any, key string) {
	am, ok := c.optObject(p, m, key, false)
	if !ok {
		return
	}
	for _, f := range []string{"extended_address", "street_address", "address_locality", "address_region", "address_country", "postal_code", "first_name", "last_name", "full_name", "phone_number"} {
		c.str(p+"."+key, am, f, false)
	}
}

// ---- 2026-04-08 ----

var severities0408 = []string{"recoverable", "requires_buyer_input", "requires_buyer_review", "unrecoverable"}

// checkTotal0408 checks total.json (signed amounts; discounts negative,
// subtotal, fulfillment, tax and fee not), plus totals.json's item rules
// when inTotals.
func checkTotal0408(c *checker, p string, v any, inTotals bool) Total {
	tm := c.object(p, v)
	var t Total
	t.Type, _ = c.str(p, tm, "type", true)
	t.DisplayText = optStr(c, p, tm, "display_text")
	t.Amount, _ = c.integer(p, tm, "amount", true, false, 0)
	if !c.ok() {
		return t
	}
	switch t.Type {
	case "discount", "items_discount":
		if t.Amount >= 0 {
			c.failf(p+".amount", "a discount must be negative")
		}
	case "subtotal", "fulfillment", "tax", "fee":
		if t.Amount < 0 {
			c.failf(p+".amount", "must not be negative")
		}
	}
	if !inTotals {
		return t
	}
	known := false
	for _, k := range totalTypes {
		known = known || k == t.Type
	}
	if !known && t.DisplayText == nil {
		c.failf(p, "display_text is required for type %q", t.Type)
	}
	lines, _ := c.array(p, tm, "lines", false)
	for i, l := range lines {
		lp := idx(p+".lines", i)
		lm := c.object(lp, l)
		c.str(lp, lm, "display_text", true)
		c.integer(lp, lm, "amount", true, false, 0)
	}
	return t
}

func checkCheckout0408(c *checker, doc any) (Checkout, []PaymentHandler) {
	m := c.object("$", doc)
	var co Checkout
	u, _ := c.optObject("$", m, "ucp", true)
	meta := checkUCPBase0408(c, "$.ucp", u, false, true)
	co.UCP = rawOf(u)
	co.ID, _ = c.str("$", m, "id", true)
	items, _ := c.array("$", m, "line_items", true)
	co.LineItems = make([]LineItem, 0, len(items))
	for i, v := range items {
		p := idx("$.line_items", i)
		lm := c.object(p, v)
		var li LineItem
		li.ID, _ = c.str(p, lm, "id", true)
		li.Item = checkItem(c, p, lm)
		li.Quantity, _ = c.integer(p, lm, "quantity", true, true, 1)
		ts, _ := c.array(p, lm, "totals", true)
		li.Totals = make([]Total, 0, len(ts))
		for j, t := range ts {
			li.Totals = append(li.Totals, checkTotal0408(c, idx(p+".totals", j), t, false))
		}
		li.ParentID = optStr(c, p, lm, "parent_id")
		co.LineItems = append(co.LineItems, li)
	}
	co.Buyer = checkBuyer(c, m, false)
	if cm, ok := c.optObject("$", m, "context", false); ok {
		for _, f := range []string{"address_country", "address_region", "postal_code", "intent", "language", "currency"} {
			c.str("$.context", cm, f, false)
		}
		el, _ := c.array("$.context", cm, "eligibility", false)
		seen := map[string]bool{}
		for i, e := range el {
			s, ok := e.(string)
			if !ok || !reverseDomainRE.MatchString(s) || seen[s] {
				c.failf(idx("$.context.eligibility", i), "must be a distinct reverse-domain name")
			}
			seen[s] = true
		}
		co.Context = rawOf(cm)
	}
	if sm, ok := c.optObject("$", m, "signals", false); ok {
		for k, v := range sm {
			if !reverseDomainRE.MatchString(k) {
				c.failf("$.signals", "key %q is not a reverse-domain name", k)
			}
			if k == "dev.ucp.buyer_ip" || k == "dev.ucp.user_agent" {
				if _, isStr := v.(string); !isStr {
					c.failf("$.signals."+k, "must be a string")
				}
			}
		}
		co.Signals = rawOf(sm)
	}
	if am, ok := c.optObject("$", m, "attribution", false); ok {
		co.Attribution = map[string]string{}
		for k, v := range am {
			s, isStr := v.(string)
			if !isStr {
				c.failf("$.attribution."+k, "must be a string")
			}
			co.Attribution[k] = s
		}
	}
	co.Status, _ = c.enum("$", m, "status", true, checkoutStatuses...)
	co.Currency, _ = c.str("$", m, "currency", true)
	ts, _ := c.array("$", m, "totals", true)
	co.Totals = make([]Total, 0, len(ts))
	subtotals, totals := 0, 0
	for i, t := range ts {
		tt := checkTotal0408(c, idx("$.totals", i), t, true)
		switch tt.Type {
		case "subtotal":
			subtotals++
		case "total":
			totals++
		}
		co.Totals = append(co.Totals, tt)
	}
	if c.ok() && (subtotals != 1 || totals != 1) {
		c.failf("$.totals", "must hold exactly one subtotal and one total")
	}
	if _, ok := m["messages"]; ok {
		co.Messages = checkMessages(c, "$", m, false, severities0408, true)
	}
	co.Links = checkLinks(c, m)
	if _, ok := c.dateTime("$", m, "expires_at", false); ok {
		co.ExpiresAt = optStr(c, "$", m, "expires_at")
	}
	if s, ok := c.uri("$", m, "continue_url", false); ok {
		co.ContinueURL = &s
	}
	if pay, ok := c.optObject("$", m, "payment", false); ok {
		ins, _ := c.array("$.payment", pay, "instruments", false)
		for i, v := range ins {
			p := idx("$.payment.instruments", i)
			im := c.object(p, v)
			c.str(p, im, "id", true)
			c.str(p, im, "handler_id", true)
			c.str(p, im, "type", true)
			checkPostalAddress(c, p, im, "billing_address")
			if cm, ok := c.optObject(p, im, "credential", false); ok {
				c.str(p+".credential", cm, "type", true)
			}
			c.optObject(p, im, "display", false)
			c.boolean(p, im, "selected")
		}
		co.Payment = rawOf(pay)
	}
	co.Order = checkOrder(c, m)
	return co, meta.handlers
}

// checkErrorResponse0408 checks error_response.json: closed, ucp with
// status "error", at least one message.
func checkErrorResponse0408(c *checker, doc any) ErrorResponse {
	m := c.object("$", doc)
	for k := range m {
		if k != "ucp" && k != "messages" && k != "continue_url" {
			c.failf("$", "unexpected member %q", k)
		}
	}
	u, _ := c.optObject("$", m, "ucp", true)
	meta := checkUCPBase0408(c, "$.ucp", u, false, false)
	if c.ok() && meta.status != "error" {
		c.failf("$.ucp.status", "must be \"error\"")
	}
	var er ErrorResponse
	er.UCP = rawOf(u)
	er.Messages = checkMessages(c, "$", m, true, severities0408, true)
	if c.ok() && len(er.Messages) == 0 {
		c.failf("$.messages", "must not be empty")
	}
	if s, ok := c.uri("$", m, "continue_url", false); ok {
		er.ContinueURL = &s
	}
	return er
}

// ---- mapping onto package cart ----

// toCart maps a validated session onto the neutral cart. now decides
// whether a canceled session expired; lenient is
// Options.ReadyWithoutErrors.
func toCart(co *Checkout, version, merchant string, now time.Time, lenient bool) cart.Cart {
	c := cart.Cart{ID: co.ID, Rail: "ucp", Version: version, Merchant: merchant, RawStatus: co.Status,
		Currency: strings.ToUpper(co.Currency), Lines: []cart.Line{}, Messages: []cart.Message{}, Fulfillment: []cart.Fulfillment{}}
	if co.ExpiresAt != nil {
		if t, err := time.Parse(time.RFC3339Nano, *co.ExpiresAt); err == nil {
			c.ExpiresAt = &t
		}
	}
	if co.ContinueURL != nil {
		c.ContinueURL = *co.ContinueURL
	}
	for _, m := range co.Messages {
		cm := cart.Message{Type: m.Type, Text: m.Content}
		if m.Code != nil {
			cm.Code = *m.Code
		}
		if m.Path != nil {
			cm.Path = *m.Path
		}
		c.Messages = append(c.Messages, cm)
	}
	c.Status = mapStatus(co.Status, co.Messages, c.ExpiresAt, now, lenient)
	for _, li := range co.LineItems {
		l := cart.Line{ID: li.ID, ItemID: li.Item.ID, Title: li.Item.Title, Quantity: li.Quantity, Unit: li.Item.Price}
		t := sumTotals(li.Totals)
		l.Subtotal, l.Tax, l.Discount, l.Total = t.Subtotal, t.Tax, t.Discount, t.Total
		c.Lines = append(c.Lines, l)
	}
	c.Totals = sumTotals(co.Totals)
	return c
}

// mapStatus maps the protocol's status onto cart.Status:
//
//	incomplete           → incomplete; with lenient
//	                       (Options.ReadyWithoutErrors) ready when no
//	                       message is an error
//	requires_escalation  → auth when an error message asks for 3-D Secure
//	                       (code requires_3ds), otherwise escalation
//	ready_for_complete   → ready
//	complete_in_progress → in_progress
//	completed            → completed
//	canceled             → expired when expires_at has passed, otherwise canceled
func mapStatus(status string, msgs []Message, expires *time.Time, now time.Time, lenient bool) cart.Status {
	switch status {
	case "incomplete":
		if lenient && readyWithoutErrors(status, msgs) {
			return cart.StatusReady
		}
		return cart.StatusIncomplete
	case "requires_escalation":
		for _, m := range msgs {
			if m.Type == "error" && m.Code != nil && *m.Code == "requires_3ds" {
				return cart.StatusAuth
			}
		}
		return cart.StatusEscalation
	case "ready_for_complete":
		return cart.StatusReady
	case "complete_in_progress":
		return cart.StatusInProgress
	case "completed":
		return cart.StatusCompleted
	}
	if expires != nil && !now.Before(*expires) {
		return cart.StatusExpired
	}
	return cart.StatusCanceled
}

// readyWithoutErrors reports whether a session is incomplete and carries
// no message of type error: what Options.ReadyWithoutErrors treats as
// ready. Warnings and infos do not count; an error of any code or
// severity does.
func readyWithoutErrors(status string, msgs []Message) bool {
	if status != "incomplete" {
		return false
	}
	for _, m := range msgs {
		if m.Type == "error" {
			return false
		}
	}
	return true
}

// sumTotals folds a totals breakdown: fulfillment is shipping, discounts
// are reported as positive amounts whatever their sign on the wire, fees
// count only towards the total.
func sumTotals(ts []Total) cart.Totals {
	var t cart.Totals
	for _, e := range ts {
		switch e.Type {
		case "subtotal":
			t.Subtotal += e.Amount
		case "tax":
			t.Tax += e.Amount
		case "fulfillment":
			t.Shipping += e.Amount
		case "discount", "items_discount":
			t.Discount += abs(e.Amount)
		case "total":
			t.Total += e.Amount
		}
	}
	return t
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
