package memory

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
)

// route is one memory route, run with a mandate token and a caller.
type route struct {
	name  string
	right string // the right it needs
	run   func(f *fixture, tok string, c Caller) error
}

// mandateRoutes returns the four routes that take a mandate, over
// namespace ns; forget erases a fresh record each time it is allowed.
func mandateRoutes(ns string) []route {
	return []route{
		{"recall", "canRead", func(f *fixture, tok string, c Caller) error {
			_, err := f.svc.Recall(f.t.Context(), c, RecallRequest{Mandate: tok, Namespace: ns})
			return err
		}},
		{"assemble", "canRead", func(f *fixture, tok string, c Caller) error {
			_, err := f.svc.Assemble(f.t.Context(), c, AssembleRequest{Mandate: tok, Namespace: ns, Budget: Budget{MaxTokens: 1000}})
			return err
		}},
		{"remember", "canWrite", func(f *fixture, tok string, c Caller) error {
			_, err := f.svc.Remember(f.t.Context(), c, RememberRequest{Mandate: tok, IdempotencyKey: fmt.Sprintf("mandate-%d", keyCounter.Add(1)),
				Namespace: ns, Subject: "user:9", Kind: "note", Body: json.RawMessage(`"a new fact"`), ValidFrom: t0,
				Source: Source{Kind: "agent", Ref: f.agent}}, "req_m")
			return err
		}},
		{"forget", "canErase", func(f *fixture, tok string, _ Caller) error {
			victim := f.mustRemember(ns, fact{subject: "victim", body: "to be erased"})
			_, err := f.svc.Forget(f.t.Context(), ForgetRequest{Mandate: tok, RootID: victim.ID, Rationale: "the person asked for it"}, f.op())
			return err
		}},
	}
}

// TestMandateRefusals runs each route with each kind of bad mandate or
// caller: each is refused with its stable code and reason, and nothing
// changes (no record entry, the same answers).
func TestMandateRefusals(t *testing.T) {
	f := newFixture(t, nil)
	a := f.mustRemember("ns", fact{subject: "user:1", body: "lives in Paris", from: t0.Add(-48 * time.Hour)})
	f.mustRemember("ns", fact{subject: "user:1", body: "lives in Berlin", from: t0, edges: []Edge{{Type: EdgeCites, To: a.ID}}})
	f.mustRemember("ns", fact{subject: "user:2", body: "likes tea"})

	// Another operator key, an agent the caller may not act for.
	_, strangerKey, _ := ed25519.GenerateKey(nil)
	otherPub, _, _ := ed25519.GenerateKey(nil)
	otherAgent := hex.EncodeToString(otherPub)

	// Revocation the real way: pay's operator route over the same store.
	revoke := func(id string) {
		t.Helper()
		mv, err := pay.NewMandateVerifier([]pay.OperatorKey{{KeyID: "op", Public: f.opKey.Public()}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		money, err := pay.New(pay.Options{Store: f.st, Log: f.log, Rails: &settle.Registry{}, Mandates: mv, Now: f.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := money.RevokeMandate(t.Context(), id, f.op()); err != nil {
			t.Fatal(err)
		}
	}
	revoke("mm-revoked")

	now := f.clock.Now().Truncate(time.Second)
	rightOff := map[string]func(*MandateClaims){
		"canRead":  func(c *MandateClaims) { c.CanRead = false },
		"canWrite": func(c *MandateClaims) { c.CanWrite = false },
		"canErase": func(c *MandateClaims) { c.CanErase = false },
	}
	sign := func(c MandateClaims, key ed25519.PrivateKey, kid string) string {
		tok, err := SignMandate(c, key, kid)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	claims := func(mod func(*MandateClaims)) MandateClaims {
		c := MandateClaims{ID: "mm-case", Agent: f.agent, IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(24 * time.Hour),
			Namespace: "ns", CanRead: true, CanWrite: true, CanErase: true}
		if mod != nil {
			mod(&c)
		}
		return c
	}
	spend, err := pay.SignMandate(pay.MandateClaims{ID: "spend-1", Agent: f.agent, IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour),
		Payees: []string{"*"}, Currency: "USD", PerTxCapMinor: 100, PerPeriodCapMinor: 1000, Period: gate.Day,
		Rails: []string{"sandbox-card"}}, f.opKey, "op")
	if err != nil {
		t.Fatal(err)
	}
	noRights, err := pay.SignOperatorToken([]byte(fmt.Sprintf(`{"jti":"mm-x","sub":%q,"iat":%d,"exp":%d,"namespace":"ns"}`,
		f.agent, now.Add(-time.Hour).Unix(), now.Add(time.Hour).Unix())), MandateType, f.opKey, "op")
	if err != nil {
		t.Fatal(err)
	}
	unknownMember, err := pay.SignOperatorToken([]byte(fmt.Sprintf(`{"jti":"mm-x","sub":%q,"iat":%d,"exp":%d,"namespace":"ns","canRead":true,"canWrite":true,"canErase":true,"canPay":true}`,
		f.agent, now.Add(-time.Hour).Unix(), now.Add(time.Hour).Unix())), MandateType, f.opKey, "op")
	if err != nil {
		t.Fatal(err)
	}

	type tcase struct {
		name   string
		token  func(r route) string
		caller *Caller // nil: the fixture's caller
		skip   func(r route) bool
		code   error
		reason string
	}
	stranger := Caller{KeyID: "ak_stranger", Agents: []string{otherAgent}}
	cases := []tcase{
		{name: "right missing", token: func(r route) string { return sign(claims(rightOff[r.right]), f.opKey, "op") },
			code: ErrRightMissing, reason: "<right>"},
		{name: "only the other rights", token: func(r route) string {
			return sign(claims(func(c *MandateClaims) {
				rightOff[r.right](c)
				c.CanRead, c.CanWrite, c.CanErase = r.right != "canRead", r.right != "canWrite", r.right != "canErase"
			}), f.opKey, "op")
		}, code: ErrRightMissing, reason: "<right>"},
		{name: "namespace not covered", token: func(route) string {
			return sign(claims(func(c *MandateClaims) { c.Namespace = "other" }), f.opKey, "op")
		}, code: ErrRightMissing, reason: "namespace"},
		{name: "namespace prefix is not the namespace", token: func(route) string {
			return sign(claims(func(c *MandateClaims) { c.Namespace = "n" }), f.opKey, "op")
		}, code: ErrRightMissing, reason: "namespace"},
		{name: "expired", token: func(route) string {
			return sign(claims(func(c *MandateClaims) { c.IssuedAt, c.ExpiresAt = now.Add(-2*time.Hour), now.Add(-time.Second) }), f.opKey, "op")
		}, code: ErrMandateInvalid, reason: "mandate_expired"},
		{name: "not yet valid", token: func(route) string {
			return sign(claims(func(c *MandateClaims) { c.IssuedAt, c.ExpiresAt = now.Add(2*time.Minute), now.Add(time.Hour) }), f.opKey, "op")
		}, code: ErrMandateInvalid, reason: "mandate_not_yet_valid"},
		{name: "spend mandate", token: func(route) string { return spend }, code: ErrMandateInvalid, reason: "mandate_wrong_type"},
		{name: "unknown operator key", token: func(route) string { return sign(claims(nil), strangerKey, "op-stranger") },
			code: ErrMandateInvalid, reason: "mandate_unknown_key"},
		{name: "another key under a known kid", token: func(route) string { return sign(claims(nil), strangerKey, "op") },
			code: ErrMandateInvalid, reason: "mandate_bad_signature"},
		{name: "revoked", token: func(route) string {
			return sign(claims(func(c *MandateClaims) { c.ID = "mm-revoked" }), f.opKey, "op")
		}, code: ErrMandateInvalid, reason: "mandate_revoked"},
		{name: "caller may not act for the mandate's agent", token: func(route) string { return sign(claims(nil), f.opKey, "op") },
			caller: &stranger, skip: func(r route) bool { return r.name == "forget" }, code: ErrMandateInvalid, reason: "agent_not_permitted"},
		{name: "mandate names another agent", token: func(route) string {
			return sign(claims(func(c *MandateClaims) { c.Agent = otherAgent }), f.opKey, "op")
		}, skip: func(r route) bool { return r.name == "forget" }, code: ErrMandateInvalid, reason: "agent_not_permitted"},
		{name: "missing", token: func(route) string { return "" }, code: ErrMandateInvalid, reason: "mandate_missing"},
		{name: "malformed", token: func(route) string { return "not.a-token" }, code: ErrMandateInvalid, reason: "mandate_malformed"},
		{name: "no rights at all", token: func(route) string { return noRights }, code: ErrMandateInvalid, reason: "mandate_invalid_claims"},
		{name: "unknown claim", token: func(route) string { return unknownMember }, code: ErrMandateInvalid, reason: "mandate_invalid_claims"},
	}

	for _, r := range mandateRoutes("ns") {
		for _, tc := range cases {
			if tc.skip != nil && tc.skip(r) {
				continue
			}
			t.Run(r.name+"/"+tc.name, func(t *testing.T) {
				caller := f.caller
				if tc.caller != nil {
					caller = *tc.caller
				}
				tok := tc.token(r)
				// forget makes its victim before it runs: take the
				// "before" after that, inside the route.
				var before string
				var size uint64
				probe := r
				probe.run = func(f *fixture, tok string, c Caller) error {
					if r.name != "forget" {
						before, size = f.snapshot("ns"), f.size()
						return r.run(f, tok, c)
					}
					victim := f.mustRemember("ns", fact{subject: "victim", body: "to be erased"})
					before, size = f.snapshot("ns"), f.size()
					_, err := f.svc.Forget(f.t.Context(), ForgetRequest{Mandate: tok, RootID: victim.ID, Rationale: "the person asked for it"}, f.op())
					return err
				}
				err := probe.run(f, tok, caller)
				want := tc.reason
				if want == "<right>" {
					want = r.right
				}
				if !errors.Is(err, tc.code) {
					t.Fatalf("err = %v, want %v", err, tc.code)
				}
				if _, reason := code(err); reason != want {
					t.Fatalf("reason %q, want %q (%v)", reason, want, err)
				}
				var me *Error
				if errors.As(err, &me); me.ProblemExtensions()["reason"] != want {
					t.Fatalf("problem extensions %v", me.ProblemExtensions())
				}
				if got := f.size(); got != size {
					t.Fatalf("a refused %s appended %d record entries", r.name, got-size)
				}
				if after := f.snapshot("ns"); after != before {
					t.Fatalf("a refused %s changed what recall answers:\nbefore %s\nafter  %s", r.name, before, after)
				}
			})
		}
	}
}

// TestMandateGrants is the other side of TestMandateRefusals: the one
// right each route needs is enough, and "*" covers every namespace.
func TestMandateGrants(t *testing.T) {
	for _, ns := range []string{"ns", "*"} {
		for _, r := range mandateRoutes("team") {
			t.Run(ns+"/"+r.name, func(t *testing.T) {
				f := newFixture(t, nil)
				f.mustRemember("team", fact{subject: "user:1", body: "likes tea"})
				tok := f.mandate(ns, func(c *MandateClaims) {
					c.ID, c.Namespace = "mm-grant", map[string]string{"ns": "team", "*": "*"}[ns]
					c.CanRead, c.CanWrite, c.CanErase = r.right == "canRead", r.right == "canWrite", r.right == "canErase"
				})
				if err := r.run(f, tok, f.caller); err != nil {
					t.Fatalf("%s with only %s: %v", r.name, r.right, err)
				}
			})
		}
	}
}

// TestMandateAsOfFloor: recall and assemble before the floor are refused
// (memory.as_of_floor), at the floor and after it allowed; the floor does
// not touch writes.
func TestMandateAsOfFloor(t *testing.T) {
	f := newFixture(t, nil)
	f.mustRemember("ns", fact{subject: "user:1", body: "lives in Paris"})
	f.clock.Advance(time.Hour)
	floor := f.clock.Now().Truncate(time.Second).Add(-10 * time.Second)
	tok := f.mandate("ns", func(c *MandateClaims) { c.ID, c.AsOfFloor = "mm-floor", floor })
	f.clock.Advance(time.Minute)
	type point struct {
		name   string
		txAt   *time.Time
		refuse bool
	}
	points := []point{
		{"long before", ptr(t0), true},
		{"a microsecond before", ptr(floor.Add(-time.Microsecond)), true},
		{"at the floor", ptr(floor), false},
		{"after", ptr(floor.Add(time.Second)), false},
		{"now (default)", nil, false},
	}
	for _, p := range points {
		for _, op := range []string{"recall", "assemble"} {
			t.Run(op+"/"+p.name, func(t *testing.T) {
				size := f.size()
				var err error
				if op == "recall" {
					_, err = f.svc.Recall(t.Context(), f.caller, RecallRequest{Mandate: tok, Namespace: "ns", TxAt: p.txAt})
				} else {
					_, err = f.svc.Assemble(t.Context(), f.caller, AssembleRequest{Mandate: tok, Namespace: "ns", TxAt: p.txAt, Budget: Budget{MaxTokens: 100}})
				}
				if !p.refuse {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					return
				}
				if !errors.Is(err, ErrAsOfFloor) {
					t.Fatalf("err = %v, want %v", err, ErrAsOfFloor)
				}
				if c, reason := code(err); c != CodeAsOfFloor || reason != "as_of_floor" {
					t.Fatalf("code %q reason %q", c, reason)
				}
				if f.size() != size {
					t.Fatal("a refusal appended record entries")
				}
			})
		}
	}
	// The floor limits what the agent may recall, not what it may write.
	if _, err := f.svc.Remember(t.Context(), f.caller, RememberRequest{Mandate: tok, IdempotencyKey: "floor-w", Namespace: "ns",
		Subject: "user:1", Kind: "note", Body: json.RawMessage(`"x"`), ValidFrom: t0, Source: Source{Kind: "agent", Ref: f.agent}}, "req"); err != nil {
		t.Fatalf("remember under a floor: %v", err)
	}
}

// TestMandateLifetime: a mandate that worked stops working when it
// expires, and when it is revoked; a revoked mandate's refused remember
// does not consume its idempotency key.
func TestMandateLifetime(t *testing.T) {
	f := newFixture(t, nil)
	now := f.clock.Now().Truncate(time.Second)
	short := f.mandate("ns", func(c *MandateClaims) {
		c.ID, c.IssuedAt, c.ExpiresAt = "mm-short", now.Add(-time.Minute), now.Add(time.Hour)
	})
	if _, err := f.svc.Recall(t.Context(), f.caller, RecallRequest{Mandate: short, Namespace: "ns"}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Hour)
	_, err := f.svc.Recall(t.Context(), f.caller, RecallRequest{Mandate: short, Namespace: "ns"})
	if _, reason := code(err); !errors.Is(err, ErrMandateInvalid) || reason != "mandate_expired" {
		t.Fatalf("after exp: %v", err)
	}

	tok := f.mandate("ns", func(c *MandateClaims) { c.ID = "mm-later-revoked" })
	q := RememberRequest{Mandate: tok, IdempotencyKey: "rv-1", Namespace: "ns", Subject: "s", Kind: "note",
		Body: json.RawMessage(`"first"`), ValidFrom: t0, Source: Source{Kind: "agent", Ref: f.agent}}
	if _, err := f.svc.Remember(t.Context(), f.caller, q, "req"); err != nil {
		t.Fatal(err)
	}
	mv, _ := pay.NewMandateVerifier([]pay.OperatorKey{{KeyID: "op", Public: f.opKey.Public()}}, nil)
	money, err := pay.New(pay.Options{Store: f.st, Log: f.log, Rails: &settle.Registry{}, Mandates: mv, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := money.RevokeMandate(t.Context(), "mm-later-revoked", f.op()); err != nil {
		t.Fatal(err)
	}
	size, before := f.size(), f.snapshot("ns")
	q2 := q
	q2.IdempotencyKey, q2.Body = "rv-2", json.RawMessage(`"second"`)
	for _, run := range []func() error{
		func() error { _, err := f.svc.Remember(t.Context(), f.caller, q2, "req"); return err },
		func() error { _, err := f.svc.Remember(t.Context(), f.caller, q, "req"); return err }, // even a replay
		func() error {
			_, err := f.svc.Recall(t.Context(), f.caller, RecallRequest{Mandate: tok, Namespace: "ns"})
			return err
		},
		func() error {
			_, err := f.svc.Assemble(t.Context(), f.caller, AssembleRequest{Mandate: tok, Namespace: "ns", Budget: Budget{MaxTokens: 10}})
			return err
		},
	} {
		if err := run(); !errors.Is(err, ErrMandateInvalid) {
			t.Fatalf("under a revoked mandate: %v", err)
		} else if _, reason := code(err); reason != "mandate_revoked" {
			t.Fatalf("reason %q", reason)
		}
	}
	if f.size() != size || f.snapshot("ns") != before {
		t.Fatal("a revoked mandate changed the store")
	}
	// The refused remember did not take its key: a new mandate uses it.
	q2.Mandate = f.mandate("ns", nil)
	if out, err := f.svc.Remember(t.Context(), f.caller, q2, "req"); err != nil || out.Replayed {
		t.Fatalf("the key of a refused remember: %+v %v", out, err)
	}
}

// TestMandateNoOperatorKeys: a store without a mandate verifier refuses
// everything.
func TestMandateNoOperatorKeys(t *testing.T) {
	f := newFixture(t, nil)
	f.svc.mandates = nil
	for _, r := range mandateRoutes("ns")[:3] {
		err := r.run(f, f.mandate("ns", nil), f.caller)
		if _, reason := code(err); !errors.Is(err, ErrMandateInvalid) || reason != "no_operator_keys" {
			t.Errorf("%s: %v", r.name, err)
		}
	}
}

// TestMandateClaimsValidate is the shape of the claims, table-driven.
func TestMandateClaimsValidate(t *testing.T) {
	agent := hex.EncodeToString(make([]byte, 32))
	ok := MandateClaims{ID: "m1", Agent: agent, IssuedAt: t0, ExpiresAt: t0.Add(time.Hour), Namespace: "ns", CanRead: true}
	for _, tc := range []struct {
		name string
		mod  func(*MandateClaims)
		ok   bool
	}{
		{"valid", func(*MandateClaims) {}, true},
		{"star", func(c *MandateClaims) { c.Namespace = "*" }, true},
		{"empty id", func(c *MandateClaims) { c.ID = "" }, false},
		{"id with a space", func(c *MandateClaims) { c.ID = "a b" }, false},
		{"id too long", func(c *MandateClaims) { c.ID = string(make([]byte, 129)) }, false},
		{"agent upper case", func(c *MandateClaims) { c.Agent = "AB" + agent[2:] }, false},
		{"agent short", func(c *MandateClaims) { c.Agent = agent[1:] }, false},
		{"no iat", func(c *MandateClaims) { c.IssuedAt = time.Time{} }, false},
		{"exp at iat", func(c *MandateClaims) { c.ExpiresAt = c.IssuedAt }, false},
		{"no namespace", func(c *MandateClaims) { c.Namespace = "" }, false},
		{"namespace with a control character", func(c *MandateClaims) { c.Namespace = "a\x00b" }, false},
		{"no right", func(c *MandateClaims) { c.CanRead = false }, false},
	} {
		c := ok
		tc.mod(&c)
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// The wire form round-trips, floor included, and refuses unknown members.
	c := ok
	c.AsOfFloor = t0.Add(-time.Hour)
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back MandateClaims
	if err := json.Unmarshal(b, &back); err != nil || back != c {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"jti":"m1","extra":1}`), &back); err == nil {
		t.Fatal("an unknown member was accepted")
	}
}
