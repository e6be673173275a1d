package audit

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// ChainVerifier verifies a stream of served entries, as a client paging
// GET /audit sees them, starting at seq 1: for each entry it recomputes the
// hash from the entry's fields (RFC 8785 over the entry without hash and
// sig), checks seq continuity and the prev link, and optionally the
// signature of an entry that carries one. Entries without a signature of
// their own are authenticated by the signed checkpoint the tree ends in
// ([ChainVerifier.VerifyCheckpoint]), which a full verification must
// always check last. It keeps the Merkle tree's right edge (O(log n) hashes), so
// that after the last entry [ChainVerifier.Root] can be compared with a
// signed checkpoint of the same size ([ChainVerifier.VerifyCheckpoint]).
//
// A ChainVerifier is not safe for concurrent use.
type ChainVerifier struct {
	pub  ed25519.PublicKey
	sigs bool
	prev [32]byte
	tree compactRange
}

// NewChainVerifier returns a verifier for a log whose record public key is
// pub. With signatures false, Add skips the Ed25519 check of entries that
// carry a signature of their own and pub may be nil.
func NewChainVerifier(pub ed25519.PublicKey, signatures bool) *ChainVerifier {
	return &ChainVerifier{pub: append(ed25519.PublicKey(nil), pub...), sigs: signatures}
}

// Add verifies e as the next entry. It returns a *TamperError naming e.Seq
// (or the seq expected, for a gap) if e does not verify, and leaves the
// verifier unchanged, so the caller can report the first bad seq and stop.
func (c *ChainVerifier) Add(e Entry) error {
	want := c.tree.size + 1
	if e.Seq != want {
		return &TamperError{Seq: want, Reason: fmt.Sprintf("expected seq %d, got %d", want, e.Seq)}
	}
	if c.sigs && len(c.pub) != ed25519.PublicKeySize {
		return fmt.Errorf("audit: chain verifier: public key has %d bytes", len(c.pub))
	}
	prev := zeroHashHex
	if want > 1 {
		prev = hex.EncodeToString(c.prev[:])
	}
	if e.Prev != prev {
		return &TamperError{Seq: e.Seq, Reason: "prev does not link to the previous entry's hash"}
	}
	hash, err := checkServedEntry(c.pub, e, c.sigs && e.Sig != "")
	if err != nil {
		return &TamperError{Seq: e.Seq, Reason: err.Error()}
	}
	c.prev = hash
	c.tree.add(tlog.RecordHash(hash[:]), nil)
	return nil
}

// Size returns the number of entries added.
func (c *ChainVerifier) Size() uint64 { return c.tree.size }

// Root returns the RFC 6962 Merkle tree hash of the entries added, the
// root a checkpoint of Size() entries must state.
func (c *ChainVerifier) Root() tlog.Hash { return c.tree.root() }

// VerifyCheckpoint checks that cp is signed with the verifier key and
// states exactly the tree of the entries added: same size, same root.
// A bad signature or a different root wraps ErrTampered; a malformed
// verifier key or a checkpoint for a different number of entries than were
// added is a plain error.
func (c *ChainVerifier) VerifyCheckpoint(verifierKey string, cp Checkpoint) error {
	v, _, err := parseVerifierKey(verifierKey)
	if err != nil {
		return err
	}
	size, root, err := openCheckpoint(v, cp)
	if err != nil {
		return fmt.Errorf("audit: chain verifier: %w", err)
	}
	if size != c.tree.size {
		// Not tampering: the caller paged a different number of entries.
		return fmt.Errorf("audit: chain verifier: checkpoint is for %d entries, verified %d", size, c.tree.size)
	}
	if root != c.tree.root() {
		return &TamperError{Seq: size, Reason: "Merkle root of the entries does not match the signed checkpoint"}
	}
	return nil
}
