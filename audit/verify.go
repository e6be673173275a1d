package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/countersign/countersign/store"
	"github.com/gowebpki/jcs"
	"golang.org/x/mod/sumdb/tlog"
)

// verifyChunk is how many entries Verify reads per store snapshot. Short
// snapshots keep a long verification from pinning old versions in the
// store (or, in memstore, from holding its read lock against writers).
const verifyChunk = 4096

// Verify checks entries from..to inclusive (from 0 means 1, to 0 means the
// newest entry) and the Merkle tree over them, and calls progress (if not
// nil) after each batch with the number of entries checked so far and the
// total.
//
// At depth [Hashes] it checks, for each entry: that it is present, that its
// stored body hashes to its stored hash, that the body names the expected
// seq and links by prev to the entry before it, and that the stored Merkle
// tree hashes written with it are those recomputed from the leaves; then
// that the recomputed tree root equals the stored tree's root at size to,
// that the stored checkpoint states the stored tree at its size (for a log
// written before checkpoints were stored: a checkpoint signed on the spot),
// and, when to is the newest entry, that the head record names it.
// Depth [Full] also checks the signature of every entry that carries one,
// that every entry parses into a valid Entry in RFC 8785 canonical form,
// and the stored checkpoint's note signature. The per-entry checks run in
// parallel on GOMAXPROCS goroutines.
//
// When from > 1, the entry and tree hashes just before from are taken as
// given: verify from 1 to check the whole log.
//
// Every integrity failure is a *[TamperError] (errors.Is(err, ErrTampered))
// naming the first bad seq, the same whatever the parallelism. from > to or
// to past the newest entry yield ErrOutOfRange.
func (l *Log) Verify(ctx context.Context, from, to uint64, depth Depth, progress func(done, total uint64)) error {
	if err := l.checkOpen(); err != nil {
		return err
	}
	if depth != Hashes && depth != Full {
		return fmt.Errorf("audit: verify: unknown depth %d", depth)
	}
	if from == 0 {
		from = 1
	}
	v := verifier{l: l, full: depth == Full}
	err := l.st.View(ctx, func(r store.Reader) error {
		h, err := readHead(r)
		if err != nil {
			return err
		}
		if to == 0 {
			to = h.size
		}
		if h.size == 0 && to == 0 {
			from = 1
			return nil
		}
		if from > to || to > h.size {
			return fmt.Errorf("%w: verify %d..%d of %d entries", ErrOutOfRange, from, to, h.size)
		}
		if from > 1 {
			pv, err := r.Get(entryKey(from - 1))
			if isNotFound(err) {
				return &TamperError{Seq: from - 1, Reason: "entry missing from the store"}
			}
			if err != nil {
				return err
			}
			ph, _, _, err := storedParts(from-1, pv)
			if err != nil {
				return err
			}
			copy(v.prev[:], ph)
		}
		v.tree, err = startRange(r, from-1)
		return err
	})
	if err != nil {
		return fmt.Errorf("audit: verify: %w", err)
	}
	if to < from { // empty log
		return nil
	}
	total := to - from + 1
	for next := from; next <= to; {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("audit: verify: %w", err)
		}
		last := min(next+verifyChunk-1, to)
		if err := v.chunk(ctx, next, last, to); err != nil {
			return fmt.Errorf("audit: verify: %w", err)
		}
		if progress != nil {
			progress(last-from+1, total)
		}
		next = last + 1
	}
	if err := v.checkRoot(ctx, to); err != nil {
		return fmt.Errorf("audit: verify: %w", err)
	}
	return nil
}

// verifier carries the state of one Verify call from chunk to chunk.
type verifier struct {
	l    *Log
	full bool
	prev [32]byte // hash of the entry before the next one
	tree compactRange
	jobs []fullJob // depth Full: entries of the current chunk
	buf  []byte    // arena for the jobs' copies of stored values
}

type fullJob struct {
	seq   uint64
	value []byte // the stored value, copied out of the iterator
}

// chunk verifies entries from..last in one snapshot; to is the end of the
// whole verification.
func (v *verifier) chunk(ctx context.Context, from, last, to uint64) error {
	v.jobs, v.buf = v.jobs[:0], v.buf[:0]
	var seqErr error
	err := v.l.st.View(ctx, func(r store.Reader) error {
		seqErr = v.sequential(r, from, last)
		if _, ok := seqErr.(*TamperError); seqErr != nil && !ok {
			return seqErr // a store error, not a finding
		}
		if seqErr == nil && last == to {
			h, err := readHead(r)
			if err != nil {
				return err
			}
			if h.size == to && h.hash != v.prev {
				seqErr = &TamperError{Seq: to, Reason: "head record does not name the newest entry"}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if v.full {
		// Every job precedes the sequential failure, if any, so a parallel
		// finding is always the earlier one.
		if err := v.parallel(); err != nil {
			return err
		}
	}
	return seqErr
}

// sequential runs the Hashes-depth checks over from..last. It returns the
// first finding as a *TamperError, or a store error.
func (v *verifier) sequential(r store.Reader, from, last uint64) error {
	eit := r.Iterate(entryKey(from), entryKey(last+1), false)
	defer eit.Close()
	tit := r.Iterate(treeKey(from-1), treeKey(last), false)
	defer tit.Close()

	var prevHex [64]byte
	hex.Encode(prevHex[:], v.prev[:])
	for seq := from; seq <= last; seq++ {
		if !eit.Next() {
			if err := eit.Err(); err != nil {
				return err
			}
			return &TamperError{Seq: seq, Reason: "entry missing from the store"}
		}
		if k, ok := seqFromKey(eit.Key(), entryPrefix); !ok || k != seq {
			return &TamperError{Seq: seq, Reason: "entry missing from the store"}
		}
		value := eit.Value()
		hash, _, body, err := storedParts(seq, value)
		if err != nil {
			return err
		}
		if sum := sha256.Sum256(body); !bytes.Equal(sum[:], hash) {
			return &TamperError{Seq: seq, Reason: "entry hash does not match the stored entry"}
		}
		bodySeq, prev, err := scanBody(body)
		if err != nil {
			return &TamperError{Seq: seq, Reason: "stored entry does not parse"}
		}
		if bodySeq != seq {
			return &TamperError{Seq: seq, Reason: fmt.Sprintf("stored entry carries seq %d", bodySeq)}
		}
		if !bytes.Equal(prev, prevHex[:]) {
			return &TamperError{Seq: seq, Reason: "prev does not link to the previous entry's hash"}
		}

		if !tit.Next() {
			if err := tit.Err(); err != nil {
				return err
			}
			return &TamperError{Seq: seq, Reason: "Merkle tree hashes missing from the store"}
		}
		if k, ok := seqFromKey(tit.Key(), treePrefix); !ok || k != seq-1 {
			return &TamperError{Seq: seq, Reason: "Merkle tree hashes missing from the store"}
		}
		tv := tit.Value()
		if len(tv) != tlog.HashSize*(1+bits.TrailingZeros64(^(seq-1))) {
			return &TamperError{Seq: seq, Reason: "stored Merkle tree hashes have the wrong length"}
		}
		badLevel := -1
		v.tree.add(tlog.RecordHash(hash), func(level int, h tlog.Hash) bool {
			if !bytes.Equal(tv[level*tlog.HashSize:(level+1)*tlog.HashSize], h[:]) {
				badLevel = level
				return false
			}
			return true
		})
		if badLevel >= 0 {
			return &TamperError{Seq: seq, Reason: fmt.Sprintf("stored Merkle tree hash (level %d) does not match the entries", badLevel)}
		}

		if v.full {
			start := len(v.buf)
			v.buf = append(v.buf, value...)
			v.jobs = append(v.jobs, fullJob{seq: seq, value: v.buf[start:len(v.buf):len(v.buf)]})
		}
		copy(v.prev[:], hash)
		hex.Encode(prevHex[:], hash)
	}
	return nil
}

// parallel runs the Full-depth checks over the chunk's jobs on GOMAXPROCS
// goroutines, each taking a contiguous share and stopping at its first
// finding; the earliest finding wins, so the result does not depend on
// scheduling.
func (v *verifier) parallel() error {
	jobs := v.jobs
	if len(jobs) == 0 {
		return nil
	}
	// The arena may have been reallocated while jobs were added; the jobs
	// still point into the old arrays, which stay valid until released.
	workers := min(runtime.GOMAXPROCS(0), len(jobs))
	errs := make([]error, workers)
	// firstBad is the lowest job index found bad so far; a worker past it
	// stops, since nothing it could find would be the first.
	var firstBad atomic.Int64
	firstBad.Store(int64(len(jobs)))
	var wg sync.WaitGroup
	share := (len(jobs) + workers - 1) / workers
	for w := range workers {
		lo := w * share
		hi := min(lo+share, len(jobs))
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				if int64(i) > firstBad.Load() {
					return
				}
				if err := checkFull(v.l.pub, jobs[i]); err != nil {
					errs[w] = err
					for {
						cur := firstBad.Load()
						if int64(i) >= cur || firstBad.CompareAndSwap(cur, int64(i)) {
							break
						}
					}
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkFull checks what depth Full adds for one stored entry: that it
// parses into a valid Entry whose encoding is the body (decodeBody), that
// its Data is canonical (so the whole body is RFC 8785 canonical), and its
// signature.
func checkFull(pub ed25519.PublicKey, j fullJob) error {
	hash, sig, body, err := storedParts(j.seq, j.value)
	if err != nil {
		return err
	}
	e, err := decodeBody(j.seq, body)
	if err != nil {
		return err
	}
	if len(e.Data) > 0 && !isCanonical(e.Data) {
		// Not certainly canonical by the fast scan: decide by the JCS
		// package itself.
		c, err := jcs.Transform(e.Data)
		if err != nil || !bytes.Equal(c, e.Data) {
			return &TamperError{Seq: j.seq, Reason: "stored entry data is not in canonical form"}
		}
	}
	if sig != nil && !ed25519.Verify(pub, hash, sig) {
		return &TamperError{Seq: j.seq, Reason: "entry signature does not verify"}
	}
	return nil
}

// checkRoot compares the root recomputed from the leaves with the stored
// tree at size to, and checks the stored checkpoint against the stored
// tree: when to is its size, the recomputed root must be the one it signs.
// At depth Full the checkpoint's signature is checked too. A log written
// before checkpoints were stored is checked, as it was then, against a
// checkpoint signed on the spot (on a writer) or the stored tree.
func (v *verifier) checkRoot(ctx context.Context, to uint64) error {
	var stored, cpStoredRoot, cpRoot tlog.Hash
	var cp Checkpoint
	var have bool
	err := v.l.st.View(ctx, func(r store.Reader) error {
		var err error
		if stored, err = tlog.TreeHash(int64(to), hashReader{r}); err != nil {
			return err
		}
		if cp, cpRoot, have, err = v.l.storedCheckpoint(r, false); err != nil || !have {
			return err
		}
		if cp.TreeSize == 0 || cp.TreeSize < to {
			return &TamperError{Seq: to, Reason: "the stored checkpoint does not cover the verified entries"}
		}
		cpStoredRoot, err = tlog.TreeHash(int64(cp.TreeSize), hashReader{r})
		return err
	})
	if err != nil {
		return err
	}
	if v.tree.root() != stored {
		return &TamperError{Seq: to, Reason: "tree root does not match the stored tree"}
	}
	if have {
		if v.full {
			if _, cpRoot, err = openCheckpoint(v.l.verifier, cp); err != nil {
				return &TamperError{Seq: cp.TreeSize, Reason: err.Error()}
			}
		}
		if cpStoredRoot != cpRoot {
			return &TamperError{Seq: cp.TreeSize, Reason: "the stored tree does not match the signed checkpoint"}
		}
		return nil
	}
	if v.l.signer != nil {
		cp, err := v.l.signCheckpoint(to, stored)
		if err != nil {
			return err
		}
		root := stored
		if v.full {
			if _, root, err = openCheckpoint(v.l.verifier, cp); err != nil {
				return &TamperError{Seq: to, Reason: err.Error()}
			}
		}
		if v.tree.root() != root {
			return &TamperError{Seq: to, Reason: "tree root does not match the checkpoint"}
		}
	}
	return nil
}
