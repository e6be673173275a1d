package httpserver_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/commerce"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/identity"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/webhook"
)

// TestURLGuardOverHTTP: every operator route that accepts a URL refuses an
// internal one (the shared guard, package netguard) with a 400 problem of
// its code, action fix-request and a detail naming the destination, and
// writes nothing: no record entry, no stored registration.
func TestURLGuardOverHTTP(t *testing.T) {
	keys := newMatrixKeys(t)
	s := newMatrixStack(t, memstore.New(nil), keys)
	signer := mustSigner(t)(keys.ops[0].signer(matrixClock, matrixBase))
	ep, err := s.webhooks.Create(t.Context(), webhook.CreateRequest{URL: "https://hooks.example/in", Events: []string{"*"}},
		audit.Actor{Kind: "operator", ID: "op-ed"}, "req_seed", "the endpoint the update targets")
	if err != nil {
		t.Fatal(err)
	}
	agent := identity.DIDKey(ed25519.PublicKey(bytes.Repeat([]byte{5}, 32)))
	private := "https://10.0.0.1"
	for _, tc := range []struct {
		name, op, method, path string
		body                   any
		code, detail, prefix   string
	}{
		{"webhook create, metadata", "webhooks.create", "POST", "/webhooks/endpoints",
			webhook.WebhookCreateRequest{CreateRequest: webhook.CreateRequest{URL: "https://169.254.169.254/latest", Events: []string{"*"}}, Rationale: matrixRationale},
			webhook.CodeInvalidURL, "169.254.169.254 is link-local", "webhook/ep/"},
		{"webhook update, 192.168", "webhooks.update", "PATCH", "/webhooks/endpoints/" + ep.ID,
			webhook.WebhookUpdateRequest{UpdateRequest: webhook.UpdateRequest{URL: new("https://192.168.1.1/hook")}, Rationale: matrixRationale},
			webhook.CodeInvalidURL, "192.168.1.1 is private", "webhook/ep/"},
		{"merchant acp baseUrl", "commerce.merchants.create", "POST", "/commerce/merchants",
			commerce.MerchantRequest{MerchantSpec: commerce.MerchantSpec{ID: "m", Protocol: "acp", BaseURL: private}, Rationale: matrixRationale},
			commerce.CodeInvalidMerchant, "baseUrl: destination 10.0.0.1 is private", "commerce/merchant/"},
		{"merchant acp pspUrl", "commerce.merchants.create", "POST", "/commerce/merchants",
			commerce.MerchantRequest{MerchantSpec: commerce.MerchantSpec{ID: "m", Protocol: "acp", BaseURL: "https://shop.example", PSPURL: "https://[fd00::1]"}, Rationale: matrixRationale},
			commerce.CodeInvalidMerchant, "pspUrl: destination fd00::1 is private", "commerce/merchant/"},
		{"merchant ucp profileUrl, decimal", "commerce.merchants.create", "POST", "/commerce/merchants",
			commerce.MerchantRequest{MerchantSpec: commerce.MerchantSpec{ID: "m", Protocol: "ucp", ProfileURL: "https://2852039166/.well-known/ucp"}, Rationale: matrixRationale},
			commerce.CodeInvalidMerchant, "169.254.169.254, link-local", "commerce/merchant/"},
		{"counterparty baseUrl, CGNAT", "identity.counterparties.create", "POST", "/identity/counterparties",
			identity.CounterpartyRequest{ID: "partner", BaseURL: "https://100.64.0.1", AgentID: agent, Rationale: matrixRationale},
			identity.CodeInvalidParty, "100.64.0.1 is shared address space", "identity/party/"},
		{"counterparty baseUrl, loopback", "identity.counterparties.create", "POST", "/identity/counterparties",
			identity.CounterpartyRequest{ID: "partner", BaseURL: "https://localhost:8443", AgentID: agent, Rationale: matrixRationale},
			identity.CodeInvalidParty, "localhost is loopback", "identity/party/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := json.Marshal(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			base := wire{method: tc.method, path: tc.path, body: body, header: http.Header{"Content-Type": {contract.MediaJSON}}}
			w := base.with(operator.HeaderName, sign(t, signer, tc.op, base))
			size, rows := written(t, s, tc.prefix)
			res := s.send(t, w)
			var p contract.Problem
			_ = json.Unmarshal(res.body, &p)
			if res.status != http.StatusBadRequest || res.media != contract.MediaProblem || p.Code != tc.code ||
				p.Action != contract.ActionFixRequest || !strings.Contains(p.Detail, tc.detail) {
				t.Fatalf("%d %s %s %q, want 400 %s fix-request saying %q\n%s", res.status, p.Code, p.Action, p.Detail, tc.code, tc.detail, res.body)
			}
			if size2, rows2 := written(t, s, tc.prefix); size2 != size || rows2 != rows {
				t.Errorf("the refusal wrote: record %d → %d, %s rows %d → %d bytes", size, size2, tc.prefix, len(rows), len(rows2))
			}
		})
	}
	if got, err := s.webhooks.Get(t.Context(), ep.ID); err != nil || got.URL != "https://hooks.example/in" {
		t.Errorf("the endpoint after the refused update: %+v %v", got, err)
	}
}

// written is the record's size and a digest of the rows under prefix.
func written(t *testing.T, s *matrixStack, prefix string) (uint64, string) {
	t.Helper()
	size, err := s.log.Size(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	err = s.st.View(t.Context(), func(r store.Reader) error {
		it := r.Iterate([]byte(prefix), store.PrefixEnd([]byte(prefix)), false)
		for it.Next() {
			b.Write(it.Key())
			b.Write(it.Value())
		}
		return it.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	return size, b.String()
}
