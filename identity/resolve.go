package identity

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/seqlist"
	"github.com/countersign/countersign/store"
)

// Counterparty is what a reference resolves to: who it is, how to check
// it, where to reach it, and what this deployment last decided about it.
type Counterparty struct {
	// ID is the canonical form of the reference: a did:key for agents, the
	// CAIP-10 account id, or a registry id.
	ID string `json:"id" doc:"Canonical id: did:key for an agent, CAIP-10 for an account, the registry id for a registered counterparty or merchant."`
	// Kind is agent, account, merchant or service.
	Kind string `json:"kind" validate:"oneof=agent account merchant service" doc:"agent, account, merchant or service."`
	// Ref is the reference as given.
	Ref string `json:"ref" doc:"The reference as given."`
	// AgentID is the ADP agent id, when the counterparty has one.
	AgentID string `json:"agentId,omitempty" doc:"The ADP agent id (did:key), when the counterparty is an agent."`
	// Keys are its public keys.
	Keys []PublicKeyRef `json:"keys" doc:"Public keys that speak for the counterparty."`
	// Endpoints are where it is reached.
	Endpoints []PartyEndpoint `json:"endpoints" doc:"Where the counterparty is reached: base, disclosure, respond."`
	// Rails it can be paid on, when known.
	Rails []string `json:"rails" doc:"Rails it can be paid on, when known."`
	// Capabilities it declared or was registered with.
	Capabilities []string `json:"capabilities" doc:"Capabilities declared or registered."`
	// Account is the parsed CAIP-10 account, for Kind account.
	Account *Account `json:"account,omitempty" doc:"The parsed CAIP-10 account id."`
	// Registered is true when an operator registered it.
	Registered bool `json:"registered" doc:"True when an operator registered this counterparty."`
	// Trust is the last decision this deployment recorded about it; null
	// when it never verified one of its disclosures.
	Trust *Trust `json:"trust" doc:"The last recorded verification decision about this counterparty; null if none."`
}

// PublicKeyRef is one public key of a counterparty.
type PublicKeyRef struct {
	Type   string `json:"type" doc:"Ed25519."`
	Hex    string `json:"hex" doc:"The raw 32-byte key, 64 lowercase hex (the ADP agent id form)."`
	DIDKey string `json:"didKey" doc:"The same key as did:key."`
}

// PartyEndpoint is one URL of a counterparty.
type PartyEndpoint struct {
	Rel string `json:"rel" doc:"base, disclosure (the well-known URI) or respond (the handshake)."`
	URL string `json:"url"`
}

// Account is a CAIP-10 account id: namespace:reference:address.
type Account struct {
	Namespace string `json:"namespace"`
	Reference string `json:"reference"`
	Address   string `json:"address"`
	ChainID   string `json:"chainId" doc:"CAIP-2 chain id: namespace:reference."`
}

// Directory resolves references the identity service does not itself know
// (for example the merchants of the commerce registry). Resolve returns
// found=false for a reference it does not know.
type Directory interface {
	Resolve(ctx context.Context, ref string) (c Counterparty, found bool, err error)
}

// Registration is an operator's registration of a counterparty.
type Registration struct {
	ID           string    `json:"id" validate:"required,max=64" doc:"Registry id: lowercase letters, digits, '.', '_' and '-', starting with a letter or digit."`
	Name         string    `json:"name,omitempty" validate:"omitempty,max=200" doc:"A name for people."`
	Kind         string    `json:"kind,omitempty" validate:"omitempty,oneof=agent merchant service" doc:"agent (default), merchant or service."`
	BaseURL      string    `json:"baseUrl" validate:"required,max=2000" doc:"Its base URL; the disclosure is fetched from <baseUrl>/.well-known/agent-disclosure and nowhere else."`
	AgentID      string    `json:"agentId" validate:"required,max=128" doc:"The ADP agent id it must disclose as (64 hex or did:key)."`
	Rails        []string  `json:"rails,omitempty" validate:"max=32,dive,max=64" doc:"Rails it can be paid on."`
	Capabilities []string  `json:"capabilities,omitempty" validate:"max=32,dive,max=64" doc:"Capabilities it offers."`
	CreatedAt    time.Time `json:"createdAt" doc:"Set by the server."`
	AuditSeq     uint64    `json:"auditSeq" doc:"The registration's record entry; set by the server."`
}

var registryID = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// Register records an operator's registration of a counterparty. The
// agent id is normalised to did:key; a second registration of the same id
// or the same agent is refused (ErrCounterpartyExists).
func (s *Service) Register(ctx context.Context, reg Registration, call OperatorCall) (Registration, error) {
	if !registryID.MatchString(reg.ID) || isSyntacticRef(reg.ID) {
		return Registration{}, fmt.Errorf("%w: id must match %s and not look like a did:key, hex key or CAIP-10 id", ErrInvalidCounterparty, registryID)
	}
	if reg.Kind == "" {
		reg.Kind = "agent"
	}
	switch reg.Kind {
	case "agent", "merchant", "service":
	default:
		return Registration{}, fmt.Errorf("%w: kind must be agent, merchant or service", ErrInvalidCounterparty)
	}
	base, err := s.checkBaseURL(reg.BaseURL)
	if err != nil {
		return Registration{}, err
	}
	reg.BaseURL = base
	k, err := PublicKeyOf(reg.AgentID)
	if err != nil {
		return Registration{}, fmt.Errorf("%w: agentId: %v", ErrInvalidCounterparty, err)
	}
	reg.AgentID = DIDKey(k)
	reg.CreatedAt = s.now().UTC()
	err = s.log.Update(ctx, func(txn store.Txn) error {
		r := reg
		for _, key := range []string{keyParty + r.ID, keyPartyAgent + keyHex(k)} {
			if _, err := txn.Get([]byte(key)); err == nil {
				return ErrCounterpartyExists
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		data, err := json.Marshal(r)
		if err != nil {
			return err
		}
		e, err := s.log.Append(txn, audit.Record{Type: EntryPartyAdded, Actor: operatorActor(call), RequestID: call.RequestID,
			Rationale: call.Rationale, Data: data})
		if err != nil {
			return err
		}
		r.AuditSeq = e.Seq
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if err := txn.Set([]byte(keyParty+r.ID), b); err != nil {
			return err
		}
		if err := txn.Set(seqlist.Key(keyPartyOrder, r.AuditSeq, r.ID), nil); err != nil {
			return err
		}
		reg = r
		return txn.Set([]byte(keyPartyAgent+keyHex(k)), []byte(r.ID))
	})
	if err != nil {
		if errors.Is(err, ErrCounterpartyExists) {
			return Registration{}, fmt.Errorf("%w: id %s or its agent id is taken", ErrCounterpartyExists, reg.ID)
		}
		return Registration{}, fmt.Errorf("identity: register: %w", err)
	}
	return reg, nil
}

// checkBaseURL checks a counterparty's base URL with the deployment's
// guard (package netguard) and refuses a query: paths are appended to it.
func (s *Service) checkBaseURL(raw string) (string, error) {
	u, err := s.urls.CheckURL(raw)
	if err != nil {
		return "", fmt.Errorf("%w: baseUrl: %w", ErrInvalidCounterparty, err)
	}
	if u.RawQuery != "" || u.ForceQuery {
		return "", fmt.Errorf("%w: baseUrl must not have a query", ErrInvalidCounterparty)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// The registry's order (package seqlist): keyPartyOrder + AuditSeq BE8 +
// counterparty id → empty, and the key set once a store written before has
// those rows.
const (
	keyPartyOrder  = "identity/party-order/"
	keyPartyLayout = "identity/party-layout"
)

// RegistrationPage is one page of registrations, in the order they were
// registered.
type RegistrationPage struct {
	Data       []Registration `json:"data"`
	HasMore    bool           `json:"hasMore"`
	NextCursor *string        `json:"nextCursor"`
}

// Counterparties pages through the registrations in the order they
// committed (their AuditSeq), so that a counterparty registered after a
// page was read is on a later page, whatever its id. cursor is
// the previous page's NextCursor ("" to start); limit is 1..100.
func (s *Service) Counterparties(ctx context.Context, cursor string, limit int) (RegistrationPage, error) {
	if limit < 1 || limit > 100 {
		limit = 20
	}
	after, err := seqlist.ParseCursor(cursor)
	if err != nil || (cursor != "" && !registryID.MatchString(after.ID)) {
		return RegistrationPage{}, ErrBadCursor
	}
	if err := migrateParties(ctx, s.st); err != nil {
		return RegistrationPage{}, fmt.Errorf("identity: counterparties: %w", err)
	}
	page := RegistrationPage{Data: []Registration{}}
	var last seqlist.Pos
	err = s.st.View(ctx, func(r store.Reader) error {
		page.Data = page.Data[:0]
		var err error
		last, page.HasMore, err = seqlist.Page(r, keyPartyOrder, after, limit, func(id string, _ []byte) (bool, error) {
			b, err := r.Get([]byte(keyParty + id))
			if err != nil {
				return false, err
			}
			var reg Registration
			if err := json.Unmarshal(b, &reg); err != nil {
				return false, err
			}
			page.Data = append(page.Data, reg)
			return true, nil
		})
		return err
	})
	if err != nil {
		return RegistrationPage{}, fmt.Errorf("identity: counterparties: %w", err)
	}
	if page.HasMore {
		c := last.Cursor()
		page.NextCursor = &c
	}
	return page, nil
}

// migrateParties gives every registration of a store written before the
// registry followed commit order its order row, at the AuditSeq it keeps
// (0 for one stored before it did). It runs once per store, checked at
// every list (one read): a registry is paged by operators, rarely.
func migrateParties(ctx context.Context, st store.Store) error {
	var m seqlist.Migration
	return m.Run(ctx, st, keyPartyLayout, func(txn store.Txn) (bool, error) {
		var rows []seqlist.Pos
		it := txn.Iterate([]byte(keyParty), store.PrefixEnd([]byte(keyParty)), false)
		for it.Next() {
			var reg Registration
			if err := json.Unmarshal(it.Value(), &reg); err != nil {
				it.Close()
				return false, fmt.Errorf("counterparty %s: %w", it.Key(), err)
			}
			rows = append(rows, seqlist.Pos{Seq: reg.AuditSeq, ID: string(it.Key()[len(keyParty):])})
		}
		if err := it.Close(); err != nil {
			return false, err
		}
		changed := false
		for _, p := range rows {
			added, err := seqlist.Add(txn, keyPartyOrder, p.Seq, p.ID)
			if err != nil {
				return false, err
			}
			changed = changed || added
		}
		return changed, nil
	})
}

// caip10 is CAIP-10: chain_id (CAIP-2 namespace:reference) ":" address.
var caip10 = regexp.MustCompile(`^([-a-z0-9]{3,8}):([-_a-zA-Z0-9]{1,32}):([-.%a-zA-Z0-9]{1,128})$`)

// isSyntacticRef reports whether ref has one of the forms resolved without
// any registry: did:key, a 64-hex agent id, a CAIP-10 account id.
func isSyntacticRef(ref string) bool {
	if _, err := PublicKeyOf(ref); err == nil {
		return true
	}
	return strings.HasPrefix(ref, "did:") || caip10.MatchString(ref)
}

// ResolveOptions tune [Service.Resolve].
type ResolveOptions struct {
	// Verify fetches the disclosure of a registered counterparty from its
	// base URL, verifies it under the deployment's policy, runs the live
	// handshake, checks that it discloses the registered agent id, and
	// records the decision, which becomes its Trust.
	Verify bool
}

// Resolve turns a reference into a Counterparty. It resolves offline:
// did:key and 64-hex ADP agent ids, CAIP-10 account ids, counterparties
// registered by an operator (by registry id, or by their agent id), then
// Options.Directories. It never fetches a URL a caller supplied: with
// opts.Verify it fetches only from a registered counterparty's base URL.
// An empty, oversized or unparseable reference is ErrBadRef; a well-formed
// one naming nothing known is ErrNotFound.
func (s *Service) Resolve(ctx context.Context, ref string, opts ResolveOptions, actor audit.Actor, requestID string) (Counterparty, error) {
	if ref == "" || len(ref) > 512 || strings.TrimSpace(ref) != ref {
		return Counterparty{}, fmt.Errorf("%w: a reference of 1 to 512 bytes without surrounding space is required", ErrBadRef)
	}
	var (
		c   Counterparty
		reg *Registration
		err error
	)
	switch {
	case keyOf(ref) != nil:
		k := keyOf(ref)
		c = Counterparty{ID: DIDKey(k), Kind: "agent", Ref: ref, AgentID: DIDKey(k)}
		if reg, err = s.registrationByKey(ctx, keyHex(k)); err != nil {
			return Counterparty{}, err
		}
	case strings.HasPrefix(ref, "did:"):
		// Before CAIP-10, whose grammar a DID like did:web:host also fits.
		return Counterparty{}, fmt.Errorf("%w: only did:key identifiers resolve offline", ErrBadRef)
	case caip10.MatchString(ref):
		m := caip10.FindStringSubmatch(ref)
		c = Counterparty{ID: ref, Kind: "account", Ref: ref,
			Account: &Account{Namespace: m[1], Reference: m[2], Address: m[3], ChainID: m[1] + ":" + m[2]}}
	case registryID.MatchString(ref):
		if reg, err = s.registration(ctx, ref); err != nil {
			return Counterparty{}, err
		}
		if reg == nil {
			for _, d := range s.dirs {
				dc, found, err := d.Resolve(ctx, ref)
				if err != nil {
					return Counterparty{}, fmt.Errorf("identity: resolve: %w", err)
				}
				if found {
					dc.Ref = ref
					return s.withTrust(ctx, s.normalise(dc))
				}
			}
			return Counterparty{}, fmt.Errorf("%w: %q is not a registered counterparty or merchant", ErrNotFound, ref)
		}
	default:
		return Counterparty{}, fmt.Errorf("%w: not a did:key, a 64-hex agent id, a CAIP-10 account id or a registry id", ErrBadRef)
	}
	if reg != nil {
		c = fromRegistration(*reg, ref)
		if opts.Verify {
			if _, err := s.verifyRegistered(ctx, *reg, actor, requestID); err != nil {
				return Counterparty{}, err
			}
		}
	}
	return s.withTrust(ctx, s.normalise(c))
}

func fromRegistration(reg Registration, ref string) Counterparty {
	k := keyOf(reg.AgentID)
	return Counterparty{
		ID: reg.ID, Kind: reg.Kind, Ref: ref, AgentID: DIDKey(k), Registered: true,
		Keys: []PublicKeyRef{{Type: "Ed25519", Hex: keyHex(k), DIDKey: DIDKey(k)}},
		Endpoints: []PartyEndpoint{{Rel: "base", URL: reg.BaseURL},
			{Rel: "disclosure", URL: reg.BaseURL + "/.well-known/agent-disclosure"},
			{Rel: "respond", URL: reg.BaseURL + "/agent-disclosure/respond"}},
		Rails: slices.Clone(reg.Rails), Capabilities: slices.Clone(reg.Capabilities),
	}
}

// normalise fills the lists a Counterparty always carries and the keys of
// an agent id.
func (s *Service) normalise(c Counterparty) Counterparty {
	if k := keyOf(c.AgentID); k != nil && len(c.Keys) == 0 {
		c.Keys = []PublicKeyRef{{Type: "Ed25519", Hex: keyHex(k), DIDKey: DIDKey(k)}}
	}
	if c.Keys == nil {
		c.Keys = []PublicKeyRef{}
	}
	if c.Endpoints == nil {
		c.Endpoints = []PartyEndpoint{}
	}
	if c.Rails == nil {
		c.Rails = []string{}
	}
	if c.Capabilities == nil {
		c.Capabilities = []string{}
	}
	return c
}

func (s *Service) withTrust(ctx context.Context, c Counterparty) (Counterparty, error) {
	k := keyOf(c.AgentID)
	if k == nil {
		return c, nil
	}
	err := s.st.View(ctx, func(r store.Reader) error {
		b, err := r.Get([]byte(keyTrust + keyHex(k)))
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var t Trust
		if err := json.Unmarshal(b, &t); err != nil {
			return err
		}
		c.Trust = &t
		return nil
	})
	if err != nil {
		return Counterparty{}, fmt.Errorf("identity: trust: %w", err)
	}
	return c, nil
}

func (s *Service) registration(ctx context.Context, id string) (*Registration, error) {
	var reg *Registration
	err := s.st.View(ctx, func(r store.Reader) error {
		b, err := r.Get([]byte(keyParty + id))
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		reg = new(Registration)
		return json.Unmarshal(b, reg)
	})
	if err != nil {
		return nil, fmt.Errorf("identity: registry: %w", err)
	}
	return reg, nil
}

func (s *Service) registrationByKey(ctx context.Context, kh string) (*Registration, error) {
	var id string
	err := s.st.View(ctx, func(r store.Reader) error {
		b, err := r.Get([]byte(keyPartyAgent + kh))
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		id = string(b)
		return err
	})
	if err != nil || id == "" {
		return nil, err
	}
	return s.registration(ctx, id)
}

// maxFetch bounds a fetched disclosure or handshake answer.
const maxFetch = 256 << 10

// verifyRegistered fetches a registered counterparty's disclosure from its
// base URL, verifies it, runs the live handshake and records the decision.
// An unreachable counterparty is a refusal (ADP §2: fail closed), recorded
// like any other.
func (s *Service) verifyRegistered(ctx context.Context, reg Registration, actor audit.Actor, requestID string) (Verified, error) {
	if s.client == nil {
		return Verified{}, fmt.Errorf("%w: this deployment was built without an HTTP client for counterparties", ErrNotFound)
	}
	// A registration stored before the guard refused its URL is refused
	// here, recorded like an unreachable counterparty.
	_, ferr := s.urls.CheckURL(reg.BaseURL)
	var raw []byte
	if ferr == nil {
		raw, ferr = s.fetch(ctx, http.MethodGet, reg.BaseURL+"/.well-known/agent-disclosure", nil)
	}
	if ferr != nil {
		raw = nil // refused below with the reachability check
	}
	var resp *ChallengeResponse
	var herr error
	ch, err := s.Challenge(ctx, "countersign:"+s.AgentID())
	if err != nil {
		return Verified{}, err
	}
	if ferr == nil {
		body, _ := json.Marshal(ch)
		var b []byte
		if b, herr = s.fetch(ctx, http.MethodPost, reg.BaseURL+"/agent-disclosure/respond", body); herr == nil {
			resp = new(ChallengeResponse)
			if err := json.Unmarshal(b, resp); err != nil {
				resp, herr = nil, fmt.Errorf("malformed challenge response: %v", err)
			}
		}
	}
	want := keyOf(reg.AgentID)
	return s.decide(ctx, raw, s.policy, resp, actor, requestID, decideFor{source: "resolve", party: reg.ID, partyKey: want, post: func(d *Decision) {
		if ferr != nil {
			addCheck(d, "reachable", false, "fetching the disclosure failed: "+ferr.Error())
			return
		}
		addCheck(d, "reachable", true, "")
		got := keyOf(d.AgentID)
		addCheck(d, "expectedAgent", got != nil && bytes.Equal(got, want),
			"the disclosure's agentId is not the one the operator registered")
		if herr != nil {
			addCheck(d, "handshake", false, "the live handshake failed: "+herr.Error())
		}
	}})
}

// fetch does one bounded request to a registered counterparty.
func (s *Service) fetch(ctx context.Context, method, u string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxFetch+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: status %d", method, u, resp.StatusCode)
	}
	if len(b) > maxFetch {
		return nil, fmt.Errorf("%s %s: answer larger than %d bytes", method, u, maxFetch)
	}
	return b, nil
}
