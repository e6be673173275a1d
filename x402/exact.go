package x402

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/countersign/countersign/x402/evm"
)

// SchemeExact is the scheme this package pays and verifies.
const SchemeExact = "exact"

// MethodEIP3009 is the only extra.assetTransferMethod this package pays
// with; an offer without the member defaults to it (scheme_exact_evm.md).
const MethodEIP3009 = "eip3009"

// ExactEVM is an offer of exact on an EVM network, read and checked by
// [ParseExactEVM]: everything a payer needs to sign, in typed form.
type ExactEVM struct {
	Network    string // CAIP-2, "eip155:<chain id>"
	ChainID    *big.Int
	Asset      evm.Address // the token contract: the domain's verifyingContract
	PayTo      evm.Address
	Amount     *big.Int      // base units, > 0
	MaxTimeout time.Duration // maxTimeoutSeconds, > 0
	Domain     evm.Domain    // extra.name, extra.version, chain id, asset
}

// OfferError says which check refused an offer: Check is the offer's
// member (e.g. "scheme", "network", "payTo", "extra.name") or "other" for
// members the specification does not define.
type OfferError struct {
	Check  string
	Reason string
}

func (e *OfferError) Error() string { return "x402: offer " + e.Check + ": " + e.Reason }

func offerErr(check, format string, a ...any) error {
	return &OfferError{Check: check, Reason: fmt.Sprintf(format, a...)}
}

// ChainID reads the chain id of an "eip155:<decimal>" CAIP-2 network.
func ChainID(network string) (*big.Int, error) {
	ref, ok := strings.CutPrefix(network, "eip155:")
	if !ok {
		return nil, fmt.Errorf("x402: network %.60q is not an EVM (eip155) network", network)
	}
	n, err := ParseUint256(ref)
	if err != nil || n.Sign() == 0 {
		return nil, fmt.Errorf("x402: network %.60q has no valid chain id", network)
	}
	return n, nil
}

// ParseExactEVM checks that r is an offer this package can pay: scheme
// exact, an eip155 network, asset and payTo EVM addresses (EIP-55 checked
// when mixed case), amount above zero, maxTimeoutSeconds above zero,
// extra.name and extra.version strings (the token's EIP-712 domain),
// extra.assetTransferMethod absent or "eip3009", and no member the
// specification does not define. Deployment policy (which networks,
// assets, names and payees) is the caller's.
func ParseExactEVM(r PaymentRequirements) (ExactEVM, error) {
	var x ExactEVM
	if r.Scheme != SchemeExact {
		return x, offerErr("scheme", "%.40q is not %q", r.Scheme, SchemeExact)
	}
	if len(r.Other) > 0 {
		for k := range r.Other {
			return x, offerErr("other", "member %.40q is not defined by x402 version 2", k)
		}
	}
	chain, err := ChainID(r.Network)
	if err != nil {
		return x, offerErr("network", "%v", err)
	}
	if x.Asset, err = evm.ParseAddress(r.Asset); err != nil {
		return x, offerErr("asset", "%v", err)
	}
	if x.PayTo, err = evm.ParseAddress(r.PayTo); err != nil {
		return x, offerErr("payTo", "%v", err)
	}
	if x.Amount, err = ParseUint256(r.Amount); err != nil {
		return x, offerErr("amount", "%v", err)
	}
	if x.Amount.Sign() == 0 {
		return x, offerErr("amount", "is zero")
	}
	if r.MaxTimeoutSeconds <= 0 {
		return x, offerErr("maxTimeoutSeconds", "is not above zero")
	}
	name, ok := r.ExtraString("name")
	if !ok || name == "" {
		return x, offerErr("extra.name", "the token's EIP-712 domain name is missing")
	}
	ver, ok := r.ExtraString("version")
	if !ok || ver == "" {
		return x, offerErr("extra.version", "the token's EIP-712 domain version is missing")
	}
	if _, present := r.Extra["assetTransferMethod"]; present {
		if m, _ := r.ExtraString("assetTransferMethod"); m != MethodEIP3009 {
			return x, offerErr("extra.assetTransferMethod", "%.40q is not %q", m, MethodEIP3009)
		}
	}
	x.Network, x.ChainID = r.Network, chain
	x.MaxTimeout = time.Duration(r.MaxTimeoutSeconds) * time.Second
	x.Domain = evm.Domain{Name: name, Version: ver, ChainID: chain, VerifyingContract: x.Asset}
	return x, nil
}

// SignExactEVM pays offer r: it signs, with key, an EIP-3009
// TransferWithAuthorization of exactly r's amount to r's payTo, valid
// strictly after validAfter and strictly before validBefore (Unix
// seconds, as the token contract compares block.timestamp), under nonce,
// and returns the payload that echoes r as accepted. resource, when not
// nil, is echoed too. The same arguments give the same payload, byte for
// byte: the signature is deterministic (RFC 6979).
func SignExactEVM(r PaymentRequirements, resource *ResourceInfo, key *evm.Key, nonce [32]byte, validAfter, validBefore time.Time) (PaymentPayload, error) {
	x, err := ParseExactEVM(r)
	if err != nil {
		return PaymentPayload{}, err
	}
	if validAfter.Unix() < 0 || !validBefore.After(validAfter) {
		return PaymentPayload{}, errors.New("x402: the validity window is empty or before 1970")
	}
	if validBefore.Sub(validAfter) > x.MaxTimeout+10*time.Minute+time.Second {
		// Not a protocol rule; a guard against signing an authorization
		// that outlives the offer by far.
		return PaymentPayload{}, fmt.Errorf("x402: the validity window %v is far longer than maxTimeoutSeconds %d", validBefore.Sub(validAfter), r.MaxTimeoutSeconds)
	}
	auth := evm.TransferWithAuthorization{From: key.Address(), To: x.PayTo, Value: x.Amount,
		ValidAfter: big.NewInt(validAfter.Unix()), ValidBefore: big.NewInt(validBefore.Unix()), Nonce: nonce}
	digest, err := auth.Digest(x.Domain)
	if err != nil {
		return PaymentPayload{}, err
	}
	sig := key.Sign(digest)
	p := PaymentPayload{X402Version: Version, Accepted: r, Payload: ExactEVMPayload{
		Signature:     "0x" + hex.EncodeToString(sig[:]),
		Authorization: WireAuthorization(auth),
	}}
	if resource != nil {
		rc := *resource
		p.Resource = &rc
	}
	return p, nil
}

// WireAuthorization writes an authorization as the payload carries it.
func WireAuthorization(a evm.TransferWithAuthorization) Authorization {
	return Authorization{From: a.From.String(), To: a.To.String(), Value: a.Value.String(),
		ValidAfter: a.ValidAfter.String(), ValidBefore: a.ValidBefore.String(),
		Nonce: "0x" + hex.EncodeToString(a.Nonce[:])}
}

// Parse reads the wire authorization: EVM addresses, decimal uint256
// numbers, a nonce of 0x and 64 hex digits.
func (a Authorization) Parse() (evm.TransferWithAuthorization, error) {
	var t evm.TransferWithAuthorization
	var err error
	if t.From, err = evm.ParseAddress(a.From); err != nil {
		return t, fmt.Errorf("from: %w", err)
	}
	if t.To, err = evm.ParseAddress(a.To); err != nil {
		return t, fmt.Errorf("to: %w", err)
	}
	if t.Value, err = ParseUint256(a.Value); err != nil {
		return t, fmt.Errorf("value: %w", err)
	}
	if t.ValidAfter, err = ParseUint256(a.ValidAfter); err != nil {
		return t, fmt.Errorf("validAfter: %w", err)
	}
	if t.ValidBefore, err = ParseUint256(a.ValidBefore); err != nil {
		return t, fmt.Errorf("validBefore: %w", err)
	}
	if t.Nonce, err = ParseNonce(a.Nonce); err != nil {
		return t, err
	}
	return t, nil
}

// ParseNonce reads a bytes32 nonce: 0x and 64 hex digits.
func ParseNonce(s string) ([32]byte, error) {
	var n [32]byte
	h, ok := strings.CutPrefix(s, "0x")
	if !ok || len(h) != 64 {
		return n, fmt.Errorf("nonce %.80q is not 0x and 64 hex digits", s)
	}
	if _, err := hex.Decode(n[:], []byte(h)); err != nil {
		return n, fmt.Errorf("nonce %.80q is not hex", s)
	}
	return n, nil
}

func parseSignature(s string) ([]byte, error) {
	h, ok := strings.CutPrefix(s, "0x")
	if !ok || len(h) != 130 {
		return nil, errors.New("is not 0x and 130 hex digits (65 bytes)")
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return nil, errors.New("is not hex")
	}
	return b, nil
}

// The invalid reasons of §9 that [VerifyExactEVM] answers.
const (
	ReasonInvalidScheme       = "invalid_scheme"
	ReasonInvalidNetwork      = "invalid_network"
	ReasonInvalidPayload      = "invalid_payload"
	ReasonInvalidRequirements = "invalid_payment_requirements"
	ReasonSignature           = "invalid_exact_evm_payload_signature"
	ReasonRecipientMismatch   = "invalid_exact_evm_payload_recipient_mismatch"
	ReasonValueMismatch       = "invalid_exact_evm_payload_authorization_value_mismatch"
	ReasonValidAfter          = "invalid_exact_evm_payload_authorization_valid_after"
	ReasonValidBefore         = "invalid_exact_evm_payload_authorization_valid_before"
)

// VerifyError is a payload [VerifyExactEVM] refuses; Reason is one of the
// specification's invalid reasons (§9), for VerifyResponse.invalidReason
// or SettlementResponse.errorReason.
type VerifyError struct {
	Reason string
	Detail string
}

func (e *VerifyError) Error() string { return "x402: " + e.Reason + ": " + e.Detail }

func verifyErr(reason, format string, a ...any) error {
	return &VerifyError{Reason: reason, Detail: fmt.Sprintf(format, a...)}
}

// VerifyExactEVM checks payload p against offer r at time now, as a
// facilitator's /verify does before settling (scheme_exact_evm.md §1
// phase 2, less balance and simulation, which need a chain): p accepted r
// (scheme, network, asset, amount, payTo and the token's name and version
// equal); the signature recovers authorization.from over the EIP-712
// digest in the domain of extra.name, extra.version, the network's chain
// id and the asset as verifyingContract; to is payTo; value is amount;
// validAfter < now < validBefore; and validBefore is at most
// maxTimeoutSeconds after now. It returns the payer and the
// authorization. Whether the nonce is unused is the chain's to say.
func VerifyExactEVM(p PaymentPayload, r PaymentRequirements, now time.Time) (evm.Address, evm.TransferWithAuthorization, error) {
	var none evm.TransferWithAuthorization
	if p.X402Version != Version {
		return evm.Address{}, none, verifyErr("invalid_x402_version", "x402Version %d", p.X402Version)
	}
	x, err := ParseExactEVM(r)
	if err != nil {
		return evm.Address{}, none, verifyErr(ReasonInvalidRequirements, "%v", err)
	}
	acc := p.Accepted
	switch {
	case acc.Scheme != r.Scheme:
		return evm.Address{}, none, verifyErr(ReasonInvalidScheme, "accepted scheme %.40q, offered %q", acc.Scheme, r.Scheme)
	case acc.Network != r.Network:
		return evm.Address{}, none, verifyErr(ReasonInvalidNetwork, "accepted network %.40q, offered %q", acc.Network, r.Network)
	}
	ax, err := ParseExactEVM(acc)
	if err != nil {
		return evm.Address{}, none, verifyErr(ReasonInvalidPayload, "accepted: %v", err)
	}
	switch {
	case ax.Asset != x.Asset:
		return evm.Address{}, none, verifyErr(ReasonInvalidPayload, "accepted asset %s, offered %s", ax.Asset, x.Asset)
	case ax.PayTo != x.PayTo:
		return evm.Address{}, none, verifyErr(ReasonRecipientMismatch, "accepted payTo %s, offered %s", ax.PayTo, x.PayTo)
	case ax.Amount.Cmp(x.Amount) != 0:
		return evm.Address{}, none, verifyErr(ReasonValueMismatch, "accepted amount %s, offered %s", ax.Amount, x.Amount)
	case ax.Domain.Name != x.Domain.Name || ax.Domain.Version != x.Domain.Version:
		return evm.Address{}, none, verifyErr(ReasonInvalidPayload, "accepted token domain %q/%q, offered %q/%q", ax.Domain.Name, ax.Domain.Version, x.Domain.Name, x.Domain.Version)
	}
	auth, err := p.Payload.Authorization.Parse()
	if err != nil {
		return evm.Address{}, none, verifyErr(ReasonInvalidPayload, "authorization: %v", err)
	}
	sig, err := parseSignature(p.Payload.Signature)
	if err != nil {
		return evm.Address{}, none, verifyErr(ReasonSignature, "signature %v", err)
	}
	digest, err := auth.Digest(x.Domain)
	if err != nil {
		return evm.Address{}, none, verifyErr(ReasonInvalidPayload, "%v", err)
	}
	signer, err := evm.Recover(digest, sig)
	if err != nil {
		return evm.Address{}, none, verifyErr(ReasonSignature, "%v", err)
	}
	if signer != auth.From {
		return evm.Address{}, none, verifyErr(ReasonSignature, "signed by %s, not by from %s", signer, auth.From)
	}
	if auth.To != x.PayTo {
		return evm.Address{}, none, verifyErr(ReasonRecipientMismatch, "to %s, payTo %s", auth.To, x.PayTo)
	}
	if auth.Value.Cmp(x.Amount) != 0 {
		return evm.Address{}, none, verifyErr(ReasonValueMismatch, "value %s, amount %s", auth.Value, x.Amount)
	}
	t := big.NewInt(now.Unix())
	if auth.ValidAfter.Cmp(t) >= 0 {
		return evm.Address{}, none, verifyErr(ReasonValidAfter, "valid after %s, now %s", auth.ValidAfter, t)
	}
	if auth.ValidBefore.Cmp(t) <= 0 {
		return evm.Address{}, none, verifyErr(ReasonValidBefore, "valid before %s, now %s", auth.ValidBefore, t)
	}
	if limit := new(big.Int).Add(t, big.NewInt(r.MaxTimeoutSeconds)); auth.ValidBefore.Cmp(limit) > 0 {
		return evm.Address{}, none, verifyErr(ReasonValidBefore, "valid before %s, more than maxTimeoutSeconds %d after now %s", auth.ValidBefore, r.MaxTimeoutSeconds, t)
	}
	return signer, auth, nil
}
