package memory

import (
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/pay"
)

// MandateType is the "typ" header of a memory mandate token; spend
// mandates use pay.MandateType, so neither is accepted as the other.
const MandateType = "svc-memory-mandate+jwt"

// MandateClaims are the rights an operator grants an agent over one
// namespace of memory: the payload of a memory mandate. Like spend
// mandates they are signed by an operator key (the same key set), and
// revoked the same way (POST /mandates/{id}/revoke).
type MandateClaims struct {
	ID        string    // jti: 1 to 128 of [A-Za-z0-9._~:-]
	Agent     string    // sub: the agent id (64 hex)
	IssuedAt  time.Time // iat
	ExpiresAt time.Time // exp, after iat
	Namespace string    // namespace: the one namespace, or "*" for every namespace
	CanRead   bool      // canRead: recall and assemble
	CanWrite  bool      // canWrite: remember
	CanErase  bool      // canErase: forget (with the operator credential)
	// AsOfFloor (asOfFloor, optional) is the earliest transaction time the
	// agent may recall: a recall or assembly as of an earlier txAt is
	// refused. Zero: no floor.
	AsOfFloor time.Time
}

type mandateWire struct {
	JTI       string `json:"jti"`
	Sub       string `json:"sub"`
	IAT       int64  `json:"iat"`
	EXP       int64  `json:"exp"`
	Namespace string `json:"namespace"`
	CanRead   bool   `json:"canRead"`
	CanWrite  bool   `json:"canWrite"`
	CanErase  bool   `json:"canErase"`
	AsOfFloor int64  `json:"asOfFloor,omitempty"`
}

// MarshalJSON encodes the claims as they are signed (NumericDates).
func (c MandateClaims) MarshalJSON() ([]byte, error) {
	w := mandateWire{JTI: c.ID, Sub: c.Agent, IAT: c.IssuedAt.Unix(), EXP: c.ExpiresAt.Unix(),
		Namespace: c.Namespace, CanRead: c.CanRead, CanWrite: c.CanWrite, CanErase: c.CanErase}
	if !c.AsOfFloor.IsZero() {
		w.AsOfFloor = c.AsOfFloor.Unix()
	}
	return json.Marshal(w)
}

// UnmarshalJSON decodes claims strictly: unknown members are refused.
func (c *MandateClaims) UnmarshalJSON(b []byte) error {
	var w mandateWire
	if err := strictDecode(b, &w, true); err != nil {
		return fmt.Errorf("memory: mandate claims: %w", err)
	}
	*c = MandateClaims{ID: w.JTI, Agent: w.Sub, Namespace: w.Namespace,
		CanRead: w.CanRead, CanWrite: w.CanWrite, CanErase: w.CanErase}
	if w.IAT != 0 {
		c.IssuedAt = time.Unix(w.IAT, 0).UTC()
	}
	if w.EXP != 0 {
		c.ExpiresAt = time.Unix(w.EXP, 0).UTC()
	}
	if w.AsOfFloor != 0 {
		c.AsOfFloor = time.Unix(w.AsOfFloor, 0).UTC()
	}
	return nil
}

// Validate checks the claims' shape.
func (c MandateClaims) Validate() error {
	switch {
	case !validMandateID(c.ID):
		return errors.New("jti must be 1 to 128 of A-Z a-z 0-9 . _ ~ : -")
	case !isHex64(c.Agent):
		return errors.New("sub must be the agent id: 64 lower-case hex digits")
	case c.IssuedAt.IsZero() || c.ExpiresAt.IsZero():
		return errors.New("iat and exp are required")
	case !c.ExpiresAt.After(c.IssuedAt):
		return errors.New("exp must be after iat")
	case c.Namespace != "*" && validName(c.Namespace) != nil:
		return fmt.Errorf("namespace: %v", validName(c.Namespace))
	case !c.CanRead && !c.CanWrite && !c.CanErase:
		return errors.New("a mandate must grant at least one of canRead, canWrite, canErase")
	}
	return nil
}

// SignMandate issues a memory mandate: a compact JWS over the claims,
// signed by an operator key (Ed25519 or P-256) named kid in the server's
// operator key set.
func SignMandate(c MandateClaims, key crypto.Signer, kid string) (string, error) {
	if err := c.Validate(); err != nil {
		return "", fmt.Errorf("memory: sign mandate: %w", err)
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("memory: sign mandate: %w", err)
	}
	tok, err := pay.SignOperatorToken(payload, MandateType, key, kid)
	if err != nil {
		return "", fmt.Errorf("memory: sign mandate: %w", err)
	}
	return tok, nil
}

// Mandate is a verified memory mandate.
type Mandate struct {
	KeyID  string // the operator key that signed it
	Claims MandateClaims
}

// covers reports whether the mandate grants rights over namespace ns.
func (m *Mandate) covers(ns string) bool {
	return m.Claims.Namespace == "*" || m.Claims.Namespace == ns
}

func validMandateID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == '~' || c == ':' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
