package identity

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/internal/schematest"
	"github.com/countersign/countersign/internal/seqlist"
	"github.com/countersign/countersign/netguard"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// deployment is one identity service over its own store and record.
type deployment struct {
	st    store.Store
	log   *audit.Log
	clock *fakeClock
	keys  []ed25519.PrivateKey
	opts  Options
	svc   *Service
}

var testPolicy = pay.Policy{
	Rails:      []pay.RailPolicy{{Name: "sandbox-card", Reversibility: gate.Reversible, Finality: gate.FinalityInstant}},
	DenyPayees: []string{}, DenyAgents: []string{}, BreakerAfter: 5, ApprovalWindowSeconds: 86400,
	IdempotencyRetentionSeconds: 604800,
}

func newDeployment(t testing.TB, edit func(*Options)) *deployment {
	t.Helper()
	d := &deployment{st: memstore.New(&memstore.Options{RetryRate: 0.05}),
		clock: &fakeClock{t: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)}}
	_, recKey, _ := ed25519.GenerateKey(nil)
	var err error
	d.log, err = audit.Open(t.Context(), d.st, recKey, &audit.Options{Now: d.clock.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	_, k, _ := ed25519.GenerateKey(nil)
	d.keys = []ed25519.PrivateKey{k}
	ops := []contract.Operation{
		{ID: "pay.create", Method: "POST", Path: "/pay", Summary: "Pay", Credential: contract.CredentialAgent, MovesValue: true},
		{ID: "audit.list", Method: "GET", Path: "/audit", Summary: "Read", Credential: contract.CredentialAgent},
		{ID: "operator.refund", Method: "POST", Path: "/operator/refund", Summary: "Refund", Credential: contract.CredentialOperator, MovesValue: true},
	}
	d.opts = Options{
		Store: d.st, Log: d.log, Now: d.clock.Now, Logger: slog.New(slog.DiscardHandler),
		NewKey: func(context.Context) (ed25519.PrivateKey, error) {
			_, k, err := ed25519.GenerateKey(nil)
			if err == nil {
				d.keys = append(d.keys, k)
			}
			return k, err
		},
		Facts: Sources{
			Policy: func() pay.Policy { return testPolicy },
			Mandates: func(context.Context) ([]pay.KnownMandate, error) {
				return []pay.KnownMandate{{ID: "mdt-1", Agent: "ab", Payees: []string{"*"}, Currency: "USD",
					PerTxCapMinor: 500, PerPeriodCapMinor: 5000, Period: gate.Day, Rails: []string{"sandbox-card"},
					ConfirmAboveMinor: 100, Approvals: 1, ExpiresAt: d.clock.Now().Add(24 * time.Hour)}}, nil
			},
			Operations: ops, Operator: OperatorFacts{ID: "op-test"}, RecordOrigin: d.log.Origin(),
		}.Facts,
	}
	if edit != nil {
		edit(&d.opts)
	}
	d.reopen(t)
	return d
}

// reopen opens the service again over the same store, as a restart does.
func (d *deployment) reopen(t testing.TB) {
	t.Helper()
	o := d.opts
	o.Keys = slices.Clone(d.keys)
	svc, err := Open(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	d.svc = svc
}

// appendEntry appends a synthetic record entry, as the money path would.
func (d *deployment) appendEntry(t testing.TB, typ string, data any) {
	t.Helper()
	b, _ := json.Marshal(data)
	err := d.log.Update(t.Context(), func(txn store.Txn) error {
		_, err := d.log.Append(txn, audit.Record{Type: typ, Actor: audit.Actor{Kind: "system", ID: "test"}, Data: b})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (d *deployment) disclose(t testing.TB, env string) []byte {
	t.Helper()
	b, err := d.svc.Disclose(t.Context(), env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func documentOf(t testing.TB, env []byte) Disclosure {
	t.Helper()
	v := Verify(env, Policy{RequireFresh: new(bool)})
	if v.Disclosure == nil {
		t.Fatalf("envelope does not parse: %v", v.Checks)
	}
	return *v.Disclosure
}

func TestDisclosureRoundTrip(t *testing.T) {
	d := newDeployment(t, nil)
	sch := loadSchemas(t)
	for _, env := range []string{EnvelopeV1, EnvelopeJWS} {
		raw := d.disclose(t, env)
		v := Verify(raw, Policy{Now: d.clock.Now(), RequireEnforcedConstitution: true, RequireAuditAnchor: true,
			RequiredHardConstraints: []string{"per-transaction-cap", "kill-switch"}, MinAttestationLevel: "none"})
		if v.Outcome != OutcomeTransact || v.Envelope != env {
			t.Fatalf("%s: our verifier refuses our disclosure: %v %v", env, v.Failed, v.Checks)
		}
		schema := sch.v1
		if env == EnvelopeJWS {
			schema = sch.jws
		}
		if err := schematest.Validate(t, schema, raw); err != nil {
			t.Errorf("%s envelope is not valid against the official schema: %v", env, err)
		}
		canon, _ := Canonicalize(v.Disclosure)
		if err := schematest.Validate(t, sch.doc, canon); err != nil {
			t.Errorf("%s: the document is not valid against disclosure.schema.json: %v", env, err)
		}
		doc := v.Disclosure
		if doc.AgentID != d.svc.AgentID() || doc.AgentID != hex.EncodeToString(d.keys[0].Public().(ed25519.PublicKey)) {
			t.Errorf("agentId %s is not the identity key in hex", doc.AgentID)
		}
		if !doc.Constitution.Enforced || doc.Constitution.Digest != GateConstitution(testPolicy, d.log.Origin()).Digest {
			t.Errorf("constitution is not the gate's: %+v", doc.Constitution)
		}
		if got := doc.Tools.Tools; len(got) != 3 || got[0].Access != "gated" || got[1].Access != "read_only" || got[2].Access != "operator_only" || !got[2].MovesValue {
			t.Errorf("tools are not the model's operations: %+v", got)
		}
		if len(doc.Capital.Mandates) != 1 || doc.Capital.Mandates[0].Label != "mdt-1" || doc.Capital.Custody != "non_custodial" {
			t.Errorf("capital: %+v", doc.Capital)
		}
		if doc.Operator.OperatorID != "op-test" || doc.Operator.DeniabilityBoundary == "" {
			t.Errorf("operator: %+v", doc.Operator)
		}
	}
}

// TestHistoryEqualsRecordScan: the disclosed counts are a scan of the
// record, done here independently through audit pages.
func TestHistoryEqualsRecordScan(t *testing.T) {
	d := newDeployment(t, func(o *Options) { o.Refresh = time.Nanosecond })
	outcomes := []string{"allow", "deny", "confirm", "deny", "allow", "deny"}
	for i, o := range outcomes {
		d.clock.Add(time.Second)
		d.appendEntry(t, "gate.decision", map[string]any{"outcome": o, "stage": "policy"})
		if o == "allow" {
			d.appendEntry(t, "payment.settled", map[string]any{"id": i})
		}
		d.appendEntry(t, "webhook.endpoint_created", map[string]any{})
		if i == 2 {
			d.clock.Add(time.Second)
			_ = d.disclose(t, EnvelopeV1) // advance the counter halfway: it must continue, not restart
		}
	}
	d.clock.Add(time.Second)
	doc := documentOf(t, d.disclose(t, EnvelopeV1))

	var total, settled, blocked int64
	var first, lastActive, head string
	cursor := ""
	for {
		page, err := d.log.Page(t.Context(), cursor, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Data {
			if first == "" {
				first = e.At
			}
			head = e.Hash
			switch e.Type {
			case "gate.decision":
				total++
				lastActive = e.At
				var g struct{ Outcome string }
				_ = json.Unmarshal(e.Data, &g)
				if g.Outcome == "deny" {
					blocked++
				}
			case "payment.settled":
				settled++
			}
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	at := func(s string) string { v, _ := time.Parse(time.RFC3339Nano, s); return Timestamp(v) }
	want := HistorySummary{TotalDecisions: total, SettledCount: settled, BlockedCount: blocked,
		FirstSeen: at(first), LastActive: at(lastActive)}
	if doc.History.Summary != want || total != 6 || blocked != 3 || settled != 2 {
		t.Errorf("history %+v, a scan of the record says %+v", doc.History.Summary, want)
	}
	if doc.History.ChainAnchor != head || doc.AuditAnchor != head {
		t.Errorf("anchors %s / %s, record head %s", doc.History.ChainAnchor, doc.AuditAnchor, head)
	}
	tally, err := Summarize(t.Context(), d.log, 0)
	if err != nil || tally.Summary() != want {
		t.Errorf("Summarize %+v %v", tally.Summary(), err)
	}
}

func TestDisclosureCache(t *testing.T) {
	d := newDeployment(t, func(o *Options) { o.Refresh = time.Second; o.TTL = time.Minute })
	first := d.disclose(t, EnvelopeV1)
	if again := d.disclose(t, EnvelopeV1); !bytes.Equal(first, again) {
		t.Fatal("an unchanged deployment re-signed its disclosure")
	}
	// The head moves: within Refresh the cached disclosure is still served.
	d.appendEntry(t, "gate.decision", map[string]any{"outcome": "allow"})
	d.clock.Add(500 * time.Millisecond)
	if again := d.disclose(t, EnvelopeV1); !bytes.Equal(first, again) {
		t.Fatal("re-signed before Refresh passed")
	}
	d.clock.Add(600 * time.Millisecond)
	second := d.disclose(t, EnvelopeV1)
	a, b := documentOf(t, first), documentOf(t, second)
	if bytes.Equal(first, second) || a.Nonce == b.Nonce || a.DisclosureID == b.DisclosureID || a.AuditAnchor == b.AuditAnchor {
		t.Fatal("a moved head must give a new disclosure, with a new nonce, id and anchor")
	}
	if b.History.Summary.TotalDecisions != 1 {
		t.Errorf("history not advanced: %+v", b.History.Summary)
	}
	// The head does not move: re-signed only after half the TTL.
	d.clock.Add(29 * time.Second)
	if again := d.disclose(t, EnvelopeV1); !bytes.Equal(second, again) {
		t.Fatal("re-signed an unchanged disclosure before half its window")
	}
	d.clock.Add(2 * time.Second)
	if again := d.disclose(t, EnvelopeV1); bytes.Equal(second, again) {
		t.Fatal("served a disclosure past half its freshness window")
	}
}

func TestRotation(t *testing.T) {
	d := newDeployment(t, nil)
	agentID := d.svc.AgentID()
	before := d.disclose(t, EnvelopeJWS)
	r, err := d.svc.Rotate(t.Context(), OperatorCall{Operator: "op-test", Rationale: "scheduled rotation"})
	if err != nil {
		t.Fatal(err)
	}
	if r.AgentID != agentID || r.ChainLen != 1 || r.PublicKey != hex.EncodeToString(d.keys[1].Public().(ed25519.PublicKey)) {
		t.Fatalf("rotation %+v", r)
	}
	for _, env := range []string{EnvelopeV1, EnvelopeJWS} {
		raw := d.disclose(t, env)
		if bytes.Equal(raw, before) {
			t.Fatal("the cached disclosure survived the rotation")
		}
		v := Verify(raw, Policy{Now: d.clock.Now()})
		if v.Outcome != OutcomeTransact || v.AgentID != agentID || len(v.RotationChain) != 1 {
			t.Fatalf("%s after rotation: %s %v", env, v.Outcome, v.Checks)
		}
	}
	// The chain is durable: a restart with both keys signs with the new one.
	d.reopen(t)
	if !d.svc.PublicKey().Equal(d.keys[1].Public()) || len(d.svc.RotationChain()) != 1 || d.svc.AgentID() != agentID {
		t.Fatal("a restart lost the rotation")
	}
	if _, err := d.svc.Rotate(t.Context(), OperatorCall{Operator: "op-test", Rationale: "again"}); err != nil {
		t.Fatal(err)
	}
	if v := Verify(d.disclose(t, EnvelopeV1), Policy{Now: d.clock.Now()}); v.Outcome != OutcomeTransact || len(v.RotationChain) != 2 {
		t.Fatalf("two hops: %v", v.Checks)
	}
	// Without the key the chain ends at, Open refuses rather than sign with a stale key.
	o := d.opts
	o.Keys = d.keys[:2]
	if _, err := Open(t.Context(), o); err == nil {
		t.Fatal("Open without the current key succeeded")
	}
	o.NewKey = nil
	o.Keys = d.keys
	svc, err := Open(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Rotate(t.Context(), OperatorCall{}); !errors.Is(err, ErrRotationUnavailable) {
		t.Errorf("rotation without NewKey: %v", err)
	}
}

// entries returns the record's entries of one type.
func (d *deployment) entries(t testing.TB, typ string) []audit.Entry {
	t.Helper()
	var out []audit.Entry
	for e, err := range d.log.Entries(t.Context(), 1, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func TestVerifyRecordsEveryDecision(t *testing.T) {
	us, them := newDeployment(t, nil), newDeployment(t, nil)
	them.clock.t = us.clock.t
	agent := audit.Actor{Kind: "agent", ID: "ak_1"}
	theirs := them.disclose(t, EnvelopeV1)
	tampered := bytes.Replace(theirs, []byte(`"enforced":true`), []byte(`"enforced":false`), 1)
	for _, tc := range []struct {
		name, outcome string
		req           VerifyRequest
		failed        []string
	}{
		{"valid", OutcomeTransact, VerifyRequest{Envelope: theirs}, nil},
		{"tampered", OutcomeRefuse, VerifyRequest{Envelope: tampered}, []string{"signature"}},
		{"malformed", OutcomeRefuse, VerifyRequest{Envelope: []byte(`{"disclosure":`)}, []string{"schema"}},
		{"tightened", OutcomeRefuse, VerifyRequest{Envelope: theirs, Policy: &Policy{RequireRedTeam: true}}, []string{"redTeamPresent"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(us.entries(t, EntryVerified))
			v, err := us.svc.Verify(t.Context(), tc.req, agent, "req_1")
			if err != nil {
				t.Fatal(err)
			}
			if v.Outcome != tc.outcome || !slices.Equal(v.Failed, tc.failed) && !(len(tc.failed) == 0 && len(v.Failed) == 0) {
				t.Fatalf("outcome %s failed %v, want %s %v", v.Outcome, v.Failed, tc.outcome, tc.failed)
			}
			es := us.entries(t, EntryVerified)
			if len(es) != before+1 || es[len(es)-1].Seq != v.AuditSeq {
				t.Fatalf("decision not recorded: %d entries, seq %d", len(es), v.AuditSeq)
			}
			var data verifiedData
			if err := json.Unmarshal(es[len(es)-1].Data, &data); err != nil {
				t.Fatal(err)
			}
			if data.Outcome != v.Outcome || data.Digest != v.Digest || data.AgentID != v.AgentID || data.PolicyHash != v.PolicyHash ||
				!slices.Equal(data.Failed, nonNil(v.Failed)) || bytes.Contains(es[len(es)-1].Data, []byte("constitution")) {
				t.Errorf("recorded %+v for decision %+v", data, v.Decision)
			}
		})
	}
	// The last decision about them is their trust.
	c, err := us.svc.Resolve(t.Context(), them.svc.AgentID(), ResolveOptions{}, agent, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Trust == nil || c.Trust.Outcome != OutcomeRefuse || !slices.Equal(c.Trust.Failed, []string{"redTeamPresent"}) {
		t.Errorf("trust %+v", c.Trust)
	}
	// A call may only tighten.
	loose := false
	if _, err := us.svc.Verify(t.Context(), VerifyRequest{Envelope: theirs, Policy: &Policy{RequireFresh: &loose}}, agent, ""); !errors.Is(err, ErrBadPolicy) {
		t.Errorf("loosening: %v", err)
	}
	// Revocations this deployment recorded are refused, in either id form.
	key := them.keys[0].Public().(ed25519.PublicKey)
	if _, err := us.svc.Revoke(t.Context(), RevokeRequest{ID: hex.EncodeToString(key), Reason: "compromised"},
		OperatorCall{Operator: "op", Rationale: "key reported stolen"}); err != nil {
		t.Fatal(err)
	}
	if v, _ := us.svc.Verify(t.Context(), VerifyRequest{Envelope: theirs}, agent, ""); v.Outcome != OutcomeRefuse || !slices.Contains(v.Failed, "revocation") {
		t.Errorf("revoked agent: %s %v", v.Outcome, v.Failed)
	}
	signed, _ := SignRevocation(them.keys[0], "dsc_other", "superseded", us.clock.Now())
	signed.Reason = "forged"
	if _, err := us.svc.Revoke(t.Context(), RevokeRequest{Signed: &signed}, OperatorCall{Operator: "op", Rationale: "a forged one"}); !errors.Is(err, ErrBadRevocation) {
		t.Errorf("a tampered signed revocation was accepted: %v", err)
	}
}

func TestHandshakeThroughTheService(t *testing.T) {
	us, them := newDeployment(t, nil), newDeployment(t, nil)
	them.clock.t = us.clock.t
	agent := audit.Actor{Kind: "agent", ID: "ak_1"}
	ch, err := us.svc.Challenge(t.Context(), "us")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := them.svc.Respond(t.Context(), ch)
	if err != nil {
		t.Fatal(err)
	}
	req := VerifyRequest{Envelope: them.disclose(t, EnvelopeJWS), Response: &resp}
	v, err := us.svc.Verify(t.Context(), req, agent, "")
	if err != nil || v.Outcome != OutcomeTransact || !slices.ContainsFunc(v.Checks, func(c Check) bool { return c.Name == "handshake" && c.OK }) {
		t.Fatalf("handshake: %v %v %v", err, v.Failed, v.Checks)
	}
	// A response is accepted once.
	if v, _ := us.svc.Verify(t.Context(), req, agent, ""); v.Outcome != OutcomeRefuse || !slices.Contains(v.Failed, "handshake") {
		t.Errorf("replayed response: %s %v", v.Outcome, v.Failed)
	}
	// Another agent's answer to our challenge is refused.
	ch2, _ := us.svc.Challenge(t.Context(), "us")
	other := newDeployment(t, nil)
	resp2, _ := other.svc.Respond(t.Context(), ch2)
	if v, _ := us.svc.Verify(t.Context(), VerifyRequest{Envelope: them.disclose(t, EnvelopeV1), Response: &resp2}, agent, ""); v.Outcome != OutcomeRefuse {
		t.Error("a response by another agent passed the handshake")
	}
	// After a rotation the handshake is signed by the new key and still binds.
	if _, err := them.svc.Rotate(t.Context(), OperatorCall{Operator: "op", Rationale: "rotation"}); err != nil {
		t.Fatal(err)
	}
	ch3, _ := us.svc.Challenge(t.Context(), "")
	resp3, _ := them.svc.Respond(t.Context(), ch3)
	if v, _ := us.svc.Verify(t.Context(), VerifyRequest{Envelope: them.disclose(t, EnvelopeV1), Response: &resp3}, agent, ""); v.Outcome != OutcomeTransact {
		t.Errorf("handshake after rotation: %v %v", v.Failed, v.Checks)
	}
	// An expired challenge is refused.
	ch4, _ := us.svc.Challenge(t.Context(), "")
	resp4, _ := them.svc.Respond(t.Context(), ch4)
	us.clock.Add(6 * time.Minute)
	them.clock.Add(6 * time.Minute)
	if v, _ := us.svc.Verify(t.Context(), VerifyRequest{Envelope: them.disclose(t, EnvelopeV1), Response: &resp4}, agent, ""); v.Outcome != OutcomeRefuse {
		t.Error("an expired challenge passed")
	}
}

// fakeDirectory resolves one merchant.
type fakeDirectory struct{}

func (fakeDirectory) Resolve(_ context.Context, ref string) (Counterparty, bool, error) {
	if ref != "shop-1" {
		return Counterparty{}, false, nil
	}
	return Counterparty{ID: "shop-1", Kind: "merchant", Rails: []string{"acp"}}, true, nil
}

func TestResolveOffline(t *testing.T) {
	d := newDeployment(t, func(o *Options) { o.Directories = []Directory{fakeDirectory{}} })
	pub, _, _ := ed25519.GenerateKey(nil)
	did, hx := DIDKey(pub), hex.EncodeToString(pub)
	if _, err := d.svc.Register(t.Context(), Registration{ID: "peer-1", BaseURL: "https://peer.example/", AgentID: hx, Rails: []string{"sandbox-card"}},
		OperatorCall{Operator: "op", Rationale: "a partner"}); err != nil {
		t.Fatal(err)
	}
	actor := audit.Actor{Kind: "agent", ID: "ak"}
	for _, tc := range []struct {
		ref, id, kind string
		registered    bool
		err           error
	}{
		{did, "peer-1", "agent", true, nil},
		{hx, "peer-1", "agent", true, nil},
		{"peer-1", "peer-1", "agent", true, nil},
		{"eip155:1:0xab16a96D359eC26a11e2C2b3d8f8B8942d5Bfcdb", "eip155:1:0xab16a96D359eC26a11e2C2b3d8f8B8942d5Bfcdb", "account", false, nil},
		{"shop-1", "shop-1", "merchant", false, nil},
		{"nobody", "", "", false, ErrNotFound},
		{"did:web:example.com", "", "", false, ErrBadRef},
		{"https://evil.example/agent", "", "", false, ErrBadRef},
		{" peer-1", "", "", false, ErrBadRef},
		{"", "", "", false, ErrBadRef},
	} {
		c, err := d.svc.Resolve(t.Context(), tc.ref, ResolveOptions{}, actor, "")
		if !errors.Is(err, tc.err) || err == nil && (c.ID != tc.id || c.Kind != tc.kind || c.Registered != tc.registered || c.Keys == nil || c.Rails == nil) {
			t.Errorf("Resolve(%q) = %+v, %v", tc.ref, c, err)
		}
	}
	c, _ := d.svc.Resolve(t.Context(), did, ResolveOptions{}, actor, "")
	if c.AgentID != did || c.Endpoints[1].URL != "https://peer.example/.well-known/agent-disclosure" || c.Rails[0] != "sandbox-card" {
		t.Errorf("registered counterparty: %+v", c)
	}
	for _, reg := range []Registration{
		{ID: "peer-1", BaseURL: "https://other.example", AgentID: DIDKey(ed25519.PublicKey(bytes.Repeat([]byte{1}, 32)))},
		{ID: "peer-2", BaseURL: "https://other.example", AgentID: did},
	} {
		if _, err := d.svc.Register(t.Context(), reg, OperatorCall{Rationale: "dup"}); !errors.Is(err, ErrCounterpartyExists) {
			t.Errorf("duplicate %s: %v", reg.ID, err)
		}
	}
	for _, reg := range []Registration{
		{ID: "Peer", BaseURL: "https://x.example", AgentID: did},
		{ID: "peer-3", BaseURL: "http://x.example", AgentID: hex.EncodeToString(bytes.Repeat([]byte{2}, 32))},
		{ID: "peer-3", BaseURL: "https://u:p@x.example", AgentID: hex.EncodeToString(bytes.Repeat([]byte{2}, 32))},
		{ID: "peer-3", BaseURL: "https://x.example", AgentID: "not-a-key"},
		{ID: "eip155:1:0xab", BaseURL: "https://x.example", AgentID: hex.EncodeToString(bytes.Repeat([]byte{2}, 32))},
	} {
		if _, err := d.svc.Register(t.Context(), reg, OperatorCall{Rationale: "bad"}); !errors.Is(err, ErrInvalidCounterparty) {
			t.Errorf("invalid %+v: %v", reg, err)
		}
	}
	page, err := d.svc.Counterparties(t.Context(), "", 1)
	if err != nil || len(page.Data) != 1 || page.HasMore {
		t.Errorf("list: %+v %v", page, err)
	}
	if _, err := d.svc.Counterparties(t.Context(), "!!", 1); !errors.Is(err, ErrBadCursor) {
		t.Errorf("bad cursor: %v", err)
	}
	if len(d.entries(t, EntryPartyAdded)) != 1 {
		t.Error("registration not recorded once")
	}
	if next := (seqlist.Pos{Seq: 1 << 40, ID: "peer-1"}).Cursor(); true {
		if p, err := d.svc.Counterparties(t.Context(), next, 10); err != nil || len(p.Data) != 0 {
			t.Errorf("page after the last: %+v %v", p, err)
		}
	}
	// A cursor of the id-ordered registry (base64url of the id) is refused.
	if _, err := d.svc.Counterparties(t.Context(), base64.RawURLEncoding.EncodeToString([]byte("peer-1")), 10); !errors.Is(err, ErrBadCursor) {
		t.Errorf("id-ordered cursor: %v", err)
	}
}

// serveADP serves a deployment's well-known disclosure and handshake, as
// the reference server's routes do.
func serveADP(t testing.TB, d *deployment) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/agent-disclosure", func(w http.ResponseWriter, r *http.Request) {
		b, err := d.svc.Disclose(r.Context(), EnvelopeV1)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		_, _ = w.Write(b)
	})
	mux.HandleFunc("POST /agent-disclosure/respond", func(w http.ResponseWriter, r *http.Request) {
		var ch Challenge
		if err := json.NewDecoder(r.Body).Decode(&ch); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		resp, err := d.svc.Respond(r.Context(), ch)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		_ = json.NewEncoder(w).Encode(resp)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

func TestResolveVerifiesARegisteredCounterparty(t *testing.T) {
	us := newDeployment(t, func(o *Options) {
		o.HTTPClient = http.DefaultClient
		o.URLs = netguard.Policy{AllowLoopback: true, AllowHTTP: true}
	})
	them, impostor := newDeployment(t, nil), newDeployment(t, nil)
	them.clock.t, impostor.clock.t = us.clock.t, us.clock.t
	theirs, fake := serveADP(t, them), serveADP(t, impostor)
	call := OperatorCall{Operator: "op", Rationale: "partners"}
	for _, reg := range []Registration{
		{ID: "them", BaseURL: theirs.URL, AgentID: them.svc.AgentID()},
		{ID: "spoofed", BaseURL: fake.URL, AgentID: DIDKey(ed25519.PublicKey(bytes.Repeat([]byte{7}, 32)))},
		{ID: "gone", BaseURL: "http://127.0.0.1:1", AgentID: DIDKey(ed25519.PublicKey(bytes.Repeat([]byte{8}, 32)))},
	} {
		if _, err := us.svc.Register(t.Context(), reg, call); err != nil {
			t.Fatal(err)
		}
	}
	actor := audit.Actor{Kind: "agent", ID: "ak"}
	for _, tc := range []struct {
		ref, outcome string
		failed       []string
	}{
		{"them", OutcomeTransact, nil},
		{"spoofed", OutcomeRefuse, []string{"expectedAgent"}},
		{"gone", OutcomeRefuse, []string{"reachable"}},
	} {
		c, err := us.svc.Resolve(t.Context(), tc.ref, ResolveOptions{Verify: true}, actor, "")
		if err != nil {
			t.Fatal(err)
		}
		if c.Trust == nil || c.Trust.Outcome != tc.outcome || !slices.Contains(c.Trust.Failed, firstOr(tc.failed)) && len(tc.failed) > 0 {
			t.Errorf("%s: trust %+v", tc.ref, c.Trust)
		}
	}
	es := us.entries(t, EntryVerified)
	if len(es) != 3 {
		t.Fatalf("%d identity.verified entries, want one per resolution", len(es))
	}
	var data verifiedData
	_ = json.Unmarshal(es[0].Data, &data)
	if data.Source != "resolve" || data.Counterparty != "them" || !data.Handshake || !slices.Contains(data.Checks, "handshake") {
		t.Errorf("recorded %+v", data)
	}
}

func firstOr(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func TestPolicyRecordedOnChange(t *testing.T) {
	d := newDeployment(t, nil)
	d.reopen(t)
	if n := len(d.entries(t, EntryPolicy)); n != 1 {
		t.Fatalf("%d gate.policy entries after a restart with the same policy, want 1", n)
	}
	d.opts.Facts = Sources{Policy: func() pay.Policy { p := testPolicy; p.BreakerAfter = 9; return p },
		Mandates: func(context.Context) ([]pay.KnownMandate, error) { return nil, nil }}.Facts
	d.reopen(t)
	es := d.entries(t, EntryPolicy)
	digest, _ := d.svc.PolicyDigest(t.Context())
	var last struct{ Digest string }
	_ = json.Unmarshal(es[len(es)-1].Data, &last)
	if len(es) != 2 || last.Digest != digest {
		t.Errorf("a changed policy: %d entries, last digest %s, in force %s", len(es), last.Digest, digest)
	}
}

func BenchmarkDiscloseCached(b *testing.B) {
	d := newDeployment(b, nil)
	d.disclose(b, EnvelopeV1)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := d.svc.Disclose(context.Background(), EnvelopeV1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestRotationAcrossProcesses: two services over one shared store (two
// servers of one deployment). A rotation through one is adopted by the
// other before it signs again, with the key from LoadKey; a server that
// cannot get that key refuses to sign rather than sign with the key
// rotated away; a rotation through a server that had not seen the first
// extends the stored chain instead of forking it.
func TestRotationAcrossProcesses(t *testing.T) {
	held := map[string]ed25519.PrivateKey{} // the keys a shared secret store would hold
	d := newDeployment(t, func(o *Options) {
		o.Shared, o.SharedRefresh = true, time.Hour
	})
	load := func(_ context.Context, pub ed25519.PublicKey) (ed25519.PrivateKey, error) {
		if k, ok := held[hex.EncodeToString(pub)]; ok {
			return k, nil
		}
		return nil, errors.New("not held")
	}
	other := func(refresh time.Duration, withLoad bool) *Service {
		o := d.opts
		o.Keys, o.SharedRefresh = d.keys[:1], refresh
		if withLoad {
			o.LoadKey = load
		}
		svc, err := Open(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	b := other(time.Nanosecond, true)  // reads the stored identity before every signature
	c := other(time.Nanosecond, false) // cannot get rotated keys
	late := other(time.Hour, true)     // has not looked since it opened
	r, err := d.svc.Rotate(t.Context(), OperatorCall{Operator: "op-test", Rationale: "scheduled rotation"})
	if err != nil {
		t.Fatal(err)
	}
	held[r.PublicKey] = d.keys[1]

	raw, err := b.Disclose(t.Context(), EnvelopeJWS)
	if err != nil {
		t.Fatal(err)
	}
	if v := Verify(raw, Policy{Now: d.clock.Now()}); v.Outcome != OutcomeTransact || len(v.RotationChain) != 1 {
		t.Fatalf("the other server's disclosure after the rotation: %s %v", v.Outcome, v.Checks)
	}
	if !b.PublicKey().Equal(d.keys[1].Public()) {
		t.Fatal("the other server still signs with the key rotated away")
	}
	if _, err := c.Disclose(t.Context(), EnvelopeV1); !errors.Is(err, ErrRotationUnavailable) {
		t.Fatalf("a server without the new key disclosed: %v", err)
	}
	if _, err := c.Respond(t.Context(), Challenge{Nonce: "n1", VerifierID: "v"}); !errors.Is(err, ErrRotationUnavailable) {
		t.Fatalf("a server without the new key answered a challenge: %v", err)
	}
	// The late server rotates: it first adopts the stored chain, so the
	// new hop starts from the key the first rotation moved to.
	r2, err := late.Rotate(t.Context(), OperatorCall{Operator: "op-test", Rationale: "second rotation elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	if r2.ChainLen != 2 {
		t.Fatalf("second rotation through another server: chain of %d, want 2", r2.ChainLen)
	}
	held[r2.PublicKey] = d.keys[2]
	raw, err = b.Disclose(t.Context(), EnvelopeV1)
	if err != nil {
		t.Fatal(err)
	}
	if v := Verify(raw, Policy{Now: d.clock.Now()}); v.Outcome != OutcomeTransact || len(v.RotationChain) != 2 {
		t.Fatalf("after two rotations through two servers: %s %v", v.Outcome, v.Checks)
	}
}
