package fakemerchant

import (
	"bytes"
	"crypto/elliptic"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/yaronf/httpsign"

	"github.com/countersign/countersign/commerce/cart"
)

// UCP protocol versions the fake speaks.
const (
	UCP20260111 = "2026-01-11"
	UCP20260408 = "2026-04-08"
)

// UCPTokenizerName is the name of the fake's payment handler: a
// tokenization handler (the UCP tokenization API's POST /tokenize) whose
// tokens are the engine's delegated allowances.
const UCPTokenizerName = "dev.countersign.tokenizer"

// UCPHandlerID is the fake's payment handler instance id.
const UCPHandlerID = "allowance"

// UCPPayment is the set of payment handlers the UCP view declares.
type UCPPayment string

const (
	// UCPPaymentTokenizer: one tokenization handler (UCPHandlerID).
	UCPPaymentTokenizer UCPPayment = ""
	// UCPPaymentCredential: the shapes of merchants that take a token
	// credential in the completion's instrument directly — a handler with
	// no tokenization endpoint (UCPWalletID) that accepts UCPWalletToken
	// and declines UCPWalletDeclineToken, and a handler it never accepts
	// (UCPUnusedHandlerID) whose version is not a date ("1.0", outside
	// the schema) and whose instrument_schemas is empty. No tokenizer.
	UCPPaymentCredential UCPPayment = "credential"
)

// The credential handlers of UCPPaymentCredential.
const (
	UCPWalletID           = "wallet"
	UCPWalletName         = "dev.countersign.wallet"
	UCPWalletToken        = "wallet_success_token"
	UCPWalletDeclineToken = "wallet_fail_token"
	UCPUnusedHandlerID    = "gpay"
	UCPUnusedHandlerName  = "com.example.pay"
)

// UCPHandler serves the UCP view of the merchant for versions (default
// both). How the version is chosen: each version has its own profile and
// its own REST endpoint, as UCP's supported_versions intends.
//
//	GET  /.well-known/ucp                          profile of the newest version offered;
//	                                               from 2026-04-08 on it lists the others in
//	                                               ucp.supported_versions
//	GET  /ucp/{version}/profile                    the profile of one version
//	POST /ucp/{version}/checkout-sessions          create (201)
//	GET  /ucp/{version}/checkout-sessions/{id}     get
//	PUT  /ucp/{version}/checkout-sessions/{id}     update (full replacement)
//	POST /ucp/{version}/checkout-sessions/{id}/complete
//	POST /ucp/{version}/checkout-sessions/{id}/cancel
//	POST /ucp/tokenize                             the payment handler's tokenizer
//
// Checkout requests must carry UCP-Agent and a UUID Request-Id, and
// state-changing ones a UUID Idempotency-Key (400 otherwise). A create
// replayed with the same Idempotency-Key answers the first answer again.
// The tokenizer takes {"credential":{"type":"spend_allowance","amount":N,
// "currency":"USD"},"binding":{"checkout_id":…}} and answers a token good
// for at most N on that session for 15 minutes, once.
//
// Scenarios: out of stock is incomplete with an out_of_stock error;
// escalation and authentication are requires_escalation with
// continue_url (authentication with code requires_3ds); a declined payment
// answers 200 with the session still ready_for_complete and an error
// message payment_declined (2026-01-11) or payment_failed (2026-04-08);
// complete_5xx answers 500; timeout_then_success completes, then holds the
// answer for HangFor; expiry shows status canceled with expires_at past;
// slow delays every answer about the session by SlowDelay; never_ready
// (sku-never-ready) stays incomplete without a message, and completes when
// asked all the same; missing_info (sku-needs-phone) stays incomplete with
// an error message of code missing, and does not complete. With
// Options.UCPPayment = UCPPaymentCredential the profile and the answers
// declare the credential handlers instead of the tokenizer, and complete
// takes UCPWalletToken (or declines UCPWalletDeclineToken) from an
// instrument of handler UCPWalletID.
//
// Every 2026-04-08 checkout answer (errors included) is signed as UCP's
// REST binding says (RFC 9421 with httpsign): Content-Digest (sha-256 of
// the body), and a signature "sig1" over @status, content-digest and
// content-type with keyid and created, by Options.SigningKey, which the
// 2026-04-08 profile publishes in signing_keys. The bad-signature
// scenarios sign, then add one byte to the body (still the same JSON)
// and recompute its Content-Digest: only the signature fails to verify.
func (m *Merchant) UCPHandler(versions ...string) http.Handler {
	if len(versions) == 0 {
		versions = []string{UCP20260111, UCP20260408}
	}
	v := &ucpView{m: m, versions: slices.Sorted(slices.Values(versions)), creates: map[string]ucpReplay{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/ucp", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, v.profile(v.versions[len(v.versions)-1]))
	})
	mux.HandleFunc("GET /ucp/{version}/profile", v.with(false, func(w http.ResponseWriter, r *http.Request, ver string) {
		writeJSON(w, http.StatusOK, v.profile(ver))
	}))
	mux.HandleFunc("POST /ucp/{version}/checkout-sessions", v.with(true, v.create))
	mux.HandleFunc("GET /ucp/{version}/checkout-sessions/{id}", v.with(true, v.get))
	mux.HandleFunc("PUT /ucp/{version}/checkout-sessions/{id}", v.with(true, v.update))
	mux.HandleFunc("POST /ucp/{version}/checkout-sessions/{id}/complete", v.with(true, v.complete))
	mux.HandleFunc("POST /ucp/{version}/checkout-sessions/{id}/cancel", v.with(true, v.cancel))
	mux.HandleFunc("POST /ucp/tokenize", v.tokenize)
	return http.MaxBytesHandler(mux, 1<<20)
}

type ucpReplay struct {
	status int
	body   []byte
	bad    bool
}

type ucpView struct {
	m        *Merchant
	versions []string

	mu      sync.Mutex // guards creates
	creates map[string]ucpReplay
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// with resolves the version of the path and, for checkout operations,
// checks the binding's mandatory headers and (2026-04-08) signs the answer.
func (v *ucpView) with(checkout bool, h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ver := r.PathValue("version")
		if !slices.Contains(v.versions, ver) {
			protocolError(w, http.StatusNotFound, "version_unsupported", "this merchant does not speak UCP "+ver)
			return
		}
		if checkout && ver != UCP20260111 {
			sw := &signingWriter{h: http.Header{}}
			sw.bad = Scenario(r.Header.Get("X-Fake-Scenario")) == ScenarioBadSignature
			if id := r.PathValue("id"); id != "" {
				if s, err := v.m.peek(id); err == nil && s.Scenario == ScenarioBadSignature {
					sw.bad = true
				}
			}
			defer v.m.signUCP(w, sw)
			w = sw
		}
		if checkout {
			if r.Header.Get("UCP-Agent") == "" {
				protocolError(w, http.StatusBadRequest, "invalid_profile_url", "UCP-Agent header is required")
				return
			}
			if !uuidRE.MatchString(r.Header.Get("Request-Id")) {
				protocolError(w, http.StatusBadRequest, "invalid", "Request-Id must be a UUID")
				return
			}
			if r.Method != http.MethodGet && !uuidRE.MatchString(r.Header.Get("Idempotency-Key")) {
				protocolError(w, http.StatusBadRequest, "invalid", "Idempotency-Key must be a UUID")
				return
			}
		}
		h(w, r, ver)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// protocolError is the bindings' error body for protocol errors: code and
// content.
func protocolError(w http.ResponseWriter, status int, code, content string) {
	writeJSON(w, status, map[string]any{"code": code, "content": content})
}

// errorResponse answers 2026-04-08's error_response (no resource).
func (v *ucpView) errorResponse(w http.ResponseWriter, status int, ver, code, content string) {
	if ver == UCP20260111 {
		protocolError(w, status, code, content)
		return
	}
	writeJSON(w, status, map[string]any{
		"ucp":      map[string]any{"version": ver, "status": "error"},
		"messages": []any{map[string]any{"type": "error", "code": code, "content": content, "severity": "unrecoverable"}},
	})
}

// ---- profile ----

// handlers are the payment handlers declared in version ver, by name.
func (v *ucpView) handlers(ver string) (names []string, hs []map[string]any) {
	if v.m.opts.UCPPayment != UCPPaymentCredential {
		return []string{UCPTokenizerName}, []map[string]any{v.handler(ver)}
	}
	base := v.m.BaseURL()
	wallet := map[string]any{"id": UCPWalletID, "version": ver, "spec": base + "/handlers/wallet",
		"config": map[string]any{"supported_tokens": []any{UCPWalletToken, UCPWalletDeclineToken}}}
	unused := map[string]any{"id": UCPUnusedHandlerID, "version": "1.0", "spec": base + "/handlers/pay", "config": map[string]any{}}
	if ver == UCP20260111 {
		for _, h := range []map[string]any{wallet, unused} {
			h["config_schema"] = h["spec"].(string) + "/config.json"
		}
		wallet["name"], unused["name"] = UCPWalletName, UCPUnusedHandlerName
		wallet["instrument_schemas"] = []any{"https://ucp.dev/schemas/shopping/types/card_payment_instrument.json"}
		unused["instrument_schemas"] = []any{}
	} else {
		wallet["available_instruments"] = []any{map[string]any{"type": "card"}}
	}
	return []string{UCPWalletName, UCPUnusedHandlerName}, []map[string]any{wallet, unused}
}

// handlerList is handlers as a 2026-01-11 list.
func (v *ucpView) handlerList(ver string) []any {
	_, hs := v.handlers(ver)
	out := make([]any, 0, len(hs))
	for _, h := range hs {
		out = append(out, h)
	}
	return out
}

// handlerRegistry is handlers as a 2026-04-08 registry.
func (v *ucpView) handlerRegistry(ver string) map[string]any {
	names, hs := v.handlers(ver)
	out := map[string]any{}
	for i, h := range hs {
		out[names[i]] = []any{h}
	}
	return out
}

func (v *ucpView) handler(ver string) map[string]any {
	base := v.m.BaseURL()
	if ver == UCP20260111 {
		return map[string]any{"id": UCPHandlerID, "name": UCPTokenizerName, "version": ver,
			"spec": base + "/handlers/tokenizer", "config_schema": base + "/handlers/tokenizer/config.json",
			"instrument_schemas": []any{"https://ucp.dev/schemas/shopping/types/card_payment_instrument.json"},
			"config":             map[string]any{"endpoint": base + "/ucp/tokenize"}}
	}
	return map[string]any{"id": UCPHandlerID, "version": ver, "spec": base + "/handlers/tokenizer",
		"schema": base + "/handlers/tokenizer/schema.json", "config": map[string]any{"endpoint": base + "/ucp/tokenize"},
		"available_instruments": []any{map[string]any{"type": "card"}}}
}

func (v *ucpView) profile(ver string) map[string]any {
	base := v.m.BaseURL()
	endpoint := base + "/ucp/" + ver
	if ver == UCP20260111 {
		return map[string]any{
			"ucp": map[string]any{
				"version": ver,
				"services": map[string]any{"dev.ucp.shopping": map[string]any{"version": ver, "spec": "https://ucp.dev/specification/overview",
					"rest": map[string]any{"schema": "https://ucp.dev/services/shopping/rest.openapi.json", "endpoint": endpoint}}},
				"capabilities": []any{map[string]any{"name": "dev.ucp.shopping.checkout", "version": ver,
					"spec": "https://ucp.dev/specification/checkout", "schema": "https://ucp.dev/schemas/shopping/checkout.json"}},
			},
			"payment": map[string]any{"handlers": v.handlerList(ver)},
		}
	}
	u := map[string]any{
		"version": ver,
		"services": map[string]any{"dev.ucp.shopping": []any{map[string]any{"version": ver, "spec": "https://ucp.dev/" + ver + "/specification/overview",
			"transport": "rest", "schema": "https://ucp.dev/" + ver + "/services/shopping/rest.openapi.json", "endpoint": endpoint}}},
		"capabilities": map[string]any{"dev.ucp.shopping.checkout": []any{map[string]any{"version": ver,
			"spec": "https://ucp.dev/" + ver + "/specification/checkout", "schema": "https://ucp.dev/" + ver + "/schemas/shopping/checkout.json"}}},
		"payment_handlers": v.handlerRegistry(ver),
	}
	older := map[string]any{}
	for _, o := range v.versions {
		if o < ver {
			older[o] = base + "/ucp/" + o + "/profile"
		}
	}
	if len(older) > 0 {
		u["supported_versions"] = older
	}
	return map[string]any{"ucp": u, "signing_keys": v.m.publishedKeys()}
}

// signingWriter holds a checkout answer until it is signed whole.
type signingWriter struct {
	h      http.Header
	status int
	body   bytes.Buffer
	bad    bool // sign, then spoil (the bad-signature scenarios)
}

func (s *signingWriter) Header() http.Header { return s.h }

func (s *signingWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
}

func (s *signingWriter) Write(b []byte) (int, error) {
	s.WriteHeader(http.StatusOK)
	return s.body.Write(b)
}

// spoil makes the answer being written through w carry a signature that
// does not verify.
func spoil(w http.ResponseWriter) {
	if sw, ok := w.(*signingWriter); ok {
		sw.bad = true
	}
}

// signUCP signs the answer sw holds with the merchant's key and writes it
// to w.
func (m *Merchant) signUCP(w http.ResponseWriter, sw *signingWriter) {
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	body := sw.body.Bytes()
	h := w.Header()
	for k, vs := range sw.h {
		h[k] = vs
	}
	fields := httpsign.Headers("@status")
	if len(body) > 0 {
		h.Set("Content-Digest", contentDigest(body))
		fields = httpsign.Headers("@status", "content-digest", "content-type")
	}
	key, kid := m.signingKey()
	cfg := httpsign.NewSignConfig().SignAlg(false).SetKeyID(kid)
	newSigner := httpsign.NewP256Signer
	if key.Curve == elliptic.P384() {
		newSigner = httpsign.NewP384Signer
	}
	signer, err := newSigner(*key, cfg, fields)
	var input, sig string
	if err == nil {
		input, sig, err = httpsign.SignResponse("sig1", *signer, &http.Response{StatusCode: status, Header: h}, nil)
	}
	if err != nil {
		h.Del("Content-Digest")
		http.Error(w, "fakemerchant: signing the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h.Set("Signature-Input", input)
	h.Set("Signature", sig)
	if sw.bad && len(body) > 0 {
		// One byte more after the first: the same JSON, a new digest, a
		// signature over the old one.
		body = append([]byte{body[0], ' '}, body[1:]...)
		h.Set("Content-Digest", contentDigest(body))
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// contentDigest is the RFC 9530 Content-Digest of body (sha-256).
func contentDigest(body []byte) string {
	rc := io.NopCloser(bytes.NewReader(body))
	d, err := httpsign.GenerateContentDigestHeader(&rc, []string{httpsign.DigestSha256})
	if err != nil {
		panic("fakemerchant: content digest: " + err.Error()) // sha-256 is always known
	}
	return d
}

// ---- sessions ----

// peek reads a session without counting a read.
func (m *Merchant) peek(id string) (Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok {
		return Session{}, ErrNoSession
	}
	return m.copy(s), nil
}

// checkout renders session s in version ver, with extra messages.
func (v *ucpView) checkout(ver string, s Session, extra ...map[string]any) map[string]any {
	m := v.m
	base := m.BaseURL()
	st := m.Status(s)
	status := map[cart.Status]string{cart.StatusReady: "ready_for_complete", cart.StatusIncomplete: "incomplete",
		cart.StatusEscalation: "requires_escalation", cart.StatusAuth: "requires_escalation", cart.StatusCompleted: "completed",
		cart.StatusCanceled: "canceled", cart.StatusExpired: "canceled"}[st]
	lines, _, totals := m.Price(s)
	signed := func(n int64) int64 { // 2026-04-08 discounts are negative
		if ver == UCP20260111 {
			return n
		}
		return -n
	}
	var items []any
	for _, l := range lines {
		lt := []any{map[string]any{"type": "subtotal", "amount": l.Subtotal}}
		if l.Discount > 0 {
			lt = append(lt, map[string]any{"type": "discount", "amount": signed(l.Discount)})
		}
		lt = append(lt, map[string]any{"type": "tax", "amount": l.Tax}, map[string]any{"type": "total", "amount": l.Total})
		items = append(items, map[string]any{"id": l.ID, "item": map[string]any{"id": l.ItemID, "title": l.Title, "price": l.Unit},
			"quantity": l.Quantity, "totals": lt})
	}
	tt := []any{map[string]any{"type": "subtotal", "display_text": "Subtotal", "amount": totals.Subtotal}}
	if totals.Discount > 0 {
		tt = append(tt, map[string]any{"type": "discount", "display_text": "Discount", "amount": signed(totals.Discount)})
	}
	tt = append(tt, map[string]any{"type": "fulfillment", "display_text": "Shipping", "amount": totals.Shipping},
		map[string]any{"type": "tax", "display_text": "Tax", "amount": totals.Tax},
		map[string]any{"type": "total", "display_text": "Total", "amount": totals.Total})
	var msgs []any
	switch st {
	case cart.StatusIncomplete:
		for i, l := range s.Lines {
			if it, _ := Find(l.ID); it.Scenario == ScenarioOutOfStock || s.Scenario == ScenarioOutOfStock {
				msgs = append(msgs, map[string]any{"type": "error", "code": "out_of_stock", "severity": "recoverable",
					"path": fmt.Sprintf("$.line_items[%d]", i), "content": it.Title + " is out of stock"})
				break
			}
		}
		if s.Scenario == ScenarioMissingInfo {
			msgs = append(msgs, map[string]any{"type": "error", "code": "missing", "severity": "requires_buyer_input",
				"path": "$.buyer.phone_number", "content": "The buyer's phone number is required."})
		}
	case cart.StatusEscalation:
		msgs = append(msgs, map[string]any{"type": "error", "code": "age_verification_required", "severity": "requires_buyer_input",
			"content": "The buyer must verify their age at the merchant."})
	case cart.StatusAuth:
		msgs = append(msgs, map[string]any{"type": "error", "code": "requires_3ds", "severity": "requires_buyer_input",
			"content": "The buyer must authenticate the payment (3-D Secure)."})
	}
	for _, e := range extra {
		msgs = append(msgs, e)
	}
	u := map[string]any{"version": ver}
	if ver == UCP20260111 {
		u["capabilities"] = []any{map[string]any{"name": "dev.ucp.shopping.checkout", "version": ver}}
	} else {
		u["status"] = "success"
		u["capabilities"] = map[string]any{"dev.ucp.shopping.checkout": []any{map[string]any{"version": ver}}}
		u["payment_handlers"] = v.handlerRegistry(ver)
	}
	out := map[string]any{
		"ucp": u, "id": s.ID, "line_items": items, "status": status, "currency": s.Currency, "totals": tt,
		"links": []any{
			map[string]any{"type": "terms_of_service", "url": base + "/terms"},
			map[string]any{"type": "privacy_policy", "url": base + "/privacy"},
		},
		"expires_at": s.ExpiresAt.UTC().Format(time.RFC3339),
	}
	if len(msgs) > 0 {
		out["messages"] = msgs
	}
	if ver == UCP20260111 {
		out["payment"] = map[string]any{"handlers": v.handlerList(ver)}
	}
	if s.Email != "" {
		out["buyer"] = map[string]any{"email": s.Email}
	}
	if status != "completed" && status != "canceled" {
		out["continue_url"] = m.ContinueURL(s)
	}
	if s.Order != nil {
		out["order"] = map[string]any{"id": s.Order.ID, "permalink_url": s.Order.Permalink}
	}
	return out
}

// ucpRequest is what the fake reads of create and update bodies.
type ucpRequest struct {
	ID        string `json:"id"`
	LineItems []struct {
		Item struct {
			ID string `json:"id"`
		} `json:"item"`
		Quantity int64 `json:"quantity"`
	} `json:"line_items"`
	Buyer *struct {
		Email string `json:"email"`
	} `json:"buyer"`
	Currency string `json:"currency"`
	Context  *struct {
		Currency string `json:"currency"`
	} `json:"context"`
}

func (q ucpRequest) lines() []cart.LineRequest {
	var out []cart.LineRequest
	for _, l := range q.LineItems {
		out = append(out, cart.LineRequest{ID: l.Item.ID, Quantity: l.Quantity})
	}
	return out
}

func (q ucpRequest) currency(ver string) string {
	switch {
	case ver == UCP20260111:
		return q.Currency
	case q.Context != nil && q.Context.Currency != "":
		return q.Context.Currency
	}
	return "USD"
}

func decodeBody(r *http.Request, v any) error {
	d := json.NewDecoder(r.Body)
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	return nil
}

// engineError answers an engine error in ver's shape.
func (v *ucpView) engineError(w http.ResponseWriter, ver string, err error) {
	switch {
	case errors.Is(err, ErrNoSession):
		v.errorResponse(w, http.StatusNotFound, ver, "not_found", "no such checkout session")
	case errors.Is(err, ErrUnknownItem):
		if ver == UCP20260111 {
			protocolError(w, http.StatusBadRequest, "invalid", err.Error())
		} else {
			v.errorResponse(w, http.StatusOK, ver, "item_unavailable", err.Error())
		}
	case errors.Is(err, ErrClosed):
		protocolError(w, http.StatusConflict, "checkout_closed", "the checkout session is completed, canceled or expired")
	case errors.Is(err, ErrBadRequest):
		protocolError(w, http.StatusBadRequest, "invalid", err.Error())
	default:
		protocolError(w, http.StatusInternalServerError, "internal_error", "internal error")
	}
}

func (v *ucpView) create(w http.ResponseWriter, r *http.Request, ver string) {
	key := ver + "\x00" + r.Header.Get("Idempotency-Key")
	v.mu.Lock()
	rep, seen := v.creates[key]
	v.mu.Unlock()
	if seen {
		if rep.bad {
			spoil(w)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.status)
		_, _ = w.Write(rep.body)
		return
	}
	var q ucpRequest
	if err := decodeBody(r, &q); err != nil {
		v.engineError(w, ver, err)
		return
	}
	if ver == UCP20260111 && q.Currency == "" {
		v.engineError(w, ver, fmt.Errorf("%w: currency is required", ErrBadRequest))
		return
	}
	s, err := v.m.Create("ucp", ver, q.currency(ver), q.lines(), Scenario(r.Header.Get("X-Fake-Scenario")))
	if err != nil {
		v.engineError(w, ver, err)
		return
	}
	if q.Buyer != nil && q.Buyer.Email != "" {
		s, _ = v.m.Update(s.ID, func(s *Session) error { s.Email = q.Buyer.Email; return nil })
	}
	v.m.Delay(r, s)
	bad := s.Scenario == ScenarioBadSignature
	if bad {
		spoil(w)
	}
	body, _ := json.Marshal(v.checkout(ver, s))
	v.mu.Lock()
	v.creates[key] = ucpReplay{status: http.StatusCreated, body: body, bad: bad}
	v.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(body)
}

func (v *ucpView) get(w http.ResponseWriter, r *http.Request, ver string) {
	s, err := v.m.Read(r.PathValue("id"))
	if err != nil {
		v.engineError(w, ver, err)
		return
	}
	v.m.Delay(r, s)
	writeJSON(w, http.StatusOK, v.checkout(ver, s))
}

func (v *ucpView) update(w http.ResponseWriter, r *http.Request, ver string) {
	id := r.PathValue("id")
	var q ucpRequest
	if err := decodeBody(r, &q); err != nil {
		v.engineError(w, ver, err)
		return
	}
	if ver == UCP20260111 && q.ID != id {
		v.engineError(w, ver, fmt.Errorf("%w: id does not match the path", ErrBadRequest))
		return
	}
	lines := q.lines()
	for _, l := range lines {
		if _, ok := Find(l.ID); !ok {
			v.engineError(w, ver, fmt.Errorf("%w: %s", ErrUnknownItem, l.ID))
			return
		}
		if l.Quantity < 1 || l.Quantity > 10_000 {
			v.engineError(w, ver, fmt.Errorf("%w: quantity", ErrBadRequest))
			return
		}
	}
	if len(lines) == 0 {
		v.engineError(w, ver, fmt.Errorf("%w: no line items", ErrBadRequest))
		return
	}
	s, err := v.m.Update(id, func(s *Session) error {
		s.Lines = lines
		if q.Buyer != nil {
			s.Email = q.Buyer.Email
		}
		return nil
	})
	if err != nil {
		v.engineError(w, ver, err)
		return
	}
	v.m.Delay(r, s)
	writeJSON(w, http.StatusOK, v.checkout(ver, s))
}

func (v *ucpView) cancel(w http.ResponseWriter, r *http.Request, ver string) {
	s, err := v.m.Cancel(r.PathValue("id"))
	if err != nil {
		v.engineError(w, ver, err)
		return
	}
	v.m.Delay(r, s)
	writeJSON(w, http.StatusOK, v.checkout(ver, s))
}

// ucpComplete is what the fake reads of completion bodies.
type ucpComplete struct {
	PaymentData *ucpInstrument `json:"payment_data"` // 2026-01-11
	Payment     *struct {      // 2026-04-08
		Instruments []ucpInstrument `json:"instruments"`
	} `json:"payment"`
}

type ucpInstrument struct {
	HandlerID  string `json:"handler_id"`
	Selected   *bool  `json:"selected"`
	Credential *struct {
		Type  string `json:"type"`
		Token string `json:"token"`
	} `json:"credential"`
}

func (q ucpComplete) token(ver, handlerID string) (string, bool) {
	var in *ucpInstrument
	if ver == UCP20260111 {
		in = q.PaymentData
	} else if q.Payment != nil {
		for i := range q.Payment.Instruments {
			if in == nil || (q.Payment.Instruments[i].Selected != nil && *q.Payment.Instruments[i].Selected) {
				in = &q.Payment.Instruments[i]
			}
		}
	}
	if in == nil || in.HandlerID != handlerID || in.Credential == nil || in.Credential.Token == "" {
		return "", false
	}
	return in.Credential.Token, true
}

func (v *ucpView) complete(w http.ResponseWriter, r *http.Request, ver string) {
	id := r.PathValue("id")
	s, err := v.m.peek(id)
	if err != nil {
		v.engineError(w, ver, err)
		return
	}
	v.m.Delay(r, s)
	var q ucpComplete
	if err := decodeBody(r, &q); err != nil {
		v.engineError(w, ver, err)
		return
	}
	handlerID := UCPHandlerID
	if v.m.opts.UCPPayment == UCPPaymentCredential {
		handlerID = UCPWalletID
	}
	token, ok := q.token(ver, handlerID)
	if !ok {
		v.engineError(w, ver, fmt.Errorf("%w: a token instrument of handler %q is required", ErrBadRequest, handlerID))
		return
	}
	var hang bool
	switch {
	case handlerID == UCPHandlerID:
		_, hang, err = v.m.Complete(id, token, r.Header.Get("Idempotency-Key"), true)
	case token == UCPWalletToken:
		// The credential is the payment: no allowance to check.
		_, hang, err = v.m.Complete(id, token, r.Header.Get("Idempotency-Key"), false)
	case token == UCPWalletDeclineToken:
		err = ErrDeclined
		if !v.m.completable(s) {
			err = ErrNotReady
		}
	default:
		err = ErrBadToken
	}
	if after, _ := v.m.peek(id); after.Scenario == ScenarioBadSignatureOnComplete && after.CompleteAttempts == 1 {
		spoil(w)
	}
	if hang {
		v.m.Hang(r)
	}
	declineCode := "payment_failed"
	if ver == UCP20260111 {
		declineCode = "payment_declined"
	}
	var extra []map[string]any
	switch {
	case err == nil, errors.Is(err, ErrNotReady):
	case IsServerFault(err):
		protocolError(w, http.StatusInternalServerError, "internal_error", "internal error")
		return
	case errors.Is(err, ErrDeclined):
		extra = append(extra, map[string]any{"type": "error", "code": declineCode, "severity": "recoverable",
			"content": "The payment was declined."})
	case errors.Is(err, ErrBadToken):
		extra = append(extra, map[string]any{"type": "error", "code": declineCode, "severity": "recoverable",
			"content": "The payment credential is invalid, used, expired or below the total."})
	case errors.Is(err, ErrClosed):
		if s, _ := v.m.peek(id); s.Order != nil {
			protocolError(w, http.StatusConflict, "checkout_completed", "the checkout session was completed by another request")
			return
		}
	default:
		v.engineError(w, ver, err)
		return
	}
	s, err = v.m.peek(id)
	if err != nil {
		v.engineError(w, ver, err)
		return
	}
	writeJSON(w, http.StatusOK, v.checkout(ver, s, extra...))
}

// tokenize is the payment handler's tokenization endpoint.
func (v *ucpView) tokenize(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Credential struct {
			Type     string `json:"type"`
			Amount   int64  `json:"amount"`
			Currency string `json:"currency"`
		} `json:"credential"`
		Binding struct {
			CheckoutID string `json:"checkout_id"`
		} `json:"binding"`
	}
	if err := decodeBody(r, &q); err != nil || q.Credential.Type != "spend_allowance" {
		protocolError(w, http.StatusBadRequest, "invalid", "a spend_allowance credential and a binding are required")
		return
	}
	if _, err := v.m.peek(q.Binding.CheckoutID); err != nil {
		protocolError(w, http.StatusBadRequest, "invalid", "binding.checkout_id names no checkout session")
		return
	}
	a, err := v.m.Delegate(q.Credential.Amount, q.Credential.Currency, q.Binding.CheckoutID, v.m.Now().Add(15*time.Minute))
	if err != nil {
		protocolError(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"token": a.Token})
}
