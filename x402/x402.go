// Package x402 speaks version 2 of x402, payments over HTTP 402: the
// messages (PaymentRequired, PaymentRequirements, PaymentPayload,
// SettlementResponse), the three HTTP headers that carry them, and the
// "exact" scheme on EVM networks (an EIP-3009 TransferWithAuthorization,
// signed with package evm).
//
// It follows specs/x402-specification-v2.md (§5 types, §7 facilitator,
// §9 error codes), specs/transports-v2/http.md (headers) and
// specs/schemes/exact/scheme_exact_evm.md (EIP-3009 method) of the
// x402-foundation/x402 repository; docs/design/x402.md lists what this
// package relies on and where the specification says it.
//
// The decoders are strict because what they read decides what is signed:
// each header is at most [MaxHeaderBytes], standard base64 of UTF-8 JSON in
// which no object names a member twice; x402Version must be 2 (version 1
// is refused with [ErrVersion1]); amounts are decimal uint256 strings
// without sign, exponent or leading zeros. Offers the decoder reads but this
// package cannot pay (another scheme, another network family) are kept:
// [ParseExactEVM] says, per offer, which check refuses it.
package x402

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"unicode/utf8"

	"github.com/countersign/countersign/internal/strictjson"
)

// Version is the only protocol version this package speaks.
const Version = 2

// The HTTP headers of the transport (transports-v2/http.md).
const (
	HeaderPaymentRequired  = "PAYMENT-REQUIRED"  // server → client, with 402
	HeaderPaymentSignature = "PAYMENT-SIGNATURE" // client → server, the retry
	HeaderPaymentResponse  = "PAYMENT-RESPONSE"  // server → client, the settlement
)

// MaxHeaderBytes bounds an encoded header value. The specification sets
// no limit; the example PAYMENT-SIGNATURE is about 1.3 KiB, and common
// servers refuse request headers far below 64 KiB.
const MaxHeaderBytes = 16 << 10

// maxDepth bounds how deep a decoded document may nest. The messages nest
// three deep; extensions get the rest.
const maxDepth = 16

// Errors the decoders wrap; test with errors.Is.
var (
	ErrVersion1        = errors.New("x402: x402 version 1 is not supported (x402Version 1): this client speaks version 2 only")
	ErrVersion         = errors.New("x402: unsupported x402Version")
	ErrHeaderTooLarge  = errors.New("x402: header larger than 16 KiB")
	ErrHeaderEncoding  = errors.New("x402: header is not standard base64")
	ErrMalformed       = errors.New("x402: malformed message")
	ErrMissingRequired = errors.New("x402: required member missing")
)

// ResourceInfo describes the protected resource (§5.1.2). Members other
// than these three (e.g. the bazaar extension's serviceName) are dropped.
type ResourceInfo struct {
	URL         string `json:"url"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
}

// PaymentRequired is what a 402 carries in PAYMENT-REQUIRED (§5.1).
type PaymentRequired struct {
	X402Version int                        `json:"x402Version"`
	Error       string                     `json:"error,omitempty"`
	Resource    ResourceInfo               `json:"resource"`
	Accepts     []PaymentRequirements      `json:"accepts"`
	Extensions  map[string]json.RawMessage `json:"extensions,omitempty"`
}

// PaymentRequirements is one way to pay (§5.1.2). Amount is in the
// asset's base units, a decimal string. Extra is scheme-specific: for
// exact on EVM, name and version of the token's EIP-712 domain and
// optionally assetTransferMethod. Other holds members the specification
// does not define; they are kept so that a payload echoes the offer as
// received, and [ParseExactEVM] refuses an offer that has any.
type PaymentRequirements struct {
	Scheme            string
	Network           string
	Amount            string
	Asset             string
	PayTo             string
	MaxTimeoutSeconds int64
	Extra             map[string]json.RawMessage
	Other             map[string]json.RawMessage
}

// PaymentPayload is what a client sends in PAYMENT-SIGNATURE (§5.2): the
// offer it accepted and, for exact on EVM, the signed authorization.
type PaymentPayload struct {
	X402Version int                        `json:"x402Version"`
	Resource    *ResourceInfo              `json:"resource,omitempty"`
	Accepted    PaymentRequirements        `json:"accepted"`
	Payload     ExactEVMPayload            `json:"payload"`
	Extensions  map[string]json.RawMessage `json:"extensions,omitempty"`
}

// ExactEVMPayload is the payload of exact on EVM with the EIP-3009 method
// (scheme_exact_evm.md §1): a 65-byte signature, 0x and 130 hex digits,
// and the authorization it signs.
type ExactEVMPayload struct {
	Signature     string        `json:"signature"`
	Authorization Authorization `json:"authorization"`
}

// Authorization is EIP-3009's TransferWithAuthorization on the wire:
// addresses as 0x-hex, numbers as decimal strings (values in base units,
// times in Unix seconds), the nonce as 0x and 64 hex digits.
type Authorization struct {
	From        string `json:"from"`
	To          string `json:"to"`
	Value       string `json:"value"`
	ValidAfter  string `json:"validAfter"`
	ValidBefore string `json:"validBefore"`
	Nonce       string `json:"nonce"`
}

// SettlementResponse is what PAYMENT-RESPONSE carries (§5.3): success,
// the transaction hash (empty when settlement failed), the CAIP-2 network,
// and optionally the payer, an error reason (§9) and the amount settled.
type SettlementResponse struct {
	Success     bool                       `json:"success"`
	ErrorReason string                     `json:"errorReason,omitempty"`
	Payer       string                     `json:"payer,omitempty"`
	Transaction string                     `json:"transaction"`
	Network     string                     `json:"network"`
	Amount      string                     `json:"amount,omitempty"`
	Extensions  map[string]json.RawMessage `json:"extensions,omitempty"`
}

// MarshalJSON writes the members the specification defines, then Other.
func (r PaymentRequirements) MarshalJSON() ([]byte, error) {
	m := make(map[string]json.RawMessage, 7+len(r.Other))
	for k, v := range r.Other {
		m[k] = v
	}
	for k, v := range map[string]any{"scheme": r.Scheme, "network": r.Network, "amount": r.Amount,
		"asset": r.Asset, "payTo": r.PayTo, "maxTimeoutSeconds": r.MaxTimeoutSeconds} {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		m[k] = b
	}
	if r.Extra != nil {
		b, err := json.Marshal(r.Extra)
		if err != nil {
			return nil, err
		}
		m["extra"] = b
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads an offer as strictly as the header decoders do.
func (r *PaymentRequirements) UnmarshalJSON(b []byte) error {
	o, err := object(b, "")
	if err != nil {
		return err
	}
	return o.requirements(r)
}

// ExtraString returns extra.<name> when it is a JSON string.
func (r PaymentRequirements) ExtraString(name string) (string, bool) {
	raw, ok := r.Extra[name]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// EncodePaymentRequired returns the PAYMENT-REQUIRED header value for p;
// an X402Version of 0 is written as 2, any other but 2 is refused.
func EncodePaymentRequired(p PaymentRequired) (string, error) {
	if p.X402Version == 0 {
		p.X402Version = Version
	}
	if p.X402Version != Version {
		return "", fmt.Errorf("%w %d: this package writes version 2 only", ErrVersion, p.X402Version)
	}
	if p.Accepts == nil {
		p.Accepts = []PaymentRequirements{}
	}
	return encode(p)
}

// EncodePaymentPayload returns the PAYMENT-SIGNATURE header value for p;
// an X402Version of 0 is written as 2, any other but 2 is refused.
func EncodePaymentPayload(p PaymentPayload) (string, error) {
	if p.X402Version == 0 {
		p.X402Version = Version
	}
	if p.X402Version != Version {
		return "", fmt.Errorf("%w %d: this package writes version 2 only", ErrVersion, p.X402Version)
	}
	return encode(p)
}

// EncodeSettlementResponse returns the PAYMENT-RESPONSE header value for s.
func EncodeSettlementResponse(s SettlementResponse) (string, error) {
	return encode(s)
}

// encode is standard base64, with padding, of the JSON: what the
// specification's examples show and its reference clients send.
func encode(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("x402: encode: %w", err)
	}
	s := base64.StdEncoding.EncodeToString(b)
	if len(s) > MaxHeaderBytes {
		return "", ErrHeaderTooLarge
	}
	return s, nil
}

// DecodePaymentRequired reads a PAYMENT-REQUIRED header value.
func DecodePaymentRequired(header string) (PaymentRequired, error) {
	var p PaymentRequired
	o, err := headerObject(HeaderPaymentRequired, header)
	if err != nil {
		return p, err
	}
	if p.X402Version, err = o.version(); err != nil {
		return p, err
	}
	if p.Error, err = o.str("error", false); err != nil {
		return p, err
	}
	ro, err := o.obj("resource", true)
	if err != nil {
		return p, err
	}
	if p.Resource, err = ro.resource(); err != nil {
		return p, err
	}
	raw, ok := o.m["accepts"]
	if !ok {
		return p, o.missing("accepts")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		return p, o.bad("accepts", "is not an array")
	}
	p.Accepts = make([]PaymentRequirements, len(items))
	for i, it := range items {
		io, err := object(it, strictjson.Index(o.member("accepts"), i))
		if err != nil {
			return p, err
		}
		if err := io.requirements(&p.Accepts[i]); err != nil {
			return p, err
		}
	}
	p.Extensions, err = o.extensions()
	return p, err
}

// DecodePaymentPayload reads a PAYMENT-SIGNATURE header value. The
// payload must be the EIP-3009 shape of exact on EVM (signature and
// authorization, nothing else); addresses, numbers, nonce and signature
// are checked for form here, and against the offer by [VerifyExactEVM].
func DecodePaymentPayload(header string) (PaymentPayload, error) {
	var p PaymentPayload
	o, err := headerObject(HeaderPaymentSignature, header)
	if err != nil {
		return p, err
	}
	if p.X402Version, err = o.version(); err != nil {
		return p, err
	}
	if ro, err := o.obj("resource", false); err != nil {
		return p, err
	} else if ro != nil {
		r, err := ro.resource()
		if err != nil {
			return p, err
		}
		p.Resource = &r
	}
	ao, err := o.obj("accepted", true)
	if err != nil {
		return p, err
	}
	if err := ao.requirements(&p.Accepted); err != nil {
		return p, err
	}
	po, err := o.obj("payload", true)
	if err != nil {
		return p, err
	}
	if err := po.only("signature", "authorization"); err != nil {
		return p, err
	}
	if p.Payload.Signature, err = po.str("signature", true); err != nil {
		return p, err
	}
	if _, err := parseSignature(p.Payload.Signature); err != nil {
		return p, po.bad("signature", err.Error())
	}
	au, err := po.obj("authorization", true)
	if err != nil {
		return p, err
	}
	if err := au.only("from", "to", "value", "validAfter", "validBefore", "nonce"); err != nil {
		return p, err
	}
	a := &p.Payload.Authorization
	for _, f := range []struct {
		name string
		dst  *string
	}{{"from", &a.From}, {"to", &a.To}, {"value", &a.Value}, {"validAfter", &a.ValidAfter},
		{"validBefore", &a.ValidBefore}, {"nonce", &a.Nonce}} {
		if *f.dst, err = au.str(f.name, true); err != nil {
			return p, err
		}
	}
	if _, err := a.Parse(); err != nil {
		return p, fmt.Errorf("%w: %s: %v", ErrMalformed, o.member("payload.authorization"), err)
	}
	p.Extensions, err = o.extensions()
	return p, err
}

// DecodeSettlementResponse reads a PAYMENT-RESPONSE header value.
func DecodeSettlementResponse(header string) (SettlementResponse, error) {
	var s SettlementResponse
	o, err := headerObject(HeaderPaymentResponse, header)
	if err != nil {
		return s, err
	}
	raw, ok := o.m["success"]
	if !ok {
		return s, o.missing("success")
	}
	if err := json.Unmarshal(raw, &s.Success); err != nil || string(raw) == "null" {
		return s, o.bad("success", "is not a boolean")
	}
	if s.ErrorReason, err = o.str("errorReason", false); err != nil {
		return s, err
	}
	if s.Payer, err = o.str("payer", false); err != nil {
		return s, err
	}
	if s.Transaction, err = o.str("transaction", true); err != nil {
		return s, err
	}
	if s.Network, err = o.str("network", true); err != nil {
		return s, err
	}
	if err := checkNetwork(s.Network); err != nil {
		return s, o.bad("network", err.Error())
	}
	if s.Amount, err = o.str("amount", false); err != nil {
		return s, err
	}
	if s.Amount != "" {
		if _, err := ParseUint256(s.Amount); err != nil {
			return s, o.bad("amount", err.Error())
		}
	}
	s.Extensions, err = o.extensions()
	return s, err
}

// headerObject checks a header's size and encoding and returns its JSON
// object.
func headerObject(name, header string) (*obj, error) {
	if len(header) > MaxHeaderBytes {
		return nil, fmt.Errorf("%w (%s is %d bytes)", ErrHeaderTooLarge, name, len(header))
	}
	b, err := decodeBase64(header)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrHeaderEncoding, name, err)
	}
	o, err := object(b, "")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return o, nil
}

// decodeBase64 reads the standard alphabet (RFC 4648 §4), padded or
// not, with canonical trailing bits. White space, line breaks and the URL
// alphabet are refused.
func decodeBase64(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("empty")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '=') {
			return nil, fmt.Errorf("byte %d (%q) is not in the standard base64 alphabet", i, c)
		}
	}
	enc := base64.StdEncoding.Strict()
	if len(s)%4 != 0 {
		enc = base64.RawStdEncoding.Strict()
	}
	return enc.DecodeString(s)
}

// obj is a decoded JSON object and its path, for errors that name the
// member they refuse.
type obj struct {
	m    map[string]json.RawMessage
	path string
}

func object(b []byte, path string) (*obj, error) {
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("%w: %s is not UTF-8", ErrMalformed, or(path, "the message"))
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("%w: %s is not JSON", ErrMalformed, or(path, "the message"))
	}
	if e := strictjson.Check(b, maxDepth); e != nil {
		return nil, fmt.Errorf("%w: %s", ErrMalformed, e)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%w: %s is not a JSON object", ErrMalformed, or(path, "the message"))
	}
	return &obj{m: m, path: path}, nil
}

func or(a, b string) string {
	if a == "" {
		return b
	}
	return a
}

func (o *obj) member(name string) string { return strictjson.Member(o.path, name) }

func (o *obj) missing(name string) error {
	return fmt.Errorf("%w: %s", ErrMissingRequired, o.member(name))
}

func (o *obj) bad(name, why string) error {
	return fmt.Errorf("%w: %s %s", ErrMalformed, o.member(name), why)
}

// str reads a string member; a required one must be present.
func (o *obj) str(name string, required bool) (string, error) {
	raw, ok := o.m[name]
	if !ok {
		if required {
			return "", o.missing(name)
		}
		return "", nil
	}
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", o.bad(name, "is not a string")
	}
	return s, nil
}

// obj reads an object member; nil when it is absent and optional.
func (o *obj) obj(name string, required bool) (*obj, error) {
	raw, ok := o.m[name]
	if !ok {
		if required {
			return nil, o.missing(name)
		}
		return nil, nil
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, o.bad(name, "is not an object")
	}
	return object(raw, o.member(name))
}

// only refuses members other than names.
func (o *obj) only(names ...string) error {
	for k := range o.m {
		known := false
		for _, n := range names {
			known = known || k == n
		}
		if !known {
			return fmt.Errorf("%w: %s is not a member this package knows", ErrMalformed, o.member(k))
		}
	}
	return nil
}

var digits = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)

// version reads x402Version, which must be the integer 2.
func (o *obj) version() (int, error) {
	raw, ok := o.m["x402Version"]
	if !ok {
		return 0, o.missing("x402Version")
	}
	s := string(bytes.TrimSpace(raw))
	switch {
	case s == "2":
		return Version, nil
	case s == "1":
		return 0, ErrVersion1
	case digits.MatchString(s) && len(s) < 10:
		return 0, fmt.Errorf("%w %s: this client speaks x402 version 2 only", ErrVersion, s)
	default:
		return 0, o.bad("x402Version", "is not an integer")
	}
}

func (o *obj) extensions() (map[string]json.RawMessage, error) {
	eo, err := o.obj("extensions", false)
	if err != nil || eo == nil {
		return nil, err
	}
	return eo.m, nil
}

func (o *obj) resource() (ResourceInfo, error) {
	var r ResourceInfo
	var err error
	if r.URL, err = o.str("url", true); err != nil {
		return r, err
	}
	if r.URL == "" {
		return r, o.bad("url", "is empty")
	}
	if r.Description, err = o.str("description", false); err != nil {
		return r, err
	}
	r.MimeType, err = o.str("mimeType", false)
	return r, err
}

// requirements reads one offer: the members every scheme shares are
// checked for form (a CAIP-2 network, a uint256 amount, a positive
// integer timeout); addresses are the scheme's to check.
func (o *obj) requirements(r *PaymentRequirements) error {
	*r = PaymentRequirements{}
	var err error
	for _, f := range []struct {
		name string
		dst  *string
	}{{"scheme", &r.Scheme}, {"network", &r.Network}, {"amount", &r.Amount}, {"asset", &r.Asset}, {"payTo", &r.PayTo}} {
		if *f.dst, err = o.str(f.name, true); err != nil {
			return err
		}
	}
	if r.Scheme == "" {
		return o.bad("scheme", "is empty")
	}
	if err := checkNetwork(r.Network); err != nil {
		return o.bad("network", err.Error())
	}
	if _, err := ParseUint256(r.Amount); err != nil {
		return o.bad("amount", err.Error())
	}
	raw, ok := o.m["maxTimeoutSeconds"]
	if !ok {
		return o.missing("maxTimeoutSeconds")
	}
	if s := string(raw); !digits.MatchString(s) || len(s) > 15 {
		return o.bad("maxTimeoutSeconds", "is not a non-negative integer below 10^15")
	} else {
		r.MaxTimeoutSeconds, _ = strconv.ParseInt(s, 10, 64)
	}
	eo, err := o.obj("extra", false)
	if err != nil {
		return err
	}
	if eo != nil {
		r.Extra = eo.m
	}
	for k, v := range o.m {
		switch k {
		case "scheme", "network", "amount", "asset", "payTo", "maxTimeoutSeconds", "extra":
		default:
			if r.Other == nil {
				r.Other = map[string]json.RawMessage{}
			}
			r.Other[k] = v
		}
	}
	return nil
}

var caip2 = regexp.MustCompile(`^[-a-z0-9]{3,8}:[-_a-zA-Z0-9]{1,32}$`)

// checkNetwork checks CAIP-2 syntax: namespace ":" reference.
func checkNetwork(n string) error {
	if !caip2.MatchString(n) {
		return fmt.Errorf("%.60q is not a CAIP-2 chain id", n)
	}
	return nil
}

var maxUint256 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))

// ParseUint256 reads a decimal uint256 as x402 writes amounts and times:
// digits only, no sign, exponent or leading zero (except "0" itself), at
// most 2^256-1.
func ParseUint256(s string) (*big.Int, error) {
	if len(s) > 78 || !digits.MatchString(s) {
		return nil, fmt.Errorf("%.80q is not a decimal uint256", s)
	}
	n, _ := new(big.Int).SetString(s, 10)
	if n.Cmp(maxUint256) > 0 {
		return nil, fmt.Errorf("%.80q is above 2^256-1", s)
	}
	return n, nil
}

// VerifyResponse is a facilitator's answer to POST /verify (§5.4, §7.1).
type VerifyResponse struct {
	IsValid       bool   `json:"isValid"`
	InvalidReason string `json:"invalidReason,omitempty"`
	Payer         string `json:"payer,omitempty"`
}

// FacilitatorRequest is the body of a facilitator's POST /verify and
// POST /settle (§7.1, §7.2).
type FacilitatorRequest struct {
	X402Version         int                 `json:"x402Version"`
	PaymentPayload      PaymentPayload      `json:"paymentPayload"`
	PaymentRequirements PaymentRequirements `json:"paymentRequirements"`
}
