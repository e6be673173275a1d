// Package ids mints the prefixed, sortable identifiers used on the wire:
// "int_" intents, "rcpt_" receipts, "ak_" agent keys, "we_" webhook
// endpoints, "mem_" memory records, "req_" requests (DESIGN §12).
//
// An id is the prefix followed by a ULID: 26 Crockford base32 characters
// that sort by creation time, so store keys built from ids iterate in
// creation order. Ids are unique, not secret: never use one as a credential.
package ids

import (
	"strings"

	"github.com/oklog/ulid/v2"
)

// Prefixes of the id kinds.
const (
	Intent   = "int_"
	Receipt  = "rcpt_"
	AgentKey = "ak_"
	Endpoint = "we_"
	Memory   = "mem_"
	Request  = "req_"
	Refund   = "rf_"
)

// New returns prefix followed by a new ULID. It is safe for concurrent use;
// ids minted by one process are strictly increasing.
func New(prefix string) string {
	return prefix + ulid.Make().String()
}

// Valid reports whether s is prefix followed by a well-formed ULID.
func Valid(prefix, s string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) != ulid.EncodedSize {
		return false
	}
	_, err := ulid.ParseStrict(rest)
	return err == nil
}
