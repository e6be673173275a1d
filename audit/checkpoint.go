package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/countersign/countersign/store"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// formatCheckpoint returns the C2SP tlog-checkpoint body: origin, decimal
// tree size and standard-base64 root hash, each on its own line.
//
// A checkpoint is signed with the same Ed25519 key as the entries. The two
// kinds of signed message cannot be confused: an entry signature covers
// exactly 32 bytes, and a checkpoint body is always longer than that
// (origin, newline, size, newline, 44 base64 characters, newline).
func formatCheckpoint(origin string, size uint64, root tlog.Hash) string {
	return origin + "\n" + strconv.FormatUint(size, 10) + "\n" +
		base64.StdEncoding.EncodeToString(root[:]) + "\n"
}

// parseCheckpoint parses a tlog-checkpoint body. Extension lines after the
// root hash are allowed and ignored, as C2SP permits.
func parseCheckpoint(text string) (origin string, size uint64, root tlog.Hash, err error) {
	errBad := errors.New("audit: malformed checkpoint")
	if !strings.HasSuffix(text, "\n") {
		return "", 0, root, errBad
	}
	lines := strings.Split(text[:len(text)-1], "\n")
	if len(lines) < 3 {
		return "", 0, root, errBad
	}
	origin = lines[0]
	if !validOrigin(origin) {
		return "", 0, root, errBad
	}
	s := lines[1]
	if s == "" || len(s) > 20 || (len(s) > 1 && s[0] == '0') {
		return "", 0, root, errBad
	}
	size, err = strconv.ParseUint(s, 10, 64)
	if err != nil || size > math.MaxInt64 {
		return "", 0, root, errBad
	}
	h, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(h) != tlog.HashSize {
		return "", 0, root, errBad
	}
	copy(root[:], h)
	for _, ext := range lines[3:] {
		if ext == "" {
			return "", 0, root, errBad
		}
	}
	return origin, size, root, nil
}

// openCheckpoint verifies c's note signature with the verifier key and
// returns the tree it states. Every failure wraps ErrTampered except a
// malformed verifier key.
func openCheckpoint(v note.Verifier, c Checkpoint) (size uint64, root tlog.Hash, err error) {
	n, err := note.Open([]byte(c.Note), note.VerifierList(v))
	if err != nil {
		// %v: the note error is detail; the class is ErrTampered.
		return 0, root, fmt.Errorf("checkpoint signature does not verify (%v): %w", err, ErrTampered)
	}
	origin, size, root, err := parseCheckpoint(n.Text)
	if err != nil {
		return 0, root, fmt.Errorf("%v: %w", err, ErrTampered)
	}
	if origin != v.Name() {
		return 0, root, fmt.Errorf("checkpoint origin %q is not the key name %q: %w", origin, v.Name(), ErrTampered)
	}
	if c.Origin != origin || c.TreeSize != size || c.RootHash != base64.StdEncoding.EncodeToString(root[:]) {
		return 0, root, fmt.Errorf("checkpoint fields disagree with the signed note: %w", ErrTampered)
	}
	return size, root, nil
}

// VerifyCheckpoint checks that c is signed by the verifier key's owner and
// that its Origin, TreeSize and RootHash fields are those of the signed
// note. A failure wraps ErrTampered, except for a malformed verifier key.
func VerifyCheckpoint(verifierKey string, c Checkpoint) error {
	v, _, err := parseVerifierKey(verifierKey)
	if err != nil {
		return err
	}
	if _, _, err := openCheckpoint(v, c); err != nil {
		return fmt.Errorf("audit: verify checkpoint: %w", err)
	}
	return nil
}

// Checkpoint returns a signed checkpoint for the current tree: the one
// stored with the newest commit, or, for a log written before checkpoints
// were stored, one signed now. On a reader it returns ErrReadOnly.
func (l *Log) Checkpoint(ctx context.Context) (Checkpoint, error) {
	if err := l.checkOpen(); err != nil {
		return Checkpoint{}, err
	}
	if l.signer == nil {
		return Checkpoint{}, fmt.Errorf("audit: checkpoint: %w", ErrReadOnly)
	}
	var size uint64
	var root tlog.Hash
	var stored Checkpoint
	var have bool
	err := l.st.View(ctx, func(r store.Reader) error {
		h, err := readHead(r)
		if err != nil {
			return err
		}
		size = h.size
		if cp, _, ok, err := l.storedCheckpoint(r, false); err != nil {
			return err
		} else if ok && cp.TreeSize == size {
			stored, have = cp, true
			return nil
		}
		root, err = tlog.TreeHash(int64(size), hashReader{r})
		return err
	})
	if err != nil {
		return Checkpoint{}, fmt.Errorf("audit: checkpoint: %w", err)
	}
	if have {
		return stored, nil
	}
	return l.signCheckpoint(size, root)
}

// signCheckpoint signs the checkpoint for (size, root), reusing the cached
// one when it is for the same tree.
func (l *Log) signCheckpoint(size uint64, root tlog.Hash) (Checkpoint, error) {
	if l.signer == nil {
		return Checkpoint{}, fmt.Errorf("audit: checkpoint: %w", ErrReadOnly)
	}
	rootB64 := base64.StdEncoding.EncodeToString(root[:])
	l.cpMu.Lock()
	if l.cpOK && l.cp.TreeSize == size && l.cp.RootHash == rootB64 {
		cp := l.cp
		l.cpMu.Unlock()
		return cp, nil
	}
	l.cpMu.Unlock()

	msg, err := note.Sign(&note.Note{Text: formatCheckpoint(l.origin, size, root)}, l.signer)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("audit: checkpoint: %w", err)
	}
	cp := Checkpoint{Origin: l.origin, TreeSize: size, RootHash: rootB64, Note: string(msg)}
	l.cpMu.Lock()
	if !l.cpOK || size >= l.cp.TreeSize {
		l.cp, l.cpOK = cp, true
	}
	l.cpMu.Unlock()
	return cp, nil
}

// Inclusion returns a proof that entry seq is in the tree of treeSize
// leaves, with a checkpoint signed for that size (treeSize 0 means the
// current size). seq 0, seq > treeSize or treeSize > the current size
// yield ErrOutOfRange. On a reader it returns ErrReadOnly.
func (l *Log) Inclusion(ctx context.Context, seq, treeSize uint64) (InclusionProof, error) {
	if err := l.checkOpen(); err != nil {
		return InclusionProof{}, err
	}
	if l.signer == nil {
		return InclusionProof{}, fmt.Errorf("audit: inclusion: %w", ErrReadOnly)
	}
	var p InclusionProof
	var root tlog.Hash
	err := l.st.View(ctx, func(r store.Reader) error {
		h, err := readHead(r)
		if err != nil {
			return err
		}
		if treeSize == 0 {
			treeSize = h.size
		}
		if seq == 0 || seq > treeSize || treeSize > h.size {
			return fmt.Errorf("%w: seq %d in tree size %d (log size %d)", ErrOutOfRange, seq, treeSize, h.size)
		}
		hr := hashReader{r}
		proof, err := tlog.ProveRecord(int64(treeSize), int64(seq-1), hr)
		if err != nil {
			return err
		}
		if root, err = tlog.TreeHash(int64(treeSize), hr); err != nil {
			return err
		}
		leaf, err := hr.ReadHashes([]int64{tlog.StoredHashIndex(0, int64(seq-1))})
		if err != nil {
			return err
		}
		p = InclusionProof{
			Seq: seq, LeafIndex: seq - 1, TreeSize: treeSize,
			LeafHash: base64.StdEncoding.EncodeToString(leaf[0][:]),
			Hashes:   encodeHashes(proof),
		}
		return nil
	})
	if err != nil {
		return InclusionProof{}, fmt.Errorf("audit: inclusion: %w", err)
	}
	if p.Checkpoint, err = l.signCheckpoint(p.TreeSize, root); err != nil {
		return InclusionProof{}, err
	}
	return p, nil
}

// Consistency returns a proof that the tree of size from is a prefix of the
// tree of size to, with a checkpoint signed for size to (to 0 means the
// current size). from 0 gives an empty proof (the empty tree is a prefix of
// every tree). from > to or to > the current size yield ErrOutOfRange.
// On a reader it returns ErrReadOnly.
func (l *Log) Consistency(ctx context.Context, from, to uint64) (ConsistencyProof, error) {
	if err := l.checkOpen(); err != nil {
		return ConsistencyProof{}, err
	}
	if l.signer == nil {
		return ConsistencyProof{}, fmt.Errorf("audit: consistency: %w", ErrReadOnly)
	}
	var p ConsistencyProof
	var root tlog.Hash
	err := l.st.View(ctx, func(r store.Reader) error {
		h, err := readHead(r)
		if err != nil {
			return err
		}
		if to == 0 {
			to = h.size
		}
		if from > to || to > h.size {
			return fmt.Errorf("%w: from %d to %d (log size %d)", ErrOutOfRange, from, to, h.size)
		}
		hr := hashReader{r}
		p = ConsistencyProof{From: from, To: to, Hashes: []string{}}
		if from > 0 && from < to {
			proof, err := tlog.ProveTree(int64(to), int64(from), hr)
			if err != nil {
				return err
			}
			p.Hashes = encodeHashes(proof)
		}
		root, err = tlog.TreeHash(int64(to), hr)
		return err
	})
	if err != nil {
		return ConsistencyProof{}, fmt.Errorf("audit: consistency: %w", err)
	}
	if p.Checkpoint, err = l.signCheckpoint(p.To, root); err != nil {
		return ConsistencyProof{}, err
	}
	return p, nil
}

func encodeHashes(hs []tlog.Hash) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = base64.StdEncoding.EncodeToString(h[:])
	}
	return out
}

func decodeHashes(ss []string) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(ss))
	for i, s := range ss {
		b, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil || len(b) != tlog.HashSize {
			return nil, fmt.Errorf("proof hash %d is not a base64 SHA-256 hash", i)
		}
		copy(out[i][:], b)
	}
	return out, nil
}

// VerifyInclusion checks, with nothing but the log's verifier key, that e
// is a genuine entry of the log: that e hashes to e.Hash, that e.Sig, if
// the entry carries one, is the record key's signature over it, that p's
// checkpoint is signed by the key, and that p proves e's leaf is in that
// checkpoint's tree. A failure
// wraps ErrTampered, except for a malformed verifier key.
func VerifyInclusion(verifierKey string, e Entry, p InclusionProof) error {
	v, pub, err := parseVerifierKey(verifierKey)
	if err != nil {
		return err
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("audit: verify inclusion of seq %d: %s: %w", e.Seq, fmt.Sprintf(format, args...), ErrTampered)
	}
	hash, err := checkServedEntry(pub, e, e.Sig != "")
	if err != nil {
		return fail("%v", err)
	}
	size, root, err := openCheckpoint(v, p.Checkpoint)
	if err != nil {
		return fmt.Errorf("audit: verify inclusion of seq %d: %w", e.Seq, err)
	}
	if p.Seq != e.Seq || p.LeafIndex != e.Seq-1 || p.TreeSize != size || e.Seq == 0 || e.Seq > size {
		return fail("proof is for seq %d (leaf %d) in tree size %d, checkpoint size %d", p.Seq, p.LeafIndex, p.TreeSize, size)
	}
	leaf := tlog.RecordHash(hash[:])
	if p.LeafHash != "" && p.LeafHash != base64.StdEncoding.EncodeToString(leaf[:]) {
		return fail("leaf hash is not the entry's")
	}
	proof, err := decodeHashes(p.Hashes)
	if err != nil {
		return fail("%v", err)
	}
	if err := tlog.CheckRecord(proof, int64(size), root, int64(e.Seq-1), leaf); err != nil {
		return fail("%v", err)
	}
	return nil
}

// VerifyConsistency checks, with nothing but the log's verifier key, that
// old and p.Checkpoint are signed by the key and that p proves the tree of
// old is a prefix of the tree of p.Checkpoint: the log only grew. A failure
// wraps ErrTampered, except for a malformed verifier key.
func VerifyConsistency(verifierKey string, p ConsistencyProof, old Checkpoint) error {
	v, _, err := parseVerifierKey(verifierKey)
	if err != nil {
		return err
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("audit: verify consistency %d..%d: %s: %w", p.From, p.To, fmt.Sprintf(format, args...), ErrTampered)
	}
	newSize, newRoot, err := openCheckpoint(v, p.Checkpoint)
	if err != nil {
		return fmt.Errorf("audit: verify consistency: new %w", err)
	}
	oldSize, oldRoot, err := openCheckpoint(v, old)
	if err != nil {
		return fmt.Errorf("audit: verify consistency: old %w", err)
	}
	if p.From != oldSize || p.To != newSize {
		return fail("proof is for %d..%d, checkpoints are %d..%d", p.From, p.To, oldSize, newSize)
	}
	proof, err := decodeHashes(p.Hashes)
	if err != nil {
		return fail("%v", err)
	}
	switch {
	case oldSize > newSize:
		return fail("old tree is larger than the new one")
	case oldSize == 0 && oldRoot != tlog.Hash(emptyTreeHash()):
		return fail("old checkpoint of size 0 does not state the empty tree")
	case oldSize == 0 || oldSize == newSize:
		if len(proof) != 0 {
			return fail("proof should be empty")
		}
		if oldSize == newSize && oldRoot != newRoot {
			return fail("same size, different root hashes: the log forked")
		}
		return nil
	}
	if err := tlog.CheckTree(proof, int64(newSize), newRoot, int64(oldSize), oldRoot); err != nil {
		return fail("%v", err)
	}
	return nil
}

// checkServedEntry recomputes a served entry's hash from its fields (RFC
// 8785 over the entry without hash and sig), compares it with e.Hash and,
// if sig, checks e.Sig. It returns the raw hash.
func checkServedEntry(pub ed25519.PublicKey, e Entry, sig bool) ([32]byte, error) {
	var hash [32]byte
	if err := checkEntryFields(&e); err != nil {
		return hash, err
	}
	data, err := canonicalData(e.Data)
	if err != nil {
		return hash, fmt.Errorf("data: %v", err)
	}
	e.Data = data
	body, err := appendBody(nil, &e)
	if err != nil {
		return hash, err
	}
	hash = sha256.Sum256(body)
	want, err := hex.DecodeString(e.Hash)
	if err != nil || !isLowerHex64(e.Hash) || !bytes.Equal(want, hash[:]) {
		return hash, errors.New("hash does not match the entry")
	}
	if sig {
		s, err := base64.RawURLEncoding.Strict().DecodeString(e.Sig)
		if err != nil || len(s) != ed25519.SignatureSize || !ed25519.Verify(pub, hash[:], s) {
			return hash, errors.New("signature does not verify")
		}
	}
	return hash, nil
}

// VerifyLogInclusion checks that data is a record of another
// transparency log, with nothing but keys: msg is a C2SP signed
// checkpoint note that logKey (a note verifier key whose name is the
// log's origin) signed, and hashes (standard base64) are the RFC 6962
// inclusion proof of the record hash of data at index in the tree it
// states. Signatures in msg by keys of cosigners are verified too, and the
// names of those that verified are returned, so a caller can require a
// witness's co-signature. Any failure wraps ErrTampered, except a
// malformed key.
func VerifyLogInclusion(msg, logKey string, cosigners []string, data []byte, index uint64, hashes []string) ([]string, error) {
	lv, _, err := parseVerifierKey(logKey)
	if err != nil {
		return nil, err
	}
	known := []note.Verifier{lv}
	for _, k := range cosigners {
		v, _, err := parseVerifierKey(k)
		if err != nil {
			return nil, err
		}
		known = append(known, v)
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("audit: log inclusion: %s: %w", fmt.Sprintf(format, args...), ErrTampered)
	}
	n, err := note.Open([]byte(msg), note.VerifierList(known...))
	if err != nil {
		return nil, fail("checkpoint signature does not verify (%v)", err)
	}
	var signers []string
	logSigned := false
	for _, sig := range n.Sigs {
		if sig.Name == lv.Name() && sig.Hash == lv.KeyHash() {
			logSigned = true
			continue
		}
		signers = append(signers, sig.Name)
	}
	if !logSigned {
		return nil, fail("the log %s did not sign the checkpoint", lv.Name())
	}
	origin, size, root, err := parseCheckpoint(n.Text)
	if err != nil {
		return nil, fail("%v", err)
	}
	if origin != lv.Name() {
		return nil, fail("checkpoint origin %q is not the log %q", origin, lv.Name())
	}
	if index >= size {
		return nil, fail("index %d is outside the tree of size %d", index, size)
	}
	proof, err := decodeHashes(hashes)
	if err != nil {
		return nil, fail("%v", err)
	}
	if err := tlog.CheckRecord(proof, int64(size), root, int64(index), tlog.RecordHash(data)); err != nil {
		return nil, fail("%v", err)
	}
	return signers, nil
}
