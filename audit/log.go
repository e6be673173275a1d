package audit

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/countersign/countersign/store"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// ErrReadOnly is returned by the methods that write or sign (Append,
// Checkpoint, Inclusion, Consistency, ...) on a Log opened with
// [OpenReader]. Check with errors.Is.
var ErrReadOnly = errors.New("audit: log is read-only")

// ErrClosed is returned by every method of a Log after Close, and by
// [Subscription.Next] after the subscription or its Log is closed.
// Check with errors.Is.
var ErrClosed = errors.New("audit: closed")

// ErrInvalidRecord is returned by Append for a Record that breaks the rules
// in [Record]; the message names the field. Check with errors.Is.
var ErrInvalidRecord = errors.New("audit: invalid record")

// ErrBadLimit is returned by Page for a limit outside 0..100.
// Check with errors.Is.
var ErrBadLimit = errors.New("audit: page limit out of range")

// ErrKeyMismatch is returned by Open when the newest stored entry is not
// signed by the given key: either the wrong record key was configured or
// the record has been tampered with (run Verify to tell which).
// Check with errors.Is.
var ErrKeyMismatch = errors.New("audit: record key does not match the log")

// Page limits.
const (
	DefaultPageLimit = 20
	MaxPageLimit     = 100
)

// Options configures a Log. The zero value gives the defaults; Open keeps a
// copy, not the pointer.
type Options struct {
	// Origin names the log: it is the first line of every checkpoint and
	// the name of the signed-note key, so it must be a valid note key name
	// (non-empty, no spaces, no '+'), and it binds page cursors to the log.
	// It must stay the same for the life of a deployment, or old cursors are
	// refused and old checkpoints name a different log.
	//
	// The default is "countersign/" followed by the first 8 bytes, in hex,
	// of the SHA-256 of the record public key, e.g.
	// "countersign/3f9a0c21d4e5b6a7": unique per key and stable across
	// restarts. A public deployment should set a schema-less URL it owns,
	// e.g. "pay.example.com/audit", as C2SP tlog-checkpoint recommends.
	Origin string

	// Now returns the time recorded in each entry's At. The default is
	// time.Now.
	Now func() time.Time

	// Logger receives the Log's own diagnostics. The default is
	// slog.Default().
	Logger *slog.Logger

	// Committed, if set, is called after each transaction run through
	// [Log.Update] commits, with the entries it appended, in order; metrics
	// derived from the record hang here. It runs on the caller's goroutine
	// after the commit, so it must be cheap and must not block. Entries
	// appended through the store's own Update (followed by Notify) are not
	// reported. Entries appended through [Log.UpdateDeferred] are reported
	// by the next Update that commits after it, once they are durable.
	Committed func([]Entry)
}

// Log is the signed, hash-linked, Merkle-tree record kept in a
// [store.Store]. A Log is safe for concurrent use by multiple goroutines.
type Log struct {
	st       store.Store
	priv     ed25519.PrivateKey // nil for a reader
	pub      ed25519.PublicKey
	origin   string
	vkey     string
	verifier note.Verifier
	signer   note.Signer // nil for a reader
	now      func() time.Time
	logger   *slog.Logger
	observe  func([]Entry)
	cursorID [8]byte // binds cursors to origin; see cursor.go

	closed atomic.Bool
	done   chan struct{} // closed by Close; wakes subscribers

	// wakeMu guards wake. wake is created when a subscriber waits and is
	// closed (and dropped) by Notify, so Notify costs one lock when nobody
	// waits.
	wakeMu sync.Mutex
	wake   chan struct{}

	// cpMu guards cp, the newest signed checkpoint, reused while the tree
	// has neither grown nor changed so that polling clients do not cost one
	// signature each.
	cpMu sync.Mutex
	cp   Checkpoint
	cpOK bool

	// pendMu guards pending: entries appended by UpdateDeferred, reported
	// to observe by the next Update that commits (see UpdateDeferred).
	pendMu  sync.Mutex
	pending []Entry
}

// Open returns a Log that appends to and reads from st, signing with key
// (the deployment's record key). It does not take ownership of st.
//
// If st already holds entries, Open checks that the stored checkpoint is
// signed by key and states the stored tree at the head (or, for a log
// written before checkpoints were stored, that the newest entry is signed
// by key), and returns an error matching ErrKeyMismatch otherwise, so a
// misconfigured key cannot extend a log it did not write; a checkpoint
// that does not match the stored tree is an ErrTampered.
func Open(ctx context.Context, st store.Store, key ed25519.PrivateKey, opts *Options) (*Log, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("audit: open: private key has %d bytes, want %d", len(key), ed25519.PrivateKeySize)
	}
	pub := key.Public().(ed25519.PublicKey)
	l, err := newLog(st, pub, opts)
	if err != nil {
		return nil, err
	}
	l.priv = key
	l.signer = &noteSigner{name: l.origin, hash: l.verifier.KeyHash(), key: key}

	var size uint64
	err = st.View(ctx, func(r store.Reader) error {
		h, err := readHead(r)
		if err != nil {
			return err
		}
		size = h.size
		return l.checkCovered(r)
	})
	if err != nil {
		return nil, fmt.Errorf("audit: open: %w", err)
	}
	l.logger.DebugContext(ctx, "audit log opened",
		slog.String("origin", l.origin), slog.Uint64("size", size))
	return l, nil
}

// OpenReader returns a read-only Log over st for someone who holds only the
// record public key, such as an offline auditor. Reads, Subscribe,
// Verify and the ChainVerifier work; the methods that append or sign
// return ErrReadOnly. opts.Origin must match the writer's Origin for cursors
// and checkpoint checks to line up (the defaults match).
func OpenReader(ctx context.Context, st store.Store, pub ed25519.PublicKey, opts *Options) (*Log, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("audit: open reader: public key has %d bytes, want %d", len(pub), ed25519.PublicKeySize)
	}
	l, err := newLog(st, append(ed25519.PublicKey(nil), pub...), opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("audit: open reader: %w", err)
	}
	return l, nil
}

func newLog(st store.Store, pub ed25519.PublicKey, opts *Options) (*Log, error) {
	if st == nil {
		return nil, errors.New("audit: open: nil store")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Origin == "" {
		sum := sha256.Sum256(pub)
		o.Origin = "countersign/" + hex.EncodeToString(sum[:8])
	}
	if !validOrigin(o.Origin) {
		return nil, fmt.Errorf("audit: open: origin %q is not a valid note key name (non-empty, no spaces, no '+')", o.Origin)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	vkey, err := note.NewEd25519VerifierKey(o.Origin, pub)
	if err != nil {
		return nil, fmt.Errorf("audit: open: %w", err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("audit: open: %w", err)
	}
	l := &Log{
		st: st, pub: pub, origin: o.Origin, vkey: vkey, verifier: v,
		now: o.Now, logger: o.Logger, observe: o.Committed, done: make(chan struct{}),
	}
	l.cursorID = cursorID(o.Origin)
	return l, nil
}

func validOrigin(s string) bool {
	return s != "" && utf8.ValidString(s) && !strings.ContainsRune(s, '+') &&
		strings.IndexFunc(s, unicode.IsSpace) < 0
}

// Origin returns the log's origin (see [Options.Origin]).
func (l *Log) Origin() string { return l.origin }

// PublicKey returns the record public key.
func (l *Log) PublicKey() ed25519.PublicKey { return append(ed25519.PublicKey(nil), l.pub...) }

// VerifierKey returns the signed-note verifier key for the log's
// checkpoints, "<origin>+<keyhash>+<base64 key>". It is public; it is what
// record.pub holds, and all that [VerifyInclusion], [VerifyConsistency] and
// [NewChainVerifier] users need.
func (l *Log) VerifierKey() string { return l.vkey }

// Close ends every subscription (their Next returns ErrClosed) and makes
// every later call return ErrClosed. It does not close the store. Close is
// idempotent.
func (l *Log) Close() error {
	if l.closed.CompareAndSwap(false, true) {
		close(l.done)
	}
	return nil
}

func (l *Log) checkOpen() error {
	if l.closed.Load() {
		return ErrClosed
	}
	return nil
}

// Append adds an entry for r inside txn, the caller's transaction, so that
// the entry commits exactly when the state change it records does. It
// reads the head from txn, assigns the next seq, the time and prev, hashes
// the entry, and writes it with its Merkle tree hashes; the checkpoint
// signed when txn commits covers it (see commitcp.go), and only an entry
// with r.Signed gets a signature of its own.
//
// Append keeps nothing between calls but what is in txn, so it is correct
// when the store re-runs the transaction function. The returned Entry is
// only meaningful once the transaction commits.
//
// A transaction run through [Log.Update] wakes subscribers when it commits;
// one run through the store's own Update must be followed, after it
// commits, by a call to [Log.Notify].
//
// Errors: ErrInvalidRecord for a bad Record, ErrReadOnly on a reader,
// ErrTampered if the stored head or tree is damaged, or the store's error.
func (l *Log) Append(txn store.Txn, r Record) (Entry, error) {
	if err := l.checkOpen(); err != nil {
		return Entry{}, err
	}
	if l.priv == nil {
		return Entry{}, fmt.Errorf("audit: append: %w", ErrReadOnly)
	}
	if err := checkRecord(r); err != nil {
		return Entry{}, fmt.Errorf("audit: append: %w", err)
	}
	data, err := canonicalData(r.Data)
	if err != nil {
		return Entry{}, fmt.Errorf("audit: append: %w", err)
	}
	h, err := readHead(txn)
	if err != nil {
		return Entry{}, fmt.Errorf("audit: append: %w", err)
	}
	if h.size >= maxSeq {
		return Entry{}, errors.New("audit: append: log is full (2^53 entries)")
	}
	e := Entry{
		Seq:       h.size + 1,
		At:        formatAt(l.now()),
		Type:      r.Type,
		IntentID:  r.IntentID,
		Actor:     r.Actor,
		RequestID: r.RequestID,
		Rationale: r.Rationale,
		Data:      data,
		Prev:      zeroHashHex,
	}
	if h.size > 0 {
		e.Prev = hex.EncodeToString(h.hash[:])
	}
	body, err := appendBody(make([]byte, 0, 256+len(data)), &e)
	if err != nil {
		return Entry{}, fmt.Errorf("audit: append: %w", err)
	}
	if len(body) > maxBodyBytes {
		return Entry{}, fmt.Errorf("audit: append: %w: entry is %d bytes, more than %d", ErrInvalidRecord, len(body), maxBodyBytes)
	}
	hash := sha256.Sum256(body)
	var sig []byte
	if r.Signed {
		sig = ed25519.Sign(l.priv, hash[:])
	}

	leaf := int64(h.size)
	hashes, err := tlog.StoredHashesForRecordHash(leaf, tlog.RecordHash(hash[:]), hashReader{txn})
	if err != nil {
		return Entry{}, fmt.Errorf("audit: append: tree: %w", err)
	}
	if err := txn.Set(entryKey(e.Seq), encodeStored(body, hash, sig)); err != nil {
		return Entry{}, fmt.Errorf("audit: append: %w", err)
	}
	if err := txn.Set(treeKey(uint64(leaf)), joinHashes(hashes)); err != nil {
		return Entry{}, fmt.Errorf("audit: append: %w", err)
	}
	if err := txn.Set(headKey, encodeHead(head{size: e.Seq, hash: hash})); err != nil {
		return Entry{}, fmt.Errorf("audit: append: %w", err)
	}
	if err := l.coverCommit(txn); err != nil {
		return Entry{}, fmt.Errorf("audit: append: %w", err)
	}
	e.Hash = hex.EncodeToString(hash[:])
	if sig != nil {
		e.Sig = encodeSig(sig)
	}
	if t, ok := txn.(*trackedTxn); ok {
		t.appended = true
		if l.observe != nil {
			t.entries = append(t.entries, e)
		}
	}
	return e, nil
}

// trackedTxn is the Txn that Log.Update hands to its function; Append marks
// it so that Update knows to wake subscribers after the commit.
type trackedTxn struct {
	store.Txn
	appended bool
	entries  []Entry // appended in this attempt, when Options.Committed is set
}

// Update runs fn in a store transaction (st.Update) and, when it commits
// having appended entries, wakes subscribers. fn may run more than once,
// as with the store's Update.
func (l *Log) Update(ctx context.Context, fn func(store.Txn) error) error {
	if err := l.checkOpen(); err != nil {
		return err
	}
	last, appended, err := l.run(ctx, l.st.Update, fn)
	if err != nil {
		return err
	}
	l.pendMu.Lock()
	pending := l.pending
	l.pending = nil
	l.pendMu.Unlock()
	if appended || len(pending) > 0 {
		l.Notify()
	}
	if l.observe != nil {
		// Deferred entries committed before this one (the store's log
		// orders them first), so they are durable now too.
		if len(pending) > 0 {
			l.observe(pending)
		}
		if last != nil && len(last.entries) > 0 {
			l.observe(last.entries)
		}
	}
	return nil
}

// UpdateDeferred is [Log.Update] through [store.UpdateDeferred]: it may
// return before the commit is durable, and it wakes no subscriber and
// reports nothing to Options.Committed, since what it appended may still
// be lost. The caller must not let anything it appended (a sequence
// number, a receipt, an answer) leave the process before a later Update,
// which makes it durable (the store orders deferred commits first), has
// returned; an Update with a function that writes nothing serves as that
// barrier. Subscribers read only durable entries, so they see these once
// that Update has synced them, and are woken by it.
//
// The money path uses it for the deciding transaction of a payment whose
// rail keeps its books in the same store (see pay and settle.LogSharer):
// the outcome's synchronous commit then makes the decision, the rail's
// entry and the outcome durable at once, and a payment waits for one
// fsync instead of two.
func (l *Log) UpdateDeferred(ctx context.Context, fn func(store.Txn) error) error {
	if err := l.checkOpen(); err != nil {
		return err
	}
	update := func(ctx context.Context, fn func(store.Txn) error) error {
		return store.UpdateDeferred(ctx, l.st, fn)
	}
	last, _, err := l.run(ctx, update, fn)
	if err == nil && l.observe != nil && last != nil && len(last.entries) > 0 {
		l.pendMu.Lock()
		l.pending = append(l.pending, last.entries...)
		l.pendMu.Unlock()
	}
	return err
}

// run runs fn through update with a trackedTxn. It returns the attempt
// that committed (when err is nil) and whether any attempt appended.
func (l *Log) run(ctx context.Context, update func(context.Context, func(store.Txn) error) error, fn func(store.Txn) error) (*trackedTxn, bool, error) {
	var appended atomic.Bool // set from the store's goroutine, read here
	var last *trackedTxn     // the latest attempt; the one that committed if err is nil
	err := update(ctx, func(txn store.Txn) error {
		t := &trackedTxn{Txn: txn}
		err := fn(t)
		if t.appended {
			// Sticky across attempts: a spurious wake-up is harmless, a
			// missed one is not.
			appended.Store(true)
		}
		last = t
		return err
	})
	return last, appended.Load(), err
}

// Notify wakes subscribers so they read entries committed since they last
// looked. [Log.Update] calls it; callers that append through the store's
// own Update must call it after that Update returns nil. Calling it when
// nothing changed is harmless and cheap.
func (l *Log) Notify() {
	l.wakeMu.Lock()
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
	l.wakeMu.Unlock()
}

// wakeChan returns a channel that Notify will close.
func (l *Log) wakeChan() <-chan struct{} {
	l.wakeMu.Lock()
	defer l.wakeMu.Unlock()
	if l.wake == nil {
		l.wake = make(chan struct{})
	}
	return l.wake
}

// WaitPast returns once the log holds an entry after seq, with nil; or
// ctx's error when it ends first, ErrClosed once the log is closed, or the
// error of reading the log's size. It is a Subscription's wait without the
// reading: for a follower that reads what it needs itself once woken (the
// webhook tailer), a Subscription would read and decode up to a batch of
// entries per wake only to be told something arrived. Like a Subscription
// it sees entries once they are durable and someone called [Log.Notify].
func (l *Log) WaitPast(ctx context.Context, seq uint64) error {
	for {
		wake := l.wakeChan() // before reading: see Subscribe
		size, err := l.Size(ctx)
		if err != nil {
			return err
		}
		if size > seq {
			return nil
		}
		select {
		case <-wake:
		case <-l.done:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Size returns the number of entries, which is also the newest seq.
func (l *Log) Size(ctx context.Context) (uint64, error) {
	if err := l.checkOpen(); err != nil {
		return 0, err
	}
	var h head
	err := l.st.View(ctx, func(r store.Reader) error {
		var err error
		h, err = readHead(r)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("audit: size: %w", err)
	}
	return h.size, nil
}

// Get returns entry seq. It checks that the stored entry hashes to its
// stored hash and parses (not its signature: see Verify), and returns an
// error matching ErrTampered otherwise. A seq that does not exist yields
// ErrNotFound.
func (l *Log) Get(ctx context.Context, seq uint64) (Entry, error) {
	if err := l.checkOpen(); err != nil {
		return Entry{}, err
	}
	var e Entry
	err := l.st.View(ctx, func(r store.Reader) error {
		if seq == 0 {
			return ErrNotFound
		}
		v, err := r.Get(entryKey(seq))
		if isNotFound(err) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		e, err = decodeStored(seq, v)
		return err
	})
	if err != nil {
		return Entry{}, fmt.Errorf("audit: get %d: %w", seq, err)
	}
	return e, nil
}

// Page returns up to limit entries after the cursor, in ascending seq
// order. cursor "" starts at seq 1; otherwise it is a NextCursor from an
// earlier page of this log (ErrBadCursor otherwise). limit 0 means
// DefaultPageLimit; a limit outside 0..MaxPageLimit yields ErrBadLimit.
// NextCursor is nil when the page reaches the newest entry; a caller
// tailing the log can resume from the last entry with [Log.CursorAfter].
func (l *Log) Page(ctx context.Context, cursor string, limit int) (Page, error) {
	if err := l.checkOpen(); err != nil {
		return Page{}, err
	}
	if limit == 0 {
		limit = DefaultPageLimit
	}
	if limit < 1 || limit > MaxPageLimit {
		return Page{}, fmt.Errorf("audit: page: %w: %d (want 1..%d)", ErrBadLimit, limit, MaxPageLimit)
	}
	var after uint64
	if cursor != "" {
		var err error
		if after, err = l.decodeCursor(cursor); err != nil {
			return Page{}, fmt.Errorf("audit: page: %w", err)
		}
	}
	p := Page{Data: []Entry{}}
	err := l.st.View(ctx, func(r store.Reader) error {
		h, err := readHead(r)
		if err != nil {
			return err
		}
		if after > h.size {
			// Sequence numbers are never withdrawn, so this log never
			// minted a cursor past its head.
			return ErrBadCursor
		}
		last := min(after+uint64(limit), h.size)
		p.Data, err = readEntries(r, after+1, last, p.Data)
		if err != nil {
			return err
		}
		if last < h.size {
			p.HasMore = true
			c := l.CursorAfter(last)
			p.NextCursor = &c
		}
		return nil
	})
	if err != nil {
		return Page{}, fmt.Errorf("audit: page: %w", err)
	}
	return p, nil
}

// readEntries appends entries from..to (inclusive) read from r to dst. A
// missing entry inside the range is tampering: the head says it exists.
func readEntries(r store.Reader, from, to uint64, dst []Entry) ([]Entry, error) {
	if from > to {
		return dst, nil
	}
	it := r.Iterate(entryKey(from), entryKey(to+1), false)
	defer it.Close()
	want := from
	for it.Next() {
		seq, ok := seqFromKey(it.Key(), entryPrefix)
		if !ok || seq != want {
			return dst, &TamperError{Seq: want, Reason: "entry missing from the store"}
		}
		e, err := decodeStored(seq, it.Value())
		if err != nil {
			return dst, err
		}
		dst = append(dst, e)
		want++
	}
	if err := it.Err(); err != nil {
		return dst, err
	}
	if want != to+1 {
		return dst, &TamperError{Seq: want, Reason: "entry missing from the store"}
	}
	return dst, nil
}

// Entries returns an iterator over entries from..to inclusive (from 0 means
// 1; to 0 means the newest entry when iteration starts). It reads in
// batches, each in its own snapshot, and stops at the first error, which it
// yields with a zero Entry.
func (l *Log) Entries(ctx context.Context, from, to uint64) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		if from == 0 {
			from = 1
		}
		if to == 0 {
			size, err := l.Size(ctx)
			if err != nil {
				yield(Entry{}, err)
				return
			}
			to = size
		}
		const batch = 256
		buf := make([]Entry, 0, batch)
		for next := from; next <= to; {
			if err := l.checkOpen(); err != nil {
				yield(Entry{}, err)
				return
			}
			last := min(next+batch-1, to)
			var err error
			buf = buf[:0]
			err = l.st.View(ctx, func(r store.Reader) error {
				h, err := readHead(r)
				if err != nil {
					return err
				}
				if last > h.size {
					return fmt.Errorf("%w: entry %d", ErrNotFound, h.size+1)
				}
				buf, err = readEntries(r, next, last, buf)
				return err
			})
			if err != nil {
				yield(Entry{}, fmt.Errorf("audit: entries: %w", err))
				return
			}
			for _, e := range buf {
				if !yield(e, nil) {
					return
				}
			}
			next = last + 1
		}
	}
}

func seqFromKey(k, prefix []byte) (uint64, bool) {
	if len(k) != len(prefix)+8 || string(k[:len(prefix)]) != string(prefix) {
		return 0, false
	}
	return beUint64(k[len(prefix):]), true
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
