package x402

import (
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/x402/evm"
)

// Asset is a token the deployment pays with on one network, pinned in its
// configuration: the EIP-712 domain an offer must name (a server that
// names another only makes its own payment fail, but a pinned domain
// turns that into a refusal the agent can read), and how its base units
// become the minor units of a currency the gate counts.
type Asset struct {
	Network  string      // CAIP-2, e.g. "eip155:84532"
	Address  evm.Address // the token contract
	Name     string      // EIP-712 domain name, e.g. "USDC"
	Version  string      // EIP-712 domain version, e.g. "2"
	Decimals int         // base units per whole token: 10^Decimals (USDC: 6)
	// Currency is the ISO 4217 currency one whole token is worth one of
	// (USDC: "USD"), and MinorDigits that currency's minor-unit digits
	// (USD: 2). Decimals must be at least MinorDigits.
	Currency    string
	MinorDigits int
}

// Policy is what the deployment will pay with and for. Choose keeps only
// the offers it can honour.
type Policy struct {
	Assets []Asset
	// MaxTimeout caps an offer's maxTimeoutSeconds: the longest a signed
	// authorization may stay valid, and so how long after a kill switch
	// an authorization already out may still be submitted.
	MaxTimeout time.Duration
	// PayTo refuses a payee the mandate does not allow (an error saying
	// why), given as "eip155:<chain id>:<address>" (CAIP-10, checksum
	// case). Nil allows any.
	PayTo func(caip10 string) error
}

// Ask is what the agent signed: the URL it asked for and the most it
// will pay, in minor units of a currency.
type Ask struct {
	URL      *url.URL
	MaxMinor int64
	Currency string
}

// Choice is the offer Choose picked, with the money it costs: Minor is
// the amount in the asset's currency's minor units, rounded up (a price
// below one minor unit counts as one, so the gate never counts less than
// moves).
type Choice struct {
	Index        int // in PaymentRequired.Accepts
	Requirements PaymentRequirements
	Offer        ExactEVM
	Asset        Asset
	Minor        int64
	Currency     string
	PayTo        string // CAIP-10
}

// Refusal says why one offer was not taken: Check names the member or the
// rule ("scheme", "network", "asset", "extra.name", "payTo",
// "maxTimeoutSeconds", "amount", "resource.url", …).
type Refusal struct {
	Index  int    `json:"index"`
	Check  string `json:"check"`
	Reason string `json:"reason"`
}

// NoOfferError is Choose's answer when no offer can be honoured; the
// problem it becomes lists every refusal.
type NoOfferError struct {
	Refusals []Refusal
}

func (e *NoOfferError) Error() string {
	if len(e.Refusals) == 0 {
		return "x402: the server offered no way to pay"
	}
	parts := make([]string, len(e.Refusals))
	for i, r := range e.Refusals {
		parts[i] = fmt.Sprintf("offer %d: %s: %s", r.Index, r.Check, r.Reason)
	}
	return "x402: no offer can be honoured (" + strings.Join(parts, "; ") + ")"
}

// Check validates the policy: every asset complete and distinct.
func (p Policy) Check() error {
	if p.MaxTimeout < time.Second {
		return errors.New("x402: policy: the timeout cap must be at least a second")
	}
	seen := map[string]bool{}
	for i, a := range p.Assets {
		id, err := ChainID(a.Network)
		switch {
		case err != nil:
			return fmt.Errorf("x402: policy: asset %d: %w", i, err)
		case id == nil:
			return fmt.Errorf("x402: policy: asset %d: no chain id", i)
		case a.Name == "" || a.Version == "":
			return fmt.Errorf("x402: policy: asset %d: the EIP-712 name and version are required", i)
		case len(a.Currency) != 3 || strings.ToUpper(a.Currency) != a.Currency:
			return fmt.Errorf("x402: policy: asset %d: currency %q is not an ISO 4217 code", i, a.Currency)
		case a.MinorDigits < 0 || a.Decimals < a.MinorDigits || a.Decimals > 36:
			return fmt.Errorf("x402: policy: asset %d: decimals %d against %d minor digits", i, a.Decimals, a.MinorDigits)
		}
		k := a.Network + "/" + a.Address.String()
		if seen[k] {
			return fmt.Errorf("x402: policy: asset %s on %s twice", a.Address, a.Network)
		}
		seen[k] = true
	}
	return nil
}

func (p Policy) asset(network string, addr evm.Address) (Asset, bool) {
	for _, a := range p.Assets {
		if a.Network == network && a.Address == addr {
			return a, true
		}
	}
	return Asset{}, false
}

// Choose picks, among pr's offers, the cheapest one the policy and the
// ask allow (the first listed among equals), and says for every other
// why not. Nothing is signed here; a NoOfferError means nothing may be.
func (p Policy) Choose(pr PaymentRequired, ask Ask) (Choice, []Refusal, error) {
	var refused []Refusal
	refuse := func(i int, check, format string, args ...any) {
		refused = append(refused, Refusal{Index: i, Check: check, Reason: fmt.Sprintf(format, args...)})
	}
	if ask.URL == nil || !SameOrigin(pr.Resource.URL, ask.URL) {
		// One resource for every offer: each is refused for it.
		for i := range pr.Accepts {
			refuse(i, "resource.url", "%.200q is not on the origin asked for", pr.Resource.URL)
		}
		return Choice{}, refused, &NoOfferError{Refusals: refused}
	}
	best := -1
	var choice Choice
	for i, r := range pr.Accepts {
		o, err := ParseExactEVM(r)
		if err != nil {
			var oe *OfferError
			if errors.As(err, &oe) {
				refuse(i, oe.Check, "%s", oe.Reason)
			} else {
				refuse(i, "other", "%v", err)
			}
			continue
		}
		a, ok := p.asset(o.Network, o.Asset)
		if !ok {
			refuse(i, "asset", "%s on %s is not an asset this deployment pays with", o.Asset, o.Network)
			continue
		}
		if o.Domain.Name != a.Name || o.Domain.Version != a.Version {
			check := "extra.name"
			if o.Domain.Name == a.Name {
				check = "extra.version"
			}
			refuse(i, check, "the token's EIP-712 domain is %q version %q, not %q version %q", a.Name, a.Version, o.Domain.Name, o.Domain.Version)
			continue
		}
		if p.MaxTimeout > 0 && o.MaxTimeout > p.MaxTimeout {
			refuse(i, "maxTimeoutSeconds", "%d s is over this deployment's cap of %d s", int64(o.MaxTimeout/time.Second), int64(p.MaxTimeout/time.Second))
			continue
		}
		payTo := fmt.Sprintf("eip155:%s:%s", o.ChainID, o.PayTo)
		if p.PayTo != nil {
			if err := p.PayTo(payTo); err != nil {
				refuse(i, "payTo", "%s: %v", payTo, err)
				continue
			}
		}
		if a.Currency != ask.Currency {
			refuse(i, "amount", "priced in %s, the most the agent signed is in %s", a.Currency, ask.Currency)
			continue
		}
		minor, ok := toMinor(o.Amount, a.Decimals-a.MinorDigits)
		if !ok || minor > ask.MaxMinor {
			refuse(i, "amount", "%s base units (%s) is over the %d %s minor units the agent signed for", o.Amount, minorText(o.Amount, a), ask.MaxMinor, ask.Currency)
			continue
		}
		if best < 0 || minor < choice.Minor {
			if best >= 0 {
				refuse(best, "amount", "a cheaper offer was taken")
			}
			best = i
			choice = Choice{Index: i, Requirements: r, Offer: o, Asset: a, Minor: minor, Currency: a.Currency, PayTo: payTo}
			continue
		}
		refuse(i, "amount", "a cheaper or earlier offer was taken")
	}
	slices.SortStableFunc(refused, func(a, b Refusal) int { return a.Index - b.Index })
	if best < 0 {
		return Choice{}, refused, &NoOfferError{Refusals: refused}
	}
	return choice, refused, nil
}

// maxMinor bounds a converted amount: the gate's amounts are below 2^53.
var maxMinor = big.NewInt(1<<53 - 1)

// toMinor converts base units to minor units, rounding up: shift is the
// number of base-unit digits below a minor unit.
func toMinor(amount *big.Int, shift int) (int64, bool) {
	div := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(shift)), nil)
	q, m := new(big.Int).QuoRem(amount, div, new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if q.Cmp(maxMinor) > 0 {
		return 0, false
	}
	return q.Int64(), true
}

func minorText(amount *big.Int, a Asset) string {
	m, ok := toMinor(amount, a.Decimals-a.MinorDigits)
	if !ok {
		return "more than any payment"
	}
	return fmt.Sprintf("%d %s minor units", m, a.Currency)
}
