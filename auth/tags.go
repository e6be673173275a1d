package auth

import "strings"

// Limits on usage tags (DESIGN §6).
const (
	// MaxTags is the most tags one request keeps; later ones are dropped.
	MaxTags = 16
	// MaxTagLen is the longest tag, in bytes.
	MaxTagLen = 64
)

// ParseTags reads the X-Svc-Tags header: comma-separated tokens, each
// trimmed of surrounding white space, each 1 to [MaxTagLen] characters
// from [A-Za-z0-9_.:=-]. It never fails: a malformed token is dropped
// silently, a repeated token is kept once (tags are case-sensitive), and
// only the first [MaxTags] distinct valid tokens are kept, in the order
// they appear. It returns nil when no token survives.
//
// Tags label calls for usage reports, and the header is the caller's to
// write, so the parser is forgiving by design: a typo costs the caller a
// label, never the request. It stops reading once it has MaxTags tags, so
// its cost does not grow with an oversized header. Several X-Svc-Tags
// header lines can be joined with "," before parsing.
//
// The result is canonical: ParseTags(strings.Join(out, ",")) equals out.
func ParseTags(header string) []string {
	var out []string
	for header != "" && len(out) < MaxTags {
		var tok string
		tok, header, _ = strings.Cut(header, ",")
		tok = strings.TrimSpace(tok)
		if !ValidTag(tok) || containsString(out, tok) {
			continue
		}
		out = append(out, tok)
	}
	return out
}

// ValidTag reports whether s is a well-formed tag: 1 to [MaxTagLen]
// characters from [A-Za-z0-9_.:=-].
func ValidTag(s string) bool {
	if len(s) == 0 || len(s) > MaxTagLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tagByte(s[i]) {
			return false
		}
	}
	return true
}

func tagByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '_', '.', ':', '=', '-':
		return true
	}
	return false
}

// containsString is a linear search: tag lists hold at most MaxTags
// entries, where a map would cost more than it saves.
func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
