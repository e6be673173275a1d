package httpserver_test

// The route × credential matrix: the security acceptance test of operator
// authority (DESIGN §5, §6). It runs against the real stack the reference
// server wires (cmd/countersign newServer): a signed record on a store,
// agent keys, the operator verifier, the money path and its sandbox rail.
// Only the clock is fixed, and requests are served in process.
//
// The list of routes is never written here: every operation of
// product.Model() is exercised according to its credential class, and the
// requests are built from the model (method, path pattern, parameter and
// body types). A new operation either runs through the matrix or fails it
// with a message that says which table below needs an entry.

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/commerce"
	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/httpserver"
	"github.com/countersign/countersign/identity"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/product"
	"github.com/countersign/countersign/protocol"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/pebblestore"
	"github.com/countersign/countersign/webhook"
	"github.com/countersign/countersign/x402/fetch"
)

const (
	matrixBase      = "https://countersign.test"
	matrixRationale = "matrix test: routine operator action"
	// matrixWindowPlus is one second past the verifier's default window.
	matrixWindowPlus = operator.DefaultWindow + time.Second
)

// matrixClock is the clock of every component. It never moves, so a
// timestamp is stale exactly when a signer's clock is set off it.
func matrixClock() time.Time { return time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC) }

// matrixKeys are the long-lived keys of a deployment: the record key and
// the two trusted operator keys, one per algorithm the scheme allows.
type matrixKeys struct {
	record   ed25519.PrivateKey
	identity ed25519.PrivateKey
	ops      []matrixOpKey
}

// matrixOpKey is one trusted operator key.
type matrixOpKey struct {
	kid    string
	alg    string // subtest suffix: "eddsa" or "es256"
	priv   crypto.Signer
	signer func(now func() time.Time, base string) (*operator.Signer, error)
	// forge signs as kid with a key the server does not trust, of the
	// same algorithm.
	forge func(now func() time.Time) (*operator.Signer, error)
}

func newMatrixKeys(t testing.TB) *matrixKeys {
	t.Helper()
	_, rec, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, edForger, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecForger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, ident, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &matrixKeys{record: rec, identity: ident, ops: []matrixOpKey{
		{
			kid: "op-ed", alg: "eddsa", priv: ed,
			signer: func(now func() time.Time, base string) (*operator.Signer, error) {
				return operator.NewSigner(ed, "op-ed", base, &operator.SignerOptions{Now: now})
			},
			forge: func(now func() time.Time) (*operator.Signer, error) {
				return operator.NewSigner(edForger, "op-ed", matrixBase, &operator.SignerOptions{Now: now})
			},
		},
		{
			kid: "op-p256", alg: "es256", priv: ec,
			signer: func(now func() time.Time, base string) (*operator.Signer, error) {
				return operator.NewSigner(ec, "op-p256", base, &operator.SignerOptions{Now: now})
			},
			forge: func(now func() time.Time) (*operator.Signer, error) {
				return operator.NewSigner(ecForger, "op-p256", matrixBase, &operator.SignerOptions{Now: now})
			},
		},
	}}
}

// trusted is the server's operator key set: public keys only.
func (k *matrixKeys) trusted() []operator.PublicKey {
	out := make([]operator.PublicKey, len(k.ops))
	for i, o := range k.ops {
		out[i] = operator.PublicKey{KeyID: o.kid, Public: o.priv.Public()}
	}
	return out
}

// refusal is one call of the verifier's OnRefused hook.
type refusal struct {
	op     string
	reason operator.Reason
	keyID  string
}

// refusalLog counts OnRefused calls. The reference server appends an
// operator.refused record entry there; this test records the call instead,
// so that "no state change" can be checked on the whole store.
type refusalLog struct {
	mu   sync.Mutex // guards list: the hook runs on request goroutines
	list []refusal
}

func (l *refusalLog) add(r refusal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, r)
}

func (l *refusalLog) since(n int) []refusal {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.list[n:])
}

func (l *refusalLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.list)
}

// matrixStack is one server process over a store, wired as
// cmd/countersign newServer wires it.
type matrixStack struct {
	h        http.Handler
	st       store.Store
	log      *audit.Log
	keys     *auth.Keys
	webhooks *webhook.Endpoints
	memory   *memory.Service
	protocol *protocol.Service
	refusals *refusalLog
	rail     *fake.Rail // the sandbox card rail, whose ledger says what moved
}

func newMatrixStack(t testing.TB, st store.Store, k *matrixKeys) *matrixStack {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	lg, err := audit.Open(t.Context(), st, k.record, &audit.Options{Now: matrixClock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	keys := auth.New(st, lg, &auth.Options{Now: matrixClock, Logger: quiet})
	refusals := &refusalLog{}
	verifier, err := operator.NewVerifier(st, k.trusted(), matrixBase, &operator.VerifierOptions{
		Now: matrixClock, Logger: quiet,
		OnRefused: func(_ context.Context, _ *http.Request, op string, reason operator.Reason, keyID string) {
			refusals.add(refusal{op: op, reason: reason, keyID: keyID})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	mandates, err := pay.NewMandateVerifier(k.trusted(), &pay.MandateVerifierOptions{Now: matrixClock})
	if err != nil {
		t.Fatal(err)
	}
	rail, err := fake.New(fake.SandboxCard, &fake.Options{Store: st, Now: matrixClock})
	if err != nil {
		t.Fatal(err)
	}
	rails := &settle.Registry{}
	if err := rails.Register(rail); err != nil {
		t.Fatal(err)
	}
	endpoints, err := webhook.NewEndpoints(st, lg, &webhook.Options{Now: matrixClock, Logger: quiet, SealKey: make([]byte, webhook.SealKeySize)})
	if err != nil {
		t.Fatal(err)
	}
	// Not started: the matrix drives its listing and retry, never delivery.
	dispatcher, err := webhook.NewDispatcher(st, lg, endpoints, &webhook.DispatcherOptions{Now: matrixClock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	model := product.Model()
	// No merchant is registered: the matrix checks credentials, and a
	// purchase past them answers 404 commerce.merchant_not_found.
	shop, err := commerce.New(commerce.Options{Store: st, Log: lg, Now: matrixClock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// No wallet: a fetch past the credentials checks its URL and asks the
	// resource, which does not resolve here.
	paid402, err := fetch.New(fetch.Options{Store: st, Log: lg, Now: matrixClock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// The money path with commerce and the protocol surface attached. The
	// identity needs the money path (it discloses its policy) and the
	// surface needs the identity (it signs our negotiation offers), so
	// both are built inside the attach, as countersign.Open does. The
	// surface's scheduler is not run: the matrix compares store digests.
	var (
		ident *identity.Service
		proto *protocol.Service
	)
	surfaces := pay.ExtensionFunc(func(svc *pay.Service, books *pay.Books) (pay.Attachment, error) {
		var err error
		ident, err = identity.Open(t.Context(), identity.Options{
			Store: st, Log: lg, Keys: []ed25519.PrivateKey{k.identity}, Now: matrixClock, Logger: quiet,
			NewKey: func(context.Context) (ed25519.PrivateKey, error) {
				_, k, err := ed25519.GenerateKey(rand.Reader)
				return k, err
			},
			Facts: identity.Sources{Policy: svc.Policy, Mandates: svc.Mandates, Operations: model.Operations(),
				Operator: identity.OperatorFacts{ID: "matrix-operator", Keys: k.trusted()}}.Facts,
		})
		if err != nil {
			return pay.Attachment{}, err
		}
		return protocol.Extension(protocol.Options{Store: st, Log: lg, Mandates: mandates, Now: matrixClock, Logger: quiet,
			PolicyDigest: ident.PolicyDigest, Identity: ident, BaseURL: matrixBase}, &proto).Attach(svc, books)
	})
	svc, err := pay.New(pay.Options{
		Store: st, Log: lg, Rails: rails, Mandates: mandates, Now: matrixClock, Logger: quiet, BaseURL: matrixBase,
		Extensions: []pay.Extension{shop, paid402, surfaces},
	})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := memory.New(memory.Options{Store: st, Log: lg, Mandates: mandates, Now: matrixClock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpserver.New(httpserver.Config{
		BaseURL: matrixBase,
		Logger:  quiet,
		Model:   model,
		Now:     matrixClock,
		Audit:   lg,
		Authenticator: httpserver.AgentAuthenticator{Keys: keys, BaseURL: matrixBase,
			DPoP: auth.NewDPoPVerifier(st, &auth.DPoPOptions{Now: matrixClock, Logger: quiet})},
		Operators:         httpserver.OperatorAuth{Verifier: verifier},
		Limiter:           matrixLimiter(t),
		AddrLimiter:       matrixLimiter(t),
		Usage:             matrixUsage(t, st),
		Webhooks:          endpoints,
		WebhookDeliveries: dispatcher,
		Payments:          svc,
		Operations:        svc,
		AgentKeys:         keys,
		Identity:          ident,
		Commerce:          shop,
		X402:              paid402,
		Memory:            mem,
		Protocol:          proto,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &matrixStack{h: httpserver.ContractChecked(t, h), st: st, log: lg, keys: keys, webhooks: endpoints, memory: mem, protocol: proto, refusals: refusals, rail: rail}
}

// wire is a request as it goes on the wire. It is a value so that one
// request can be sent twice (a replay) or signed in one shape and sent in
// another (a tamper).
type wire struct {
	method string
	path   string // escaped
	query  string // raw, "" for none
	body   []byte // nil for an operation without a body
	header http.Header
}

func (w wire) target() string {
	if w.query == "" {
		return w.path
	}
	return w.path + "?" + w.query
}

// with returns w with the header name set to value (a copy: w is shared).
func (w wire) with(name, value string) wire {
	w.header = w.header.Clone()
	if w.header == nil {
		w.header = http.Header{}
	}
	w.header.Set(name, value)
	return w
}

func (w wire) request(t testing.TB) *http.Request {
	t.Helper()
	var body io.Reader
	if w.body != nil {
		body = bytes.NewReader(w.body)
	}
	r := httptest.NewRequestWithContext(t.Context(), w.method, w.target(), body)
	for k, vs := range w.header {
		r.Header[k] = slices.Clone(vs)
	}
	return r
}

// response is what came back.
type response struct {
	status int
	media  string
	body   []byte
	// The problem members the matrix checks; zero for a success.
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

func (s *matrixStack) send(t testing.TB, w wire) response {
	t.Helper()
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, w.request(t))
	res := response{status: rec.Code, media: rec.Header().Get("Content-Type"), body: rec.Body.Bytes()}
	if res.media == contract.MediaProblem {
		if err := json.Unmarshal(res.body, &res); err != nil {
			t.Fatalf("%s %s: problem does not decode: %v\n%s", w.method, w.target(), err, res.body)
		}
	}
	return res
}

// storeState identifies every byte of state: the record's size (for the
// reader of a failure) and a digest of every key and value in the store,
// so "no state change" covers nonces, keys, intents and controls too, not
// only the record.
type storeState struct {
	size   uint64
	keys   int
	digest [sha256.Size]byte
}

func (s *matrixStack) state(t testing.TB) storeState {
	t.Helper()
	size, err := s.log.Size(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var st storeState
	err = s.st.View(t.Context(), func(r store.Reader) error {
		h := sha256.New()
		var n [8]byte
		st.keys = 0
		it := r.Iterate(nil, nil, false)
		for it.Next() {
			for _, b := range [][]byte{it.Key(), it.Value()} {
				binary.BigEndian.PutUint64(n[:], uint64(len(b)))
				h.Write(n[:])
				h.Write(b)
			}
			st.keys++
		}
		copy(st.digest[:], h.Sum(nil))
		return it.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	st.size = size
	return st
}

// matrixFixture is a stack with the state the routes need to do real
// work: agent keys in several conditions, a mandate, a settled and a held
// payment.
type matrixFixture struct {
	*matrixStack
	keys *matrixKeys

	agentKey    ed25519.PrivateKey
	agentHex    string
	mandate     string
	mandateID   string
	memMandate  string // a memory mandate over namespace "matrix" with every right
	cred        string // the agent credential every agent route is called with
	keyID       string // its key id
	victimKeyID string // the key the revoke route revokes
	endpointID  string // a webhook endpoint the routes address
	victimEPID  string // the endpoint the delete route deletes
	revokedCred string
	dpopCred    string // a DPoP-bound key presented as a bearer token
	otherCred   string // a valid credential of another agent key, acting for another agent
	settled     string // intent ids
	held        string
	challenge   string
	declineHeld string       // a second held payment, for operator.decline (approve takes held)
	idem        int          // idempotency keys minted so far
	seq         atomic.Int64 // counterparty ids minted so far

	// Protocol objects, made through the Go API by the fixture's key.
	captureHold string // held: hold.capture captures part of it
	releaseHold string // held: hold.release releases it
	meter       string // open, unit price 1
	session     string // open
	stake       string // locked (the clock never moves: release answers stake.locked)
	proof       json.RawMessage

	// Part 2: a counterparty whose key the fixture holds, and what the
	// positive controls of terms … claim act on.
	cpKey        ed25519.PrivateKey
	cpHex        string
	terms        string // proposed: terms.accept accepts it with termsSig
	termsSig     string
	negotiation  string // our offer: negotiate.counter and negotiate.get
	negAccept    string // our offer: negotiate.accept with negAcceptSig
	negAcceptSig string
	negReject    string // open: negotiate.reject
	obligation   string // floor sign, awaiting evidence: clearing stays pending
	cancelObl    string // floor self, no evidence: obligation.cancel
	evidence     string // self evidence about obligation
	delivery     string // recorded, on a cleared obligation
	policy       string // active, on a cleared obligation disputed as dispute
	dispute      string // open; its respondent is cpHex
	claim        string // filed on another policy and dispute
}

func newMatrixFixture(t *testing.T) *matrixFixture {
	t.Helper()
	k := newMatrixKeys(t)
	fx := &matrixFixture{matrixStack: newMatrixStack(t, memstore.New(nil), k), keys: k}
	ctx := t.Context()

	pub, agentKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	fx.agentKey, fx.agentHex = agentKey, hex.EncodeToString(pub)
	seed := audit.Actor{Kind: "operator", ID: "op-ed"}
	issue := func(name, jkt string) auth.Issued {
		iss, err := fx.matrixStack.keys.Create(ctx, auth.CreateRequest{Name: name, AgentIDs: []string{fx.agentHex}, JKT: jkt}, seed, "req_seed")
		if err != nil {
			t.Fatal(err)
		}
		return iss
	}
	main := issue("matrix-agent", "")
	fx.cred, fx.keyID = main.Credential, main.ID
	fx.victimKeyID = issue("matrix-victim", "").ID
	revoked := issue("matrix-revoked", "")
	if _, err := fx.matrixStack.keys.Revoke(ctx, revoked.ID, seed, "req_seed", "retired before the matrix runs"); err != nil {
		t.Fatal(err)
	}
	fx.revokedCred = revoked.Credential
	for _, id := range []*string{&fx.endpointID, &fx.victimEPID} {
		c, err := fx.matrixStack.webhooks.Create(ctx, webhook.CreateRequest{URL: "https://hooks.example/in", Events: []string{"*"}},
			seed, "req_seed", "seed endpoint for the matrix")
		if err != nil {
			t.Fatal(err)
		}
		*id = c.ID
	}
	otherPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, err := fx.matrixStack.keys.Create(ctx, auth.CreateRequest{Name: "matrix-other-agent", AgentIDs: []string{hex.EncodeToString(otherPub)}}, seed, "req_seed")
	if err != nil {
		t.Fatal(err)
	}
	fx.otherCred = other.Credential
	thumb := sha256.Sum256([]byte("a DPoP key"))
	fx.dpopCred = issue("matrix-dpop", base64.RawURLEncoding.EncodeToString(thumb[:])).Credential

	fx.mandateID = "mdt-matrix"
	fx.mandate, err = pay.SignMandate(pay.MandateClaims{
		ID: fx.mandateID, Agent: fx.agentHex,
		IssuedAt: matrixClock().Add(-time.Hour), ExpiresAt: matrixClock().Add(30 * 24 * time.Hour),
		Payees: []string{"*"}, Currency: "USD", PerTxCapMinor: 50_000, PerPeriodCapMinor: 1_000_000,
		Period: gate.Day, Rails: []string{fake.SandboxCard}, ConfirmAboveMinor: 10_000,
		IrreversibleConfirmAboveMinor: 10_000,
	}, k.ops[0].priv, k.ops[0].kid)
	if err != nil {
		t.Fatal(err)
	}

	fx.memMandate, err = memory.SignMandate(memory.MandateClaims{
		ID: "mm-matrix", Agent: fx.agentHex, IssuedAt: matrixClock().Add(-time.Hour), ExpiresAt: matrixClock().Add(30 * 24 * time.Hour),
		Namespace: "matrix", CanRead: true, CanWrite: true, CanErase: true,
	}, k.ops[0].priv, k.ops[0].kid)
	if err != nil {
		t.Fatal(err)
	}

	// The two payments go through the route itself, so the fixture also
	// proves that the agent path works with the credential the matrix uses.
	payOnce := func(minor int64, want int) []byte {
		b, err := json.Marshal(fx.instruction(t, minor))
		if err != nil {
			t.Fatal(err)
		}
		w := wire{method: http.MethodPost, path: "/pay", body: b, header: http.Header{
			"Content-Type": {contract.MediaJSON}, "Authorization": {"Bearer " + fx.cred}}}
		res := fx.send(t, w)
		if res.status != want {
			t.Fatalf("seeding payment of %d: status %d, want %d\n%s", minor, res.status, want, res.body)
		}
		return res.body
	}
	var receipt pay.Receipt
	if err := json.Unmarshal(payOnce(500, http.StatusOK), &receipt); err != nil {
		t.Fatal(err)
	}
	fx.settled = receipt.IntentID
	var held pay.Held
	if err := json.Unmarshal(payOnce(20_000, http.StatusAccepted), &held); err != nil {
		t.Fatal(err)
	}
	fx.held, fx.challenge = held.IntentID, held.Challenge
	if err := json.Unmarshal(payOnce(20_000, http.StatusAccepted), &held); err != nil {
		t.Fatal(err)
	}
	fx.declineHeld = held.IntentID
	if fx.settled == "" || fx.held == "" || fx.challenge == "" || fx.declineHeld == "" {
		t.Fatalf("seeding: settled %q, held %q, challenge %q, held to decline %q", fx.settled, fx.held, fx.challenge, fx.declineHeld)
	}
	fx.seedProtocol(t)
	return fx
}

// seedProtocol makes, as the fixture's agent key, the objects the
// protocol methods' positive controls act on, and custody for the
// withdrawals and stakes.
func (fx *matrixFixture) seedProtocol(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	call := protocol.AgentCall(pay.Caller{KeyID: fx.keyID, Agents: []string{fx.agentHex}, Credential: gate.CredentialAPIKey}, "req_seed")
	svc := fx.matrixStack.protocol
	hold := func() string {
		h, err := svc.HoldPlace(ctx, call, &protocol.HoldPlaceRequest{Spend: *fx.spend(t, "hold.place", "acct:seller.example", 1_000), TTLSeconds: 3600})
		if err != nil || h.Status != protocol.HoldHeld {
			t.Fatalf("seeding a hold: %+v, %v", h, err)
		}
		return h.HoldID
	}
	fx.captureHold, fx.releaseHold = hold(), hold()
	m, err := svc.MeterOpen(ctx, call, &protocol.MeterOpenRequest{Spend: *fx.spend(t, "meter.open", "acct:api.example", 1_000), UnitPriceMinor: 1, TTLSeconds: 3600})
	if err != nil || m.Status != protocol.MeterOpen {
		t.Fatalf("seeding a meter: %+v, %v", m, err)
	}
	fx.meter = m.MeterID
	ses, err := svc.SessionOpen(ctx, call, &protocol.SessionOpenRequest{Mandate: fx.mandate, BudgetMinor: 1_000, TTLSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	fx.session = ses.ID
	dep, err := svc.CustodyDeposit(ctx, call, &protocol.CustodySpendRequest{Spend: *fx.spend(t, "custody.deposit", protocol.DefaultCustodyPayee, 5_000)})
	if err != nil || dep.Status != string(pay.StatusSettled) {
		t.Fatalf("seeding a deposit: %+v, %v", dep, err)
	}
	stk, err := svc.StakePost(ctx, call, &protocol.StakePostRequest{Amount: pay.Amount{Minor: 100, Currency: "USD"},
		LockedUntil: matrixClock().Add(time.Hour), Purpose: "matrix stake", IdempotencyKey: "matrix-stake-seed"})
	if err != nil {
		t.Fatal(err)
	}
	fx.stake = stk.ID
	proof, err := svc.ProofGet(ctx, call, &protocol.ProofGetRequest{IntentID: fx.settled})
	if err != nil {
		t.Fatal(err)
	}
	if fx.proof, err = json.Marshal(proof); err != nil {
		t.Fatal(err)
	}
	fx.seedProtocol2(t, call)
}

// seedProtocol2 makes the objects of terms, negotiate, obligation,
// evidence, delivery, dispute, insurance and claim the positive controls
// act on.
func (fx *matrixFixture) seedProtocol2(t *testing.T, call protocol.Call) {
	t.Helper()
	ctx := t.Context()
	svc := fx.matrixStack.protocol
	pub, cpKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	fx.cpKey, fx.cpHex = cpKey, hex.EncodeToString(pub)
	cpSign := func(signingBytes string) string {
		msg, err := base64.RawURLEncoding.DecodeString(signingBytes)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(ed25519.Sign(cpKey, msg))
	}
	body := fx.termsBody()
	trm, err := svc.TermsPropose(ctx, call, &protocol.TermsProposeRequest{Counterparty: fx.cpHex, Terms: body})
	if err != nil {
		t.Fatalf("seeding terms: %v", err)
	}
	fx.terms, fx.termsSig = trm.ID, cpSign(trm.SigningBytes)
	offer := func() *protocol.Negotiation {
		n, err := svc.NegotiateOffer(ctx, call, &protocol.NegotiateOfferRequest{Counterparty: fx.cpHex, Terms: body})
		if err != nil {
			t.Fatalf("seeding a negotiation: %v", err)
		}
		return n
	}
	fx.negotiation = offer().ID
	na := offer()
	fx.negAccept, fx.negAcceptSig = na.ID, cpSign(na.Offers[0].SigningBytes)
	fx.negReject = offer().ID

	obligation := func(floor protocol.EvidenceClass) string {
		o, err := svc.ObligationCreate(ctx, call, &protocol.ObligationCreateRequest{Spend: *fx.spend(t, "obligation.create", "acct:seller.example", 300),
			EvidenceFloor: floor, Deadline: matrixClock().Add(time.Hour), Counterparty: fx.cpHex})
		if err != nil || o.Status != protocol.ObligationAwaiting {
			t.Fatalf("seeding an obligation: %+v, %v", o, err)
		}
		return o.ObligationID
	}
	self := func(subject string) *protocol.EvidenceSubmitted {
		ev, err := svc.EvidenceSubmit(ctx, call, &protocol.EvidenceSubmitRequest{Subject: subject, Class: protocol.ClassSelf,
			Statement: json.RawMessage(`{"subject":"` + subject + `","delivered":"matrix seed"}`)})
		if err != nil {
			t.Fatalf("seeding evidence: %v", err)
		}
		return ev
	}
	// cleared is an obligation that cleared on its own word (floor self).
	cleared := func() string {
		id := obligation(protocol.ClassSelf)
		if ev := self(id); ev.Clearing == nil || ev.Clearing.Status != protocol.ClearingCleared {
			t.Fatalf("seeding a cleared obligation: %+v", ev.Clearing)
		}
		return id
	}
	fx.obligation = obligation(protocol.ClassSign)
	fx.evidence = self(fx.obligation).Evidence.ID
	fx.cancelObl = obligation(protocol.ClassSelf)
	dlv, err := svc.DeliveryRecord(ctx, call, &protocol.DeliveryRecordRequest{Subject: cleared(), Description: "matrix delivery"})
	if err != nil {
		t.Fatal(err)
	}
	fx.delivery = dlv.ID
	insured := func() (policy, dispute string) {
		subject := cleared()
		pol, err := svc.InsuranceBind(ctx, call, &protocol.InsuranceBindRequest{Subject: subject, LimitMinor: 300,
			Spend: *fx.spend(t, "insurance.bind", protocol.DefaultInsurancePayee, 100)})
		if err != nil || pol.Status != "active" {
			t.Fatalf("seeding a policy: %+v, %v", pol, err)
		}
		dsp, err := svc.DisputeOpen(ctx, call, &protocol.DisputeOpenRequest{Subject: subject, Reason: "matrix dispute"})
		if err != nil {
			t.Fatal(err)
		}
		return pol.ID, dsp.ID
	}
	fx.policy, fx.dispute = insured()
	pol, dsp := insured()
	clm, err := svc.ClaimFile(ctx, call, &protocol.ClaimFileRequest{PolicyID: pol, DisputeID: dsp, AmountMinor: 50})
	if err != nil {
		t.Fatal(err)
	}
	fx.claim = clm.ID
}

// termsBody is what the fixture's terms and offers say.
func (fx *matrixFixture) termsBody() protocol.TermsBody {
	return protocol.TermsBody{Payee: "acct:seller.example", Amount: pay.Amount{Minor: 300, Currency: "USD"}, Rail: fake.SandboxCard,
		Description: "matrix terms", ValidUntil: matrixClock().Add(24 * time.Hour)}
}

// spend returns a spend under the fixture's mandate with a fresh
// idempotency key, signed for the protocol method.
func (fx *matrixFixture) spend(t testing.TB, method, payee string, minor int64) *pay.Instruction {
	t.Helper()
	in := fx.instruction(t, minor)
	in.Payee, in.Envelope.Signature = payee, ""
	if err := protocol.SignSpend(method, in, fx.agentKey); err != nil {
		t.Fatal(err)
	}
	return in
}

// instruction returns a signed payment instruction under the fixture's
// mandate with a fresh idempotency key.
func (fx *matrixFixture) instruction(t testing.TB, minor int64) *pay.Instruction {
	t.Helper()
	fx.idem++
	in := &pay.Instruction{
		IdempotencyKey: fmt.Sprintf("matrix-%d", fx.idem), Payee: "acct:seller.example",
		Amount: pay.Amount{Minor: minor, Currency: "USD"}, Purpose: "matrix test payment",
		Terms: pay.Terms{Rail: fake.SandboxCard, Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
			Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
		Envelope: pay.Envelope{Agent: fx.agentHex, Mandate: fx.mandate},
	}
	if err := pay.SignInstruction(in, fx.agentKey); err != nil {
		t.Fatal(err)
	}
	return in
}

// paramKey names one parameter of one parameter type.
type paramKey struct {
	params reflect.Type
	in     string // path, query or header
	name   string
}

// paramValue is a valid value of a parameter and a different one, which
// the tamper cases swap in.
type paramValue struct{ value, other string }

// matrixParams gives a value to every path parameter and every required
// query or header parameter of the contract. Keyed by the parameter type,
// not by the route, so the list of routes lives in contract alone.
func matrixParams(fx *matrixFixture) map[paramKey]paramValue {
	p := func(t reflect.Type, in, name string) paramKey { return paramKey{t, in, name} }
	return map[paramKey]paramValue{
		p(reflect.TypeFor[pay.IntentParams](), "path", "id"):        {fx.settled, fx.held},
		p(reflect.TypeFor[pay.IntentEventsParams](), "path", "id"):  {fx.settled, fx.held},
		p(reflect.TypeFor[audit.AuditEntryParams](), "path", "seq"): {"1", "2"},
		p(reflect.TypeFor[product.ProblemPageParams](), "path", "code"): {
			contract.CodeOperatorUnauthorized, contract.CodeAuthMissing},
		p(reflect.TypeFor[audit.AuditConsistencyParams](), "query", "from"): {"1", "2"},
		p(reflect.TypeFor[auth.UsageParams](), "query", "since"):            {"2026-11-23T00:00:00Z", "2026-11-01T00:00:00Z"},
		p(reflect.TypeFor[auth.UsageParams](), "query", "until"):            {"2026-11-24T00:00:00Z", "2026-11-30T00:00:00Z"},
		// The signed revocation of the victim key, turned by the tamper
		// cases against the key every agent route uses.
		p(reflect.TypeFor[auth.AgentRevokeParams](), "path", "id"):               {fx.victimKeyID, fx.keyID},
		p(reflect.TypeFor[auth.AgentRevokeParams](), "query", "rationale"):       {matrixRationale, "retire every key of this tenant"},
		p(reflect.TypeFor[webhook.EndpointParams](), "path", "id"):               {fx.endpointID, fx.victimEPID},
		p(reflect.TypeFor[webhook.EndpointDeleteParams](), "path", "id"):         {fx.victimEPID, fx.endpointID},
		p(reflect.TypeFor[webhook.EndpointDeleteParams](), "query", "rationale"): {matrixRationale, "drop every endpoint we have"},
		p(reflect.TypeFor[webhook.DeliveriesParams](), "path", "id"):             {fx.endpointID, fx.victimEPID},
		p(reflect.TypeFor[webhook.DeliveryParams](), "path", "id"):               {fx.endpointID, fx.victimEPID},
		p(reflect.TypeFor[webhook.DeliveryParams](), "path", "eventId"):          {"evt_1_audit.appended", "evt_2_audit.appended"},
	}
}

// matrixBodies builds a valid body of every body type of the contract.
func matrixBodies(fx *matrixFixture) map[reflect.Type]func(t testing.TB) any {
	return map[reflect.Type]func(t testing.TB) any{
		reflect.TypeFor[pay.Instruction](): func(t testing.TB) any { return fx.instruction(t, 100) },
		reflect.TypeFor[pay.ApproveRequest](): func(testing.TB) any {
			return pay.ApproveRequest{IntentID: fx.held, Challenge: fx.challenge, MandateID: fx.mandateID,
				Rationale: matrixRationale, Acknowledged: true}
		},
		reflect.TypeFor[pay.DeclineRequest](): func(testing.TB) any {
			// Without the challenge, as an operator working from the held
			// list sends it.
			return pay.DeclineRequest{IntentID: fx.declineHeld, MandateID: fx.mandateID, Rationale: matrixRationale}
		},
		reflect.TypeFor[pay.RefundRequest](): func(testing.TB) any {
			one := int64(1)
			return pay.RefundRequest{IntentID: fx.settled, AmountMinor: &one, Rationale: matrixRationale}
		},
		reflect.TypeFor[pay.KillSwitchRequest](): func(testing.TB) any {
			// Releasing, so later payments and approvals are not frozen.
			off := false
			return pay.KillSwitchRequest{Engaged: &off, Rationale: matrixRationale}
		},
		reflect.TypeFor[contract.RationaleRequest](): func(testing.TB) any {
			return contract.RationaleRequest{Rationale: matrixRationale}
		},
		reflect.TypeFor[auth.AgentCreateRequest](): func(testing.TB) any {
			return auth.AgentCreateRequest{Name: "matrix-created", AgentIDs: []string{fx.agentHex}, Rationale: matrixRationale}
		},
		reflect.TypeFor[webhook.WebhookCreateRequest](): func(testing.TB) any {
			return webhook.WebhookCreateRequest{CreateRequest: webhook.CreateRequest{URL: "https://hooks.example/new", Events: []string{"payment.settled"}},
				Rationale: matrixRationale}
		},
		reflect.TypeFor[webhook.WebhookUpdateRequest](): func(testing.TB) any {
			on := true
			return webhook.WebhookUpdateRequest{UpdateRequest: webhook.UpdateRequest{Active: &on}, Rationale: matrixRationale}
		},
		reflect.TypeFor[pay.MandateRevokeRequest](): func(testing.TB) any {
			// Not the fixture's mandate: the approve route still needs it.
			return pay.MandateRevokeRequest{MandateID: "mdt-unused", Rationale: matrixRationale}
		},
		reflect.TypeFor[commerce.MerchantRequest](): func(testing.TB) any {
			return commerce.MerchantRequest{MerchantSpec: commerce.MerchantSpec{ID: "matrix-shop", Protocol: "acp",
				BaseURL: "https://shop.example"}, Rationale: matrixRationale}
		},
		reflect.TypeFor[commerce.QuoteRequest](): func(testing.TB) any {
			return commerce.QuoteRequest{Rail: "acp", Merchant: "shop", Currency: "USD", Lines: []cart.LineRequest{{ID: "sku-mug", Quantity: 1}}}
		},
		reflect.TypeFor[commerce.PurchaseRequest](): func(t testing.TB) any {
			in := fx.instruction(t, 100)
			p := commerce.PurchaseRequest{QuoteRequest: commerce.QuoteRequest{Rail: "acp", Merchant: "shop", Currency: "USD",
				Lines: []cart.LineRequest{{ID: "sku-mug", Quantity: 1}}}, IdempotencyKey: in.IdempotencyKey, Purpose: in.Purpose,
				Terms: in.Terms, Envelope: pay.Envelope{Mandate: fx.mandate}}
			p.Terms.Rail = "acp"
			if err := commerce.SignPurchase(&p, fx.agentKey); err != nil {
				t.Fatal(err)
			}
			return p
		},
		reflect.TypeFor[fetch.Request](): func(t testing.TB) any {
			in := fx.instruction(t, 100)
			r := fetch.Request{Method: "GET", URL: "https://resource.invalid/report", MaxAmount: in.Amount,
				IdempotencyKey: in.IdempotencyKey, Purpose: in.Purpose, Terms: in.Terms, Envelope: pay.Envelope{Mandate: fx.mandate}}
			r.Terms.Rail = fetch.RailName
			if err := fetch.Sign(&r, fx.agentKey); err != nil {
				t.Fatal(err)
			}
			return r
		},
		reflect.TypeFor[identity.ResolveRequest](): func(testing.TB) any {
			return identity.ResolveRequest{Ref: fx.agentHex}
		},
		reflect.TypeFor[identity.VerifyBody](): func(testing.TB) any {
			// A refusal is still a 200 Decision: the route answers it.
			return map[string]any{"disclosure": map[string]any{}, "signature": map[string]any{}}
		},
		reflect.TypeFor[identity.Challenge](): func(testing.TB) any {
			return identity.Challenge{Nonce: "matrix-nonce", IssuedAt: "2026-01-01T00:00:00.000Z"}
		},
		reflect.TypeFor[identity.ChallengeRequest](): func(testing.TB) any {
			return identity.ChallengeRequest{VerifierID: "matrix"}
		},
		reflect.TypeFor[identity.CounterpartyRequest](): func(testing.TB) any {
			// A new id each time: a positive control must be able to succeed.
			n := fx.seq.Add(1)
			_, k, _ := ed25519.GenerateKey(rand.Reader)
			return identity.CounterpartyRequest{ID: fmt.Sprintf("matrix-peer-%d", n), BaseURL: "https://peer.example",
				AgentID: identity.DIDKey(k.Public().(ed25519.PublicKey)), Rationale: matrixRationale}
		},
		reflect.TypeFor[identity.RevokeBody](): func(testing.TB) any {
			return identity.RevokeBody{RevokeRequest: identity.RevokeRequest{ID: "dsc_matrix", Reason: "matrix"},
				Rationale: matrixRationale}
		},
		reflect.TypeFor[identity.RotateRequest](): func(testing.TB) any {
			return identity.RotateRequest{Rationale: matrixRationale}
		},
		reflect.TypeFor[memory.RememberRequest](): func(testing.TB) any {
			fx.idem++
			return memory.RememberRequest{Mandate: fx.memMandate, IdempotencyKey: fmt.Sprintf("matrix-mem-%d", fx.idem),
				Namespace: "matrix", Subject: "s", Kind: "note", Body: json.RawMessage(`"hello"`),
				ValidFrom: matrixClock().Add(-time.Hour), Source: memory.Source{Kind: "agent", Ref: fx.agentHex}}
		},
		reflect.TypeFor[memory.RecallRequest](): func(testing.TB) any {
			return memory.RecallRequest{Mandate: fx.memMandate, Namespace: "matrix"}
		},
		reflect.TypeFor[memory.AssembleRequest](): func(testing.TB) any {
			return memory.AssembleRequest{Mandate: fx.memMandate, Namespace: "matrix", Budget: memory.Budget{MaxTokens: 1000}}
		},
		reflect.TypeFor[memory.VerifyRequest](): func(t testing.TB) any {
			b, err := json.Marshal(fx.memRecord(t))
			if err != nil {
				t.Fatal(err)
			}
			return memory.VerifyRequest{Artifact: b}
		},
		reflect.TypeFor[memory.ForgetRequest](): func(t testing.TB) any {
			return memory.ForgetRequest{Mandate: fx.memMandate, RootID: fx.memRecord(t).Record.ID, Rationale: matrixRationale}
		},
		reflect.TypeFor[memory.TaintRequest](): func(testing.TB) any {
			return memory.TaintRequest{Source: &memory.Source{Kind: "url", Ref: "https://untrusted.example"}, Rationale: matrixRationale}
		},

		// The protocol surface. The matrix's clock never moves, so the
		// stake's lock never ends: stake.release answers 409 stake.locked
		// past the credential check.
		reflect.TypeFor[protocol.MandateRef]():         func(testing.TB) any { return protocol.MandateRef{MandateID: fx.mandateID} },
		reflect.TypeFor[protocol.MandateListRequest](): func(testing.TB) any { return protocol.MandateListRequest{} },
		reflect.TypeFor[protocol.MandateVerifyRequest](): func(t testing.TB) any {
			in := fx.instruction(t, 100)
			return protocol.MandateVerifyRequest{Mandate: fx.mandate, Payee: in.Payee, Amount: in.Amount, Terms: in.Terms}
		},
		reflect.TypeFor[protocol.SessionOpenRequest](): func(testing.TB) any {
			return protocol.SessionOpenRequest{Mandate: fx.mandate, BudgetMinor: 500, TTLSeconds: 600}
		},
		reflect.TypeFor[protocol.SessionRef](): func(testing.TB) any { return protocol.SessionRef{SessionID: fx.session} },
		reflect.TypeFor[protocol.HoldPlaceRequest](): func(t testing.TB) any {
			return protocol.HoldPlaceRequest{Spend: *fx.spend(t, "hold.place", "acct:seller.example", 100), TTLSeconds: 600}
		},
		reflect.TypeFor[protocol.HoldCaptureRequest](): func(testing.TB) any {
			return protocol.HoldCaptureRequest{HoldID: fx.captureHold, AmountMinor: 100, IdempotencyKey: "matrix-capture"}
		},
		reflect.TypeFor[protocol.HoldRef](): func(testing.TB) any { return protocol.HoldRef{HoldID: fx.releaseHold} },
		reflect.TypeFor[protocol.MeterOpenRequest](): func(t testing.TB) any {
			return protocol.MeterOpenRequest{Spend: *fx.spend(t, "meter.open", "acct:api.example", 100), UnitPriceMinor: 1, TTLSeconds: 600}
		},
		reflect.TypeFor[protocol.MeterRecordRequest](): func(testing.TB) any {
			return protocol.MeterRecordRequest{MeterID: fx.meter, Units: 3, UsageID: "matrix-usage"}
		},
		reflect.TypeFor[protocol.MeterCloseRequest](): func(testing.TB) any {
			return protocol.MeterCloseRequest{MeterID: fx.meter, IdempotencyKey: "matrix-close"}
		},
		reflect.TypeFor[protocol.MeterRef]():              func(testing.TB) any { return protocol.MeterRef{MeterID: fx.meter} },
		reflect.TypeFor[protocol.CustodyBalanceRequest](): func(testing.TB) any { return protocol.CustodyBalanceRequest{Agent: fx.agentHex} },
		reflect.TypeFor[protocol.CustodyLedgerRequest](): func(testing.TB) any {
			return protocol.CustodyLedgerRequest{Agent: fx.agentHex, Currency: "USD"}
		},
		reflect.TypeFor[protocol.StakePostRequest](): func(testing.TB) any {
			fx.idem++
			return protocol.StakePostRequest{Amount: pay.Amount{Minor: 10, Currency: "USD"}, LockedUntil: matrixClock().Add(time.Hour),
				Purpose: "matrix stake", IdempotencyKey: fmt.Sprintf("matrix-stake-%d", fx.idem)}
		},
		reflect.TypeFor[protocol.StakeRef](): func(testing.TB) any { return protocol.StakeRef{StakeID: fx.stake} },
		reflect.TypeFor[protocol.EconomicsSummaryRequest](): func(testing.TB) any {
			return protocol.EconomicsSummaryRequest{Since: matrixClock().Add(-24 * time.Hour), Until: matrixClock().Add(time.Hour), GroupBy: "payee"}
		},
		reflect.TypeFor[protocol.EconomicsBudgetRequest](): func(testing.TB) any { return protocol.EconomicsBudgetRequest{} },
		reflect.TypeFor[protocol.Empty]():                  func(testing.TB) any { return protocol.Empty{} },
		reflect.TypeFor[protocol.OversightQueueRequest]():  func(testing.TB) any { return protocol.OversightQueueRequest{} },
		reflect.TypeFor[protocol.RevocationListRequest]():  func(testing.TB) any { return protocol.RevocationListRequest{} },
		reflect.TypeFor[protocol.RevocationCheckRequest](): func(testing.TB) any {
			return protocol.RevocationCheckRequest{Agent: fx.agentHex}
		},
		reflect.TypeFor[protocol.RevokeIdentityRequest](): func(testing.TB) any {
			// Not the fixture's agent: every agent route still acts for it.
			return protocol.RevokeIdentityRequest{Agent: strings.Repeat("cd", 32), Override: protocol.Override{Rationale: matrixRationale}}
		},
		reflect.TypeFor[protocol.ProofGetRequest]():    func(testing.TB) any { return protocol.ProofGetRequest{IntentID: fx.settled} },
		reflect.TypeFor[protocol.ProofVerifyRequest](): func(testing.TB) any { return protocol.ProofVerifyRequest{Proof: fx.proof} },

		// Part 2. The matrix's agent key acts for fx.agentHex alone, and
		// the counterparty is no identity of it: dispute.respond answers
		// 403 dispute.not_respondent past the credential check (the story,
		// protocol_story_test.go, responds as the respondent). An
		// operator request is accepted once per trusted key and again to
		// prime each replay: after the first, delivery.dispute answers 409
		// dispute.exists and dispute.resolve 409 dispute.already_resolved.
		//
		// terms.propose and negotiate.offer (protocol.NegotiateOfferRequest
		// is this type).
		reflect.TypeFor[protocol.TermsProposeRequest](): func(testing.TB) any {
			return protocol.TermsProposeRequest{Counterparty: fx.cpHex, Terms: fx.termsBody()}
		},
		reflect.TypeFor[protocol.TermsAcceptRequest](): func(testing.TB) any {
			return protocol.TermsAcceptRequest{TermsID: fx.terms, Signature: fx.termsSig}
		},
		reflect.TypeFor[protocol.TermsRef](): func(testing.TB) any { return protocol.TermsRef{TermsID: fx.terms} },
		reflect.TypeFor[protocol.NegotiateCounterRequest](): func(t testing.TB) any {
			// The counterparty's counter-offer: the second offer, signed
			// with its key.
			counter := fx.termsBody()
			counter.Amount.Minor = 400
			msg, err := protocol.OfferSigningBytes(fx.negotiation, 2, fx.agentHex, fx.cpHex, counter)
			if err != nil {
				t.Fatal(err)
			}
			return protocol.NegotiateCounterRequest{NegotiationID: fx.negotiation, From: protocol.SideCounterparty, Terms: counter,
				Signature: base64.RawURLEncoding.EncodeToString(ed25519.Sign(fx.cpKey, msg))}
		},
		reflect.TypeFor[protocol.NegotiateAcceptRequest](): func(testing.TB) any {
			return protocol.NegotiateAcceptRequest{NegotiationID: fx.negAccept, Signature: fx.negAcceptSig}
		},
		reflect.TypeFor[protocol.NegotiateRejectRequest](): func(testing.TB) any {
			return protocol.NegotiateRejectRequest{NegotiationID: fx.negReject, By: protocol.SideUs, Reason: "matrix test"}
		},
		reflect.TypeFor[protocol.NegotiationRef](): func(testing.TB) any {
			return protocol.NegotiationRef{NegotiationID: fx.negotiation}
		},
		reflect.TypeFor[protocol.ObligationCreateRequest](): func(t testing.TB) any {
			return protocol.ObligationCreateRequest{Spend: *fx.spend(t, "obligation.create", "acct:seller.example", 100),
				EvidenceFloor: protocol.ClassSelf, Deadline: matrixClock().Add(time.Hour)}
		},
		reflect.TypeFor[protocol.ObligationRef](): func(testing.TB) any {
			return protocol.ObligationRef{ObligationID: fx.obligation}
		},
		reflect.TypeFor[protocol.ObligationListRequest](): func(testing.TB) any { return protocol.ObligationListRequest{} },
		reflect.TypeFor[protocol.EvidenceSubmitRequest](): func(testing.TB) any {
			// Below the obligation's floor (sign): 202 clearing.pending.
			return protocol.EvidenceSubmitRequest{Subject: fx.obligation, Class: protocol.ClassSelf,
				Statement: json.RawMessage(`{"subject":"` + fx.obligation + `","delivered":"matrix test"}`)}
		},
		reflect.TypeFor[protocol.EvidenceRef](): func(testing.TB) any { return protocol.EvidenceRef{EvidenceID: fx.evidence} },
		reflect.TypeFor[protocol.EvidenceListRequest](): func(testing.TB) any {
			return protocol.EvidenceListRequest{Subject: fx.obligation}
		},
		reflect.TypeFor[protocol.DeliveryRecordRequest](): func(testing.TB) any {
			return protocol.DeliveryRecordRequest{Subject: fx.settled, Description: "matrix delivery"}
		},
		reflect.TypeFor[protocol.DeliveryRef](): func(testing.TB) any { return protocol.DeliveryRef{DeliveryID: fx.delivery} },
		reflect.TypeFor[protocol.DeliveryDisputeRequest](): func(testing.TB) any {
			return protocol.DeliveryDisputeRequest{DeliveryID: fx.delivery, Reason: "matrix dispute", Override: protocol.Override{Rationale: matrixRationale}}
		},
		reflect.TypeFor[protocol.DisputeOpenRequest](): func(testing.TB) any {
			return protocol.DisputeOpenRequest{Subject: fx.settled, Reason: "matrix dispute"}
		},
		reflect.TypeFor[protocol.DisputeRespondRequest](): func(testing.TB) any {
			return protocol.DisputeRespondRequest{DisputeID: fx.dispute, Text: "matrix response"}
		},
		reflect.TypeFor[protocol.DisputeRef]():         func(testing.TB) any { return protocol.DisputeRef{DisputeID: fx.dispute} },
		reflect.TypeFor[protocol.DisputeListRequest](): func(testing.TB) any { return protocol.DisputeListRequest{} },
		reflect.TypeFor[protocol.DisputeResolveRequest](): func(testing.TB) any {
			return protocol.DisputeResolveRequest{DisputeID: fx.dispute, Outcome: protocol.ForClaimant, Override: protocol.Override{Rationale: matrixRationale}}
		},
		reflect.TypeFor[protocol.InsuranceQuoteRequest](): func(testing.TB) any {
			return protocol.InsuranceQuoteRequest{Subject: fx.settled, LimitMinor: 1_000}
		},
		reflect.TypeFor[protocol.InsuranceBindRequest](): func(t testing.TB) any {
			return protocol.InsuranceBindRequest{Subject: fx.settled, LimitMinor: 1_000,
				Spend: *fx.spend(t, "insurance.bind", protocol.DefaultInsurancePayee, 100)}
		},
		reflect.TypeFor[protocol.PolicyRef](): func(testing.TB) any { return protocol.PolicyRef{PolicyID: fx.policy} },
		reflect.TypeFor[protocol.ClaimFileRequest](): func(testing.TB) any {
			return protocol.ClaimFileRequest{PolicyID: fx.policy, DisputeID: fx.dispute, AmountMinor: 50}
		},
		reflect.TypeFor[protocol.ClaimRef]():         func(testing.TB) any { return protocol.ClaimRef{ClaimID: fx.claim} },
		reflect.TypeFor[protocol.ClaimListRequest](): func(testing.TB) any { return protocol.ClaimListRequest{} },
	}
}

// matrixOpBodies builds the body of operations that share a body type
// but not its valid values; it takes precedence over matrixBodies.
func matrixOpBodies(fx *matrixFixture) map[string]func(t testing.TB) any {
	return map[string]func(t testing.TB) any{
		// A deposit pays the custody account; a withdrawal may not.
		"custody.deposit": func(t testing.TB) any {
			return protocol.CustodySpendRequest{Spend: *fx.spend(t, "custody.deposit", protocol.DefaultCustodyPayee, 100)}
		},
		"custody.withdraw": func(t testing.TB) any {
			return protocol.CustodySpendRequest{Spend: *fx.spend(t, "custody.withdraw", "acct:bank.example", 100)}
		},
		// obligation.cancel cancels an obligation of its own; the rest of
		// obligation and clearing read fx.obligation.
		"obligation.cancel": func(testing.TB) any { return protocol.ObligationRef{ObligationID: fx.cancelObl} },
	}
}

// memRecord remembers a fresh record in-process (each forget erases one).
func (fx *matrixFixture) memRecord(t testing.TB) memory.RecordArtifact {
	t.Helper()
	fx.idem++
	r, err := fx.matrixStack.memory.Remember(t.Context(), memory.Caller{}, memory.RememberRequest{
		Mandate: fx.memMandate, IdempotencyKey: fmt.Sprintf("matrix-mem-%d", fx.idem), Namespace: "matrix",
		Subject: fmt.Sprintf("subject-%d", fx.idem), Kind: "note", Body: json.RawMessage(`{"n":1}`),
		ValidFrom: matrixClock().Add(-time.Hour), Source: memory.Source{Kind: "tool", Ref: "matrix"}}, "req_seed")
	if err != nil {
		t.Fatal(err)
	}
	return r.Artifact
}

// opParam is one parameter an operation declares.
type opParam struct {
	in, name string
	kind     reflect.Kind
	required bool
}

func declaredParams(op contract.Operation) []opParam {
	if op.Params == nil {
		return nil
	}
	var out []opParam
	for i := range op.Params.NumField() {
		f := op.Params.Field(i)
		for _, in := range []string{"path", "query", "header"} {
			name, ok := f.Tag.Lookup(in)
			if !ok {
				continue
			}
			kind := f.Type.Kind()
			if kind == reflect.Pointer {
				kind = f.Type.Elem().Kind()
			}
			required := in == "path" || slices.Contains(strings.Split(f.Tag.Get("validate"), ","), "required")
			out = append(out, opParam{in: in, name: name, kind: kind, required: required})
		}
	}
	return out
}

// builder makes the minimal valid request of an operation.
type builder struct {
	params map[paramKey]paramValue
	bodies map[reflect.Type]func(t testing.TB) any
	byOp   map[string]func(t testing.TB) any // by operation id, before bodies
}

// build returns the request; other swaps in the other value of every path
// parameter. It fails the test, naming the table to extend, when the
// operation has a parameter or body type the tables do not know.
func (b builder) build(t testing.TB, op contract.Operation, other bool) wire {
	t.Helper()
	w := wire{method: op.Method, header: http.Header{}}
	query := url.Values{}
	path := op.Path
	for _, p := range declaredParams(op) {
		if !p.required {
			continue
		}
		v, ok := b.params[paramKey{op.Params, p.in, p.name}]
		if !ok {
			t.Fatalf("operation %s: the %s parameter %q of %v has no value in matrixParams (httpserver/matrix_test.go); "+
				"add one, an existing id where the route looks it up", op.ID, p.in, p.name, op.Params)
		}
		val := v.value
		if other && p.in == "path" {
			val = v.other
		}
		switch p.in {
		case "path":
			path = strings.Replace(path, "{"+p.name+"}", url.PathEscape(val), 1)
		case "query":
			query.Set(p.name, val)
		case "header":
			w.header.Set(p.name, val)
		}
	}
	if strings.ContainsAny(path, "{}") {
		t.Fatalf("operation %s: path %s still has a wildcard after filling %s", op.ID, path, op.Path)
	}
	w.path, w.query = path, query.Encode()
	if op.Body != nil {
		mk, ok := b.byOp[op.ID]
		if !ok {
			mk, ok = b.bodies[op.Body]
		}
		if !ok {
			t.Fatalf("operation %s: body type %v has no entry in matrixBodies (httpserver/matrix_test.go); "+
				"add a function that returns a valid body, using the fixture's ids", op.ID, op.Body)
		}
		body, err := json.Marshal(mk(t))
		if err != nil {
			t.Fatal(err)
		}
		w.body = body
		// Always sent: serveOperation checks the media type (415) before
		// it looks at an operator credential, and every cell must reach
		// the credential check.
		w.header.Set("Content-Type", contract.MediaJSON)
	}
	return w
}

// expect is what one matrix cell must answer.
type expect struct {
	kind     expectKind
	status   int
	code     string
	reason   operator.Reason // "" when the problem has no reason member
	refusals int             // OnRefused calls the request must cause
}

type expectKind int

const (
	expectRefused  expectKind = iota // the credential is refused, nothing changes
	expectAccepted                   // the credential is accepted: not a 401 (and status, when set)
	expectOpen                       // a route without credentials: 2xx, nothing changes
)

// matrixCase is one cell: prep returns the request to send (it may send
// a priming request itself, as the replay does, before the state is
// captured).
type matrixCase struct {
	name string
	prep func(t *testing.T) wire
	want expect
}

// matrixRun counts what the matrix did, for its summary line.
type matrixRun struct {
	ops         map[contract.Credential]int
	refused     int
	accepted    int
	open        int
	escalations int
}

func (fx *matrixFixture) run(t *testing.T, op contract.Operation, c matrixCase, tally *matrixRun) {
	t.Helper()
	w := c.prep(t)
	before := fx.state(t)
	n := fx.refusals.len()
	res := fx.send(t, w)
	after := fx.state(t)
	got := fx.refusals.since(n)

	switch c.want.kind {
	case expectAccepted:
		t.Logf("%s %s: %d %s", w.method, w.target(), res.status, res.Code)
		if c.want.status != 0 && res.status != c.want.status {
			t.Fatalf("status %d %s, want %d\n%s", res.status, res.Code, c.want.status, res.body)
		}
		if res.status >= 500 {
			// Past the credential check, but worth a look: the stack does
			// not wire Config.Usage (its flush goroutine would write to the
			// store while the matrix compares store digests), so usage.get
			// answers 500 by design.
			t.Logf("NOTE: %s answered %d %s after accepting the credential", op.ID, res.status, res.Code)
		}
		if res.status == http.StatusUnauthorized {
			t.Fatalf("a correctly signed or authenticated request was refused: %d %s (reason %q)\n%s",
				res.status, res.Code, res.Reason, res.body)
		}
		if brokenRequest(res.Code) {
			t.Fatalf("the request builder made a request the route refuses before its domain logic: %d %s\n%s",
				res.status, res.Code, res.body)
		}
		if len(got) != 0 {
			t.Errorf("an accepted request called OnRefused: %+v", got)
		}
		if !t.Failed() {
			tally.accepted++
		}
		return
	case expectOpen:
		if res.status < 200 || res.status > 299 {
			t.Fatalf("status %d %s, want 2xx for a route that needs no credential\n%s", res.status, res.Code, res.body)
		}
	case expectRefused:
		if res.status != c.want.status {
			// Whatever else it is, a request that should have been refused
			// for its credential and was not is an escalation.
			tally.escalations++
			t.Fatalf("status %d %s (reason %q), want %d %s: the credential was not refused as required\n%s",
				res.status, res.Code, res.Reason, c.want.status, c.want.code, res.body)
		}
		if res.media != contract.MediaProblem || res.Code != c.want.code {
			t.Errorf("answer %s code %q, want %s code %q", res.media, res.Code, contract.MediaProblem, c.want.code)
		}
		if res.Reason != string(c.want.reason) {
			t.Errorf("reason %q, want %q", res.Reason, c.want.reason)
		}
	}
	if before != after {
		t.Errorf("state changed: record size %d → %d, store keys %d → %d (digest changed: %v)",
			before.size, after.size, before.keys, after.keys, before.digest != after.digest)
	}
	if len(got) != c.want.refusals {
		t.Errorf("OnRefused called %d times (%+v), want %d", len(got), got, c.want.refusals)
	}
	for _, r := range got {
		if r.op != op.ID || r.reason != c.want.reason {
			t.Errorf("OnRefused(%s, %s), want (%s, %s)", r.op, r.reason, op.ID, c.want.reason)
		}
	}
	if t.Failed() {
		return
	}
	if c.want.kind == expectOpen {
		tally.open++
	} else {
		tally.refused++
	}
}

// brokenRequest reports codes that mean the matrix's own request is wrong
// (it did not reach the operation's logic), as opposed to a domain answer.
// A 500 is not one of them: it comes after the credential check, and the
// stack leaves some optional dependencies unwired (see run).
func brokenRequest(code string) bool {
	return strings.HasPrefix(code, "request.") || code == contract.CodeRouteNotFound ||
		code == contract.CodeMethodNotAllowed
}

// TestMatrix is the route × credential matrix. For every operation of the
// contract, by credential class:
//
//   - operator: every way of presenting something other than a valid,
//     fresh, unused signature over exactly this request is 401
//     operator.unauthorized with its precise reason, reaches the verifier
//     once (one OnRefused call) and changes nothing in the store; a
//     correctly signed request, with each of the two trusted keys, is not
//     a 401.
//   - agent: an operator signature does not stand in for the agent
//     credential (401 auth.missing); malformed, unknown, wrong, revoked
//     and DPoP-bound-as-bearer credentials are 401 auth.invalid; nothing
//     changes and the operator verifier is never consulted. The fixture's
//     credential is not a 401.
//   - agent or operator (the record and intent reads an operator's console
//     makes): without any credential 401 auth.missing; the agent cases
//     above, but an operator signature now opens the route, with each
//     trusted key, and reads any intent (200); with the Svc-Operator
//     header the signature alone decides, so every operator attack above
//     is refused as on an operator route, even beside a valid agent
//     credential; another agent key reads the record but not the
//     fixture's intents (404 intent.not_found).
//   - none: answers 2xx without credentials, and garbage credentials are
//     ignored rather than refused: serveOperation does not look at the
//     Authorization or Svc-Operator header of a CredentialNone operation
//     at all, so a client with a broken or expired credential can still
//     read the contract and the problem pages. Such routes reveal nothing
//     private (DESIGN §6).
func TestMatrix(t *testing.T) {
	fx := newMatrixFixture(t)
	b := builder{params: matrixParams(fx), bodies: matrixBodies(fx), byOp: matrixOpBodies(fx)}
	ops := product.Model().Operations()

	var operatorIDs []string
	for _, op := range ops {
		if op.Credential.AcceptsOperator() {
			operatorIDs = append(operatorIDs, op.ID)
		}
	}
	tally := &matrixRun{ops: map[contract.Credential]int{}}
	cells := 0
	for _, op := range ops {
		t.Run(op.ID, func(t *testing.T) {
			var cases []matrixCase
			switch op.Credential {
			case contract.CredentialOperator:
				cases = fx.operatorCases(t, b, op, otherOperation(operatorIDs, op.ID))
			case contract.CredentialAgent:
				cases = fx.agentCases(t, b, op)
			case contract.CredentialAgentOrOperator:
				cases = fx.eitherCases(t, b, op, otherOperation(operatorIDs, op.ID))
			case contract.CredentialNone:
				cases = fx.openCases(t, b, op)
			default:
				t.Fatalf("operation %s has credential class %v: every route must be None, Agent, Operator or AgentOrOperator, "+
					"and this matrix must know how to attack it", op.ID, op.Credential)
			}
			tally.ops[op.Credential]++
			cells += len(cases)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) { fx.run(t, op, c, tally) })
			}
		})
	}
	t.Logf("route × credential matrix: %d operations (%d operator, %d agent, %d agent or operator, %d none) × their credential cases = %d cells: "+
		"%d refused as required, %d positive controls accepted, %d open routes answered; %d escalations",
		len(ops), tally.ops[contract.CredentialOperator], tally.ops[contract.CredentialAgent], tally.ops[contract.CredentialAgentOrOperator],
		tally.ops[contract.CredentialNone], cells, tally.refused, tally.accepted, tally.open, tally.escalations)
	if tally.escalations != 0 {
		t.Errorf("%d cells escalated", tally.escalations)
	}
}

// otherOperation is another operator operation's id, for a signature made
// for the wrong operation.
func otherOperation(ids []string, id string) string {
	i := slices.Index(ids, id)
	if len(ids) < 2 || i < 0 {
		return "operator.other"
	}
	return ids[(i+1)%len(ids)]
}

// sign returns the Svc-Operator value s makes for w as operation opID.
func sign(t testing.TB, s *operator.Signer, opID string, w wire) string {
	t.Helper()
	r := httptest.NewRequest(w.method, w.target(), nil)
	if err := s.Sign(r, opID, w.body); err != nil {
		t.Fatal(err)
	}
	return r.Header.Get(operator.HeaderName)
}

func mustSigner(t testing.TB) func(*operator.Signer, error) *operator.Signer {
	return func(s *operator.Signer, err error) *operator.Signer {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

func shifted(d time.Duration) func() time.Time {
	return func() time.Time { return matrixClock().Add(d) }
}

// tamperBody changes one member of a JSON object body: the rationale when
// there is one (forging what the record will say), otherwise the first.
func tamperBody(t testing.TB, body []byte) []byte {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || len(m) == 0 {
		t.Fatalf("body %s is not a JSON object with members: %v", body, err)
	}
	key := "rationale"
	if _, ok := m[key]; !ok {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		key = keys[0]
	}
	switch v := m[key].(type) {
	case string:
		m[key] = v + " and also something else"
	case bool:
		m[key] = !v
	case json.Number:
		m[key] = json.Number(string(v) + "0")
	default:
		m[key] = nil
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (fx *matrixFixture) operatorCases(t *testing.T, b builder, op contract.Operation, otherOp string) []matrixCase {
	base := b.build(t, op, false)
	refused := func(r operator.Reason) expect {
		return expect{kind: expectRefused, status: http.StatusUnauthorized, code: contract.CodeOperatorUnauthorized, reason: r, refusals: 1}
	}
	fixed := func(w wire) func(*testing.T) wire { return func(*testing.T) wire { return w } }
	must := mustSigner(t)
	declared := declaredParams(op)
	hasPathParams := slices.ContainsFunc(declared, func(p opParam) bool { return p.in == "path" })

	unknown := func(t *testing.T) wire {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		s := must(operator.NewSigner(k, "op-mallory", matrixBase, &operator.SignerOptions{Now: matrixClock}))
		return base.with(operator.HeaderName, sign(t, s, op.ID, base))
	}
	algMismatch := func(t *testing.T) wire {
		// A P-256 key's signature is 64 bytes (r||s); 72 is what an
		// ASN.1 DER signature typically is.
		nonce := make([]byte, operator.NonceBytes)
		sig := make([]byte, 72)
		_, _ = rand.Read(nonce)
		_, _ = rand.Read(sig)
		v, err := operator.Header{KeyID: fx.keys.ops[1].kid, Timestamp: matrixClock().Unix(),
			Nonce: base64.RawURLEncoding.EncodeToString(nonce), Signature: sig}.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		return base.with(operator.HeaderName, string(v))
	}
	cases := []matrixCase{
		{"no_credential", fixed(base), refused(operator.ReasonMissingHeader)},
		{"agent_bearer", fixed(base.with("Authorization", "Bearer "+fx.cred)), refused(operator.ReasonMissingHeader)},
		{"agent_credential_as_operator_header", fixed(base.with(operator.HeaderName, fx.cred)), refused(operator.ReasonMalformedHeader)},
		{"malformed_header", fixed(base.with(operator.HeaderName, `keyid="op-ed", ts=1`)), refused(operator.ReasonMalformedHeader)},
		{"unknown_key", unknown, refused(operator.ReasonUnknownKey)},
		{"alg_mismatch", algMismatch, refused(operator.ReasonAlgMismatch)},
	}

	for i, key := range fx.keys.ops {
		s := must(key.signer(matrixClock, matrixBase))
		signed := func(s *operator.Signer, opID string, signedAs, sent wire) func(*testing.T) wire {
			return func(t *testing.T) wire { return sent.with(operator.HeaderName, sign(t, s, opID, signedAs)) }
		}
		add := func(name string, prep func(*testing.T) wire, want expect) {
			cases = append(cases, matrixCase{name + "_" + key.alg, prep, want})
		}
		add("positive_control", signed(s, op.ID, base, base), expect{kind: expectAccepted})
		add("forged_signature", func(t *testing.T) wire {
			return base.with(operator.HeaderName, sign(t, must(key.forge(matrixClock)), op.ID, base))
		}, refused(operator.ReasonBadSignature))
		add("key_confusion", func(t *testing.T) wire {
			// Signed by this key, claimed by the other trusted key.
			h, err := operator.ParseHeader(sign(t, s, op.ID, base))
			if err != nil {
				t.Fatal(err)
			}
			h.KeyID = fx.keys.ops[(i+1)%len(fx.keys.ops)].kid
			v, err := h.MarshalText()
			if err != nil {
				t.Fatal(err)
			}
			return base.with(operator.HeaderName, string(v))
		}, refused(operator.ReasonBadSignature))
		add("stale_timestamp", signed(must(key.signer(shifted(-matrixWindowPlus), matrixBase)), op.ID, base, base),
			refused(operator.ReasonStaleTimestamp))
		add("future_timestamp", signed(must(key.signer(shifted(matrixWindowPlus), matrixBase)), op.ID, base, base),
			refused(operator.ReasonFutureTimestamp))
		add("replayed_nonce", func(t *testing.T) wire {
			w := base.with(operator.HeaderName, sign(t, s, op.ID, base))
			// The first may succeed or fail for domain reasons, but it
			// must pass the credential check, or this is no replay.
			if res := fx.send(t, w); res.status == http.StatusUnauthorized {
				t.Fatalf("the first request of the replay was refused: %s %s", res.Code, res.Reason)
			}
			return w
		}, refused(operator.ReasonReplayedNonce))
		add("other_operation", signed(s, otherOp, base, base), refused(operator.ReasonBadSignature))
		add("other_base_url", signed(must(key.signer(matrixClock, "https://evil.test")), op.ID, base, base),
			refused(operator.ReasonBadSignature))
		otherMethod := base
		otherMethod.method = http.MethodGet
		if op.Method == http.MethodGet {
			otherMethod.method = http.MethodPost
		}
		add("other_method", signed(s, op.ID, otherMethod, base), refused(operator.ReasonBadSignature))
		if hasPathParams {
			// Signed for one resource, sent to another.
			add("tampered_path", signed(s, op.ID, base, b.build(t, op, true)), refused(operator.ReasonBadSignature))
		} else {
			// Signed for another path, sent to the route's own.
			elsewhere := base
			elsewhere.path = "/v0" + base.path
			add("tampered_path", signed(s, op.ID, elsewhere, base), refused(operator.ReasonBadSignature))
		}
		added := base
		added.query = addQuery(declared, base.query)
		add("tampered_query_added", signed(s, op.ID, base, added), refused(operator.ReasonBadSignature))
		if base.query != "" {
			dropped := base
			dropped.query = ""
			add("tampered_query_dropped", signed(s, op.ID, base, dropped), refused(operator.ReasonBadSignature))
			changed := base
			changed.query = changeQuery(t, base.query)
			add("tampered_query_value", signed(s, op.ID, base, changed), refused(operator.ReasonBadSignature))
		}
		if op.Body != nil {
			tampered := base
			tampered.body = tamperBody(t, base.body)
			add("tampered_body", signed(s, op.ID, base, tampered), refused(operator.ReasonBadSignature))
			// The same JSON value in other bytes: the signature covers
			// the raw body, not its meaning.
			spaced := base
			spaced.body = append(slices.Clone(base.body), '\n')
			add("tampered_body_bytes", signed(s, op.ID, base, spaced), refused(operator.ReasonBadSignature))
			// A signature over no body is no blank cheque for any body.
			empty := base
			empty.body = []byte{}
			add("tampered_body_from_empty", signed(s, op.ID, empty, base), refused(operator.ReasonBadSignature))
		}
	}
	return cases
}

// addQuery appends a parameter to query: one the operation declares and
// the query lacks (so the tampered request is one the route would serve),
// or an undeclared one.
func addQuery(declared []opParam, query string) string {
	v, _ := url.ParseQuery(query)
	add := "x=1"
	for _, p := range declared {
		if p.in == "query" && !v.Has(p.name) {
			val := "x"
			switch p.kind {
			case reflect.Int, reflect.Int64, reflect.Uint64, reflect.Uint:
				val = "5"
			}
			add = url.QueryEscape(p.name) + "=" + val
			break
		}
	}
	if query == "" {
		return add
	}
	return query + "&" + add
}

// changeQuery changes the value of every parameter in query.
func changeQuery(t testing.TB, query string) string {
	t.Helper()
	v, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	for k := range v {
		v.Set(k, v.Get(k)+"0")
	}
	return v.Encode()
}

func (fx *matrixFixture) agentCases(t *testing.T, b builder, op contract.Operation) []matrixCase {
	refused := func(code string) expect {
		return expect{kind: expectRefused, status: http.StatusUnauthorized, code: code}
	}
	// The body of pay.create is a fresh signed instruction each time, so a
	// request that gets through is a payment that would settle.
	fresh := func(edit func(t *testing.T, w wire) wire) func(*testing.T) wire {
		return func(t *testing.T) wire { return edit(t, b.build(t, op, false)) }
	}
	bearer := func(v string) func(*testing.T) wire {
		return fresh(func(_ *testing.T, w wire) wire { return w.with("Authorization", v) })
	}
	signedBy := func(key matrixOpKey) func(t *testing.T, w wire) wire {
		return func(t *testing.T, w wire) wire {
			return w.with(operator.HeaderName, sign(t, mustSigner(t)(key.signer(matrixClock, matrixBase)), op.ID, w))
		}
	}
	id, secret, err := auth.ParseCredential(fx.cred)
	if err != nil {
		t.Fatal(err)
	}
	wrongSecret := strings.Repeat("A", len(secret))
	cases := []matrixCase{
		{"no_credential", fresh(func(_ *testing.T, w wire) wire { return w }), refused(contract.CodeAuthMissing)},
	}
	for _, key := range fx.keys.ops {
		cases = append(cases, matrixCase{"operator_signature_only_" + key.alg, fresh(signedBy(key)), refused(contract.CodeAuthMissing)})
	}
	cases = append(cases,
		matrixCase{"operator_signature_and_malformed_bearer", fresh(func(t *testing.T, w wire) wire {
			return signedBy(fx.keys.ops[0])(t, w.with("Authorization", "Bearer not-a-credential"))
		}), refused(contract.CodeAuthInvalid)},
		matrixCase{"malformed_bearer", bearer("Bearer not-a-credential"), refused(contract.CodeAuthInvalid)},
		matrixCase{"wrong_scheme", bearer("Basic " + base64.StdEncoding.EncodeToString([]byte("agent:"+fx.cred))), refused(contract.CodeAuthInvalid)},
		matrixCase{"unknown_credential", bearer("Bearer svc_ak_01JABCDEFGHJKMNPQRSTVWXYZ0_" + secret), refused(contract.CodeAuthInvalid)},
		matrixCase{"wrong_secret", bearer("Bearer svc_" + id + "_" + wrongSecret), refused(contract.CodeAuthInvalid)},
		matrixCase{"revoked_credential", bearer("Bearer " + fx.revokedCred), refused(contract.CodeAuthInvalid)},
		// A DPoP-bound key used as a bearer token is a missing proof.
		matrixCase{"dpop_bound_as_bearer", bearer("Bearer " + fx.dpopCred), expect{kind: expectRefused,
			status: http.StatusUnauthorized, code: contract.CodeAuthInvalid, reason: "missing_proof"}},
		matrixCase{"positive_control", bearer("Bearer " + fx.cred), expect{kind: expectAccepted}},
	)
	return cases
}

// eitherCases attacks an operation an agent credential or an operator
// signature opens. It is the agent cases and the operator cases, but where
// the two meet: a request without the Svc-Operator header is an agent's
// (no credential is auth.missing, and the verifier is never asked); one
// with it is the operator's, and the signature alone decides (a valid
// agent credential beside a bad signature is still refused, a valid
// signature beside a broken agent credential is accepted). Another agent
// key reads the record, but not the fixture key's intents; an operator
// reads them.
func (fx *matrixFixture) eitherCases(t *testing.T, b builder, op contract.Operation, otherOp string) []matrixCase {
	base := b.build(t, op, false)
	readsOwnIntent := slices.Contains(op.Problems, pay.CodeIntentNotFound)
	must := mustSigner(t)
	var cases []matrixCase
	for _, c := range fx.agentCases(t, b, op) {
		switch {
		case strings.HasPrefix(c.name, "operator_signature_only_"):
			// An operator signature opens the route.
			c.want = expect{kind: expectAccepted, status: http.StatusOK}
		case c.name == "operator_signature_and_malformed_bearer":
			// The signature decides; the bearer beside it is not read.
			c.want = expect{kind: expectAccepted, status: http.StatusOK}
		case c.name == "positive_control":
			c.want.status = http.StatusOK
		}
		cases = append(cases, c)
	}
	otherAgent := expect{kind: expectAccepted, status: http.StatusOK}
	if readsOwnIntent {
		otherAgent = expect{kind: expectRefused, status: http.StatusNotFound, code: pay.CodeIntentNotFound}
	}
	cases = append(cases, matrixCase{"other_agent", func(*testing.T) wire { return base.with("Authorization", "Bearer "+fx.otherCred) }, otherAgent})
	for _, c := range fx.operatorCases(t, b, op, otherOp) {
		switch {
		case c.name == "no_credential", c.name == "agent_bearer":
			continue // agent requests, above
		case strings.HasPrefix(c.name, "positive_control_"):
			c.want.status = http.StatusOK
		}
		cases = append(cases, c)
	}
	for _, key := range fx.keys.ops {
		cases = append(cases,
			matrixCase{"operator_signature_and_agent_bearer_" + key.alg, func(t *testing.T) wire {
				w := base.with("Authorization", "Bearer "+fx.otherCred)
				return w.with(operator.HeaderName, sign(t, must(key.signer(matrixClock, matrixBase)), op.ID, w))
			}, expect{kind: expectAccepted, status: http.StatusOK}},
			matrixCase{"wrong_operator_key_and_agent_bearer_" + key.alg, func(t *testing.T) wire {
				w := base.with("Authorization", "Bearer "+fx.cred)
				return w.with(operator.HeaderName, sign(t, must(key.forge(matrixClock)), op.ID, w))
			}, expect{kind: expectRefused, status: http.StatusUnauthorized, code: contract.CodeOperatorUnauthorized,
				reason: operator.ReasonBadSignature, refusals: 1}},
		)
	}
	cases = append(cases, matrixCase{"empty_operator_header_and_agent_bearer", func(*testing.T) wire {
		return base.with("Authorization", "Bearer "+fx.cred).with(operator.HeaderName, "")
	}, expect{kind: expectRefused, status: http.StatusUnauthorized, code: contract.CodeOperatorUnauthorized,
		reason: operator.ReasonMissingHeader, refusals: 1}})
	return cases
}

func (fx *matrixFixture) openCases(t *testing.T, b builder, op contract.Operation) []matrixCase {
	base := b.build(t, op, false)
	open := expect{kind: expectOpen}
	garbageOp := `keyid="op-ed", ts=1, nonce="AAAAAAAAAAAAAAAAAAAAAA", sig=:AAAA:`
	fixed := func(w wire) func(*testing.T) wire { return func(*testing.T) wire { return w } }
	return []matrixCase{
		{"no_credential", fixed(base), open},
		{"garbage_bearer", fixed(base.with("Authorization", "Bearer garbage")), open},
		{"revoked_bearer", fixed(base.with("Authorization", "Bearer "+fx.revokedCred)), open},
		{"garbage_operator_header", fixed(base.with(operator.HeaderName, garbageOp)), open},
		{"garbage_both", fixed(base.with("Authorization", "Basic Og==").with(operator.HeaderName, garbageOp)), open},
	}
}

// TestNonceSurvivesRestart replays, against a new server process over
// the same durable store, a signed operator request the previous process
// accepted: the nonce must still be spent.
func TestNonceSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	keys := newMatrixKeys(t)
	open := func() *pebblestore.Store {
		st, err := pebblestore.Open(dir, &pebblestore.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	op, ok := product.Model().Operation("operator.kill_switch")
	if !ok || op.Credential != contract.CredentialOperator {
		t.Fatal("operator.kill_switch is not an operator operation of the contract")
	}
	off := false
	body, err := json.Marshal(pay.KillSwitchRequest{Engaged: &off, Rationale: matrixRationale})
	if err != nil {
		t.Fatal(err)
	}
	base := wire{method: op.Method, path: op.Path, body: body, header: http.Header{"Content-Type": {contract.MediaJSON}}}
	signer := mustSigner(t)(keys.ops[1].signer(matrixClock, matrixBase)) // P-256: the slower key path
	w := base.with(operator.HeaderName, sign(t, signer, op.ID, base))

	st1 := open()
	first := newMatrixStack(t, st1, keys)
	if res := first.send(t, w); res.status != http.StatusOK {
		t.Fatalf("first process: status %d %s, want 200\n%s", res.status, res.Code, res.body)
	}
	if err := first.log.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st1.Close(); err != nil {
		t.Fatal(err)
	}

	st2 := open()
	t.Cleanup(func() { _ = st2.Close() })
	second := newMatrixStack(t, st2, keys)
	before := second.state(t)
	res := second.send(t, w)
	if res.status != http.StatusUnauthorized || res.Code != contract.CodeOperatorUnauthorized ||
		res.Reason != string(operator.ReasonReplayedNonce) {
		t.Fatalf("replay after restart: %d %s (reason %q), want 401 %s (reason %s)\n%s", res.status, res.Code, res.Reason,
			contract.CodeOperatorUnauthorized, operator.ReasonReplayedNonce, res.body)
	}
	if after := second.state(t); after != before {
		t.Errorf("the refused replay changed state: record size %d → %d", before.size, after.size)
	}
	if got := second.refusals.since(0); len(got) != 1 || got[0].reason != operator.ReasonReplayedNonce || got[0].keyID != keys.ops[1].kid {
		t.Errorf("OnRefused calls %+v, want one replayed_nonce for %s", got, keys.ops[1].kid)
	}
	// Control: the new process accepts a fresh signature, so the refusal
	// above is the nonce's doing.
	fresh := base.with(operator.HeaderName, sign(t, signer, op.ID, base))
	if res := second.send(t, fresh); res.status != http.StatusOK {
		t.Fatalf("fresh signature after restart: status %d %s, want 200\n%s", res.status, res.Code, res.body)
	}
}

// matrixLimiter is a limiter far above what the matrix sends: rate limits
// have their own test; here they only must not change a cell's answer.
func matrixLimiter(t testing.TB) *auth.Limiter {
	t.Helper()
	l, err := auth.NewLimiter(&auth.LimiterOptions{Rate: 1e6, Burst: 1e6, Now: matrixClock})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// matrixUsage counts in memory only during the test (its flush interval is
// a day), so refused requests leave the store byte for byte unchanged.
func matrixUsage(t testing.TB, st store.Store) *auth.Usage {
	u := auth.NewUsage(st, &auth.UsageOptions{Now: matrixClock, FlushEvery: 24 * time.Hour})
	t.Cleanup(func() { _ = u.Close(context.Background()) })
	return u
}
