package auth

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/store/memstore"
)

// FuzzDPoPVerify feeds arbitrary proofs to Verify. It must never panic,
// every refusal must be a *DPoPError (the server-side inputs are valid
// and the store does not fail), and a proof it accepts must be refused
// as a replay the second time. Seeds in testdata/fuzz/FuzzDPoPVerify are
// real proofs by the deterministic test keys, valid at dpopNow.
func FuzzDPoPVerify(f *testing.F) {
	keys := newTestKeys(f)
	ed, err := NewDPoPProof(keys.ed, "POST", testHTU, testCred, dpopNow)
	if err != nil {
		f.Fatal(err)
	}
	ec, err := NewDPoPProof(keys.ec, "POST", testHTU, testCred, dpopNow)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ed)
	f.Add(ec)
	f.Add("")
	f.Add("a.b.c")
	edJKT := mustThumbprint(f, keys.ed.Public())
	ecJKT := mustThumbprint(f, keys.ec.Public())
	v := NewDPoPVerifier(&memstore.Store{}, &DPoPOptions{Now: func() time.Time { return dpopNow }, Logger: discardLogger()})

	f.Fuzz(func(t *testing.T, proof string) {
		for _, jkt := range []string{edJKT, ecJKT} {
			err := v.Verify(t.Context(), proof, "POST", testHTU, testCred, jkt)
			if err == nil {
				err = v.Verify(t.Context(), proof, "POST", testHTU, testCred, jkt)
				var de *DPoPError
				if !errors.As(err, &de) || de.Reason != DPoPJTIReplayed {
					t.Fatalf("accepted proof replayed: %v", err)
				}
				continue
			}
			var de *DPoPError
			if !errors.As(err, &de) {
				t.Fatalf("refusal %v is not a *DPoPError", err)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("refusal %v does not match ErrInvalid", err)
			}
		}
	})
}

// FuzzNormalizeHTU checks that normalising a proof's htu is idempotent
// and never leaves a query or fragment.
func FuzzNormalizeHTU(f *testing.F) {
	for _, s := range []string{
		testHTU, "HTTPS://API.Example.COM:443/a/./b/../%7e%2f", "http://[::1]:80", "https://h/p?q#f", "https://u@h/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := normalizeHTU(s, false)
		if err != nil {
			return
		}
		if strings.ContainsAny(out, "?#") {
			t.Fatalf("normalizeHTU(%q) = %q keeps a query or fragment", s, out)
		}
		again, err := normalizeHTU(out, false)
		if err != nil || again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", s, out, again, err)
		}
	})
}
