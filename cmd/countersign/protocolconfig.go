package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"

	"golang.org/x/mod/sumdb/note"

	"github.com/countersign/countersign/protocol"
)

// protocolConfig is the file --protocol-config names: the keys each
// evidence class is checked against, and the insurance schedule.
//
//	{"evidence": {"witnesses": {"name": "<64 hex Ed25519 public key>"},
//	              "receipts":  {"merchant-or-rail": "<64 hex>"},
//	              "attesters": {"name": "<64 hex>"},
//	              "logs":      {"origin": "<note verifier key origin+hash+base64>"}},
//	 "insurance": {"payee": "acct:...", "rateBps": 300, "minPremiumMinor": 100, "maxLimitMinor": 10000000}}
type protocolConfig struct {
	Evidence struct {
		Witnesses map[string]string `json:"witnesses"`
		Receipts  map[string]string `json:"receipts"`
		Attesters map[string]string `json:"attesters"`
		Logs      map[string]string `json:"logs"`
	} `json:"evidence"`
	Insurance struct {
		Payee           string `json:"payee"`
		RateBps         int64  `json:"rateBps"`
		MinPremiumMinor int64  `json:"minPremiumMinor"`
		MaxLimitMinor   int64  `json:"maxLimitMinor"`
	} `json:"insurance"`
}

// readProtocolConfig reads --protocol-config; "" is no evidence keys and
// the default insurance schedule.
func readProtocolConfig(path string) (protocol.EvidenceKeys, protocol.InsuranceSchedule, error) {
	var keys protocol.EvidenceKeys
	var ins protocol.InsuranceSchedule
	if path == "" {
		return keys, ins, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return keys, ins, fmt.Errorf("--protocol-config: %w", err)
	}
	var c protocolConfig
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return keys, ins, fmt.Errorf("--protocol-config %s: %w", path, err)
	}
	for _, set := range []struct {
		name string
		in   map[string]string
		out  *map[string]ed25519.PublicKey
	}{{"witnesses", c.Evidence.Witnesses, &keys.Witnesses}, {"receipts", c.Evidence.Receipts, &keys.Receipts}, {"attesters", c.Evidence.Attesters, &keys.Attesters}} {
		*set.out = map[string]ed25519.PublicKey{}
		for name, h := range set.in {
			k, err := hex.DecodeString(h)
			if err != nil || len(k) != ed25519.PublicKeySize || name == "" {
				return keys, ins, fmt.Errorf("--protocol-config %s: evidence.%s.%q: want a name and 64 hex digits of an Ed25519 public key", path, set.name, name)
			}
			(*set.out)[name] = ed25519.PublicKey(k)
		}
	}
	keys.Logs = map[string]string{}
	for origin, vkey := range c.Evidence.Logs {
		v, err := note.NewVerifier(vkey)
		if err != nil || v.Name() != origin {
			return keys, ins, fmt.Errorf("--protocol-config %s: evidence.logs.%q: want a note verifier key named after the origin", path, origin)
		}
		keys.Logs[origin] = vkey
	}
	ins = protocol.InsuranceSchedule{Payee: c.Insurance.Payee, RateBps: c.Insurance.RateBps,
		MinPremiumMinor: c.Insurance.MinPremiumMinor, MaxLimitMinor: c.Insurance.MaxLimitMinor}
	return keys, ins, nil
}
