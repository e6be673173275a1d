package audit

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/countersign/countersign/store"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// One signed checkpoint per commit.
//
// Entries are not signed one by one: each entry's hash covers the one
// before it and the Merkle tree covers them all, so one signature over the
// tree head after a commit authenticates every entry in it, as in
// Certificate Transparency and the Go checksum database. The checkpoint is
// written in the commit it covers (store.Committer.BeforeCommit: once per
// commit group, after every member's function), so the stored record is
// never ahead of a stored signature, and a reader holding only the public
// key can verify everything up to the head. A store whose transactions do
// not implement store.Committer gets the same result more slowly: the
// checkpoint is re-signed by every Append.

// commitHookKey is the key of the log's commit hook; one per Log, so two
// logs over one store (tests) each sign their own.
type commitHookKey struct{ l *Log }

// coverCommit arranges for the checkpoint of the head to be signed and
// stored when txn commits.
func (l *Log) coverCommit(txn store.Txn) error {
	inner := txn
	if t, ok := txn.(*trackedTxn); ok {
		inner = t.Txn
	}
	if c, ok := inner.(store.Committer); ok {
		c.BeforeCommit(commitHookKey{l}, l.storeCheckpoint)
		return nil
	}
	return l.storeCheckpoint(txn)
}

// storeCheckpoint signs the checkpoint of txn's head and stores it.
func (l *Log) storeCheckpoint(txn store.Txn) error {
	h, err := readHead(txn)
	if err != nil || h.size == 0 {
		return err
	}
	root, err := tlog.TreeHash(int64(h.size), hashReader{txn})
	if err != nil {
		return fmt.Errorf("audit: checkpoint: %w", err)
	}
	msg, err := note.Sign(&note.Note{Text: formatCheckpoint(l.origin, h.size, root)}, l.signer)
	if err != nil {
		return fmt.Errorf("audit: checkpoint: %w", err)
	}
	return txn.Set(cpKey, msg)
}

// storedCheckpoint reads the stored checkpoint, if any (ok false for a log
// written before checkpoints were stored, or an empty one). With verify it
// checks the note's signature; otherwise only that it parses.
func (l *Log) storedCheckpoint(r store.Reader, verify bool) (cp Checkpoint, root tlog.Hash, ok bool, err error) {
	v, err := r.Get(cpKey)
	if errors.Is(err, store.ErrNotFound) {
		return cp, root, false, nil
	}
	if err != nil {
		return cp, root, false, fmt.Errorf("audit: read checkpoint: %w", err)
	}
	var text string
	if verify {
		n, err := note.Open(v, note.VerifierList(l.verifier))
		if err != nil {
			return cp, root, false, fmt.Errorf("%w: the stored checkpoint is not signed by this key (%v)", ErrKeyMismatch, err)
		}
		text = n.Text
	} else {
		i := bytes.Index(v, []byte("\n\n"))
		if i < 0 {
			return cp, root, false, &TamperError{Reason: "the stored checkpoint is not a signed note"}
		}
		text = string(v[:i+1])
	}
	origin, size, root, err := parseCheckpoint(text)
	if err != nil || origin != l.origin {
		return cp, root, false, &TamperError{Reason: "the stored checkpoint does not parse or names another log"}
	}
	cp = Checkpoint{Origin: origin, TreeSize: size, RootHash: encodeHash(root), Note: string(v)}
	return cp, root, true, nil
}

// checkCovered checks that the stored checkpoint is signed by the log's
// key and states the stored tree at the head. A log with no stored
// checkpoint (written before they were kept) must instead end in an entry
// signed on its own, checked with the key.
func (l *Log) checkCovered(r store.Reader) error {
	h, err := readHead(r)
	if err != nil || h.size == 0 {
		return err
	}
	cp, root, ok, err := l.storedCheckpoint(r, true)
	if err != nil {
		return err
	}
	if !ok {
		last, err := r.Get(entryKey(h.size))
		if err != nil {
			return fmt.Errorf("audit: read entry %d: %w", h.size, err)
		}
		hash, sig, _, err := storedParts(h.size, last)
		if err != nil || sig == nil || !verifyEd25519(l.pub, hash, sig) {
			return fmt.Errorf("%w: the newest entry (seq %d) is not signed by this key and no checkpoint covers it; "+
				"check the configured record key, or run verify", ErrKeyMismatch, h.size)
		}
		return nil
	}
	if cp.TreeSize != h.size {
		return &TamperError{Seq: h.size, Reason: fmt.Sprintf("the stored checkpoint covers %d entries, the head names %d", cp.TreeSize, h.size)}
	}
	stored, err := tlog.TreeHash(int64(h.size), hashReader{r})
	if err != nil {
		return err
	}
	if stored != root {
		return &TamperError{Seq: h.size, Reason: "the stored tree does not match the signed checkpoint"}
	}
	return nil
}

func encodeHash(h tlog.Hash) string { return base64.StdEncoding.EncodeToString(h[:]) }

func verifyEd25519(pub ed25519.PublicKey, msg, sig []byte) bool {
	return len(sig) == ed25519.SignatureSize && ed25519.Verify(pub, msg, sig)
}
