package settle_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
)

// authStub is a rail with the capability, always on.
type authStub struct{ stubRail }

func (authStub) Authorize(context.Context, settle.SettleRequest) (settle.Authorization, error) {
	return settle.Authorization{}, settle.ErrUnavailable
}
func (authStub) Capture(context.Context, string, int64) (settle.Settlement, error) {
	return settle.Settlement{}, settle.ErrUnavailable
}
func (authStub) Void(context.Context, string) (settle.Authorization, error) {
	return settle.Authorization{}, settle.ErrUnavailable
}
func (authStub) LookupAuthorization(context.Context, string) (settle.Authorization, error) {
	return settle.Authorization{}, settle.ErrUnavailable
}

// switchedStub is a rail whose capability is switched per instance.
type switchedStub struct {
	authStub
	on bool
}

func (s switchedStub) AuthorizationsEnabled() bool { return s.on }

// wrapper hides the capability of the rail it embeds, as a wrapper that
// does not forward it does.
type wrapper struct{ settle.Rail }

func TestAuthorizerOf(t *testing.T) {
	enabled, err := fake.New("card", &fake.Options{Authorizations: true})
	if err != nil {
		t.Fatal(err)
	}
	disabled, err := fake.New("card", nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		rail settle.Rail
		want bool
	}{
		{"nil", nil, false},
		{"no capability", stubRail{"r", instant}, false},
		{"capability without a switch", authStub{stubRail{"r", instant}}, true},
		{"switched on", switchedStub{authStub{stubRail{"r", instant}}, true}, true},
		{"switched off", switchedStub{authStub{stubRail{"r", instant}}, false}, false},
		{"fake enabled", enabled, true},
		{"fake disabled", disabled, false},
		{"wrapped", wrapper{enabled}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, ok := settle.AuthorizerOf(tc.rail)
			if ok != tc.want || (a != nil) != tc.want {
				t.Errorf("AuthorizerOf = %v, %v; want ok=%v", a, ok, tc.want)
			}
		})
	}
}

func TestAuthorizationStatusValidate(t *testing.T) {
	for _, s := range []settle.AuthorizationStatus{settle.AuthAuthorized, settle.AuthCaptured, settle.AuthVoided, settle.AuthExpired} {
		if err := s.Validate(); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range []settle.AuthorizationStatus{"", "pending", "Captured", "declined"} {
		if err := s.Validate(); err == nil || !strings.HasPrefix(err.Error(), "settle: ") {
			t.Errorf("%q: %v", s, err)
		}
	}
	// The zero Authorization a failed call returns never reads as held.
	if err := (settle.Authorization{}).Status.Validate(); err == nil {
		t.Error("zero Authorization has a valid status")
	}
}

func TestValidateCapture(t *testing.T) {
	tests := []struct {
		name  string
		key   string
		minor int64
		ok    bool
	}{
		{"valid", "int_1", 1, true},
		{"max", "int_1", settle.MaxAmount, true},
		{"zero", "int_1", 0, false},
		{"negative", "int_1", -1, false},
		{"over max", "int_1", settle.MaxAmount + 1, false},
		{"empty key", "", 1, false},
		{"key with space", "int 1", 1, false},
		{"key of 256", strings.Repeat("k", 256), 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := settle.ValidateCapture(tc.key, tc.minor)
			if (err == nil) != tc.ok {
				t.Fatalf("ValidateCapture = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, settle.ErrInvalidRequest) {
				t.Errorf("error %v does not match ErrInvalidRequest", err)
			}
		})
	}
}

func TestErrAuthorizationClosedWording(t *testing.T) {
	// Operators and logs match on it; changing it is a breaking change.
	if got, want := settle.ErrAuthorizationClosed.Error(), "settle: authorization closed"; got != want {
		t.Errorf("ErrAuthorizationClosed = %q, want %q", got, want)
	}
}
