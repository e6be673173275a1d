package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/countersign/countersign/internal/jcsenc"
)

// Key layout. Everything the package stores lives under "audit/":
//
//	audit/e/<seq, 8 bytes big-endian>   stored entry (see encodeStored)
//	audit/t/<leaf, 8 bytes big-endian>  tlog stored hashes written with leaf
//	audit/head                          size (8 bytes BE) ‖ newest entry hash (32 bytes)
//	audit/cp                            the signed checkpoint of the head (C2SP note text)
//
// Big-endian integers make bytewise key order equal numeric order, so a
// range of entries is one ordered scan.
var (
	entryPrefix = []byte("audit/e/")
	treePrefix  = []byte("audit/t/")
	headKey     = []byte("audit/head")
	cpKey       = []byte("audit/cp")
)

func entryKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), entryPrefix...), seq)
}

func treeKey(leaf uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), treePrefix...), leaf)
}

// Stored entry value, in one of two formats:
//
//	format 1 (storedSigned): an entry signed on its own
//	[0]      1
//	[1:33]   entry hash (raw SHA-256)
//	[33:97]  Ed25519 signature over the 32 hash bytes
//	[97:]    canonical body: the RFC 8785 JSON of the entry without hash and sig
//
//	format 2 (storedCovered): an entry covered by the log's checkpoint
//	[0]      2
//	[1:33]   entry hash (raw SHA-256)
//	[33:]    canonical body
//
// Keeping the canonical body means the hash is checked by hashing stored
// bytes, without re-running JCS (see the package doc, "Storage layout").
// Every entry written before checkpoints were kept per commit is in format
// 1; since then only entries appended with Record.Signed are.
const (
	storedSigned  = 1
	storedCovered = 2
	storedHashOff = 1
	storedSigOff  = storedHashOff + sha256.Size
	storedBodyOff = storedSigOff + 64
)

// maxBodyBytes bounds the canonical body of one entry. Entries are a record
// of decisions, not a blob store; a megabyte leaves ample room for Data.
const maxBodyBytes = 1 << 20

// maxSeq is the largest sequence number that survives RFC 8785, which
// serializes every number as an IEEE 754 double.
const maxSeq = 1 << 53

var zeroHashHex = string(bytes.Repeat([]byte{'0'}, 64))

// head is the decoded value of headKey.
type head struct {
	size uint64
	hash [32]byte // hash of entry size; zero when size is 0
}

func readHead(r interface{ Get([]byte) ([]byte, error) }) (head, error) {
	v, err := r.Get(headKey)
	if isNotFound(err) {
		return head{}, nil
	}
	if err != nil {
		return head{}, fmt.Errorf("audit: read head: %w", err)
	}
	if len(v) != 8+32 {
		return head{}, &TamperError{Seq: 0, Reason: "head record is damaged"}
	}
	var h head
	h.size = binary.BigEndian.Uint64(v)
	copy(h.hash[:], v[8:])
	return h, nil
}

func encodeHead(h head) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 40), h.size)
	return append(b, h.hash[:]...)
}

// encodeStored builds the stored value for an entry from its canonical
// body, raw hash and raw signature (nil for an entry the checkpoint
// covers).
func encodeStored(body []byte, hash [32]byte, sig []byte) []byte {
	v := make([]byte, 0, storedBodyOff+len(body))
	if sig == nil {
		v = append(v, storedCovered)
	} else {
		v = append(v, storedSigned)
	}
	v = append(v, hash[:]...)
	v = append(v, sig...)
	return append(v, body...)
}

// storedParts splits a stored value without copying; sig is nil for an
// entry stored without a signature of its own. It checks only the
// framing, not the body.
func storedParts(seq uint64, v []byte) (hash, sig, body []byte, err error) {
	switch {
	case len(v) >= storedBodyOff+2 && v[0] == storedSigned:
		return v[storedHashOff:storedSigOff], v[storedSigOff:storedBodyOff], v[storedBodyOff:], nil
	case len(v) >= storedSigOff+2 && v[0] == storedCovered:
		return v[storedHashOff:storedSigOff], nil, v[storedSigOff:], nil
	}
	return nil, nil, nil, &TamperError{Seq: seq, Reason: "stored entry is not in the stored format"}
}

// decodeStored turns the stored value of entry seq into the served Entry,
// checking that the body hashes to the stored hash, that it parses, and that
// re-encoding the parsed entry reproduces the body byte for byte, so that
// the Entry served is exactly what was hashed. It does not check the
// signature, nor that Data is in canonical form (Verify at depth Full does).
func decodeStored(seq uint64, v []byte) (Entry, error) {
	hash, sig, body, err := storedParts(seq, v)
	if err != nil {
		return Entry{}, err
	}
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], hash) {
		return Entry{}, &TamperError{Seq: seq, Reason: "entry hash does not match the stored entry"}
	}
	e, err := decodeBody(seq, body)
	if err != nil {
		return Entry{}, err
	}
	e.Hash = hex.EncodeToString(hash)
	if sig != nil {
		e.Sig = base64.RawURLEncoding.EncodeToString(sig)
	}
	return e, nil
}

// bodyFields mirrors Entry without Hash and Sig, so that a body carrying a
// "hash" or "sig" member is rejected as an unknown field.
type bodyFields struct {
	Seq       uint64          `json:"seq"`
	At        string          `json:"at"`
	Type      string          `json:"type"`
	IntentID  string          `json:"intentId"`
	Actor     Actor           `json:"actor"`
	RequestID string          `json:"requestId"`
	Rationale string          `json:"rationale"`
	Data      json.RawMessage `json:"data"`
	Prev      string          `json:"prev"`
}

// decodeBody parses a canonical body strictly: no unknown members, valid
// field values, the sequence number expected, and a re-encoding equal to the
// input.
func decodeBody(seq uint64, body []byte) (Entry, error) {
	bad := func(why string) (Entry, error) {
		return Entry{}, &TamperError{Seq: seq, Reason: why}
	}
	// json.Unmarshal, not a Decoder with DisallowUnknownFields: a member
	// it does not know, a duplicate, a name in other case or trailing
	// white space all make the canonical re-encoding below differ from
	// body, which refuses them as strictly, and Unmarshal is the cheaper
	// half of full verification's cost per entry.
	f, ok := parseCanonicalBody(body)
	if !ok {
		// Not in the exact canonical layout: parse it generally, to say
		// what is wrong (or to find it fine after all).
		if err := json.Unmarshal(body, &f); err != nil {
			// %v, not %w: the JSON error is detail for a person, and the
			// class callers branch on is ErrTampered.
			return bad(fmt.Sprintf("stored entry does not parse: %v", err))
		}
	}
	e := Entry{
		Seq: f.Seq, At: f.At, Type: f.Type, IntentID: f.IntentID, Actor: f.Actor,
		RequestID: f.RequestID, Rationale: f.Rationale, Data: f.Data, Prev: f.Prev,
	}
	if e.Seq != seq {
		return bad(fmt.Sprintf("stored entry carries seq %d", e.Seq))
	}
	if err := checkEntryFields(&e); err != nil {
		return bad(err.Error())
	}
	re, err := appendBody(nil, &e)
	if err != nil || !bytes.Equal(re, body) {
		return bad("stored entry is not in canonical form")
	}
	return e, nil
}

// checkEntryFields checks what every entry must satisfy, beyond the Record
// rules: a positive seq, a well-formed timestamp and prev.
func checkEntryFields(e *Entry) error {
	if e.Seq == 0 || e.Seq > maxSeq {
		return fmt.Errorf("seq %d out of range", e.Seq)
	}
	if !validAt(e.At) {
		return fmt.Errorf("at %q is not RFC 3339 UTC with 6 fractional digits", e.At)
	}
	if !isLowerHex64(e.Prev) {
		return errors.New("prev is not 64 lowercase hex digits")
	}
	if e.Seq == 1 && e.Prev != zeroHashHex {
		return errors.New("prev of seq 1 is not 64 zeros")
	}
	return checkRecord(Record{
		Type: e.Type, IntentID: e.IntentID, Actor: e.Actor,
		RequestID: e.RequestID, Rationale: e.Rationale, Data: e.Data,
	})
}

// timeLayout formats At: RFC 3339, UTC, exactly six fractional digits.
const timeLayout = "2006-01-02T15:04:05.000000Z"

func formatAt(t time.Time) string { return t.UTC().Format(timeLayout) }

func validAt(s string) bool {
	if len(s) != len(timeLayout) {
		return false
	}
	t, err := time.Parse(timeLayout, s)
	return err == nil && formatAt(t) == s
}

func isLowerHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// checkRecord validates what a caller supplies to Append. Errors wrap
// ErrInvalidRecord.
func checkRecord(r Record) error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidRecord}, args...)...)
	}
	if r.Type == "" {
		return invalid("type is empty")
	}
	switch r.Actor.Kind {
	case "agent", "operator", "system":
	default:
		return invalid("actor kind %q is not agent, operator or system", r.Actor.Kind)
	}
	if r.Actor.ID == "" {
		return invalid("actor id is empty")
	}
	for _, f := range [...]struct{ name, v string }{
		{"type", r.Type}, {"intentId", r.IntentID}, {"actor id", r.Actor.ID},
		{"requestId", r.RequestID}, {"rationale", r.Rationale},
	} {
		// Invalid UTF-8 would be replaced by U+FFFD on the way out, and the
		// entry served would no longer hash to the entry signed.
		if !utf8.ValidString(f.v) {
			return invalid("%s is not valid UTF-8", f.name)
		}
	}
	if len(r.Data) > 0 && firstNonSpace(r.Data) != '{' {
		return invalid("data is not a JSON object")
	}
	return nil
}

func firstNonSpace(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}

// canonicalData returns the RFC 8785 form of a Record's Data, which must be
// a JSON object (checked by checkRecord).
func canonicalData(data json.RawMessage) ([]byte, error) {
	if len(data) == 0 {
		return nil, nil
	}
	if data[0] == '{' {
		if isCanonical(data) {
			return bytes.Clone(data), nil // already canonical (a served entry, usually)
		}
		if c, ok := fastCanonical(data); ok {
			return c, nil
		}
	}
	c, err := jcs.Transform(data)
	if err != nil {
		// %v: jcs errors are plain strings; the class is ErrInvalidRecord.
		return nil, fmt.Errorf("%w: data is not valid JSON: %v", ErrInvalidRecord, err)
	}
	if len(c) == 0 || c[0] != '{' {
		return nil, fmt.Errorf("%w: data is not a JSON object", ErrInvalidRecord)
	}
	return c, nil
}

// appendBody appends the RFC 8785 canonical JSON of e without hash and sig.
// e.Data must already be canonical; it is copied as is.
//
// The members are written in their canonical order by hand rather than via
// json.Marshal and jcs.Transform: this runs inside the caller's transaction
// on every append, and writing ~300 bytes directly is an order of magnitude
// cheaper than parsing and re-sorting them. TestBodyMatchesJCS and
// FuzzCanonicalBody check that the two agree. All member names are ASCII,
// so UTF-16 code unit order is byte order:
// actor < at < data < intentId < prev < rationale < requestId < seq < type,
// and inside actor, id < kind.
func appendBody(b []byte, e *Entry) ([]byte, error) {
	if e.Seq > maxSeq {
		return nil, fmt.Errorf("audit: seq %d exceeds 2^53", e.Seq)
	}
	return appendEntry(b, e, e.Data, false), nil
}

// appendEntry writes an entry's canonical JSON; with full, hash and sig
// too (the entry as served), without them the body its hash covers.
func appendEntry(b []byte, e *Entry, data []byte, full bool) []byte {
	b = append(b, `{"actor":{"id":`...)
	b = jcsenc.AppendString(b, e.Actor.ID)
	b = append(b, `,"kind":`...)
	b = jcsenc.AppendString(b, e.Actor.Kind)
	b = append(b, `},"at":`...)
	b = jcsenc.AppendString(b, e.At)
	if len(data) > 0 {
		b = append(b, `,"data":`...)
		b = append(b, data...)
	}
	if full {
		b = append(b, `,"hash":`...)
		b = jcsenc.AppendString(b, e.Hash)
	}
	if e.IntentID != "" {
		b = append(b, `,"intentId":`...)
		b = jcsenc.AppendString(b, e.IntentID)
	}
	b = append(b, `,"prev":`...)
	b = jcsenc.AppendString(b, e.Prev)
	if e.Rationale != "" {
		b = append(b, `,"rationale":`...)
		b = jcsenc.AppendString(b, e.Rationale)
	}
	if e.RequestID != "" {
		b = append(b, `,"requestId":`...)
		b = jcsenc.AppendString(b, e.RequestID)
	}
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	if full && e.Sig != "" { // omitted when empty, as encoding/json does
		b = append(b, `,"sig":`...)
		b = jcsenc.AppendString(b, e.Sig)
	}
	b = append(b, `,"type":`...)
	b = jcsenc.AppendString(b, e.Type)
	return append(b, '}')
}

// parseCanonicalBody reads a body laid out exactly as appendBody writes
// one, members in canonical order, in one pass; it reports false at the
// first difference, and decodeBody then parses with json.Unmarshal. Either
// way decodeBody accepts a body only if re-encoding what was read gives the
// body back, so this can make verification faster but never more lenient:
// a body it misreads would not re-encode to itself.
func parseCanonicalBody(body []byte) (f bodyFields, ok bool) {
	p := canonScanner{b: body}
	str := func(dst *string) bool {
		if p.i >= len(body) || body[p.i] != '"' {
			return false
		}
		start := p.i
		raw, ok := p.str()
		if !ok {
			return false
		}
		if bytes.IndexByte(raw, '\\') < 0 {
			*dst = string(raw)
			return true
		}
		return json.Unmarshal(body[start:p.i], dst) == nil
	}
	lit := func(s string) bool {
		if !bytes.HasPrefix(body[p.i:], []byte(s)) {
			return false
		}
		p.i += len(s)
		return true
	}
	if !lit(`{"actor":{"id":`) || !str(&f.Actor.ID) || !lit(`,"kind":`) || !str(&f.Actor.Kind) ||
		!lit(`},"at":`) || !str(&f.At) {
		return f, false
	}
	if lit(`,"data":`) {
		start := p.i
		if p.i >= len(body) || body[p.i] != '{' || !p.value(0) {
			return f, false
		}
		f.Data = bytes.Clone(body[start:p.i])
	}
	if lit(`,"intentId":`) && !str(&f.IntentID) {
		return f, false
	}
	if !lit(`,"prev":`) || !str(&f.Prev) {
		return f, false
	}
	if lit(`,"rationale":`) && !str(&f.Rationale) {
		return f, false
	}
	if lit(`,"requestId":`) && !str(&f.RequestID) {
		return f, false
	}
	if !lit(`,"seq":`) {
		return f, false
	}
	start := p.i
	for p.i < len(body) && body[p.i] >= '0' && body[p.i] <= '9' {
		p.i++
	}
	seq, err := strconv.ParseUint(string(body[start:p.i]), 10, 64)
	if err != nil || !lit(`,"type":`) || !str(&f.Type) || !lit("}") || p.i != len(body) {
		return f, false
	}
	f.Seq = seq
	return f, true
}

// scanBody extracts seq and prev from a canonical body in one pass over its
// top-level members, without building values. It is the Hashes-depth
// fast path; it accepts only what decodeBody would also read the same way
// (FuzzDecodeEntry checks that the two agree).
func scanBody(body []byte) (seq uint64, prev []byte, err error) {
	errBad := errors.New("body is not a canonical entry object")
	if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
		return 0, nil, errBad
	}
	i := 1
	haveSeq := false
	for {
		// Member name. Our names never need escapes; anything with one is
		// not a member we read and is skipped as a string.
		if i >= len(body) || body[i] != '"' {
			return 0, nil, errBad
		}
		nameStart := i + 1
		j, ok := skipString(body, i)
		if !ok {
			return 0, nil, errBad
		}
		name := body[nameStart : j-1]
		i = j
		if i >= len(body) || body[i] != ':' {
			return 0, nil, errBad
		}
		i++
		switch string(name) {
		case "seq":
			if haveSeq {
				return 0, nil, errBad
			}
			start := i
			for i < len(body) && body[i] >= '0' && body[i] <= '9' {
				i++
			}
			if i == start || i-start > 16 || (body[start] == '0') {
				return 0, nil, errBad
			}
			seq, err = strconv.ParseUint(string(body[start:i]), 10, 64)
			if err != nil {
				return 0, nil, errBad
			}
			haveSeq = true
		case "prev":
			if prev != nil || i+66 > len(body) || body[i] != '"' || body[i+65] != '"' {
				return 0, nil, errBad
			}
			prev = body[i+1 : i+65]
			i += 66
		default:
			j, ok := skipValue(body, i)
			if !ok {
				return 0, nil, errBad
			}
			i = j
		}
		if i >= len(body) {
			return 0, nil, errBad
		}
		switch body[i] {
		case ',':
			i++
		case '}':
			if i != len(body)-1 || !haveSeq || prev == nil {
				return 0, nil, errBad
			}
			return seq, prev, nil
		default:
			return 0, nil, errBad
		}
	}
}

// skipString returns the index just past the string starting at b[i]=='"'.
func skipString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

// skipValue returns the index just past the JSON value starting at b[i]. It
// balances brackets and skips strings but does not validate scalars: the
// body's hash has already been checked, and depth Full parses it properly.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				j, ok := skipString(b, i)
				if !ok {
					return 0, false
				}
				i = j
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return 0, false
	default:
		for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' {
			i++
		}
		return i, true
	}
}

// AppendCanonical appends e's RFC 8785 (JCS) form, hash and sig included,
// to b: what jcs.Transform of e's JSON gives, written directly. e.Data
// must be canonical, as every entry the log serves holds it; a Data that
// was re-encoded with escapes since (\u003c for '<') is canonicalized
// here first.
func AppendCanonical(b []byte, e *Entry) ([]byte, error) {
	data := e.Data
	if bytes.IndexByte(data, '\\') >= 0 {
		c, err := canonicalData(data)
		if err != nil {
			return nil, err
		}
		data = c
	}
	return appendEntry(b, e, data, true), nil
}
