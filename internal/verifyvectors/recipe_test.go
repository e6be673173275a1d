package verifyvectors

// This file is an outsider's verifier, written from docs/VERIFYING.md and
// nothing else: it imports only the standard library (TestRecipeIsStdlibOnly
// holds it to that) and shares no code with the packages that produce the
// artifacts. Each function names the section of the document it implements.
// If the code and the document part ways, these functions and the code
// disagree about a vector, and TestVectors fails.

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ---- §1 JSON and RFC 8785 ----

// jv is a parsed JSON value that keeps member order and number literals.
type jv struct {
	kind byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	str  string
	num  string
	b    bool
	keys []string
	vals []jv
}

// parseJSON parses exactly one JSON value: valid UTF-8, no duplicate member
// names, nothing after the value.
func parseJSON(raw []byte) (jv, error) {
	if !utf8.Valid(raw) {
		return jv{}, errors.New("invalid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := parseValue(dec, 0)
	if err != nil {
		return jv{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return jv{}, errors.New("data after the JSON value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder, depth int) (jv, error) {
	if depth > 128 {
		return jv{}, errors.New("nesting too deep")
	}
	tok, err := dec.Token()
	if err != nil {
		return jv{}, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			v := jv{kind: 'o'}
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jv{}, err
				}
				k := kt.(string)
				if seen[k] {
					return jv{}, fmt.Errorf("duplicate member %q", k)
				}
				seen[k] = true
				m, err := parseValue(dec, depth+1)
				if err != nil {
					return jv{}, err
				}
				v.keys, v.vals = append(v.keys, k), append(v.vals, m)
			}
			_, err := dec.Token()
			return v, err
		case '[':
			v := jv{kind: 'a'}
			for dec.More() {
				m, err := parseValue(dec, depth+1)
				if err != nil {
					return jv{}, err
				}
				v.vals = append(v.vals, m)
			}
			_, err := dec.Token()
			return v, err
		}
	case string:
		return jv{kind: 's', str: t}, nil
	case json.Number:
		return jv{kind: 'n', num: string(t)}, nil
	case bool:
		return jv{kind: 'b', b: t}, nil
	case nil:
		return jv{kind: 'z'}, nil
	}
	return jv{}, fmt.Errorf("unexpected token %v", tok)
}

func (v jv) get(name string) (jv, bool) {
	for i, k := range v.keys {
		if k == name {
			return v.vals[i], true
		}
	}
	return jv{}, false
}

// s returns member name as a string ("" when absent or not a string).
func (v jv) s(name string) string {
	m, _ := v.get(name)
	return m.str
}

// u returns member name as an unsigned integer.
func (v jv) u(name string) (uint64, error) {
	m, ok := v.get(name)
	if !ok || m.kind != 'n' {
		return 0, fmt.Errorf("member %s is not a number", name)
	}
	return strconv.ParseUint(m.num, 10, 64)
}

// without returns the object v without the named members.
func (v jv) without(names ...string) jv {
	out := jv{kind: 'o'}
	for i, k := range v.keys {
		if !slices.Contains(names, k) {
			out.keys, out.vals = append(out.keys, k), append(out.vals, v.vals[i])
		}
	}
	return out
}

// canon writes v in RFC 8785 form: members sorted by UTF-16 code units,
// numbers as ECMAScript Number.prototype.toString, minimal string escapes,
// no white space.
func canon(v jv) ([]byte, error) { return appendCanon(nil, v) }

func appendCanon(b []byte, v jv) ([]byte, error) {
	var err error
	switch v.kind {
	case 'o':
		idx := make([]int, len(v.keys))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, c int) int {
			return slices.Compare(utf16.Encode([]rune(v.keys[a])), utf16.Encode([]rune(v.keys[c])))
		})
		b = append(b, '{')
		for n, i := range idx {
			if n > 0 {
				b = append(b, ',')
			}
			b = canonString(b, v.keys[i])
			b = append(b, ':')
			if b, err = appendCanon(b, v.vals[i]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case 'a':
		b = append(b, '[')
		for i, m := range v.vals {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendCanon(b, m); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case 's':
		return canonString(b, v.str), nil
	case 'n':
		n, err := esNumber(v.num)
		return append(b, n...), err
	case 'b':
		return strconv.AppendBool(b, v.b), nil
	default:
		return append(b, "null"...), nil
	}
}

func canonString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\b':
			b = append(b, `\b`...)
		case c == '\t':
			b = append(b, `\t`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '\f':
			b = append(b, `\f`...)
		case c == '\r':
			b = append(b, `\r`...)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// esNumber formats a JSON number literal as ECMAScript's Number::toString
// of the nearest double.
func esNumber(lit string) (string, error) {
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) {
		return "", fmt.Errorf("number %s is not a finite double", lit)
	}
	if f == 0 {
		return "0", nil
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	mant, exp, _ := strings.Cut(strconv.FormatFloat(f, 'e', -1, 64), "e")
	digits := strings.Replace(mant, ".", "", 1)
	e, _ := strconv.Atoi(exp)
	k, n := len(digits), e+1
	switch {
	case k <= n && n <= 21:
		return sign + digits + strings.Repeat("0", n-k), nil
	case 0 < n && n <= 21:
		return sign + digits[:n] + "." + digits[n:], nil
	case -6 < n && n <= 0:
		return sign + "0." + strings.Repeat("0", -n) + digits, nil
	}
	out := digits[:1]
	if k > 1 {
		out += "." + digits[1:]
	}
	if n-1 >= 0 {
		return sign + out + "e+" + strconv.Itoa(n-1), nil
	}
	return sign + out + "e" + strconv.Itoa(n-1), nil
}

// canonRaw parses raw and returns its RFC 8785 form.
func canonRaw(raw []byte) ([]byte, error) {
	v, err := parseJSON(raw)
	if err != nil {
		return nil, err
	}
	return canon(v)
}

// ---- §2 the record key and signed notes ----

// recordKey is a parsed note verifier key: <name>+<8 hex key hash>+<base64(0x01 || key)>.
type recordKey struct {
	name string
	hash uint32
	pub  ed25519.PublicKey
}

func parseRecordKey(vkey string) (recordKey, error) {
	name, rest, ok1 := strings.Cut(vkey, "+")
	hash8, key64, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 || len(hash8) != 8 {
		return recordKey{}, errors.New("verifier key is not name+hash+key")
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(key64)
	if err != nil || len(raw) != 33 || raw[0] != 0x01 {
		return recordKey{}, errors.New("verifier key is not an Ed25519 key")
	}
	h, err := strconv.ParseUint(hash8, 16, 32)
	if err != nil {
		return recordKey{}, err
	}
	k := recordKey{name: name, hash: uint32(h), pub: ed25519.PublicKey(raw[1:])}
	if k.hash != noteKeyHash(name, k.pub) {
		return recordKey{}, errors.New("verifier key hash does not match its name and key")
	}
	return k, nil
}

// noteKeyHash is the first 4 bytes, big-endian, of SHA-256(name || "\n" || 0x01 || key).
func noteKeyHash(name string, pub ed25519.PublicKey) uint32 {
	h := sha256.New()
	h.Write([]byte(name + "\n"))
	h.Write([]byte{0x01})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// openNote checks the signature line of k in a signed note and returns
// the signed text (ending in "\n") and the raw 64-byte signature.
func openNote(k recordKey, note string) (text string, sig []byte, err error) {
	i := strings.LastIndex(note, "\n\n")
	if i < 0 || !strings.HasSuffix(note, "\n") {
		return "", nil, errors.New("not a signed note")
	}
	text = note[:i+1]
	for line := range strings.SplitSeq(note[i+2:len(note)-1], "\n") {
		name, b64, ok := strings.Cut(strings.TrimPrefix(line, "— "), " ")
		if !strings.HasPrefix(line, "— ") || !ok || name != k.name {
			continue
		}
		raw, err := base64.StdEncoding.Strict().DecodeString(b64)
		if err != nil || len(raw) != 4+ed25519.SignatureSize || binary.BigEndian.Uint32(raw) != k.hash {
			continue
		}
		if ed25519.Verify(k.pub, []byte(text), raw[4:]) {
			return text, raw[4:], nil
		}
		return "", nil, errors.New("note signature does not verify")
	}
	return "", nil, errors.New("no signature by the record key")
}

// ---- §3 checkpoints ----

type treeHead struct {
	size uint64
	root [32]byte
}

// openCheckpoint verifies a served checkpoint object {origin, treeSize,
// rootHash, note} and returns the tree it states.
func openCheckpoint(k recordKey, cp jv) (treeHead, error) {
	text, _, err := openNote(k, cp.s("note"))
	if err != nil {
		return treeHead{}, err
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 || lines[0] != k.name {
		return treeHead{}, errors.New("checkpoint origin is not the key name")
	}
	size, err := strconv.ParseUint(lines[1], 10, 64)
	if err != nil || strconv.FormatUint(size, 10) != lines[1] {
		return treeHead{}, errors.New("malformed tree size")
	}
	root, err := b64Hash(lines[2])
	if err != nil {
		return treeHead{}, err
	}
	if n, err := cp.u("treeSize"); err != nil || n != size || cp.s("origin") != lines[0] || cp.s("rootHash") != lines[2] {
		return treeHead{}, errors.New("checkpoint members disagree with the signed note")
	}
	return treeHead{size: size, root: root}, nil
}

func b64Hash(s string) ([32]byte, error) {
	var h [32]byte
	raw, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(raw) != 32 {
		return h, fmt.Errorf("%q is not a standard base64 SHA-256 hash", s)
	}
	copy(h[:], raw)
	return h, nil
}

// ---- §4 entries ----

// entryHash recomputes an entry's hash: SHA-256 of the RFC 8785 form of
// the entry without "hash" and "sig". It checks the served "hash" and
// returns the raw hash and the canonical bytes hashed.
func entryHash(e jv) ([32]byte, []byte, error) {
	body, err := canon(e.without("hash", "sig"))
	if err != nil {
		return [32]byte{}, nil, err
	}
	h := sha256.Sum256(body)
	if e.s("hash") != hex.EncodeToString(h[:]) {
		return h, body, errors.New("entry hash does not match the entry")
	}
	return h, body, nil
}

// checkEntrySig checks the optional "sig": base64url without padding of
// the Ed25519 signature over the 32 raw hash bytes.
func checkEntrySig(k recordKey, hash [32]byte, sig string) error {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil || !ed25519.Verify(k.pub, hash[:], raw) {
		return errors.New("entry signature does not verify")
	}
	return nil
}

// ---- §5 the Merkle tree and proofs (RFC 6962 / RFC 9162) ----

func leafHash(entryHash [32]byte) [32]byte {
	return sha256.Sum256(append([]byte{0x00}, entryHash[:]...))
}

func nodeHash(l, r [32]byte) [32]byte {
	b := append(append([]byte{0x01}, l[:]...), r[:]...)
	return sha256.Sum256(b)
}

// verifyInclusionPath is RFC 9162 §2.1.3.2.
func verifyInclusionPath(index, size uint64, leaf, root [32]byte, path [][32]byte) error {
	if index >= size {
		return errors.New("index outside the tree")
	}
	fn, sn, r := index, size-1, leaf
	for _, p := range path {
		if sn == 0 {
			return errors.New("proof too long")
		}
		if fn&1 == 1 || fn == sn {
			r = nodeHash(p, r)
			for fn&1 == 0 && fn != 0 {
				fn, sn = fn>>1, sn>>1
			}
		} else {
			r = nodeHash(r, p)
		}
		fn, sn = fn>>1, sn>>1
	}
	if sn != 0 || r != root {
		return errors.New("inclusion proof does not lead to the root")
	}
	return nil
}

// verifyConsistencyPath is RFC 9162 §2.1.4.2.
func verifyConsistencyPath(first, second uint64, firstRoot, secondRoot [32]byte, path [][32]byte) error {
	switch {
	case first > second:
		return errors.New("old tree larger than the new one")
	case first == second:
		if len(path) != 0 || firstRoot != secondRoot {
			return errors.New("same size, different roots")
		}
		return nil
	case first == 0:
		if len(path) != 0 {
			return errors.New("proof from the empty tree must be empty")
		}
		return nil
	}
	if first&(first-1) == 0 {
		path = append([][32]byte{firstRoot}, path...)
	}
	if len(path) == 0 {
		return errors.New("empty proof")
	}
	fn, sn := first-1, second-1
	for fn&1 == 1 {
		fn, sn = fn>>1, sn>>1
	}
	fr, sr := path[0], path[0]
	for _, c := range path[1:] {
		if sn == 0 {
			return errors.New("proof too long")
		}
		if fn&1 == 1 || fn == sn {
			fr, sr = nodeHash(c, fr), nodeHash(c, sr)
			for fn&1 == 0 && fn != 0 {
				fn, sn = fn>>1, sn>>1
			}
		} else {
			sr = nodeHash(sr, c)
		}
		fn, sn = fn>>1, sn>>1
	}
	if fr != firstRoot || sr != secondRoot || sn != 0 {
		return errors.New("consistency proof does not lead to both roots")
	}
	return nil
}

func b64Hashes(v jv) ([][32]byte, error) {
	if v.kind != 'a' {
		return nil, errors.New("hashes is not an array")
	}
	out := make([][32]byte, len(v.vals))
	for i, m := range v.vals {
		h, err := b64Hash(m.str)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// verifyEntryInclusion is the whole recipe for one entry and its served
// inclusion proof {seq, leafIndex, treeSize, leafHash, hashes, checkpoint}.
// It returns the entry hash and the tree the proof is against.
func verifyEntryInclusion(k recordKey, e, p jv) ([32]byte, treeHead, error) {
	h, _, err := entryHash(e)
	if err != nil {
		return h, treeHead{}, err
	}
	if sig := e.s("sig"); sig != "" {
		if err := checkEntrySig(k, h, sig); err != nil {
			return h, treeHead{}, err
		}
	}
	cp, _ := p.get("checkpoint")
	th, err := openCheckpoint(k, cp)
	if err != nil {
		return h, th, err
	}
	seq, err1 := e.u("seq")
	pseq, err2 := p.u("seq")
	idx, err3 := p.u("leafIndex")
	size, err4 := p.u("treeSize")
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return h, th, err
	}
	if seq == 0 || pseq != seq || idx != seq-1 || size != th.size {
		return h, th, errors.New("proof is for another entry or tree")
	}
	leaf := leafHash(h)
	if lh := p.s("leafHash"); lh != "" && lh != base64.StdEncoding.EncodeToString(leaf[:]) {
		return h, th, errors.New("leafHash is not the entry's leaf")
	}
	hs, _ := p.get("hashes")
	path, err := b64Hashes(hs)
	if err != nil {
		return h, th, err
	}
	return h, th, verifyInclusionPath(idx, size, leaf, th.root, path)
}

// verifyConsistencyProof checks a served {from, to, hashes, checkpoint}
// against an older checkpoint.
func verifyConsistencyProof(k recordKey, p, oldCP jv) error {
	cp, _ := p.get("checkpoint")
	newT, err := openCheckpoint(k, cp)
	if err != nil {
		return err
	}
	oldT, err := openCheckpoint(k, oldCP)
	if err != nil {
		return err
	}
	from, err1 := p.u("from")
	to, err2 := p.u("to")
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	if from != oldT.size || to != newT.size {
		return errors.New("proof is for other tree sizes")
	}
	hs, _ := p.get("hashes")
	path, err := b64Hashes(hs)
	if err != nil {
		return err
	}
	return verifyConsistencyPath(from, to, oldT.root, newT.root, path)
}

// ---- §6 statements ----

func statementMessage(purpose string, digest [32]byte) []byte {
	return append([]byte("countersign statement v1\n"+purpose+"\n"), digest[:]...)
}

func verifyStatement(k recordKey, purpose string, digest [32]byte, sig string) error {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil || !ed25519.Verify(k.pub, statementMessage(purpose, digest), raw) {
		return errors.New("statement signature does not verify")
	}
	return nil
}

// ---- §7 memory artifacts ----

// artifactDigest is SHA-256 of the RFC 8785 form of the artifact without
// its "signature" member.
func artifactDigest(a jv) ([32]byte, error) {
	c, err := canon(a.without("signature"))
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(c), nil
}

// contentDigest is a memory record's seal digest: SHA-256 of the RFC 8785
// form of {body, edges, id, kind, namespace, recordedAt, salt, source,
// subject, validFrom, validTo} taken from the record.
func contentDigest(r jv) (string, error) {
	seal, _ := r.get("seal")
	content := jv{kind: 'o'}
	for _, name := range []string{"id", "namespace", "subject", "kind", "body", "validFrom", "validTo", "recordedAt", "source", "edges"} {
		m, ok := r.get(name)
		if !ok {
			return "", fmt.Errorf("record has no %s", name)
		}
		content.keys, content.vals = append(content.keys, name), append(content.vals, m)
	}
	salt, _ := seal.get("salt")
	content.keys, content.vals = append(content.keys, "salt"), append(content.vals, salt)
	c, err := canon(content)
	if err != nil {
		return "", err
	}
	d := sha256.Sum256(c)
	return hex.EncodeToString(d[:]), nil
}

// checkSeal checks a record's content digest and its signed
// memory.recorded entry.
func checkSeal(k recordKey, r jv) error {
	d, err := contentDigest(r)
	if err != nil {
		return err
	}
	seal, _ := r.get("seal")
	if seal.s("contentDigest") != d {
		return errors.New("content does not match its digest")
	}
	e, _ := seal.get("entry")
	h, _, err := entryHash(e)
	if err != nil {
		return err
	}
	if err := checkEntrySig(k, h, e.s("sig")); err != nil {
		return err
	}
	data, _ := e.get("data")
	if e.s("type") != "memory.recorded" || data.s("id") != r.s("id") || data.s("namespace") != r.s("namespace") || data.s("contentDigest") != d {
		return errors.New("the seal's entry commits another record")
	}
	return nil
}

// verifyMemoryArtifact is the whole recipe for memory.record, memory.page,
// memory.context and memory.erasure. It returns the number of seals checked.
func verifyMemoryArtifact(k recordKey, raw []byte) (int, error) {
	a, err := parseJSON(raw)
	if err != nil {
		return 0, err
	}
	typ := a.s("type")
	switch typ {
	case "memory.record", "memory.page", "memory.context", "memory.erasure":
	default:
		return 0, fmt.Errorf("unknown artifact type %q", typ)
	}
	d, err := artifactDigest(a)
	if err != nil {
		return 0, err
	}
	if err := verifyStatement(k, typ, d, a.s("signature")); err != nil {
		return 0, err
	}
	var records []jv
	switch typ {
	case "memory.record":
		r, _ := a.get("record")
		records = []jv{r}
	case "memory.page":
		data, _ := a.get("data")
		records = data.vals
	case "memory.context":
		items, _ := a.get("items")
		for _, it := range items.vals {
			r, _ := it.get("record")
			records = append(records, r)
		}
	case "memory.erasure":
		e, _ := a.get("entry")
		p, _ := a.get("inclusion")
		if _, _, err := verifyEntryInclusion(k, e, p); err != nil {
			return 0, err
		}
		data, _ := e.get("data")
		erased, _ := a.get("erased")
		got, _ := data.get("erased")
		cg, _ := canon(got)
		ce, _ := canon(erased)
		if e.s("type") != "memory.erased" || data.s("rootId") != a.s("rootId") || data.s("namespace") != a.s("namespace") ||
			!bytes.Equal(cg, ce) || len(erased.vals) == 0 || erased.vals[0].s("id") != a.s("rootId") {
			return 0, errors.New("the erasure entry lists other records than the proof")
		}
	}
	for _, r := range records {
		if err := checkSeal(k, r); err != nil {
			return 0, fmt.Errorf("record %s: %w", r.s("id"), err)
		}
	}
	return len(records), nil
}

// ---- §8 receipts ----

func verifyReceipt(k recordKey, receipt, e, p jv) error {
	h, _, err := verifyEntryInclusion(k, e, p)
	if err != nil {
		return err
	}
	seq, _ := e.u("seq")
	rseq, _ := receipt.u("auditSeq")
	if seq != rseq || receipt.s("auditHash") != hex.EncodeToString(h[:]) || e.s("type") != "payment.settled" || e.s("intentId") != receipt.s("intentId") {
		return errors.New("the entry is not the receipt's")
	}
	want, err := canon(receipt.without("auditSeq", "auditHash"))
	if err != nil {
		return err
	}
	data, _ := e.get("data")
	got, err := canon(data)
	if err != nil || !bytes.Equal(want, got) {
		return errors.New("the entry records other receipt fields")
	}
	return nil
}

// ---- §9 proofs of enforcement ----

// impliedStatus replays an intent's entries into the status they leave it in.
func impliedStatus(entries []jv) (string, error) {
	st := ""
	for _, e := range entries {
		data, _ := e.get("data")
		switch e.s("type") {
		case "gate.decision":
			st = map[string]string{"deny": "denied", "confirm": "pending_approval", "allow": "settling"}[data.s("outcome")]
		case "approval.granted":
			req, err1 := data.u("approvalsRequired")
			got, err2 := data.u("approvalsReceived")
			if err1 != nil || err2 != nil {
				return "", errors.New("approval.granted without approval counts")
			}
			if got >= req {
				st = "settling"
			}
		case "payment.authorized":
			st = "authorized"
		case "payment.capture_requested", "payment.outcome_unknown":
			st = "settling"
		case "payment.settled":
			st = "settled"
		case "payment.failed":
			st = "failed"
		case "approval.expired", "payment.hold_expired":
			st = "expired"
		case "payment.voided":
			st = "voided"
		case "payment.refunded":
			rem, err := data.u("remainingMinor")
			if err != nil {
				return "", errors.New("payment.refunded without remainingMinor")
			}
			st = "partially_refunded"
			if rem == 0 {
				st = "refunded"
			}
		}
	}
	return st, nil
}

// verifyEnforcement is the whole recipe for a proof of enforcement. It
// returns whether the policy hash is the decision entry's own.
func verifyEnforcement(k recordKey, raw []byte) (policyVerified bool, err error) {
	p, err := parseJSON(raw)
	if err != nil {
		return false, err
	}
	for _, k := range p.keys {
		switch k {
		case "type", "intentId", "status", "decision", "policyHash", "policyEntry", "entries", "checkpoint":
		default:
			return false, fmt.Errorf("unknown member %q", k)
		}
	}
	if p.s("type") != "countersign.enforcement-proof/v1" {
		return false, errors.New("not a proof of enforcement")
	}
	cp, _ := p.get("checkpoint")
	th, err := openCheckpoint(k, cp)
	if err != nil {
		return false, err
	}
	check := func(pe jv) (jv, error) {
		e, _ := pe.get("entry")
		in, _ := pe.get("inclusion")
		icp, _ := in.get("checkpoint")
		if icp.s("note") != cp.s("note") {
			return e, errors.New("inclusion proof is not against the proof's checkpoint")
		}
		_, t, err := verifyEntryInclusion(k, e, in)
		if err == nil && t != th {
			err = errors.New("inclusion proof is for another tree")
		}
		return e, err
	}
	list, _ := p.get("entries")
	if len(list.vals) == 0 {
		return false, errors.New("no entries")
	}
	var entries []jv
	var last uint64
	for _, pe := range list.vals {
		e, err := check(pe)
		if err != nil {
			return false, err
		}
		seq, _ := e.u("seq")
		if e.s("intentId") != p.s("intentId") || seq <= last {
			return false, errors.New("an entry is about another intent or out of order")
		}
		last = seq
		entries = append(entries, e)
	}
	first := entries[0]
	if first.s("type") != "gate.decision" {
		return false, errors.New("the first entry is not the gate.decision")
	}
	rec, _ := first.get("data")
	dec, _ := p.get("decision")
	rr, _ := rec.get("reasons")
	dr, _ := dec.get("reasons")
	if rec.s("outcome") != dec.s("outcome") || rec.s("mandateId") != dec.s("mandateId") || len(rr.vals) != len(dr.vals) {
		return false, errors.New("the decision differs from the recorded one")
	}
	for i := range rr.vals {
		if rr.vals[i].s("code") != dr.vals[i].s("code") {
			return false, errors.New("the decision's reasons differ from the recorded ones")
		}
	}
	recorded := rec.s("policyHash")
	if recorded != "" && recorded != p.s("policyHash") {
		return false, errors.New("policyHash is not the decision entry's")
	}
	status, err := impliedStatus(entries)
	if err != nil {
		return false, err
	}
	if status != p.s("status") {
		return false, fmt.Errorf("status %s is not what the entries imply (%s)", p.s("status"), status)
	}
	if pe, ok := p.get("policyEntry"); ok && pe.kind == 'o' {
		e, err := check(pe)
		if err != nil {
			return false, err
		}
		seq, _ := e.u("seq")
		fseq, _ := first.u("seq")
		data, _ := e.get("data")
		if e.s("type") != "gate.policy" || seq >= fseq || data.s("digest") != p.s("policyHash") {
			return false, errors.New("the policy entry does not record the policy hash before the decision")
		}
	}
	return recorded != "", nil
}

// ---- §10 ADP disclosures ----

const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

func base58Decode(s string) ([]byte, error) {
	n := new(big.Int)
	for _, c := range s {
		i := strings.IndexRune(base58Alphabet, c)
		if i < 0 {
			return nil, errors.New("not base58")
		}
		n.Mul(n, big.NewInt(58)).Add(n, big.NewInt(int64(i)))
	}
	zeros := len(s) - len(strings.TrimLeft(s, "1"))
	return append(make([]byte, zeros), n.Bytes()...), nil
}

// keyOf returns the Ed25519 key an agentId names: 64 hex digits, or
// did:key:z + base58btc(0xed 0x01 || key).
func keyOf(agentID string) (ed25519.PublicKey, error) {
	if len(agentID) == 64 {
		if k, err := hex.DecodeString(agentID); err == nil {
			return k, nil
		}
	}
	if rest, ok := strings.CutPrefix(agentID, "did:key:z"); ok {
		raw, err := base58Decode(rest)
		if err == nil && len(raw) == 34 && raw[0] == 0xed && raw[1] == 0x01 {
			return raw[2:], nil
		}
	}
	return nil, fmt.Errorf("agentId %q names no Ed25519 key", agentID)
}

// rotationBody is the canonical body a rotation hop's from key signs.
func rotationBody(hop jv) ([]byte, error) {
	body := jv{kind: 'o'}
	for _, name := range []string{"type", "from", "to", "rotatedAt"} {
		m, _ := hop.get(name)
		body.keys, body.vals = append(body.keys, name), append(body.vals, m)
	}
	return canon(body)
}

// checkBinding binds the disclosure's agentId to the signing key: the
// same key, or a rotation chain from agentId's key to it.
func checkBinding(agentID string, signing ed25519.PublicKey, chain jv, hasChain bool) error {
	cur, err := keyOf(agentID)
	if err != nil {
		return err
	}
	if !hasChain {
		if !bytes.Equal(cur, signing) {
			return errors.New("agentId does not name the signing key")
		}
		return nil
	}
	if len(chain.vals) == 0 || len(chain.vals) > 32 {
		return errors.New("rotation chain must have 1 to 32 hops")
	}
	seen := []ed25519.PublicKey{cur}
	for _, hop := range chain.vals {
		from, err1 := keyOf(hop.s("from"))
		to, err2 := keyOf(hop.s("to"))
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		if hop.s("type") != "rotation" || !bytes.Equal(from, cur) {
			return errors.New("rotation hop does not start at the current key")
		}
		body, err := rotationBody(hop)
		if err != nil {
			return err
		}
		sig, err := hex.DecodeString(hop.s("signature"))
		if err != nil || !ed25519.Verify(from, body, sig) {
			return errors.New("rotation hop signature does not verify")
		}
		for _, s := range seen {
			if bytes.Equal(s, to) {
				return errors.New("rotation chain revisits a key")
			}
		}
		seen, cur = append(seen, to), to
	}
	if !bytes.Equal(cur, signing) {
		return errors.New("rotation chain does not end at the signing key")
	}
	return nil
}

// verifyADP verifies either envelope and returns the canonical disclosure
// bytes that were signed (v1) or carried as the payload (JWS).
func verifyADP(raw []byte) (disclosure []byte, err error) {
	env, err := parseJSON(raw)
	if err != nil {
		return nil, err
	}
	chain, hasChain := env.get("rotationChain")
	var doc jv
	var signing ed25519.PublicKey
	if _, isJWS := env.get("payload"); isJWS {
		prot, err := base64.RawURLEncoding.Strict().DecodeString(env.s("protected"))
		if err != nil {
			return nil, err
		}
		ph, err := parseJSON(prot)
		if err != nil || ph.s("alg") != "EdDSA" {
			return nil, errors.New("protected header is not alg EdDSA")
		}
		hdr, _ := env.get("header")
		jwk, _ := hdr.get("jwk")
		x, err := base64.RawURLEncoding.Strict().DecodeString(jwk.s("x"))
		if err != nil || len(x) != 32 || jwk.s("kty") != "OKP" || jwk.s("crv") != "Ed25519" {
			return nil, errors.New("header.jwk is not an Ed25519 key")
		}
		signing = x
		sig, err := base64.RawURLEncoding.Strict().DecodeString(env.s("signature"))
		if err != nil || !ed25519.Verify(signing, []byte(env.s("protected")+"."+env.s("payload")), sig) {
			return nil, errors.New("JWS signature does not verify")
		}
		if disclosure, err = base64.RawURLEncoding.Strict().DecodeString(env.s("payload")); err != nil {
			return nil, err
		}
		if doc, err = parseJSON(disclosure); err != nil {
			return nil, err
		}
		if c, err := canon(doc); err != nil || !bytes.Equal(c, disclosure) {
			return nil, errors.New("payload is not the canonical disclosure")
		}
	} else {
		doc, _ = env.get("disclosure")
		if disclosure, err = canon(doc); err != nil {
			return nil, err
		}
		sb, _ := env.get("signature")
		pub, err1 := hex.DecodeString(sb.s("publicKey"))
		sig, err2 := hex.DecodeString(sb.s("value"))
		if err := errors.Join(err1, err2); err != nil || sb.s("algorithm") != "ed25519" || len(pub) != 32 {
			return nil, errors.New("malformed v1 signature block")
		}
		signing = pub
		if !ed25519.Verify(signing, disclosure, sig) {
			return nil, errors.New("v1 signature does not verify")
		}
	}
	return disclosure, checkBinding(doc.s("agentId"), signing, chain, hasChain)
}

// ---- §11 webhook signatures ----

func webhookMAC(secret, t string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(t + "."))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// verifyWebhook accepts a body when some v1 value of the header is the
// HMAC of "<t>.<body>" under secret; it returns t.
func verifyWebhook(body []byte, header, secret string) (int64, error) {
	var t string
	var v1 []string
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			t = v
		case "v1":
			v1 = append(v1, v)
		}
	}
	ts, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return 0, errors.New("no timestamp")
	}
	want := webhookMAC(secret, t, body)
	for _, v := range v1 {
		if hmac.Equal([]byte(v), []byte(want)) {
			return ts, nil
		}
	}
	return 0, errors.New("no v1 signature matches")
}

// ---- §12 meter usage chains ----

type usageLine struct {
	Units   int64  `json:"units"`
	UsageID string `json:"usageId"`
}

// meterStep is the input of one link: previous head bytes (none for the
// first line) || seq (8 bytes BE) || units (8 bytes BE) || usage id.
func meterStep(prev []byte, seq int64, l usageLine) []byte {
	b := append([]byte(nil), prev...)
	b = binary.BigEndian.AppendUint64(b, uint64(seq))
	b = binary.BigEndian.AppendUint64(b, uint64(l.Units))
	return append(b, l.UsageID...)
}

func meterHead(lines []usageLine) string {
	var head []byte
	for i, l := range lines {
		h := sha256.Sum256(meterStep(head, int64(i+1), l))
		head = h[:]
	}
	return hex.EncodeToString(head)
}
