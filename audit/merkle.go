package audit

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"fmt"

	"github.com/countersign/countersign/store"
	"golang.org/x/mod/sumdb/tlog"
)

// The Merkle tree is tlog's: leaf i (0-based) is entry seq i+1, and its
// record data is the 32 raw bytes of the entry hash, so its leaf hash is
// tlog.RecordHash(hash) = SHA-256(0x00 ‖ hash), as in RFC 6962.
//
// tlog.StoredHashes(n, ...) yields the hashes that become final when leaf n
// is added: the leaf hash (level 0) and then one interior hash for each
// trailing 1 bit of n (levels 1..k). They are stored together under
// treeKey(n), level L at bytes [32L, 32L+32). The hash at tlog's stored
// index (level, i) therefore lives under leaf ((i+1) << level) - 1, which
// is how hashReader finds it: one key per leaf rather than one per hash.

func joinHashes(hs []tlog.Hash) []byte {
	b := make([]byte, 0, len(hs)*tlog.HashSize)
	for _, h := range hs {
		b = append(b, h[:]...)
	}
	return b
}

// hashReader is a tlog.HashReader over a store snapshot or transaction.
// A missing or short tree value below the head is reported as tampering.
type hashReader struct{ r store.Reader }

func (h hashReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	lastLeaf := int64(-1)
	var v []byte
	for i, x := range indexes {
		if x < 0 {
			return nil, fmt.Errorf("audit: tree: bad stored hash index %d", x)
		}
		level, n := tlog.SplitStoredHashIndex(x)
		leaf := (n+1)<<level - 1
		if leaf != lastLeaf {
			var err error
			v, err = h.r.Get(treeKey(uint64(leaf)))
			if isNotFound(err) {
				return nil, &TamperError{Seq: uint64(leaf) + 1, Reason: "Merkle tree hashes missing from the store"}
			}
			if err != nil {
				return nil, fmt.Errorf("audit: tree: %w", err)
			}
			lastLeaf = leaf
		}
		off := level * tlog.HashSize
		if len(v) < off+tlog.HashSize {
			return nil, &TamperError{Seq: uint64(leaf) + 1, Reason: "stored Merkle tree hashes are truncated"}
		}
		copy(out[i][:], v[off:])
	}
	return out, nil
}

// compactRange is the right edge of a Merkle tree being built leaf by leaf:
// left[L] is the root of the newest complete level-L subtree that still
// waits for a right sibling, present when bit L of size is 1. It is how
// Verify and ChainVerifier recompute the tree in O(log n) memory.
type compactRange struct {
	size uint64
	left [64]tlog.Hash
}

// add appends a leaf and calls check(level, hash) for each hash that
// tlog.StoredHashes would store for it, in level order, stopping at the
// first false.
func (c *compactRange) add(leaf tlog.Hash, check func(level int, h tlog.Hash) bool) bool {
	h := leaf
	if check != nil && !check(0, h) {
		return false
	}
	level := 0
	for n := c.size; n&1 == 1; n >>= 1 {
		h = tlog.NodeHash(c.left[level], h)
		level++
		if check != nil && !check(level, h) {
			return false
		}
	}
	c.left[level] = h
	c.size++
	return true
}

// root returns the RFC 6962 tree hash of the leaves added so far.
func (c *compactRange) root() tlog.Hash {
	if c.size == 0 {
		return tlog.Hash(emptyTreeHash())
	}
	var h tlog.Hash
	first := true
	for level := 0; level < 64; level++ {
		if c.size&(1<<level) == 0 {
			continue
		}
		if first {
			h, first = c.left[level], false
		} else {
			h = tlog.NodeHash(c.left[level], h)
		}
	}
	return h
}

// emptyTreeHash is the RFC 6962 hash of the empty tree, SHA-256("").
func emptyTreeHash() [32]byte {
	return [32]byte{
		0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14,
		0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
		0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c,
		0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55,
	}
}

// startRange loads the compact range of the first size leaves from stored
// tree hashes, so verification can start in the middle of the log.
func startRange(r store.Reader, size uint64) (compactRange, error) {
	c := compactRange{size: size}
	var idx []int64
	var levels []int
	for level := 63; level >= 0; level-- {
		if size&(1<<level) != 0 {
			idx = append(idx, tlog.StoredHashIndex(level, int64(size>>level)-1))
			levels = append(levels, level)
		}
	}
	hs, err := hashReader{r}.ReadHashes(idx)
	if err != nil {
		return c, err
	}
	for i, level := range levels {
		c.left[level] = hs[i]
	}
	return c, nil
}

// noteSigner is a note.Signer for the record key. It is built directly
// from the key rather than from a "PRIVATE+KEY+..." string so the private
// key is never formatted as text.
type noteSigner struct {
	name string
	hash uint32
	key  ed25519.PrivateKey
}

func (s *noteSigner) Name() string                    { return s.name }
func (s *noteSigner) KeyHash() uint32                 { return s.hash }
func (s *noteSigner) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(s.key, msg), nil }

func encodeSig(sig []byte) string { return base64.RawURLEncoding.EncodeToString(sig) }

func beUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }
