package ledger

import (
	"bytes"
	"encoding/binary"
	"strings"
)

// Key prefixes; see "Key layout" in the package doc.
const (
	transferPrefix = "ledger/t/"
	linePrefix     = "ledger/l/"
)

// transferKey is the key of the transfer with the given id.
func transferKey(id string) []byte {
	return append([]byte(transferPrefix), id...)
}

// pairPrefix is the prefix of every line of (account, currency). The
// trailing 0x00 ends the currency, so "USD" never matches the lines of a
// currency "USDC".
func pairPrefix(account Account, currency string) []byte {
	k := make([]byte, 0, len(linePrefix)+len(account)+len(currency)+2+8)
	k = append(k, linePrefix...)
	k = append(k, account...)
	k = append(k, 0)
	k = append(k, currency...)
	return append(k, 0)
}

// lineKey is the key of line seq of (account, currency).
func lineKey(account Account, currency string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(pairPrefix(account, currency), seq)
}

// parseLineKey splits a line key. It reports false for a key that is not
// one this package writes.
func parseLineKey(k []byte) (account Account, currency string, seq uint64, ok bool) {
	rest, ok := bytes.CutPrefix(k, []byte(linePrefix))
	// The seq is parsed from the end: its 8 bytes may contain 0x00.
	if !ok || len(rest) < 2+8 || rest[len(rest)-9] != 0 {
		return "", "", 0, false
	}
	seq = binary.BigEndian.Uint64(rest[len(rest)-8:])
	rest = rest[:len(rest)-9]
	a, c, ok := bytes.Cut(rest, []byte{0})
	if !ok || !validAccount(string(a)) || !validCurrency(string(c)) {
		return "", "", 0, false
	}
	return string(a), string(c), seq, true
}

// Limits on the names and strings of a transfer.
const (
	maxAccountLen  = 200
	minCurrencyLen = 3
	maxCurrencyLen = 258
	maxIDLen       = 255
	maxKindLen     = 100
	maxRefLen      = 255
)

// visible reports whether s is min..max bytes of visible ASCII (0x21-0x7e:
// no spaces, no control bytes, no 0x00).
func visible(s string, minLen, maxLen int) bool {
	if len(s) < minLen || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func validAccount(a Account) bool { return visible(a, 1, maxAccountLen) }
func validCurrency(c string) bool { return visible(c, minCurrencyLen, maxCurrencyLen) }

// ValidCurrency reports whether c is a currency code the ledger accepts:
// 3 to 258 visible ASCII characters. Callers check input with it so that
// a client's bad code is the client's error, not a ledger fault.
func ValidCurrency(c string) bool    { return validCurrency(c) }
func isWorld(a Account) bool         { return strings.HasPrefix(a, WorldPrefix) }
func inRange(minor int64) bool       { return minor >= -MaxMinor && minor <= MaxMinor }
func validPrefix(prefix string) bool { return visible(prefix, 0, maxAccountLen) }
