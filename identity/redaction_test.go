package identity

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestPrepareRedactableReproducesInterop: with the interop key, the interop
// document and the fixture's salts, PrepareRedactable reproduces the
// fixture's commitments and signature exactly.
func TestPrepareRedactableReproducesInterop(t *testing.T) {
	f := loadInterop(t)
	key := interopKey(t, f)
	var full RedactedView
	if err := json.Unmarshal(f.Redactions[0].View, &full); err != nil {
		t.Fatal(err)
	}
	var signed struct {
		Disclosure json.RawMessage `json:"disclosure"`
	}
	if err := json.Unmarshal(f.Disclosures[0].Signed, &signed); err != nil {
		t.Fatal(err)
	}
	d, err := ParseDisclosure(signed.Disclosure)
	if err != nil {
		t.Fatal(err)
	}
	// Feed the fixture's salts, in REDACTABLE_FIELDS order, as the entropy.
	var entropy bytes.Buffer
	for _, field := range RedactableFields() {
		if r, ok := full.Revealed[field]; ok {
			b, err := hex.DecodeString(r.Salt)
			if err != nil {
				t.Fatal(err)
			}
			entropy.Write(b)
		}
	}
	h, err := PrepareRedactable(d, key, &entropy)
	if err != nil {
		t.Fatal(err)
	}
	if h.Redactable.Meta != full.Meta || h.Redactable.Signature != full.Signature {
		t.Errorf("meta/signature %+v\nwant %+v %+v", h.Redactable, full.Meta, full.Signature)
	}
	for field, c := range full.Commitments {
		if h.Redactable.Commitments[field] != c {
			t.Errorf("commitment %s = %s, want %s", field, h.Redactable.Commitments[field], c)
		}
		if got, _ := Commit(full.Revealed[field].Value, full.Revealed[field].Salt); got != c {
			t.Errorf("Commit(%s) = %s, want %s", field, got, c)
		}
	}
	view := Reveal(h, "constitution", "history")
	b, _ := json.Marshal(view)
	r := VerifyRedacted(b)
	if !r.OK || !slices.Equal(r.RevealedFields, []string{"constitution", "history"}) {
		t.Errorf("%+v", r)
	}
}

func TestRedaction(t *testing.T) {
	key := adpKey(40)
	for _, agentID := range []string{adpHex(key), DIDKey(adpPub(key))} {
		h, err := PrepareRedactable(adpSample(agentID), key, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Redactable.Commitments) != 9 {
			t.Errorf("%d commitments, want all 9 redactable fields", len(h.Redactable.Commitments))
		}
		mk := func(v RedactedView) []byte {
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		good := Reveal(h, "capital", "operator", "notAField", "version")
		if r := VerifyRedacted(mk(good)); !r.OK || !slices.Equal(r.RevealedFields, []string{"capital", "operator"}) {
			t.Errorf("%+v", r)
		}
		if r := VerifyRedacted(mk(Reveal(h))); !r.OK || len(r.RevealedFields) != 0 || r.RevealedFields == nil {
			t.Errorf("nothing revealed: %+v", r)
		}
		tamper := func(f func(v *RedactedView)) RedactionResult {
			v := Reveal(h, "capital", "operator")
			f(&v)
			return VerifyRedacted(mk(v))
		}
		for name, c := range map[string]struct {
			f      func(v *RedactedView)
			reason string
		}{
			"value edited": {func(v *RedactedView) {
				r := v.Revealed["capital"]
				r.Value = json.RawMessage(strings.Replace(string(r.Value), "non_custodial", "custodial", 1))
				v.Revealed["capital"] = r
			}, "does not match its commitment"},
			"salt swapped": {func(v *RedactedView) {
				r := v.Revealed["capital"]
				r.Salt = v.Revealed["operator"].Salt
				v.Revealed["capital"] = r
			}, "does not match its commitment"},
			"commitment dropped": {func(v *RedactedView) { delete(v.Commitments, "tools") }, "signature mismatch"},
			"revealed without commitment": {func(v *RedactedView) {
				v.Revealed["extra"] = RevealedField{Value: json.RawMessage(`1`), Salt: "s"}
			}, "has no commitment"},
			"meta edited": {func(v *RedactedView) { v.Meta.ValidUntil = "2099-01-01T00:00:00.000Z" }, "signature mismatch"},
			"foreign key": {func(v *RedactedView) { v.Signature.PublicKey = adpHex(adpKey(41)) }, "agentId"},
		} {
			if r := tamper(c.f); r.OK || !strings.Contains(r.Reason, c.reason) || len(r.RevealedFields) != 0 {
				t.Errorf("%s: %+v, want a failure about %q", name, r, c.reason)
			}
		}
	}
	for _, raw := range []string{``, `{}`, `[]`, `{"meta":{},"commitments":{},"revealed":{},"signature":{}}`,
		`{"meta":1,"commitments":{},"revealed":{},"signature":{}}`} {
		if r := VerifyRedacted([]byte(raw)); r.OK || r.Reason == "" {
			t.Errorf("VerifyRedacted(%s) = %+v", raw, r)
		}
	}
	if _, err := PrepareRedactable(adpSample(adpHex(adpKey(42))), key, nil); err == nil {
		t.Error("PrepareRedactable signed for a foreign agentId")
	}
}
