package pay

import (
	"bytes"
	"container/list"
	"crypto"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/internal/fielderr"
	"github.com/countersign/countersign/internal/strictjson"
	"github.com/countersign/countersign/operator"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jws"
)

// MandateType is the "typ" header of a mandate token (RFC 8725 §3.11
// explicit typing). Verifiers compare it exactly.
const MandateType = "svc-mandate+jwt"

// Limits of mandate claims and operator keys.
const (
	MaxMandateIDLen  = 128     // bytes of jti
	MaxMandatePayees = 64      // entries of payees
	MaxMandateRails  = 16      // entries of rails
	MaxApprovals     = 10      // approvals
	MaxVelocityCount = 1000000 // velocity.count
	MaxKeyIDLen      = 128     // bytes of an operator kid
)

// Defaults of [MandateVerifierOptions].
const (
	DefaultCacheSize    = 4096        // verified tokens kept
	DefaultIssuedAtSkew = time.Minute // how far in the future iat may be
)

// ErrInvalidClaims is matched by every [*ClaimsError]; check with errors.Is.
var ErrInvalidClaims = errors.New("pay: invalid mandate claims")

// ClaimsError lists every way mandate claims break the rules of
// [MandateClaims.Validate]. It matches [ErrInvalidClaims].
type ClaimsError struct {
	Fields []FieldError // in the order of the claims; never empty
}

func (e *ClaimsError) Error() string {
	return fielderr.Join("pay: invalid mandate claims: ", e.Fields)
}

// Unwrap makes every ClaimsError match [ErrInvalidClaims].
func (e *ClaimsError) Unwrap() error { return ErrInvalidClaims }

// MandateClaims are what an operator authorises an agent to spend: the
// payload of a mandate token. Mandates are immutable: to change one, the
// operator revokes it and issues another.
//
// On the wire the claims are a JSON object with the member names in the
// comments; iat and exp are JWT NumericDates written as whole seconds (a
// fraction is refused). Verification refuses unknown and duplicate
// members. The zero values of the optional claims are the safe ones: a
// missing confirmAboveMinor or irreversibleConfirmAboveMinor is 0, which
// sends every payment (or every irreversible one) to a person.
type MandateClaims struct {
	// ID (jti) is the mandate id: 1 to 128 bytes of [A-Za-z0-9._~:-].
	ID string
	// Agent (sub) is the agent id: 64 lower-case hex digits of the agent's
	// Ed25519 public key.
	Agent string
	// IssuedAt (iat) and ExpiresAt (exp) bound the mandate's life; exp
	// must be after iat. Sub-second parts are dropped when signing.
	IssuedAt  time.Time
	ExpiresAt time.Time
	// Payees (payees): 1 to 64 entries, each a payee reference, a pattern
	// "*.suffix" or "*"; see gate.MatchPayee.
	Payees []string
	// Currency (currency): the one currency the mandate spends; see
	// [ValidCurrency].
	Currency string
	// PerTxCapMinor (perTxCapMinor): the largest single payment, 1..MaxMinor.
	PerTxCapMinor int64
	// PerPeriodCapMinor (perPeriodCapMinor): the most that may be settled
	// or reserved per Period, 1..MaxMinor.
	PerPeriodCapMinor int64
	// Period (period): "day", "week" or "month", UTC calendar windows; see
	// gate.PeriodWindow.
	Period gate.Period
	// Rails (rails): 1 to 16 distinct rail names the mandate may use.
	Rails []string
	// ConfirmAboveMinor (confirmAboveMinor): payments of this amount or
	// more need a person, 0..MaxMinor. 0 confirms every payment; a value
	// above PerTxCapMinor never confirms on amount.
	ConfirmAboveMinor int64
	// IrreversibleConfirmAboveMinor (irreversibleConfirmAboveMinor):
	// irreversible payments of this amount or more need a person, 0..MaxMinor.
	IrreversibleConfirmAboveMinor int64
	// Velocity (velocity, {"count","seconds"}): at most Count payments in
	// any Seconds seconds (1..MaxVelocityCount, 1..gate.MaxVelocitySeconds).
	// The zero value (member absent) means no velocity limit.
	Velocity gate.Velocity
	// Approvals (approvals): how many distinct operators must approve a
	// held payment, 1..MaxApprovals. 0 (member absent) means 1; a verified
	// [Mandate] always holds the effective value.
	Approvals int
}

// claimsWire is the JSON form of MandateClaims.
type claimsWire struct {
	JTI                           string         `json:"jti"`
	Sub                           string         `json:"sub"`
	IAT                           int64          `json:"iat"`
	EXP                           int64          `json:"exp"`
	Payees                        []string       `json:"payees"`
	Currency                      string         `json:"currency"`
	PerTxCapMinor                 int64          `json:"perTxCapMinor"`
	PerPeriodCapMinor             int64          `json:"perPeriodCapMinor"`
	Period                        gate.Period    `json:"period"`
	Rails                         []string       `json:"rails"`
	ConfirmAboveMinor             int64          `json:"confirmAboveMinor"`
	IrreversibleConfirmAboveMinor int64          `json:"irreversibleConfirmAboveMinor"`
	Velocity                      *gate.Velocity `json:"velocity,omitempty"`
	Approvals                     int            `json:"approvals,omitempty"`
}

// MarshalJSON encodes the claims as they are signed.
func (c MandateClaims) MarshalJSON() ([]byte, error) {
	w := claimsWire{
		JTI: c.ID, Sub: c.Agent, IAT: c.IssuedAt.Unix(), EXP: c.ExpiresAt.Unix(),
		Payees: c.Payees, Currency: c.Currency,
		PerTxCapMinor: c.PerTxCapMinor, PerPeriodCapMinor: c.PerPeriodCapMinor, Period: c.Period,
		Rails: c.Rails, ConfirmAboveMinor: c.ConfirmAboveMinor,
		IrreversibleConfirmAboveMinor: c.IrreversibleConfirmAboveMinor, Approvals: c.Approvals,
	}
	if !c.Velocity.IsZero() {
		w.Velocity = &c.Velocity
	}
	return json.Marshal(w)
}

// UnmarshalJSON decodes claims strictly: one JSON object, no unknown or
// duplicate members, integers where numbers are expected. It does not
// validate; see [MandateClaims.Validate].
func (c *MandateClaims) UnmarshalJSON(b []byte) error {
	// encoding/json would keep the last of a repeated member silently,
	// while another reader might keep the first. Check answers for JSON
	// json.Valid accepts (as json.Unmarshal's input is); anything else the
	// decoder below refuses. No JSON it accepts nests deeper than 10000.
	if e := strictjson.Check(b, 10000); e != nil && !e.TooDeep {
		return fmt.Errorf("pay: mandate claims: member %.40q given twice", e.Name)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var w claimsWire
	if err := dec.Decode(&w); err != nil {
		return fmt.Errorf("pay: mandate claims: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("pay: mandate claims: data after the JSON object")
	}
	out := MandateClaims{
		ID: w.JTI, Agent: w.Sub,
		Payees: w.Payees, Currency: w.Currency,
		PerTxCapMinor: w.PerTxCapMinor, PerPeriodCapMinor: w.PerPeriodCapMinor, Period: w.Period,
		Rails: w.Rails, ConfirmAboveMinor: w.ConfirmAboveMinor,
		IrreversibleConfirmAboveMinor: w.IrreversibleConfirmAboveMinor, Approvals: w.Approvals,
	}
	// 0 stays the zero time, so that Validate reports a missing claim.
	if w.IAT != 0 {
		out.IssuedAt = time.Unix(w.IAT, 0).UTC()
	}
	if w.EXP != 0 {
		out.ExpiresAt = time.Unix(w.EXP, 0).UTC()
	}
	if w.Velocity != nil {
		if w.Velocity.IsZero() {
			// Absence means no limit; a velocity member that sets none is
			// more likely a mistake than a wish.
			return errors.New("pay: mandate claims: velocity must set count and seconds (omit it for no limit)")
		}
		out.Velocity = *w.Velocity
	}
	*c = out
	return nil
}

// Validate checks the claims and returns a [*ClaimsError] listing every
// problem, or nil. [SignMandate] and [MandateVerifier.Verify] both apply it.
func (c MandateClaims) Validate() error {
	var errs []FieldError
	bad := func(field, rule, msg string) { errs = append(errs, FieldError{Field: field, Rule: rule, Message: msg}) }
	switch {
	case c.ID == "":
		bad("jti", "required", "is required")
	case len(c.ID) > MaxMandateIDLen || !isMandateID(c.ID):
		bad("jti", "id", "must be 1 to 128 of A-Z a-z 0-9 . _ ~ : -")
	}
	switch {
	case c.Agent == "":
		bad("sub", "required", "is required")
	case !isAgentID(c.Agent):
		bad("sub", "hexadecimal", "must be 64 lower-case hex digits (an Ed25519 public key)")
	}
	iatOK := checkDate(c.IssuedAt, "iat", bad)
	if checkDate(c.ExpiresAt, "exp", bad) && iatOK && c.ExpiresAt.Unix() <= c.IssuedAt.Unix() {
		bad("exp", "gtfield", "must be after iat")
	}
	switch {
	case len(c.Payees) == 0:
		bad("payees", "required", "must name at least one payee or pattern")
	case len(c.Payees) > MaxMandatePayees:
		bad("payees", "max", "must have at most "+strconv.Itoa(MaxMandatePayees)+" entries")
	default:
		for i, p := range c.Payees {
			if !gate.ValidPayeePattern(p) {
				bad("payees["+strconv.Itoa(i)+"]", "payee", `must be a payee reference, "*.suffix" or "*"`)
			}
		}
	}
	switch {
	case c.Currency == "":
		bad("currency", "required", "is required")
	case !ValidCurrency(c.Currency):
		bad("currency", "currency", "must be an ISO 4217 code (three upper-case letters) or a CAIP-19 asset id")
	}
	checkMinor(c.PerTxCapMinor, 1, "perTxCapMinor", bad)
	checkMinor(c.PerPeriodCapMinor, 1, "perPeriodCapMinor", bad)
	if !c.Period.Valid() {
		bad("period", "oneof", "must be one of: day, week, month")
	}
	switch {
	case len(c.Rails) == 0:
		bad("rails", "required", "must name at least one rail")
	case len(c.Rails) > MaxMandateRails:
		bad("rails", "max", "must have at most "+strconv.Itoa(MaxMandateRails)+" entries")
	default:
		for i, r := range c.Rails {
			switch {
			case !gate.ValidRail(r):
				bad("rails["+strconv.Itoa(i)+"]", "rail", "must be a rail name")
			case slices.Index(c.Rails, r) < i:
				bad("rails["+strconv.Itoa(i)+"]", "unique", "repeats an earlier rail")
			}
		}
	}
	checkMinor(c.ConfirmAboveMinor, 0, "confirmAboveMinor", bad)
	checkMinor(c.IrreversibleConfirmAboveMinor, 0, "irreversibleConfirmAboveMinor", bad)
	if v := c.Velocity; !v.IsZero() {
		if v.Count < 1 || v.Count > MaxVelocityCount {
			bad("velocity.count", "max", "must be 1 to "+strconv.Itoa(MaxVelocityCount))
		}
		if v.Seconds < 1 || v.Seconds > gate.MaxVelocitySeconds {
			bad("velocity.seconds", "max", "must be 1 to "+strconv.Itoa(gate.MaxVelocitySeconds))
		}
	}
	if c.Approvals < 0 || c.Approvals > MaxApprovals {
		bad("approvals", "max", "must be 1 to "+strconv.Itoa(MaxApprovals)+" (0 or absent means 1)")
	}
	if len(errs) == 0 {
		return nil
	}
	return &ClaimsError{Fields: errs}
}

func checkDate(t time.Time, field string, bad func(field, rule, msg string)) bool {
	switch {
	case t.IsZero():
		bad(field, "required", "is required")
	case t.Unix() <= 0 || t.Unix() > MaxMinor:
		bad(field, "range", "must be a NumericDate after 1970 and below 2^53 seconds")
	default:
		return true
	}
	return false
}

func checkMinor(n, least int64, field string, bad func(field, rule, msg string)) {
	switch {
	case n < least:
		bad(field, "min", "must be at least "+strconv.FormatInt(least, 10))
	case n > MaxMinor:
		bad(field, "max", "must be at most "+strconv.FormatInt(MaxMinor, 10))
	}
}

func isMandateID(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._~:-", c) >= 0) {
			return false
		}
	}
	return true
}

// Mandate is a verified mandate. A caller owns the Mandate it is given:
// changing it affects no one else.
type Mandate struct {
	// ID is the mandate id (Claims.ID, the jti claim): the key for
	// revocation and for the approvals of held payments.
	ID string
	// KeyID is the kid of the operator key that signed it.
	KeyID string
	// TokenHash is the SHA-256 of the compact token as received.
	TokenHash [32]byte
	// Claims are the verified claims; Claims.Approvals is at least 1.
	Claims MandateClaims
}

// Gate returns the part of the mandate the gate reads.
func (m *Mandate) Gate() gate.Mandate {
	c := &m.Claims
	return gate.Mandate{
		ID:                            m.ID,
		Agent:                         c.Agent,
		Payees:                        slices.Clone(c.Payees),
		Currency:                      c.Currency,
		PerTxCapMinor:                 c.PerTxCapMinor,
		PerPeriodCapMinor:             c.PerPeriodCapMinor,
		Period:                        c.Period,
		Rails:                         slices.Clone(c.Rails),
		ConfirmAboveMinor:             c.ConfirmAboveMinor,
		IrreversibleConfirmAboveMinor: c.IrreversibleConfirmAboveMinor,
		Velocity:                      c.Velocity,
	}
}

func (m *Mandate) clone() *Mandate {
	c := *m
	c.Claims.Payees = slices.Clone(m.Claims.Payees)
	c.Claims.Rails = slices.Clone(m.Claims.Rails)
	return &c
}

// SignMandate issues a mandate: a compact JWS over the claims' JSON, signed
// by an operator key, with protected header {"alg", "kid", "typ":
// "svc-mandate+jwt"}. The key is an Ed25519 key (alg EdDSA) or a P-256 ECDSA
// key (alg ES256); ed25519.PrivateKey and *ecdsa.PrivateKey are the tested
// types. The claims must pass [MandateClaims.Validate]; kid is 1 to 128
// bytes of visible ASCII and must name the key in the server's operator key
// set.
func SignMandate(c MandateClaims, key crypto.Signer, kid string) (string, error) {
	if err := c.Validate(); err != nil {
		return "", fmt.Errorf("pay: sign mandate: %w", err)
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("pay: sign mandate: %w", err)
	}
	return SignOperatorToken(payload, MandateType, key, kid)
}

// SignOperatorToken signs payload as a compact JWS with the protected
// header {"alg", "kid", "typ"}: the form of every token an operator issues
// (spend mandates here, memory mandates in package memory). The key is an
// Ed25519 key (alg EdDSA) or a P-256 ECDSA key (alg ES256); kid is 1 to 128
// bytes of visible ASCII and must name the key in the server's operator
// key set; typ tells the kinds of token apart.
func SignOperatorToken(payload []byte, typ string, key crypto.Signer, kid string) (string, error) {
	if !validKeyID(kid) {
		return "", errors.New("pay: sign operator token: kid must be 1 to 128 bytes of visible ASCII")
	}
	if key == nil {
		return "", errors.New("pay: sign operator token: no key")
	}
	alg, err := operator.AlgForKey(key.Public())
	if err != nil {
		return "", fmt.Errorf("pay: sign operator token: %w", err)
	}
	hdrs := jws.NewHeaders()
	if err := hdrs.Set(jws.TypeKey, typ); err != nil {
		return "", fmt.Errorf("pay: sign operator token: %w", err)
	}
	if err := hdrs.Set(jws.KeyIDKey, kid); err != nil {
		return "", fmt.Errorf("pay: sign operator token: %w", err)
	}
	tok, err := jws.Sign(payload, jws.WithKey(alg, key, jws.WithProtectedHeaders(hdrs)))
	if err != nil {
		return "", fmt.Errorf("pay: sign operator token: %w", err)
	}
	if len(tok) > MaxMandateLen {
		return "", fmt.Errorf("pay: sign operator token: token of %d bytes is longer than %d", len(tok), MaxMandateLen)
	}
	return string(tok), nil
}

func validKeyID(kid string) bool {
	return kid != "" && len(kid) <= MaxKeyIDLen && visibleASCII(kid)
}

// OperatorKey is a public key the server trusts to issue mandates; the
// operator package owns the type and the JWK Set parser
// ([operator.KeysFromSet]), so one key set serves mandates and Svc-Operator
// signatures alike.
type OperatorKey = operator.PublicKey

// MandateVerifierOptions configures a [MandateVerifier]. The zero value
// gives the defaults.
type MandateVerifierOptions struct {
	// Now returns the current time. The default is time.Now.
	Now func() time.Time
	// CacheSize is how many verified tokens are kept. The default (0) is
	// DefaultCacheSize; a negative value disables the cache.
	CacheSize int
	// IssuedAtSkew is how far in the future iat may be, for clocks that
	// disagree. The default (0) is DefaultIssuedAtSkew (one minute); a
	// negative value allows none. exp gets no leeway.
	IssuedAtSkew time.Duration
}

// MandateVerifier verifies mandate tokens against the operator keys. It is
// safe for concurrent use.
//
// Mandates are immutable, so a verified token is cached by its SHA-256
// (a bounded LRU): a payment costs one signature verification instead of
// two. Expiry is checked again on every use, cached or not. Revocation is
// not: it lives in storage, and the caller must check [Mandate.ID] against
// it after every Verify.
type MandateVerifier struct {
	keys  map[string]verifierKey // by kid; never changes after construction
	now   func() time.Time
	skew  time.Duration
	cache *mandateCache // nil when disabled
}

type verifierKey struct {
	alg jwa.SignatureAlgorithm
	pub crypto.PublicKey
}

// NewMandateVerifier returns a verifier that trusts keys. It needs at least
// one key; kids must be unique and every key Ed25519 or P-256. opts may be
// nil; it is copied.
func NewMandateVerifier(keys []OperatorKey, opts *MandateVerifierOptions) (*MandateVerifier, error) {
	var o MandateVerifierOptions
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	switch {
	case o.CacheSize == 0:
		o.CacheSize = DefaultCacheSize
	case o.CacheSize < 0:
		o.CacheSize = 0
	}
	switch {
	case o.IssuedAtSkew == 0:
		o.IssuedAtSkew = DefaultIssuedAtSkew
	case o.IssuedAtSkew < 0:
		o.IssuedAtSkew = 0
	}
	if len(keys) == 0 {
		return nil, errors.New("pay: mandate verifier: no operator keys")
	}
	v := &MandateVerifier{keys: make(map[string]verifierKey, len(keys)), now: o.Now, skew: o.IssuedAtSkew}
	for _, k := range keys {
		if !validKeyID(k.KeyID) {
			return nil, fmt.Errorf("pay: mandate verifier: kid %.40q must be 1 to 128 bytes of visible ASCII", k.KeyID)
		}
		if _, dup := v.keys[k.KeyID]; dup {
			return nil, fmt.Errorf("pay: mandate verifier: kid %q given twice", k.KeyID)
		}
		alg, err := operator.AlgForKey(k.Public)
		if err != nil {
			return nil, fmt.Errorf("pay: mandate verifier: key %q: %w", k.KeyID, err)
		}
		v.keys[k.KeyID] = verifierKey{alg: alg, pub: k.Public}
	}
	if o.CacheSize > 0 {
		v.cache = &mandateCache{max: o.CacheSize, ll: list.New(), items: make(map[[32]byte]*list.Element)}
	}
	return v, nil
}

// Verify checks a mandate token and returns the verified mandate, or a
// [*UnauthorizedError] whose reason names the first check that failed, in
// this order: the token is a compact JWS with an attached payload and a
// strict protected header (mandate_malformed); alg is EdDSA or ES256
// (mandate_bad_alg); typ is exactly svc-mandate+jwt (mandate_wrong_type);
// kid names a trusted key (mandate_unknown_key); alg is the one that key
// type uses (mandate_bad_alg); the signature verifies
// (mandate_bad_signature); the claims are strict JSON and pass
// [MandateClaims.Validate] (mandate_invalid_claims); now is before exp
// (mandate_expired); iat is not after now plus the skew
// (mandate_not_yet_valid).
//
// The result is not checked for revocation: the caller must look up
// Mandate.ID in storage before acting on it.
func (v *MandateVerifier) Verify(token string) (*Mandate, error) {
	if len(token) > MaxMandateLen {
		return nil, unauthorized(ReasonMandateMalformed, fmt.Errorf("longer than %d bytes", MaxMandateLen))
	}
	sum := sha256.Sum256([]byte(token))
	now := v.now()
	if m := v.cache.get(sum); m != nil {
		if !now.Before(m.Claims.ExpiresAt) {
			v.cache.remove(sum)
			return nil, unauthorized(ReasonMandateExpired, nil)
		}
		return m.clone(), nil
	}

	kid, claims, err := v.verifyToken(token, MandateType)
	if err != nil {
		return nil, err
	}
	var c MandateClaims
	if err := json.Unmarshal(claims, &c); err != nil {
		return nil, unauthorized(ReasonMandateInvalidClaims, err)
	}
	if err := c.Validate(); err != nil {
		return nil, unauthorized(ReasonMandateInvalidClaims, err)
	}
	if !now.Before(c.ExpiresAt) {
		return nil, unauthorized(ReasonMandateExpired, nil)
	}
	if c.IssuedAt.After(now.Add(v.skew)) {
		return nil, unauthorized(ReasonMandateNotYetValid, nil)
	}
	if c.Approvals == 0 {
		c.Approvals = 1
	}
	m := &Mandate{ID: c.ID, KeyID: kid, TokenHash: sum, Claims: c}
	v.cache.add(sum, m)
	return m.clone(), nil
}

// VerifyToken checks a compact JWS that an operator key issued with the
// given typ and returns the signing key's kid and the verified payload,
// for tokens other than spend mandates (memory mandates). Its checks and
// reasons are those of [MandateVerifier.Verify] up to the signature:
// mandate_malformed, mandate_bad_alg, mandate_wrong_type,
// mandate_unknown_key, mandate_bad_signature. The payload's claims, expiry
// and revocation are the caller's to check. Nothing is cached.
func (v *MandateVerifier) VerifyToken(token, typ string) (kid string, payload []byte, err error) {
	if len(token) > MaxMandateLen {
		return "", nil, unauthorized(ReasonMandateMalformed, fmt.Errorf("longer than %d bytes", MaxMandateLen))
	}
	return v.verifyToken(token, typ)
}

func (v *MandateVerifier) verifyToken(token, typ string) (string, []byte, error) {
	h, payload, _, err := splitCompact(token)
	if err != nil {
		return "", nil, unauthorized(ReasonMandateMalformed, err)
	}
	if payload == "" {
		return "", nil, unauthorized(ReasonMandateMalformed, errors.New("the payload is detached"))
	}
	hdr, err := parseHeader(h)
	if err != nil {
		return "", nil, unauthorized(ReasonMandateMalformed, err)
	}
	if hdr.alg != jwa.EdDSA().String() && hdr.alg != jwa.ES256().String() {
		return "", nil, unauthorized(ReasonMandateBadAlg, fmt.Errorf("alg %.20q", hdr.alg))
	}
	if hdr.typ != typ {
		return "", nil, unauthorized(ReasonMandateWrongType, fmt.Errorf("typ %.40q", hdr.typ))
	}
	key, ok := v.keys[hdr.kid]
	if !hdr.hasKid || !ok {
		return "", nil, unauthorized(ReasonMandateUnknownKey, fmt.Errorf("kid %.40q", hdr.kid))
	}
	if hdr.alg != key.alg.String() {
		return "", nil, unauthorized(ReasonMandateBadAlg, fmt.Errorf("alg %s for a key that uses %s", hdr.alg, key.alg))
	}
	claims, err := jws.Verify([]byte(token), jws.WithCompact(), jws.WithKey(key.alg, key.pub))
	if err != nil {
		return "", nil, unauthorized(ReasonMandateBadSignature, err)
	}
	return hdr.kid, claims, nil
}

// mandateCache is a bounded LRU of verified mandates by token hash. Its
// methods are nil-safe: a nil cache keeps nothing.
type mandateCache struct {
	mu    sync.Mutex // guards ll and items; held for list and map work only, never while verifying
	max   int
	ll    *list.List // of *cacheEntry, most recently used first
	items map[[32]byte]*list.Element
}

type cacheEntry struct {
	key [32]byte
	m   *Mandate // never modified once cached; Verify hands out clones
}

func (c *mandateCache) get(key [32]byte) *Mandate {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[key]
	if !ok {
		return nil
	}
	c.ll.MoveToFront(e)
	return e.Value.(*cacheEntry).m
}

func (c *mandateCache) add(key [32]byte, m *Mandate) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok { // verified concurrently by another caller
		c.ll.MoveToFront(e)
		return
	}
	c.items[key] = c.ll.PushFront(&cacheEntry{key: key, m: m})
	if c.ll.Len() > c.max {
		oldest := c.ll.Back()
		c.ll.Remove(oldest)
		delete(c.items, oldest.Value.(*cacheEntry).key)
	}
}

func (c *mandateCache) remove(key [32]byte) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.ll.Remove(e)
		delete(c.items, key)
	}
}

func (c *mandateCache) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
