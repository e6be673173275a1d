package webhook

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/internal/ids"
	"github.com/countersign/countersign/internal/seqlist"
	"github.com/countersign/countersign/netguard"
	"github.com/countersign/countersign/store"
)

// Errors of the endpoint and delivery services. Each carries a stable code
// (its Code method) for the HTTP edge; check with errors.Is.
var (
	// ErrInvalidURL: the url is not https (or http to a loopback address
	// where that is allowed), is malformed, carries user info or a
	// fragment, or names a forbidden address (400).
	ErrInvalidURL = errcode.New(CodeInvalidURL, "webhook: invalid endpoint url")
	// ErrInvalidEvents: events is empty or names an unknown kind; the
	// message lists the valid kinds (400).
	ErrInvalidEvents = errcode.New(CodeInvalidEvents, "webhook: invalid event kinds")
	// ErrNotFound: no endpoint with that id, or it was deleted (404).
	ErrNotFound = errcode.New(CodeNotFound, "webhook: no such endpoint")
	// ErrTooManyEndpoints: the deployment already has Options.MaxEndpoints
	// endpoints (409).
	ErrTooManyEndpoints = errcode.New(CodeTooManyEndpoints, "webhook: too many endpoints")
	// ErrDeliveryNotFound: the endpoint has no delivery of that event (it
	// was not subscribed, the event id is malformed, or the delivery's
	// retention ended) (404).
	ErrDeliveryNotFound = errcode.New(CodeDeliveryNotFound, "webhook: no such delivery")
	// ErrInactive: the endpoint is inactive, so a delivery cannot be
	// retried; activate it first (409).
	ErrInactive = errcode.New(CodeInactive, "webhook: endpoint is inactive")
	// ErrBadCursor: a page cursor is malformed or not from this listing (400).
	ErrBadCursor = errcode.New(CodeBadCursor, "webhook: malformed cursor")
	// ErrBadLimit: a page limit is outside 0..MaxPageLimit (400).
	ErrBadLimit = errcode.New(CodeBadLimit, "webhook: page limit out of range")
)

// Page limits of List and Deliveries.
const (
	DefaultPageLimit = 20
	MaxPageLimit     = 100
)

// Defaults of [Options].
const (
	DefaultRotationOverlap = 24 * time.Hour
	DefaultMaxEndpoints    = 100
)

// secretPrefix starts every endpoint signing secret.
const secretPrefix = "whsec_"

// Entry types this package appends to the record.
const (
	EntryEndpointCreated = "webhook.endpoint_created"
	EntryEndpointUpdated = "webhook.endpoint_updated"
	EntryEndpointDeleted = "webhook.endpoint_deleted"
	EntryDeliveryRetried = "webhook.delivery_retried"
)

// Store layout: every key of this package starts with "webhook/".
var (
	endpointPrefix = []byte("webhook/ep/")
)

// List's order: webhook/ep-order/ + CreatedSeq BE8 + id → empty, one row
// per endpoint not deleted (package seqlist), and the key set once a store
// written before has them.
const (
	endpointOrder  = "webhook/ep-order/"
	endpointLayout = "webhook/ep-layout"
)

func endpointKey(id string) []byte { return append(append([]byte(nil), endpointPrefix...), id...) }

// Endpoint is a webhook endpoint as the service shows it: never with its
// secret.
type Endpoint struct {
	ID     string   `json:"id" doc:"we_<ULID>."`
	URL    string   `json:"url" doc:"Where deliveries are POSTed."`
	Events []string `json:"events" doc:"The event kinds delivered; [\"*\"] means every kind."`
	Active bool     `json:"active" doc:"Inactive endpoints receive nothing."`
	// DisabledReason is "gone" when the dispatcher deactivated the
	// endpoint because its receiver answered 410 Gone; empty otherwise.
	DisabledReason string    `json:"disabledReason,omitempty" doc:"Why the service deactivated the endpoint: gone (the receiver answered 410)."`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`
	// PreviousSecretExpiresAt is set during the overlap after a secret
	// rotation: until then deliveries are signed with the previous secret
	// as well as the current one.
	PreviousSecretExpiresAt *time.Time `json:"previousSecretExpiresAt,omitempty" doc:"Until then deliveries also carry a signature under the previous secret."`
}

// storedEndpoint is the persisted form under webhook/ep/<id>.
type storedEndpoint struct {
	Endpoint
	// CreatedSeq is the seq of the endpoint's webhook.endpoint_created
	// entry: only entries after it are delivered to the endpoint.
	CreatedSeq uint64 `json:"createdSeq"`
	// Secret and PrevSecret are sealed (see seal.go).
	Secret     string `json:"secret,omitempty"`
	PrevSecret string `json:"prevSecret,omitempty"`
	// Deleted marks a tombstone: the endpoint is gone for every reader;
	// the dispatcher purges its deliveries and then the tombstone.
	Deleted bool `json:"deleted,omitempty"`
}

// LogValue keeps the sealed secrets (which are in the clear when no seal
// key is configured) out of logs.
func (s storedEndpoint) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", s.ID), slog.String("secret", "REDACTED"))
}

// view returns the endpoint as shown at now (an expired rotation overlap is
// not shown).
func (s storedEndpoint) view(now time.Time) Endpoint {
	e := s.Endpoint
	e.Events = slices.Clone(e.Events)
	if e.PreviousSecretExpiresAt != nil && !now.Before(*e.PreviousSecretExpiresAt) {
		e.PreviousSecretExpiresAt = nil
	}
	return e
}

// subscribed reports whether the endpoint wants events of kind.
func (s *storedEndpoint) subscribed(kind string) bool {
	for _, k := range s.Events {
		if k == AllEvents || k == kind {
			return true
		}
	}
	return false
}

// Options configures [Endpoints]. The zero value gives the defaults; New
// keeps a copy.
type Options struct {
	// SealKey (SealKeySize bytes) protects endpoint secrets at rest: each
	// is sealed with AES-256-GCM under a key derived from SealKey by
	// HKDF-SHA256. Secrets cannot be hashed, because the dispatcher needs
	// them to sign. Keep the key outside the store (a file readable only
	// by the server, see NewSealKey), so that a copy or dump of the store
	// alone does not reveal the secrets. The default (nil) stores secrets
	// unencrypted, and NewEndpoints logs a warning saying so; a production
	// deployment must set it.
	SealKey []byte
	// OldSealKeys open secrets sealed under earlier seal keys, during a
	// seal-key rotation. Every write re-seals under SealKey. Default none.
	OldSealKeys [][]byte
	// AllowLoopbackHTTP admits http:// urls to loopback addresses
	// (localhost, 127.0.0.0/8, ::1), and loopback destinations in general:
	// sandbox mode. Default false: https only, and never to loopback.
	AllowLoopbackHTTP bool
	// RotationOverlap is how long the previous secret keeps signing after
	// a rotation. Default DefaultRotationOverlap (24 h).
	RotationOverlap time.Duration
	// MaxEndpoints caps the number of endpoints. Default
	// DefaultMaxEndpoints.
	MaxEndpoints int
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Rand is the source of secrets and nonces. Default crypto/rand.Reader.
	Rand io.Reader
	// Logger receives the service's diagnostics. Default slog.Default().
	Logger *slog.Logger
}

// LogValue keeps the seal keys out of logs.
func (o Options) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Bool("sealKey", o.SealKey != nil),
		slog.Int("oldSealKeys", len(o.OldSealKeys)),
		slog.Bool("allowLoopbackHTTP", o.AllowLoopbackHTTP),
		slog.Duration("rotationOverlap", o.RotationOverlap),
		slog.Int("maxEndpoints", o.MaxEndpoints),
	)
}

// Endpoints manages webhook endpoints: create, read, update (including
// secret rotation) and delete, each change recorded in the record in the
// same transaction. It is safe for concurrent use.
type Endpoints struct {
	st            store.Store
	log           *audit.Log
	seal          *sealer
	now           func() time.Time
	rand          io.Reader
	logger        *slog.Logger
	allowLoopback bool
	overlap       time.Duration
	max           int
	layout        seqlist.Migration // of List's order rows; see migrate
}

// NewEndpoints returns the endpoint service over st, recording changes in
// log. It fails only for a seal key of the wrong size.
func NewEndpoints(st store.Store, log *audit.Log, opts *Options) (*Endpoints, error) {
	if st == nil || log == nil {
		return nil, errors.New("webhook: new endpoints: nil store or log")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RotationOverlap == 0 {
		o.RotationOverlap = DefaultRotationOverlap
	}
	if o.RotationOverlap < 0 {
		return nil, fmt.Errorf("webhook: new endpoints: negative RotationOverlap %v", o.RotationOverlap)
	}
	if o.MaxEndpoints == 0 {
		o.MaxEndpoints = DefaultMaxEndpoints
	}
	s, err := newSealer(o.SealKey, o.OldSealKeys)
	if err != nil {
		return nil, err
	}
	if !s.box.Sealed() {
		o.Logger.LogAttrs(context.Background(), slog.LevelWarn,
			"webhook: no SealKey configured: endpoint signing secrets are stored UNENCRYPTED in the store; "+
				"anyone who can read the data directory can forge deliveries")
	}
	return &Endpoints{
		st: st, log: log, seal: s, now: o.Now, rand: o.Rand, logger: o.Logger,
		allowLoopback: o.AllowLoopbackHTTP, overlap: o.RotationOverlap, max: o.MaxEndpoints,
	}, nil
}

// CreateRequest describes an endpoint to create.
type CreateRequest struct {
	URL    string   `json:"url" validate:"required,max=2048" doc:"https URL (http to loopback in sandbox mode)."`
	Events []string `json:"events" validate:"required,min=1,max=16,dive,min=1,max=64" doc:"Event kinds to deliver; [\"*\"] for every kind."`
	// Active defaults to true.
	Active *bool `json:"active,omitempty" doc:"Default true."`
}

// Created is the result of Create: the endpoint and, this once, its
// signing secret.
type Created struct {
	Endpoint
	// Secret ("whsec_" + base64url of 32 random bytes) signs deliveries.
	// It is shown only here; store it in the receiver's configuration.
	Secret string `json:"secret" doc:"Signing secret, shown once."`
}

// LogValue keeps the secret out of logs.
func (c Created) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", c.ID), slog.String("secret", "REDACTED"))
}

// UpdateRequest changes an endpoint; nil members are left as they are.
type UpdateRequest struct {
	URL    *string   `json:"url,omitempty" validate:"omitempty,max=2048" doc:"New URL."`
	Events *[]string `json:"events,omitempty" validate:"omitempty,min=1,max=16,dive,min=1,max=64" doc:"New event kinds."`
	Active *bool     `json:"active,omitempty" doc:"Activate or deactivate."`
	// RotateSecret issues a new secret, returned once; the previous one
	// keeps signing for Options.RotationOverlap.
	RotateSecret bool `json:"rotateSecret,omitempty" doc:"Issue a new secret; the old one keeps signing for 24 hours."`
}

// Updated is the result of Update: the endpoint and, when the secret was
// rotated, the new secret, shown this once.
type Updated struct {
	Endpoint
	Secret string `json:"secret,omitempty" doc:"The new signing secret after a rotation, shown once."`
}

// LogValue keeps the secret out of logs.
func (u Updated) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", u.ID), slog.String("secret", "REDACTED"))
}

// EndpointPage is one page of endpoints, oldest first.
type EndpointPage struct {
	Data       []Endpoint `json:"data"`
	HasMore    bool       `json:"hasMore"`
	NextCursor *string    `json:"nextCursor"`
}

// endpointChange is the data of an endpoint entry in the record: the
// endpoint as it is after the change (never its secret) and what changed.
type endpointChange struct {
	Endpoint
	Changed []string `json:"changed,omitempty"`
}

// Create registers an endpoint and returns it with its secret, shown this
// once. It records webhook.endpoint_created (without the secret) in the
// same transaction. Only entries appended after that one are delivered to
// the endpoint. actor, requestID and rationale say who asked and why.
func (e *Endpoints) Create(ctx context.Context, req CreateRequest, actor audit.Actor, requestID, rationale string) (Created, error) {
	u, err := e.checkURL(req.URL)
	if err != nil {
		return Created{}, err
	}
	events, err := checkEvents(req.Events)
	if err != nil {
		return Created{}, err
	}
	secret, err := e.newSecret()
	if err != nil {
		return Created{}, err
	}
	id := ids.New(ids.Endpoint)
	sealed, err := e.seal.seal(id, secret, e.rand)
	if err != nil {
		return Created{}, err
	}
	now := e.now().UTC()
	se := storedEndpoint{
		Endpoint: Endpoint{
			ID: id, URL: u, Events: events, Active: req.Active == nil || *req.Active,
			CreatedAt: now, UpdatedAt: now,
		},
		Secret: sealed,
	}
	data, err := json.Marshal(endpointChange{Endpoint: se.Endpoint})
	if err != nil {
		return Created{}, fmt.Errorf("webhook: create endpoint: %w", err)
	}
	err = e.log.Update(ctx, func(txn store.Txn) error {
		n, err := countEndpoints(txn)
		if err != nil {
			return err
		}
		if n >= e.max {
			return fmt.Errorf("%w: the limit is %d", ErrTooManyEndpoints, e.max)
		}
		ent, err := e.log.Append(txn, audit.Record{
			Type: EntryEndpointCreated, Actor: actor, RequestID: requestID, Rationale: rationale, Data: data,
		})
		if err != nil {
			return err
		}
		s := se // a copy per attempt: fn may run more than once
		s.CreatedSeq = ent.Seq
		if err := txn.Set(seqlist.Key(endpointOrder, s.CreatedSeq, id), nil); err != nil {
			return err
		}
		return putEndpoint(txn, &s)
	})
	if err != nil {
		return Created{}, fmt.Errorf("webhook: create endpoint: %w", err)
	}
	return Created{Endpoint: se.view(now), Secret: secret}, nil
}

func (e *Endpoints) newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := io.ReadFull(e.rand, b); err != nil {
		return "", fmt.Errorf("webhook: generating secret: %w", err)
	}
	return secretPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// Get returns an endpoint by id.
func (e *Endpoints) Get(ctx context.Context, id string) (Endpoint, error) {
	var se storedEndpoint
	err := e.st.View(ctx, func(r store.Reader) error {
		var err error
		se, err = getEndpoint(r, id)
		return err
	})
	if err != nil {
		return Endpoint{}, fmt.Errorf("webhook: get endpoint: %w", err)
	}
	return se.view(e.now()), nil
}

// List returns up to limit endpoints after cursor, oldest first: in the
// order their creations committed (the seq of their
// webhook.endpoint_created entries), so that an endpoint created after a
// page was read is on a later page, whatever its id. cursor "" starts at
// the beginning; otherwise it is a NextCursor from an earlier page
// (ErrBadCursor otherwise). limit 0 means DefaultPageLimit; outside
// 0..MaxPageLimit it is ErrBadLimit.
func (e *Endpoints) List(ctx context.Context, cursor string, limit int) (EndpointPage, error) {
	limit, err := checkLimit(limit)
	if err != nil {
		return EndpointPage{}, fmt.Errorf("webhook: list endpoints: %w", err)
	}
	after, err := seqlist.ParseCursor(cursor)
	if err != nil || (cursor != "" && !ids.Valid(ids.Endpoint, after.ID)) {
		return EndpointPage{}, fmt.Errorf("webhook: list endpoints: %w", ErrBadCursor)
	}
	if err := e.migrate(ctx); err != nil {
		return EndpointPage{}, fmt.Errorf("webhook: list endpoints: %w", err)
	}
	now := e.now()
	p := EndpointPage{Data: []Endpoint{}}
	var last seqlist.Pos
	err = e.st.View(ctx, func(r store.Reader) error {
		p.Data = p.Data[:0]
		var err error
		last, p.HasMore, err = seqlist.Page(r, endpointOrder, after, limit, func(id string, _ []byte) (bool, error) {
			se, err := getEndpoint(r, id)
			if errors.Is(err, ErrNotFound) {
				return false, nil // deleted: its order row goes with it, but never list a tombstone
			}
			if err != nil {
				return false, err
			}
			p.Data = append(p.Data, se.view(now))
			return true, nil
		})
		return err
	})
	if err != nil {
		return EndpointPage{}, fmt.Errorf("webhook: list endpoints: %w", err)
	}
	if p.HasMore {
		c := last.Cursor()
		p.NextCursor = &c
	}
	return p, nil
}

// migrate gives every endpoint of a store written before List followed
// commit order its order row, at its CreatedSeq (the record keeps it;
// 0 for an endpoint stored before it did). It runs once per store, at the
// first List: NewEndpoints cannot do I/O.
func (e *Endpoints) migrate(ctx context.Context) error {
	return e.layout.Run(ctx, e.st, endpointLayout, func(txn store.Txn) (bool, error) {
		all, err := loadEndpoints(txn, nil)
		if err != nil {
			return false, err
		}
		changed := false
		for _, se := range all {
			if se.Deleted {
				continue
			}
			added, err := seqlist.Add(txn, endpointOrder, se.CreatedSeq, se.ID)
			if err != nil {
				return false, err
			}
			changed = changed || added
		}
		return changed, nil
	})
}

// Update changes an endpoint and records webhook.endpoint_updated, naming
// what changed, in the same transaction. With RotateSecret the new secret
// is returned once, and the previous one keeps signing deliveries (as a
// second v1 value) for Options.RotationOverlap; rotating again within the
// overlap retires the oldest secret at once. Activating an endpoint clears
// DisabledReason; it does not send the events recorded while it was
// inactive. A request that changes nothing records nothing.
func (e *Endpoints) Update(ctx context.Context, id string, req UpdateRequest, actor audit.Actor, requestID, rationale string) (Updated, error) {
	var newURL string
	if req.URL != nil {
		u, err := e.checkURL(*req.URL)
		if err != nil {
			return Updated{}, err
		}
		newURL = u
	}
	var newEvents []string
	if req.Events != nil {
		ev, err := checkEvents(*req.Events)
		if err != nil {
			return Updated{}, err
		}
		newEvents = ev
	}
	var secret string
	if req.RotateSecret {
		var err error
		if secret, err = e.newSecret(); err != nil {
			return Updated{}, err
		}
	}
	var sealedNew string
	if secret != "" {
		var err error
		if sealedNew, err = e.seal.seal(id, secret, e.rand); err != nil {
			return Updated{}, err
		}
	}
	now := e.now().UTC()
	var out storedEndpoint
	err := e.log.Update(ctx, func(txn store.Txn) error {
		se, err := getEndpoint(txn, id)
		if err != nil {
			return err
		}
		var changed []string
		if req.URL != nil && newURL != se.URL {
			se.URL = newURL
			changed = append(changed, "url")
		}
		if req.Events != nil && !slices.Equal(newEvents, se.Events) {
			se.Events = newEvents
			changed = append(changed, "events")
		}
		if req.Active != nil && *req.Active != se.Active {
			se.Active = *req.Active
			if se.Active {
				se.DisabledReason = ""
			}
			changed = append(changed, "active")
		}
		if sealedNew != "" {
			// The current secret becomes the previous one; a secret
			// that was previous already is retired now.
			se.PrevSecret = se.Secret
			se.Secret = sealedNew
			exp := now.Add(e.overlap)
			se.PreviousSecretExpiresAt = &exp
			changed = append(changed, "secret")
		}
		if len(changed) == 0 {
			out = se
			return nil
		}
		se.UpdatedAt = now
		if err := e.reseal(&se, now); err != nil {
			return err
		}
		data, err := json.Marshal(endpointChange{Endpoint: se.view(now), Changed: changed})
		if err != nil {
			return err
		}
		if _, err := e.log.Append(txn, audit.Record{
			Type: EntryEndpointUpdated, Actor: actor, RequestID: requestID, Rationale: rationale, Data: data,
		}); err != nil {
			return err
		}
		out = se
		return putEndpoint(txn, &se)
	})
	if err != nil {
		return Updated{}, fmt.Errorf("webhook: update endpoint: %w", err)
	}
	return Updated{Endpoint: out.view(now), Secret: secret}, nil
}

// reseal drops an expired previous secret and rewrites secrets stored in
// the clear, or under an old seal key, under the current seal key, so that
// configuring a key (or rotating it) takes effect on each endpoint's next
// write. It works only from what the transaction read, so it is correct
// when the transaction function runs again.
func (e *Endpoints) reseal(se *storedEndpoint, now time.Time) error {
	if se.PreviousSecretExpiresAt != nil && !now.Before(*se.PreviousSecretExpiresAt) {
		se.PrevSecret = ""
		se.PreviousSecretExpiresAt = nil
	}
	for _, p := range []*string{&se.Secret, &se.PrevSecret} {
		if *p == "" || !e.seal.stale(*p) {
			continue
		}
		plain, err := e.seal.open(se.ID, *p)
		if err != nil {
			return err
		}
		if *p, err = e.seal.seal(se.ID, plain, e.rand); err != nil {
			return err
		}
	}
	return nil
}

// Delete removes an endpoint and records webhook.endpoint_deleted in the
// same transaction. The endpoint disappears at once for every reader and
// receives nothing more; its secrets are erased from the store now, and
// the dispatcher purges its deliveries in the background.
func (e *Endpoints) Delete(ctx context.Context, id string, actor audit.Actor, requestID, rationale string) error {
	now := e.now().UTC()
	err := e.log.Update(ctx, func(txn store.Txn) error {
		se, err := getEndpoint(txn, id)
		if err != nil {
			return err
		}
		data, err := json.Marshal(endpointChange{Endpoint: se.view(now)})
		if err != nil {
			return err
		}
		if _, err := e.log.Append(txn, audit.Record{
			Type: EntryEndpointDeleted, Actor: actor, RequestID: requestID, Rationale: rationale, Data: data,
		}); err != nil {
			return err
		}
		if err := txn.Delete(seqlist.Key(endpointOrder, se.CreatedSeq, se.ID)); err != nil {
			return err
		}
		tomb := storedEndpoint{Endpoint: Endpoint{ID: se.ID, UpdatedAt: now}, CreatedSeq: se.CreatedSeq, Deleted: true}
		return putEndpoint(txn, &tomb)
	})
	if err != nil {
		return fmt.Errorf("webhook: delete endpoint: %w", err)
	}
	return nil
}

// dispatcherActor is who the record names when the dispatcher itself
// changes an endpoint.
var dispatcherActor = audit.Actor{Kind: "system", ID: "webhook.dispatcher"}

// deactivateGone marks the endpoint inactive because its receiver answered
// 410 Gone, recording webhook.endpoint_updated in txn. It reports whether
// it changed anything.
func (e *Endpoints) deactivateGone(txn store.Txn, id string, now time.Time) (bool, error) {
	se, err := getEndpoint(txn, id)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil || !se.Active {
		return false, err
	}
	se.Active = false
	se.DisabledReason = "gone"
	se.UpdatedAt = now.UTC()
	data, err := json.Marshal(endpointChange{Endpoint: se.view(now), Changed: []string{"active"}})
	if err != nil {
		return false, err
	}
	if _, err := e.log.Append(txn, audit.Record{
		Type: EntryEndpointUpdated, Actor: dispatcherActor,
		Rationale: "the receiver answered 410 Gone, so the endpoint was deactivated",
		Data:      data,
	}); err != nil {
		return false, err
	}
	return true, putEndpoint(txn, &se)
}

// signingSecrets returns the secrets that sign a delivery at now: the
// current one, and the previous one during a rotation's overlap.
func (e *Endpoints) signingSecrets(se *storedEndpoint, now time.Time) ([]string, error) {
	cur, err := e.seal.open(se.ID, se.Secret)
	if err != nil {
		return nil, err
	}
	out := []string{cur}
	if se.PrevSecret != "" && se.PreviousSecretExpiresAt != nil && now.Before(*se.PreviousSecretExpiresAt) {
		prev, err := e.seal.open(se.ID, se.PrevSecret)
		if err != nil {
			return nil, err
		}
		out = append(out, prev)
	}
	return out, nil
}

func getEndpoint(r store.Reader, id string) (storedEndpoint, error) {
	if !ids.Valid(ids.Endpoint, id) {
		return storedEndpoint{}, ErrNotFound
	}
	b, err := r.Get(endpointKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return storedEndpoint{}, ErrNotFound
	}
	if err != nil {
		return storedEndpoint{}, err
	}
	var se storedEndpoint
	if err := json.Unmarshal(b, &se); err != nil {
		return storedEndpoint{}, fmt.Errorf("endpoint %s: %w", id, err)
	}
	if se.Deleted {
		return storedEndpoint{}, ErrNotFound
	}
	return se, nil
}

func putEndpoint(txn store.Txn, se *storedEndpoint) error {
	b, err := json.Marshal(se)
	if err != nil {
		return err
	}
	return txn.Set(endpointKey(se.ID), b)
}

// loadEndpoints returns every stored endpoint, tombstones included, in id
// order. cache, if not nil, saves decoding endpoints that did not change.
func loadEndpoints(r store.Reader, cache *endpointCache) ([]storedEndpoint, error) {
	var out []storedEndpoint
	var seen map[string]cachedEndpoint
	if cache != nil {
		seen = map[string]cachedEndpoint{}
	}
	it := r.Iterate(endpointPrefix, store.PrefixEnd(endpointPrefix), false)
	defer it.Close()
	for it.Next() {
		ce, err := cache.decode(it.Key(), it.Value())
		if err != nil {
			return nil, err
		}
		if seen != nil {
			seen[string(it.Key())] = ce
		}
		se := ce.se
		se.Events = slices.Clone(se.Events)
		out = append(out, se)
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	cache.replace(seen)
	return out, nil
}

// endpointCache remembers decoded endpoints by their stored bytes: the
// dispatcher reads every endpoint on each refill and tail batch, and
// decoding JSON dominated that. Its zero value is ready; a nil
// *endpointCache decodes every time. It is safe for concurrent use.
type endpointCache struct {
	mu sync.Mutex // guards m
	m  map[string]cachedEndpoint
}

type cachedEndpoint struct {
	raw []byte
	se  storedEndpoint
}

func (c *endpointCache) decode(key, raw []byte) (cachedEndpoint, error) {
	if c != nil {
		c.mu.Lock()
		ce, ok := c.m[string(key)]
		c.mu.Unlock()
		if ok && bytes.Equal(ce.raw, raw) {
			return ce, nil
		}
	}
	var se storedEndpoint
	if err := json.Unmarshal(raw, &se); err != nil {
		return cachedEndpoint{}, fmt.Errorf("endpoint %s: %w", key, err)
	}
	return cachedEndpoint{raw: bytes.Clone(raw), se: se}, nil
}

// replace keeps exactly the endpoints of the latest load, so deleted ones
// do not accumulate.
func (c *endpointCache) replace(m map[string]cachedEndpoint) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.m = m
	c.mu.Unlock()
}

func countEndpoints(r store.Reader) (int, error) {
	all, err := loadEndpoints(r, nil)
	n := 0
	for _, se := range all {
		if !se.Deleted {
			n++
		}
	}
	return n, err
}

func checkLimit(limit int) (int, error) {
	if limit == 0 {
		return DefaultPageLimit, nil
	}
	if limit < 1 || limit > MaxPageLimit {
		return 0, fmt.Errorf("%w: %d (want 1..%d)", ErrBadLimit, limit, MaxPageLimit)
	}
	return limit, nil
}

// checkEvents validates and normalizes an events list: non-empty, every
// member a known kind or "*", duplicates dropped, and any list containing
// "*" becomes ["*"].
func checkEvents(events []string) ([]string, error) {
	if len(events) == 0 {
		return nil, fmt.Errorf("%w: events must list at least one kind; valid: %s", ErrInvalidEvents, kindNames())
	}
	if len(events) > 16 {
		return nil, fmt.Errorf("%w: events lists %d kinds, at most 16; valid: %s", ErrInvalidEvents, len(events), kindNames())
	}
	out := make([]string, 0, len(events))
	for i, k := range events {
		if k != AllEvents && !knownKind(k) {
			return nil, fmt.Errorf("%w: events[%d] %q is not an event kind; valid: %s", ErrInvalidEvents, i, clip(k), kindNames())
		}
		if k == AllEvents {
			return []string{AllEvents}, nil
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

// checkURL validates an endpoint url with the shared guard (package
// netguard) and returns it with scheme and host in lower case. See
// ErrInvalidURL. A host name (rather than an address) is checked again,
// address by address, at every connection the dispatcher makes, because
// what it resolves to can change.
func (e *Endpoints) checkURL(raw string) (string, error) {
	// Sandbox mode admits loopback, and http to it; never http elsewhere.
	u, err := netguard.Policy{AllowLoopback: e.allowLoopback}.CheckURL(raw)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	return u.String(), nil
}
