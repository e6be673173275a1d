package countersign

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/commerce"
	"github.com/countersign/countersign/console"
	"github.com/countersign/countersign/httpserver"
	"github.com/countersign/countersign/identity"
	"github.com/countersign/countersign/internal/lease"
	"github.com/countersign/countersign/internal/sealbox"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/netguard"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/product"
	"github.com/countersign/countersign/protocol"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/webhook"
	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/fetch"
)

// DefaultBaseURL is the base URL of a node whose Options name none.
const DefaultBaseURL = "http://127.0.0.1:8080"

// Node is the whole service over one store: the record, the money path
// with commerce and the protocol surface attached, the identity, the
// memory, the webhooks, the operator's authority and the agent edge, with
// the background work that keeps them (settlement reconciliation,
// approval expiry, sweeps, the protocol scheduler, webhook delivery,
// refusal summaries). Its domain services are for in-process use; its
// Handler is the full HTTP surface. It is safe for concurrent use. The
// store stays the caller's: Close does not close it.
type Node struct {
	opts    Options
	st      store.Store
	log     *audit.Log
	keys    *auth.Keys
	pay     *pay.Service
	shop    *commerce.Service
	paid402 *fetch.Service
	proto   *protocol.Service
	ident   *identity.Service
	mem     *memory.Service
	hooks   *webhook.Endpoints
	deliver *webhook.Dispatcher
	hub     *audit.Hub
	ops     *operator.Verifier
	refused *operator.RefusalJournal
	usage   *auth.Usage
	dpop    *auth.DPoPVerifier
	handler http.Handler

	stop      context.CancelFunc // ends the background work
	bg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Open builds the service on st: record, then the money path (with
// commerce and, inside its attachment, the identity and the protocol
// surface: see pay.Extension), then the memory, the webhooks and the HTTP
// surface, in that one order. It records a system.started entry,
// finishes the payments a crash left settling, and starts the background
// work, which Close ends. A failed Open releases what it acquired and
// leaves st open.
func Open(ctx context.Context, st store.Store, opts *Options) (n *Node, err error) {
	if st == nil {
		return nil, errors.New("countersign: Open needs a store")
	}
	o := opts.clone()
	if err := o.defaults(); err != nil {
		return nil, err
	}
	n = &Node{opts: o, st: st}
	// maybeCleanUp: whatever was acquired before a failure is released.
	// (The returns below set n to nil; the node is held here.)
	acquired := n
	defer func() {
		if err != nil {
			acquired.release()
		}
	}()

	auditOpts := &audit.Options{Origin: o.Origin, Logger: o.Logger, Now: o.Now}
	if o.Metrics != nil {
		auditOpts.Committed = o.Metrics.ObserveEntries
	}
	if n.log, err = audit.Open(ctx, st, o.RecordKey, auditOpts); err != nil {
		if errors.Is(err, audit.ErrKeyMismatch) {
			return nil, fmt.Errorf("countersign: the store holds another record than RecordKey signs "+
				"(open it with the record key it was created with, or use an empty store): %w", err)
		}
		return nil, fmt.Errorf("countersign: open record: %w", err)
	}
	if err := n.recordStart(ctx); err != nil {
		return nil, err
	}
	n.keys = auth.New(st, n.log, &auth.Options{Logger: o.Logger, Now: o.Now})
	if o.Provision != nil {
		if err := o.Provision(ctx, n.keys); err != nil {
			return nil, fmt.Errorf("countersign: provision: %w", err)
		}
	}
	if n.refused, err = operator.NewRefusalJournal(n.log, &operator.RefusalJournalOptions{
		Now: o.Now, Logger: o.Logger, RequestID: httpserver.RequestID,
	}); err != nil {
		return nil, err
	}
	if o.Metrics != nil {
		if err := o.Metrics.WatchRefusals(n.refused); err != nil {
			return nil, err
		}
	}
	if n.ops, err = operator.NewVerifier(st, o.OperatorKeys, o.BaseURL, &operator.VerifierOptions{
		Now: o.Now, Logger: o.Logger, OnRefused: n.refused.Refused,
	}); err != nil {
		return nil, fmt.Errorf("countersign: operator keys: %w", err)
	}
	mandates, err := pay.NewMandateVerifier(o.OperatorKeys, &pay.MandateVerifierOptions{Now: o.Now})
	if err != nil {
		return nil, fmt.Errorf("countersign: operator keys: %w", err)
	}

	if err := n.openMoneyPath(ctx, mandates); err != nil {
		return nil, err
	}

	if n.mem, err = memory.New(memory.Options{Store: st, Log: n.log, Mandates: mandates, SealKey: o.SealKey,
		UntrustedSourceKinds: o.Memory.UntrustedSourceKinds, Now: o.Now, Logger: o.Logger}); err != nil {
		return nil, fmt.Errorf("countersign: memory: %w", err)
	}
	n.hub = audit.NewHub(n.log, &audit.HubOptions{Logger: o.Logger})
	if n.hooks, err = webhook.NewEndpoints(st, n.log, &webhook.Options{SealKey: o.SealKey,
		AllowLoopbackHTTP: o.Sandbox, Now: o.Now, Logger: o.Logger}); err != nil {
		return nil, fmt.Errorf("countersign: webhooks: %w", err)
	}
	if n.deliver, err = n.newDispatcher(); err != nil {
		return nil, fmt.Errorf("countersign: webhook delivery: %w", err)
	}
	if o.Metrics != nil {
		if err := o.Metrics.WatchOutbox(n.deliver); err != nil {
			return nil, err
		}
		if err := o.Metrics.WatchHub(n.hub); err != nil {
			return nil, err
		}
	}
	if err := n.openHandler(); err != nil {
		return nil, err
	}

	// Payments a crash left settling finish before anyone asks about them.
	// On a store other processes share, whichever node holds the upkeep
	// lease does it (first thing on taking it): see startShared.
	if !isShared(st) {
		rep, err := n.pay.Reconcile(ctx)
		if err != nil {
			return nil, fmt.Errorf("countersign: reconcile: %w", err)
		}
		o.Logger.InfoContext(ctx, "reconciled payments left settling",
			slog.Int("settled", rep.Settled), slog.Int("failed", rep.Failed), slog.Int("stillSettling", rep.StillSettling))
	}
	if err := n.start(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// defaults fills the zero fields and checks the required ones.
func (o *Options) defaults() error {
	if len(o.RecordKey) != ed25519.PrivateKeySize {
		return errors.New("countersign: Options.RecordKey must be an Ed25519 private key")
	}
	if len(o.OperatorKeys) == 0 {
		return errors.New("countersign: Options.OperatorKeys needs at least one operator's public key")
	}
	if o.Origin == "" {
		sum := sha256.Sum256(o.RecordKey.Public().(ed25519.PublicKey))
		o.Origin = "countersign.local/record/" + hex.EncodeToString(sum[:4])
	}
	if o.BaseURL == "" {
		o.BaseURL = DefaultBaseURL
	}
	o.BaseURL = strings.TrimRight(o.BaseURL, "/")
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Replicas.LeaseTTL <= 0 {
		o.Replicas.LeaseTTL = 15 * time.Second
	}
	if o.Replicas.FollowEvery <= 0 {
		o.Replicas.FollowEvery = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.URLs == nil {
		o.URLs = &netguard.Policy{AllowLoopback: o.Sandbox, AllowHTTP: o.Sandbox}
	}
	if o.HTTPClient == nil {
		o.HTTPClient = o.URLs.Client(10 * time.Second)
	}
	if o.Identity.OperatorID == "" {
		o.Identity.OperatorID = "sandbox-operator"
	}
	if len(o.Identity.Keys) == 0 {
		// Derived from the record key, so that the same node reopened on
		// the same store is the same identity.
		seed := sha256.Sum256(append([]byte("countersign identity key v1\n"), o.RecordKey.Seed()...))
		o.Identity.Keys = []ed25519.PrivateKey{ed25519.NewKeyFromSeed(seed[:])}
	}
	if o.Identity.NewKey == nil {
		o.Identity.NewKey = func(context.Context) (ed25519.PrivateKey, error) {
			_, k, err := ed25519.GenerateKey(rand.Reader)
			return k, err
		}
	}
	if o.Protocol.ScheduleEvery <= 0 {
		o.Protocol.ScheduleEvery = 15 * time.Second
	}
	return nil
}

// recordStart appends the system.started entry: a restart can change how
// the gate decides (configuration, keys), so it belongs in the record like
// any other state change: when a node started, under which origin and
// base URL, in which mode, with the embedding program's StartData.
func (n *Node) recordStart(ctx context.Context) error {
	d := map[string]any{}
	for k, v := range n.opts.StartData {
		d[k] = v
	}
	d["sandbox"] = n.opts.Sandbox
	d["baseUrl"] = n.opts.BaseURL
	d["origin"] = n.opts.Origin
	data, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("countersign: Options.StartData: %w", err)
	}
	err = n.log.Update(ctx, func(txn store.Txn) error {
		_, err := n.log.Append(txn, audit.Record{Type: "system.started",
			Actor: audit.Actor{Kind: "system", ID: "countersign-serve"}, Data: data})
		return err
	})
	if err != nil {
		return fmt.Errorf("countersign: record start: %w", err)
	}
	return nil
}

// openMoneyPath builds the money path with its extensions: commerce (its
// rails, and purchases paying through it), then the identity (which
// discloses the money path's policy) and the protocol surface (which
// signs with that identity and keeps its books on the money path's
// intents). The identity and the surface need the money path and the
// money path needs the surface's books, so both are built inside the
// attachment (pay.Extension); nothing is wired after.
func (n *Node) openMoneyPath(ctx context.Context, mandates *pay.MandateVerifier) error {
	o := n.opts
	rails := &settle.Registry{}
	for _, r := range o.Rails {
		if err := rails.Register(r); err != nil {
			return fmt.Errorf("countersign: rails: %w", err)
		}
	}
	var err error
	if n.shop, err = commerce.New(commerce.Options{Store: n.st, Log: n.log, Logger: o.Logger, Now: o.Now,
		Merchants: o.Merchants, SealKey: o.SealKey, URLs: *o.URLs, Connect: o.Connect}); err != nil {
		return fmt.Errorf("countersign: commerce: %w", err)
	}
	if n.paid402, err = fetch.New(fetch.Options{Store: n.st, Log: n.log, Wallet: o.X402.Wallet,
		Policy: x402.Policy{Assets: o.X402.Assets, MaxTimeout: o.X402.MaxTimeout}, URLs: *o.URLs, Chain: o.X402.Chain,
		Finality: o.X402.Finality, ClockSkew: o.X402.ClockSkew, Timeout: o.Pay.RailTimeout, Now: o.Now, Logger: o.Logger}); err != nil {
		return fmt.Errorf("countersign: x402: %w", err)
	}
	model := product.Model()
	surfaces := pay.ExtensionFunc(func(svc *pay.Service, books *pay.Books) (pay.Attachment, error) {
		id := o.Identity
		src := identity.Sources{
			Policy: svc.Policy, Mandates: svc.Mandates, Operations: model.Operations(),
			Operator: identity.OperatorFacts{ID: id.OperatorID, Keys: o.OperatorKeys,
				DeniabilityBoundary: id.DeniabilityBoundary},
			RecordOrigin: o.Origin, SystemPrompt: id.SystemPrompt, PromptVersion: id.PromptVersion,
		}
		newKey, loadKey, err := n.identityKeys(id.NewKey)
		if err != nil {
			return pay.Attachment{}, err
		}
		if n.ident, err = identity.Open(ctx, identity.Options{
			Store: n.st, Log: n.log, Keys: id.Keys, NewKey: newKey, LoadKey: loadKey, Shared: isShared(n.st), SharedRefresh: o.Replicas.FollowEvery,
			Facts: src.Facts, Policy: id.Policy,
			TTL: id.TTL, HexAgentID: id.HexAgentID, HTTPClient: o.HTTPClient, URLs: *o.URLs, Directories: []identity.Directory{merchantDirectory{n.shop}},
			BaseURL: o.BaseURL, Now: o.Now, Logger: o.Logger,
		}); err != nil {
			return pay.Attachment{}, fmt.Errorf("identity: %w", err)
		}
		return protocol.Extension(protocol.Options{Store: n.st, Log: n.log, Mandates: mandates, Now: o.Now,
			Logger: o.Logger, PolicyDigest: n.ident.PolicyDigest, Identity: n.ident,
			Evidence: o.Protocol.Evidence, Insurance: o.Protocol.Insurance, BaseURL: o.BaseURL}, &n.proto).Attach(svc, books)
	})
	origin := o.Origin
	if n.pay, err = pay.New(pay.Options{
		Store: n.st, Log: n.log, Rails: rails, Mandates: mandates, Now: o.Now, Logger: o.Logger, BaseURL: o.BaseURL,
		DenyPayees: o.Pay.DenyPayees, DenyAgents: o.Pay.DenyAgents, BreakerAfter: o.Pay.BreakerAfter,
		ApprovalWindow: o.Pay.ApprovalWindow, IdempotencyRetention: o.Pay.IdempotencyRetention,
		RailTimeout: o.Pay.RailTimeout, SharedStore: isShared(n.st),
		Extensions: []pay.Extension{n.shop, n.paid402, surfaces},
		// Every decision records the digest of the policy the identity
		// discloses: the constitution of this very policy.
		PolicyDigest: func(p pay.Policy) string { return identity.GateConstitution(p, origin).Digest },
	}); err != nil {
		return fmt.Errorf("countersign: money path: %w", err)
	}
	return nil
}

// isShared reports whether st is a store other processes may share (it
// tells this process of their commits): the node then runs as one replica
// of several (docs/design/replicas.md).
func isShared(st store.Store) bool {
	_, ok := st.(store.Watcher)
	return ok
}

// merchantDirectory resolves a registered merchant as a counterparty.
type merchantDirectory struct{ svc *commerce.Service }

func (d merchantDirectory) Resolve(_ context.Context, ref string) (identity.Counterparty, bool, error) {
	m, err := d.svc.Merchant(ref)
	if errors.Is(err, commerce.ErrMerchantNotFound) {
		return identity.Counterparty{}, false, nil
	}
	if err != nil {
		return identity.Counterparty{}, false, err
	}
	return identity.Counterparty{ID: ref, Kind: "merchant", Rails: []string{m.Protocol()},
		Capabilities: []string{"checkout:" + m.Protocol() + "@" + m.Version()}}, true, nil
}

// keySealedIdentity is where the identity keys of a store several nodes
// share are kept, sealed (+ the public key in hex).
const keySealedIdentity = "node/identity-key/"

// identityKeys returns the identity's NewKey and LoadKey. On a store
// several nodes share, with a SealKey, each key a rotation makes is also
// sealed into the store, so that every node can load the key another
// rotated to (identity.Options.LoadKey); without a SealKey, each node
// must be given the new key (Options.Identity.Keys) and refuses to sign
// until it is.
func (n *Node) identityKeys(newKey func(context.Context) (ed25519.PrivateKey, error)) (
	func(context.Context) (ed25519.PrivateKey, error), func(context.Context, ed25519.PublicKey) (ed25519.PrivateKey, error), error) {
	if !isShared(n.st) || n.opts.SealKey == nil {
		return newKey, nil, nil
	}
	box, err := sealbox.New(n.opts.SealKey, nil, "countersign identity key v1")
	if err != nil {
		return nil, nil, fmt.Errorf("countersign: identity keys: %w", err)
	}
	seal := func(ctx context.Context) (ed25519.PrivateKey, error) {
		k, err := newKey(ctx)
		if err != nil {
			return nil, err
		}
		pub := hex.EncodeToString(k.Public().(ed25519.PublicKey))
		sealed, err := box.Seal(pub, hex.EncodeToString(k.Seed()), rand.Reader)
		if err != nil {
			return nil, err
		}
		// Before the rotation commits: a rotation that then fails leaves
		// a sealed key nobody uses, never a chain to a key nobody holds.
		err = n.st.Update(ctx, func(txn store.Txn) error { return txn.Set([]byte(keySealedIdentity+pub), []byte(sealed)) })
		return k, err
	}
	load := func(ctx context.Context, pub ed25519.PublicKey) (ed25519.PrivateKey, error) {
		id := hex.EncodeToString(pub)
		var sealed []byte
		if err := n.st.View(ctx, func(r store.Reader) (err error) {
			sealed, err = r.Get([]byte(keySealedIdentity + id))
			return err
		}); err != nil {
			return nil, err
		}
		seed, err := box.Open(id, string(sealed))
		if err != nil {
			return nil, err
		}
		b, err := hex.DecodeString(seed)
		if err != nil || len(b) != ed25519.SeedSize {
			return nil, errors.New("countersign: a sealed identity key is malformed")
		}
		return ed25519.NewKeyFromSeed(b), nil
	}
	return seal, load, nil
}

// rotatingIdentity calls Options.Identity.Rotated after each rotation.
type rotatingIdentity struct {
	*identity.Service
	rotated func(*identity.Service)
}

func (r rotatingIdentity) Rotate(ctx context.Context, call identity.OperatorCall) (identity.Rotation, error) {
	rot, err := r.Service.Rotate(ctx, call)
	if err == nil && r.rotated != nil {
		r.rotated(r.Service)
	}
	return rot, err
}

// openHandler builds the HTTP surface over the node.
func (n *Node) openHandler() error {
	o := n.opts
	limiter, err := auth.NewLimiter(&auth.LimiterOptions{Rate: o.RateLimit.AgentRate, Burst: o.RateLimit.AgentBurst, Now: o.Now})
	if err != nil {
		return fmt.Errorf("countersign: agent rate limit: %w", err)
	}
	addrLimiter, err := auth.NewLimiter(&auth.LimiterOptions{Rate: o.RateLimit.AddrRate, Burst: o.RateLimit.AddrBurst, Now: o.Now})
	if err != nil {
		return fmt.Errorf("countersign: address rate limit: %w", err)
	}
	n.usage = auth.NewUsage(n.st, &auth.UsageOptions{Logger: o.Logger, Now: o.Now})
	n.dpop = auth.NewDPoPVerifier(n.st, &auth.DPoPOptions{Logger: o.Logger, Now: o.Now})
	var ident httpserver.Identity = n.ident
	if o.Identity.Rotated != nil {
		ident = rotatingIdentity{Service: n.ident, rotated: o.Identity.Rotated}
	}
	cfg := httpserver.Config{
		BaseURL: o.BaseURL, Sandbox: o.Sandbox, Logger: o.Logger, Model: product.Model(), Now: o.Now,
		Audit: n.log, AuditHub: n.hub, Webhooks: n.hooks, WebhookDeliveries: n.deliver,
		Authenticator: httpserver.AgentAuthenticator{Keys: n.keys, DPoP: n.dpop, BaseURL: o.BaseURL},
		Limiter:       limiter, AddrLimiter: addrLimiter, Usage: n.usage,
		Operators: httpserver.OperatorAuth{Verifier: n.ops},
		Payments:  n.pay, Operations: n.pay, AgentKeys: n.keys,
		Identity: ident, Commerce: n.shop, X402: n.paid402, Memory: n.mem, Protocol: n.proto,
	}
	if o.Metrics != nil {
		cfg.Metrics = o.Metrics
	}
	api, err := httpserver.New(cfg)
	if err != nil {
		return fmt.Errorf("countersign: HTTP surface: %w", err)
	}
	page, err := console.Handler(console.Config{BaseURL: o.BaseURL, RecordKey: n.log.VerifierKey(), Sandbox: o.Sandbox})
	if err != nil {
		return fmt.Errorf("countersign: operator console: %w", err)
	}
	n.handler = console.Beside(page, api)
	return nil
}

// start runs the background work: webhook delivery, the minute's upkeep
// and the protocol scheduler; on a store other processes share, under
// leases (see startShared).
func (n *Node) start(ctx context.Context) error {
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	n.stop = stop
	if w, ok := n.st.(store.Watcher); ok {
		return n.startShared(bg, w)
	}
	if err := n.deliver.Start(bg); err != nil {
		return fmt.Errorf("countersign: webhook delivery: %w", err)
	}
	n.bg.Add(2)
	go func() {
		defer n.bg.Done()
		n.every(bg, operator.DefaultRefusalInterval, func(ctx context.Context) {
			n.upkeep(ctx)
			n.flushRefusals(ctx)
		})
	}()
	go func() {
		defer n.bg.Done()
		// Holds, meters, sessions and stakes due while the node was down
		// are swept at once, then every ScheduleEvery.
		n.proto.Run(bg, n.opts.Protocol.ScheduleEvery)
	}()
	return nil
}

// startShared runs the background work on a store several nodes share
// (store.Watcher): each piece of shared work — the upkeep, the protocol
// scheduler, webhook delivery — runs on one node at a time, the holder of
// its lease in the store, and moves to another node when the holder stops
// or dies (after Options.LeaseTTL). What is the node's own — summarising
// the operator requests it refused, and waking its record streams and
// webhook tail when another node commits — runs on every node.
func (n *Node) startShared(bg context.Context, w store.Watcher) error {
	var id [12]byte
	if _, err := rand.Read(id[:]); err != nil {
		return fmt.Errorf("countersign: lease holder id: %w", err)
	}
	holder := hex.EncodeToString(id[:])
	works := []struct {
		name string
		work func(context.Context)
	}{
		// The upkeep starts with the reconciliation a single node does in
		// Open: payments a crash left settling.
		{"upkeep", func(ctx context.Context) { n.every(ctx, operator.DefaultRefusalInterval, n.upkeep) }},
		{"protocol-scheduler", func(ctx context.Context) { n.proto.Run(ctx, n.opts.Protocol.ScheduleEvery) }},
		{"webhook-delivery", n.deliverUnderLease},
	}
	for _, wk := range works {
		l, err := lease.New(n.st, wk.name, holder, &lease.Options{TTL: n.opts.Replicas.LeaseTTL, Logger: n.opts.Logger})
		if err != nil {
			return fmt.Errorf("countersign: %w", err)
		}
		n.bg.Add(1)
		go func() {
			defer n.bg.Done()
			l.Run(bg, wk.work, nil)
		}()
	}
	n.bg.Add(2)
	go func() {
		defer n.bg.Done()
		n.every(bg, operator.DefaultRefusalInterval, n.flushRefusals)
	}()
	go func() {
		defer n.bg.Done()
		n.follow(bg, w)
	}()
	return nil
}

// follow wakes the record's followers (the live streams, the webhook
// tail) when another node commits: on each signal of the store, and every
// FollowEvery in case a signal was lost. The followers read the store
// itself, the truth; the signal only says when to look.
func (n *Node) follow(ctx context.Context, w store.Watcher) {
	changes := w.Watch(ctx)
	t := time.NewTicker(n.opts.Replicas.FollowEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-changes:
			if !ok {
				changes = nil // the store closed; the ticker goes on until ctx ends
			}
		case <-t.C:
		}
		n.log.Notify()
	}
}

// deliverUnderLease runs a webhook dispatcher of its own while the node
// holds the delivery lease: a dispatcher's queues and backoff are in its
// memory, so each holder starts from the store's outbox afresh. The
// node's own dispatcher (n.deliver) answers the operator's delivery
// routes and is never started here.
func (n *Node) deliverUnderLease(ctx context.Context) {
	d, err := n.newDispatcher()
	if err == nil {
		err = d.Start(ctx)
	}
	if err != nil {
		n.opts.Logger.ErrorContext(ctx, "webhook delivery", slog.Any("error", err))
		return
	}
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := d.Close(cctx); err != nil {
		n.opts.Logger.WarnContext(ctx, "webhook delivery", slog.Any("error", err))
	}
}

// every runs fn now, then every d until ctx ends.
func (n *Node) every(ctx context.Context, d time.Duration, fn func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		fn(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// upkeep is the minute's upkeep: finishing payments and refunds whose
// rail gave no definite answer and no client retried, expiring held
// payments past their approval window, and forgetting replay caches,
// usage, nonces and idempotency records past their retention.
func (n *Node) upkeep(ctx context.Context) {
	rep, err := n.pay.Reconcile(ctx)
	n.fault(ctx, "periodic reconcile", err)
	if err == nil && rep.Settled+rep.Failed+rep.StillSettling > 0 {
		n.opts.Logger.InfoContext(ctx, "reconciled payments left settling",
			slog.Int("settled", rep.Settled), slog.Int("failed", rep.Failed), slog.Int("stillSettling", rep.StillSettling))
	}
	_, err = n.pay.ExpireApprovals(ctx)
	n.fault(ctx, "approval expiry", err)
	_, err = n.dpop.SweepDPoP(ctx)
	n.fault(ctx, "DPoP replay-cache sweep", err)
	_, err = n.usage.SweepUsage(ctx)
	n.fault(ctx, "usage sweep", err)
	_, err = n.ops.SweepNonces(ctx)
	n.fault(ctx, "operator nonce sweep", err)
	_, err = n.pay.SweepIdempotency(ctx)
	n.fault(ctx, "idempotency sweep", err)
}

// flushRefusals summarises the operator requests this node refused.
func (n *Node) flushRefusals(ctx context.Context) {
	_, err := n.refused.Flush(ctx)
	n.fault(ctx, "summarising refused operator requests", err)
}

func (n *Node) fault(ctx context.Context, what string, err error) {
	if err != nil && ctx.Err() == nil {
		n.opts.Logger.ErrorContext(ctx, what, slog.Any("error", err))
	}
}

// Close drains the node, in this order: record streams end (a stream
// never goes idle by itself); the background work stops (upkeep, the
// protocol scheduler); webhook deliveries in flight finish or stay in the
// outbox for the next open; the usage counts and refusal counts still in
// memory are written; memory erasures finish their physical purge. Stop
// serving the Handler first (http.Server.Shutdown). The store is the
// caller's and stays open. Close is idempotent; ctx bounds the drain.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() { n.closeErr = n.close(ctx) })
	return n.closeErr
}

func (n *Node) close(ctx context.Context) error {
	if n.hub != nil {
		n.hub.Close()
	}
	if n.stop != nil {
		n.stop()
	}
	n.bg.Wait()
	var errs []error
	if n.deliver != nil {
		if err := n.deliver.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("webhook delivery: %w", err))
		}
	}
	if n.usage != nil {
		if err := n.usage.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("usage counts: %w", err))
		}
	}
	if n.refused != nil {
		if err := n.refused.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("refusal summary: %w", err))
		}
	}
	if n.mem != nil {
		n.mem.WaitPurge()
	}
	if len(errs) > 0 {
		return fmt.Errorf("countersign: close: %w", errors.Join(errs...))
	}
	return nil
}

// newDispatcher returns a webhook dispatcher over the node's endpoints.
func (n *Node) newDispatcher() (*webhook.Dispatcher, error) {
	o := n.opts
	return webhook.NewDispatcher(n.st, n.log, n.hooks, &webhook.DispatcherOptions{
		Schedule: o.Webhook.Schedule, OnDelivery: o.Webhook.OnDelivery, AllowLoopback: o.Sandbox, Now: o.Now, Logger: o.Logger,
	})
}

// release is Close for a half-open node: it drains what was started.
func (n *Node) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = n.close(ctx)
}

// Handler returns the full HTTP surface over the node: the routes of
// /openapi.json, with the agent edge and the operator's authority.
func (n *Node) Handler() http.Handler { return n.handler }

// Store returns the store the node runs on.
func (n *Node) Store() store.Store { return n.st }

// Record returns the signed record.
func (n *Node) Record() *audit.Log { return n.log }

// Stream returns the hub of the live record stream.
func (n *Node) Stream() *audit.Hub { return n.hub }

// Pay returns the money path.
func (n *Node) Pay() *pay.Service { return n.pay }

// Commerce returns quoting and buying from merchants.
func (n *Node) Commerce() *commerce.Service { return n.shop }

// X402 returns paying for HTTP resources that ask for x402 payment; see
// also [Node.X402Transport].
func (n *Node) X402() *fetch.Service { return n.paid402 }

// Protocol returns the protocol surface.
func (n *Node) Protocol() *protocol.Service { return n.proto }

// Identity returns the node's ADP identity and counterparty verification.
func (n *Node) Identity() *identity.Service { return n.ident }

// Memory returns the bi-temporal memory.
func (n *Node) Memory() *memory.Service { return n.mem }

// Webhooks returns the webhook endpoints.
func (n *Node) Webhooks() *webhook.Endpoints { return n.hooks }

// AgentKeys returns the agents' credentials.
func (n *Node) AgentKeys() *auth.Keys { return n.keys }

// Operators returns the verifier of operator signatures.
func (n *Node) Operators() *operator.Verifier { return n.ops }

// Refusals returns the journal of refused operator requests.
func (n *Node) Refusals() *operator.RefusalJournal { return n.refused }

// X402Transport returns an http.RoundTripper that pays the x402 resources
// it is sent to through this node's gate, as agent a: a Go agent runtime's
// own http.Client then pays 402s under the same instruction, decision,
// record and settlement as POST /x402/fetch (see fetch.Transport).
func (n *Node) X402Transport(a fetch.Agent) http.RoundTripper { return n.paid402.Transport(a) }
