package commerce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/commerce/ucp"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/internal/sealbox"
	"github.com/countersign/countersign/netguard"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// Problem codes of the merchant registry.
const (
	CodeInvalidMerchant = "commerce.invalid_merchant"
	CodeMerchantExists  = "commerce.merchant_exists"
)

// Errors of the merchant registry. Check with errors.Is.
var (
	// ErrInvalidMerchant: a registration is malformed (400).
	ErrInvalidMerchant = errcode.New(CodeInvalidMerchant, "commerce: invalid merchant registration")
	// ErrMerchantExists: a merchant with that id is registered (409).
	ErrMerchantExists = errcode.New(CodeMerchantExists, "commerce: merchant already registered")
)

// sealPurpose is the HKDF purpose of sealed merchant credentials.
const sealPurpose = "countersign merchant credential seal v1"

// EntryMerchantRegistered records an operator's registration (never its
// secrets).
const EntryMerchantRegistered = "commerce.merchant_registered"

const keyMerchant = "commerce/merchant/" // + id → storedMerchant

// MerchantSpec is how to reach a merchant: what configuration lists and an
// operator registers. APIKey and PSPKey are secrets: sealed at rest, never
// shown again, never in the record. SigningKeys are public keys, stored as
// given and listed by key id and thumbprint.
type MerchantSpec struct {
	ID       string `json:"id" validate:"required,max=64" doc:"Registry id: lowercase letters, digits, '-', '_' and '.'."`
	Protocol string `json:"protocol" validate:"required,oneof=acp ucp" doc:"acp or ucp."`
	// ACP: the merchant's base URL and bearer key, and the PSP issuing
	// delegated payment tokens (default the base URL).
	BaseURL string `json:"baseUrl,omitempty" validate:"omitempty,max=2000" doc:"ACP: the merchant's base URL."`
	APIKey  string `json:"apiKey,omitempty" validate:"omitempty,max=4096" doc:"ACP: the merchant's bearer key; sealed at rest, never shown again."`
	PSPURL  string `json:"pspUrl,omitempty" validate:"omitempty,max=2000" doc:"ACP: the PSP's base URL (default baseUrl)."`
	PSPKey  string `json:"pspKey,omitempty" validate:"omitempty,max=4096" doc:"ACP: the PSP's bearer key; sealed at rest."`
	// UCP: the merchant's discovery profile, and the keys its answers must
	// be signed with (2026-04-08 response signatures; see package ucp).
	ProfileURL         string                  `json:"profileUrl,omitempty" validate:"omitempty,max=2000" doc:"UCP: the merchant's /.well-known/ucp."`
	PaymentCredentials []ucp.PaymentCredential `json:"paymentCredentials,omitempty" validate:"omitempty,max=16,dive" doc:"UCP: token credentials for payment handlers that take one directly at complete (no tokenization endpoint), by handler id or name; sealed at rest, never shown again nor recorded."`
	SigningKeys        []ucp.SigningKey        `json:"signingKeys,omitempty" validate:"omitempty,max=16,dive" doc:"UCP 2026-04-08: the merchant's response-signing public keys (JWK, EC P-256 or P-384), pinned: every checkout answer must then carry a valid RFC 9421 signature by one of them, and the keys of the merchant's profile are not trusted. Refused for acp, and for a merchant that negotiates UCP 2026-01-11."`
	// ReadyWithoutErrors is ucp.Options.ReadyWithoutErrors: for a merchant
	// that never reports ready_for_complete (the protocol's public sample
	// merchant), an operator's explicit choice.
	ReadyWithoutErrors bool `json:"readyWithoutErrors,omitempty" doc:"UCP: treat a checkout session the merchant reports incomplete that carries no message of type error as ready to complete (for merchants that never report ready_for_complete, such as the protocol's public sample). The cart's merchantStatus stays incomplete; a session with an error message, or in any other status, is not ready. Default false: only ready_for_complete is paid. Refused for acp."`
}

// PinnedKey names a pinned response-signing key in listings and the record.
type PinnedKey struct {
	KeyID      string `json:"kid"`
	Thumbprint string `json:"thumbprint" doc:"RFC 7638 SHA-256 JWK thumbprint, base64url."`
}

// pinnedKeys names keys for listings. The keys were checked.
func pinnedKeys(keys []ucp.SigningKey) []PinnedKey {
	var out []PinnedKey
	for _, k := range keys {
		tp, _ := k.Thumbprint()
		out = append(out, PinnedKey{KeyID: k.Kid, Thumbprint: tp})
	}
	return out
}

// MerchantRequest is the body of POST /commerce/merchants.
type MerchantRequest struct {
	MerchantSpec
	Rationale string `json:"rationale" validate:"required,max=2000" doc:"Why, in at least 10 characters; written into the record."`
}

// MerchantView is a registered merchant as listed: never its secrets.
type MerchantView struct {
	ID                 string      `json:"id"`
	Protocol           string      `json:"protocol"`
	Version            string      `json:"version,omitempty" doc:"The negotiated protocol version, once connected."`
	BaseURL            string      `json:"baseUrl,omitempty"`
	PSPURL             string      `json:"pspUrl,omitempty"`
	ProfileURL         string      `json:"profileUrl,omitempty"`
	HasAPIKey          bool        `json:"hasApiKey"`
	SigningKeys        []PinnedKey `json:"signingKeys,omitempty" doc:"UCP: the pinned response-signing keys, by key id and thumbprint."`
	CredentialHandlers []string    `json:"credentialHandlers,omitempty" doc:"UCP: the payment handlers a credential is held for (never the credential)."`
	ReadyWithoutErrors bool        `json:"readyWithoutErrors,omitempty" doc:"UCP: a session the merchant reports incomplete without an error message is treated as ready to complete (see the registration's readyWithoutErrors)."`
	ProfileIgnored     []string    `json:"profileIgnored,omitempty" doc:"UCP, once connected: the parts of the merchant's profile that do not satisfy the protocol's schema but are never used (a payment handler's version, say), as path: violation. Reported, not refused."`
	Source             string      `json:"source" doc:"configuration or operator."`
	CreatedAt          time.Time   `json:"createdAt,omitzero"`
	AuditSeq           uint64      `json:"auditSeq,omitempty"`
}

// MerchantPage lists the registry, ordered by id.
type MerchantPage struct {
	Data []MerchantView `json:"data"`
}

// storedMerchant is a registration at rest.
type storedMerchant struct {
	MerchantView
	APIKey string `json:"apiKey,omitempty"` // sealed
	PSPKey string `json:"pspKey,omitempty"` // sealed
	// Credentials are the sealed JSON of the payment credentials.
	Credentials string           `json:"credentials,omitempty"`
	PinnedKeys  []ucp.SigningKey `json:"pinnedKeys,omitempty"`
}

// registry holds what the service knows of each merchant beyond its
// client: where it came from, for listings.
type registry struct {
	mu    sync.Mutex // guards views
	views map[string]MerchantView
}

// lazyMerchant connects on first use, so a registered merchant that is
// down when the server starts does not stop the start: its requests fail
// with ErrMerchantUnavailable until it answers.
type lazyMerchant struct {
	spec    MerchantSpec
	connect func(context.Context, MerchantSpec) (cart.Merchant, error)

	mu sync.Mutex // guards m
	m  cart.Merchant
}

func (l *lazyMerchant) get(ctx context.Context) (cart.Merchant, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m != nil {
		return l.m, nil
	}
	m, err := l.connect(ctx, l.spec)
	if err != nil {
		return nil, errors.Join(cart.ErrUnavailable, err)
	}
	l.m = m
	return m, nil
}

func (l *lazyMerchant) Protocol() string { return l.spec.Protocol }
func (l *lazyMerchant) Version() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		return ""
	}
	return l.m.Version()
}
func (l *lazyMerchant) Create(ctx context.Context, r cart.CreateRequest) (cart.Cart, error) {
	m, err := l.get(ctx)
	if err != nil {
		return cart.Cart{}, err
	}
	return m.Create(ctx, r)
}
func (l *lazyMerchant) Get(ctx context.Context, id string) (cart.Cart, error) {
	m, err := l.get(ctx)
	if err != nil {
		return cart.Cart{}, err
	}
	return m.Get(ctx, id)
}
func (l *lazyMerchant) Complete(ctx context.Context, id string, p cart.Payment) (cart.Order, error) {
	m, err := l.get(ctx)
	if err != nil {
		return cart.Order{}, err
	}
	return m.Complete(ctx, id, p)
}
func (l *lazyMerchant) Cancel(ctx context.Context, id string) (cart.Cart, error) {
	m, err := l.get(ctx)
	if err != nil {
		return cart.Cart{}, err
	}
	return m.Cancel(ctx, id)
}

// Check validates a registration: its id, protocol and signing keys, and
// every URL through urls (package netguard: https to a public address,
// no user info or fragment, no private, loopback or link-local address
// in any spelling). Errors match ErrInvalidMerchant (400); a refused URL
// also wraps the *netguard.Error with its reason. RegisterMerchant runs
// it; a program that configures merchants itself runs it on each.
func (sp MerchantSpec) Check(urls netguard.Policy) error {
	if !validID(sp.ID) {
		return fmt.Errorf("%w: id must be 1 to 64 lowercase letters, digits, '-', '_' or '.'", ErrInvalidMerchant)
	}
	checkURL := func(name, raw string, required bool) error {
		if raw == "" && !required {
			return nil
		}
		if _, err := urls.CheckURL(raw); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalidMerchant, name, err)
		}
		return nil
	}
	switch sp.Protocol {
	case "acp":
		if len(sp.PaymentCredentials) > 0 {
			return fmt.Errorf("%w: paymentCredentials: ACP pays with the PSP's delegated tokens; credentials are for ucp merchants only", ErrInvalidMerchant)
		}
		if len(sp.SigningKeys) > 0 {
			return fmt.Errorf("%w: signingKeys: ACP defines no response signatures; keys are pinned for ucp merchants only", ErrInvalidMerchant)
		}
		if sp.ReadyWithoutErrors {
			return fmt.Errorf("%w: readyWithoutErrors: ACP merchants say ready_for_payment; the accommodation is for ucp merchants only", ErrInvalidMerchant)
		}
		if err := checkURL("baseUrl", sp.BaseURL, true); err != nil {
			return err
		}
		return checkURL("pspUrl", sp.PSPURL, false)
	case "ucp":
		if err := ucp.CheckSigningKeys(sp.SigningKeys); err != nil {
			return fmt.Errorf("%w: signingKeys: %v", ErrInvalidMerchant, err)
		}
		if err := ucp.CheckPaymentCredentials(sp.PaymentCredentials); err != nil {
			return fmt.Errorf("%w: paymentCredentials%v", ErrInvalidMerchant, err)
		}
		return checkURL("profileUrl", sp.ProfileURL, true)
	}
	return fmt.Errorf("%w: protocol must be acp or ucp", ErrInvalidMerchant)
}

// checkDiscovered checks the URLs a merchant's answers named, which the
// client will call: a UCP profile's REST endpoint. The connections are
// checked again by the client's guard; this refuses the registration
// before anything is stored.
func checkDiscovered(m cart.Merchant, urls netguard.Policy) error {
	p, ok := m.(interface{ Profile() ucp.Profile })
	if !ok {
		return nil
	}
	if _, err := urls.CheckURL(p.Profile().Endpoint); err != nil {
		return fmt.Errorf("%w: profileUrl: the profile declares the endpoint %q: %w", ErrInvalidMerchant, p.Profile().Endpoint, err)
	}
	return nil
}

// RegisterMerchant adds a merchant at an operator's call: the server
// connects to it first (a UCP merchant is discovered and its version
// negotiated; nothing is stored if that fails), seals its credentials,
// stores the registration and records it (without secrets) in one
// transaction.
func (s *Service) RegisterMerchant(ctx context.Context, sp MerchantSpec, call pay.OperatorCall) (MerchantView, error) {
	if err := sp.Check(s.urls); err != nil {
		return MerchantView{}, err
	}
	if s.connect == nil {
		return MerchantView{}, fmt.Errorf("%w: this server registers merchants in configuration only", ErrInvalidMerchant)
	}
	if _, err := s.Merchant(sp.ID); err == nil {
		return MerchantView{}, fmt.Errorf("%w: %s", ErrMerchantExists, sp.ID)
	}
	m, err := s.connect(ctx, sp)
	if errors.Is(err, ucp.ErrSignaturesUnsupported) {
		return MerchantView{}, fmt.Errorf("%w: signingKeys: %w", ErrInvalidMerchant, err)
	}
	if errors.Is(err, netguard.ErrForbiddenAddress) {
		// A name that resolves inside the network: retrying does not help.
		return MerchantView{}, fmt.Errorf("%w: connecting to %s: %w", ErrInvalidMerchant, sp.ID, err)
	}
	if errors.Is(err, cart.ErrInvalidResponse) || errors.Is(err, ucp.ErrNoCommonVersion) {
		// What the merchant publishes is unusable: a retry cannot fix it.
		return MerchantView{}, fmt.Errorf("%w: profileUrl: %s: %v", ErrInvalidMerchant, sp.ID, err)
	}
	if err != nil {
		return MerchantView{}, fmt.Errorf("%w: connecting to %s: %v", ErrMerchantUnavailable, sp.ID, err)
	}
	if err := checkDiscovered(m, s.urls); err != nil {
		return MerchantView{}, err
	}
	v := MerchantView{ID: sp.ID, Protocol: sp.Protocol, Version: m.Version(), BaseURL: sp.BaseURL, PSPURL: sp.PSPURL,
		ProfileURL: sp.ProfileURL, HasAPIKey: sp.APIKey != "", SigningKeys: pinnedKeys(sp.SigningKeys), Source: "operator",
		CreatedAt: s.now().UTC(), CredentialHandlers: credentialHandlers(sp.PaymentCredentials), ReadyWithoutErrors: sp.ReadyWithoutErrors}
	if p, ok := profileOf(m); ok {
		v.ProfileIgnored = p.Ignored
	}
	st := storedMerchant{MerchantView: v, PinnedKeys: sp.SigningKeys}
	if sp.APIKey != "" {
		if st.APIKey, err = s.seal.Seal(sp.ID+"/api", sp.APIKey, s.rand); err != nil {
			return MerchantView{}, err
		}
	}
	if sp.PSPKey != "" {
		if st.PSPKey, err = s.seal.Seal(sp.ID+"/psp", sp.PSPKey, s.rand); err != nil {
			return MerchantView{}, err
		}
	}
	if len(sp.PaymentCredentials) > 0 {
		b, err := json.Marshal(sp.PaymentCredentials)
		if err != nil {
			return MerchantView{}, err
		}
		if st.Credentials, err = s.seal.Seal(sp.ID+"/payment", string(b), s.rand); err != nil {
			return MerchantView{}, err
		}
	}
	// Recorded: the view, which names the handlers but never a credential.
	data, err := json.Marshal(v)
	if err != nil {
		return MerchantView{}, err
	}
	err = s.log.Update(ctx, func(txn store.Txn) error {
		if _, err := txn.Get([]byte(keyMerchant + sp.ID)); err == nil {
			return fmt.Errorf("%w: %s", ErrMerchantExists, sp.ID)
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		e, err := s.log.Append(txn, audit.Record{Type: EntryMerchantRegistered, Actor: audit.Actor{Kind: "operator", ID: call.Operator},
			RequestID: call.RequestID, Rationale: call.Rationale, Data: data})
		if err != nil {
			return err
		}
		row := st
		row.AuditSeq = e.Seq
		b, err := json.Marshal(row)
		if err != nil {
			return err
		}
		v = row.MerchantView
		return txn.Set([]byte(keyMerchant+sp.ID), b)
	})
	if err != nil {
		return MerchantView{}, fmt.Errorf("commerce: register merchant: %w", err)
	}
	if err := s.add(sp.ID, m, v); err != nil && !errors.Is(err, ErrMerchantExists) {
		return MerchantView{}, err // (exists: a lookup loaded this very registration from the store first)
	}
	return v, nil
}

// loadRegistered adds the merchants operators registered that the service
// does not know yet (at New; and, on a store several servers share, those
// registered through another), connecting each on first use.
func (s *Service) loadRegistered(ctx context.Context) error {
	var rows []storedMerchant
	err := s.st.View(ctx, func(r store.Reader) error {
		it := r.Iterate([]byte(keyMerchant), store.PrefixEnd([]byte(keyMerchant)), false)
		for it.Next() {
			var row storedMerchant
			if err := json.Unmarshal(it.Value(), &row); err != nil {
				it.Close()
				return err
			}
			rows = append(rows, row)
		}
		return it.Close()
	})
	if err != nil {
		return fmt.Errorf("commerce: stored merchants: %w", err)
	}
	for _, row := range rows {
		if _, ok := s.known(row.ID); ok {
			continue
		}
		sp := MerchantSpec{ID: row.ID, Protocol: row.Protocol, BaseURL: row.BaseURL, PSPURL: row.PSPURL, ProfileURL: row.ProfileURL,
			SigningKeys: row.PinnedKeys, ReadyWithoutErrors: row.ReadyWithoutErrors}
		if row.APIKey != "" {
			if sp.APIKey, err = s.seal.Open(row.ID+"/api", row.APIKey); err != nil {
				return fmt.Errorf("commerce: merchant %s: %w", row.ID, err)
			}
		}
		if row.PSPKey != "" {
			if sp.PSPKey, err = s.seal.Open(row.ID+"/psp", row.PSPKey); err != nil {
				return fmt.Errorf("commerce: merchant %s: %w", row.ID, err)
			}
		}
		if row.Credentials != "" {
			b, err := s.seal.Open(row.ID+"/payment", row.Credentials)
			if err == nil {
				err = json.Unmarshal([]byte(b), &sp.PaymentCredentials)
			}
			if err != nil {
				return fmt.Errorf("commerce: merchant %s: payment credentials: %w", row.ID, err)
			}
		}
		if s.connect == nil {
			return fmt.Errorf("commerce: merchant %s is registered but the service has no Connect", row.ID)
		}
		connect := s.connect
		if err := sp.Check(s.urls); err != nil {
			// Registered before the guard refused its URL: listed, never
			// called.
			s.logger.LogAttrs(ctx, slog.LevelWarn, "commerce: a registered merchant's URL is refused; it will not be called",
				slog.String("merchant", row.ID), slog.Any("error", err))
			connect = func(context.Context, MerchantSpec) (cart.Merchant, error) { return nil, err }
		}
		if err := s.add(row.ID, &lazyMerchant{spec: sp, connect: connect}, row.MerchantView); err != nil && !errors.Is(err, ErrMerchantExists) {
			return err // (exists: a concurrent load added it first)
		}
	}
	return nil
}

// MerchantList lists the registry, configured and registered, by id.
func (s *Service) MerchantList(ctx context.Context) (MerchantPage, error) {
	if err := s.loadRegistered(ctx); err != nil {
		return MerchantPage{}, err
	}
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	page := MerchantPage{Data: []MerchantView{}}
	for id, v := range s.reg.views {
		if m, err := s.Merchant(id); err == nil {
			v.Version = m.Version()
			if p, ok := profileOf(m); ok {
				v.ProfileIgnored = p.Ignored
			}
			if hs := heldCredentials(m); len(hs) > 0 {
				v.CredentialHandlers = hs
			}
		}
		page.Data = append(page.Data, v)
	}
	sort.Slice(page.Data, func(i, j int) bool { return page.Data[i].ID < page.Data[j].ID })
	return page, nil
}

// credentialHandlers names the handlers of creds, never the credentials.
func credentialHandlers(creds []ucp.PaymentCredential) []string {
	var out []string
	for _, c := range creds {
		out = append(out, c.Handler)
	}
	return out
}

// profileOf is a connected UCP merchant's profile.
func profileOf(m cart.Merchant) (ucp.Profile, bool) {
	if l, ok := m.(*lazyMerchant); ok {
		l.mu.Lock()
		m = l.m
		l.mu.Unlock()
	}
	p, ok := m.(interface{ Profile() ucp.Profile })
	if !ok {
		return ucp.Profile{}, false
	}
	return p.Profile(), true
}

// heldCredentials names the handlers a connected UCP merchant holds
// credentials for.
func heldCredentials(m cart.Merchant) []string {
	if l, ok := m.(*lazyMerchant); ok {
		l.mu.Lock()
		m = l.m
		l.mu.Unlock()
	}
	if h, ok := m.(interface{ CredentialHandlers() []string }); ok {
		return h.CredentialHandlers()
	}
	return nil
}

func newSealBox(key []byte) (*sealbox.Box, error) { return sealbox.New(key, nil, sealPurpose) }
