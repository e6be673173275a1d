// Package seqlist keeps paginated lists whose pages follow commit order.
//
// # Why not id order
//
// Ids (ULIDs) are minted when a request starts, before its transaction
// commits. Two servers on one database, or two concurrent requests on one
// server, can commit in the other order than they minted: an item whose id
// sorts before a cursor a client already holds may commit after the client
// took it, and a list in id order never shows it to that client.
//
// # Commit order
//
// Every transaction that puts an item into a list also appends an entry to
// the record (package audit), and the store serializes record appends:
// there is one chain. So the seq of an entry appended in that transaction
// orders the transactions as they committed. A list keeps one order row
// per item,
//
//	prefix ‖ seq (8 bytes, big-endian) ‖ id → value
//
// and a cursor names the (seq, id) of the last item a page returned. An
// item that commits after a reader took a cursor has a greater seq than
// every item that reader saw, so a later page returns it, whatever its id.
// Any entry of the transaction will do: no other transaction's entry falls
// between two entries of one transaction.
//
// A list whose items leave it, or move (get put again by a later
// transaction), and whose item records do not keep the seq, also keeps a
// member row per item, id → seq: see [Index].
//
// # Items stored before
//
// A store written before a list followed commit order is brought to the new
// layout once, by a [Migration]. Items whose seq the store does not know
// are put at seq 0: they sort before every item put since, among
// themselves by id, as they did.
package seqlist

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/countersign/countersign/store"
)

// Pos is a place in a list: the seq an item was put at and its id. The
// zero Pos is before the first item.
type Pos struct {
	Seq uint64
	ID  string
}

// Key returns the order row of id put at seq: prefix ‖ seq (8 bytes,
// big-endian) ‖ id.
func Key(prefix string, seq uint64, id string) []byte {
	k := make([]byte, 0, len(prefix)+8+len(id))
	k = append(k, prefix...)
	k = binary.BigEndian.AppendUint64(k, seq)
	return append(k, id...)
}

// Split returns the position an order row under prefix names; ok is false
// for a key that is not one.
func Split(prefix string, key []byte) (p Pos, ok bool) {
	if len(key) <= len(prefix)+8 || string(key[:len(prefix)]) != prefix {
		return Pos{}, false
	}
	rest := key[len(prefix):]
	return Pos{Seq: binary.BigEndian.Uint64(rest), ID: string(rest[8:])}, true
}

// ErrBadCursor is returned by [ParseCursor] for a string that no list
// minted. Packages answer it with their own bad-cursor error.
var ErrBadCursor = errors.New("seqlist: malformed cursor")

// cursorVersion starts every cursor. It is not a printable character, so
// that a cursor of the id-ordered lists before (base64url of a bare id)
// fails to parse instead of naming some other place.
const cursorVersion = 1

// Before reports whether p comes before q in a list: by seq, then by id,
// the order of their order rows.
func (p Pos) Before(q Pos) bool {
	if p.Seq != q.Seq {
		return p.Seq < q.Seq
	}
	return p.ID < q.ID
}

// Cursor returns the opaque cursor that continues after p: base64url (no
// padding) of a version byte, the seq (8 bytes, big-endian) and the id.
func (p Pos) Cursor() string {
	b := make([]byte, 0, 9+len(p.ID))
	b = append(b, cursorVersion)
	b = binary.BigEndian.AppendUint64(b, p.Seq)
	b = append(b, p.ID...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ParseCursor returns the position a cursor minted by [Pos.Cursor]
// continues after, the zero Pos for "" (the start), or an error matching
// ErrBadCursor. It does not know what ids the list holds: callers check
// the id's form.
func ParseCursor(c string) (Pos, error) {
	if c == "" {
		return Pos{}, nil
	}
	// One spelling per cursor: the decoder skips CR and LF, and Strict
	// refuses non-zero padding bits.
	b, err := base64.RawURLEncoding.Strict().DecodeString(c)
	if err != nil || base64.RawURLEncoding.EncodedLen(len(b)) != len(c) {
		return Pos{}, fmt.Errorf("%w: not base64url", ErrBadCursor)
	}
	if len(b) < 10 || b[0] != cursorVersion {
		return Pos{}, fmt.Errorf("%w: not a list cursor", ErrBadCursor)
	}
	return Pos{Seq: binary.BigEndian.Uint64(b[1:9]), ID: string(b[9:])}, nil
}

// Page calls fn, in commit order, for the items of the list under prefix
// after the position after (the zero Pos: from the start), until fn has
// counted limit of them (fn says whether it counted an item: a filter
// returns false). It returns the position of the last item counted, and
// whether an item follows it; fn is not called for that one.
func Page(r store.Reader, prefix string, after Pos, limit int, fn func(id string, value []byte) (bool, error)) (last Pos, more bool, err error) {
	lower := []byte(prefix)
	if after != (Pos{}) {
		lower = append(Key(prefix, after.Seq, after.ID), 0) // strictly after
	}
	it := r.Iterate(lower, store.PrefixEnd([]byte(prefix)), false)
	defer it.Close()
	n := 0
	for it.Next() {
		if n == limit {
			return last, true, it.Err()
		}
		p, ok := Split(prefix, it.Key())
		if !ok {
			return Pos{}, false, fmt.Errorf("seqlist: malformed order row %q", it.Key())
		}
		counted, err := fn(p.ID, it.Value())
		if err != nil {
			return Pos{}, false, err
		}
		if counted {
			n++
			last = p
		}
	}
	return last, false, it.Err()
}

// Index is a list whose items leave it or move: an order row per item
// under Order (see [Key]; its value is empty) and a member row per item
// under Member, id → seq (8 bytes, big-endian), which says where its order
// row is. An empty member value is seq 0: the member rows of a list that
// was a set keyed by id (id → empty) are already the member rows of the
// Index, and [Index.Backfill] writes their order rows.
type Index struct {
	Order, Member string
}

// Seq returns the seq id was put at, and whether id is in the list.
func (x Index) Seq(r store.Reader, id string) (uint64, bool, error) {
	v, err := r.Get([]byte(x.Member + id))
	if errors.Is(err, store.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	seq, err := memberSeq(v)
	return seq, err == nil, err
}

func memberSeq(v []byte) (uint64, error) {
	switch len(v) {
	case 0:
		return 0, nil
	case 8:
		return binary.BigEndian.Uint64(v), nil
	}
	return 0, fmt.Errorf("seqlist: member row of %d bytes", len(v))
}

// Put puts id into the list at seq, the seq of an entry appended in txn;
// an id already in the list moves there.
func (x Index) Put(txn store.Txn, seq uint64, id string) error {
	if err := x.Remove(txn, id); err != nil {
		return err
	}
	if err := txn.Set(Key(x.Order, seq, id), nil); err != nil {
		return err
	}
	return txn.Set([]byte(x.Member+id), binary.BigEndian.AppendUint64(nil, seq))
}

// Remove takes id out of the list; an id not in it is no error.
func (x Index) Remove(txn store.Txn, id string) error {
	seq, ok, err := x.Seq(txn, id)
	if err != nil || !ok {
		return err
	}
	if err := txn.Delete(Key(x.Order, seq, id)); err != nil {
		return err
	}
	return txn.Delete([]byte(x.Member + id))
}

// Backfill writes the order row of every member row that has none: those
// of a list that was a set keyed by id, at seq 0. It reports whether it
// wrote anything; it is idempotent.
func (x Index) Backfill(txn store.Txn) (bool, error) {
	var legacy []string
	it := txn.Iterate([]byte(x.Member), store.PrefixEnd([]byte(x.Member)), false)
	for it.Next() {
		if len(it.Value()) == 0 {
			legacy = append(legacy, string(it.Key()[len(x.Member):]))
		}
	}
	if err := it.Close(); err != nil {
		return false, err
	}
	for _, id := range legacy {
		if err := x.Put(txn, 0, id); err != nil {
			return false, err
		}
	}
	return len(legacy) > 0, nil
}

// Add writes the order row of id at seq under prefix (with an empty
// value) unless it is there, and reports whether it wrote it: a migration
// that finds every row in place writes nothing.
func Add(txn store.Txn, prefix string, seq uint64, id string) (bool, error) {
	k := Key(prefix, seq, id)
	if _, err := txn.Get(k); err == nil {
		return false, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	return true, txn.Set(k, nil)
}

// Move moves the rows of an id-ordered index, from + group + id → value
// (group is what comes before the last "/" of the key after from, and ends
// with it; ids hold no "/"), to the order rows to + group + seq + id →
// value, and deletes them. seq says where each item goes (0 when the
// store does not know). It reports whether it moved anything; it is
// idempotent. to must not start with from.
func Move(txn store.Txn, from, to string, seq func(r store.Reader, group, id string) (uint64, error)) (bool, error) {
	if strings.HasPrefix(to, from) {
		return false, fmt.Errorf("seqlist: move %q into itself (%q)", from, to)
	}
	type row struct {
		key, value []byte
	}
	var rows []row
	it := txn.Iterate([]byte(from), store.PrefixEnd([]byte(from)), false)
	for it.Next() {
		rows = append(rows, row{append([]byte(nil), it.Key()...), append([]byte(nil), it.Value()...)})
	}
	if err := it.Close(); err != nil {
		return false, err
	}
	for _, r := range rows {
		rest := string(r.key[len(from):])
		group, id := "", rest
		for i := len(rest) - 1; i >= 0; i-- {
			if rest[i] == '/' {
				group, id = rest[:i+1], rest[i+1:]
				break
			}
		}
		s, err := seq(txn, group, id)
		if err != nil {
			return false, err
		}
		if err := txn.Set(Key(to+group, s, id), r.value); err != nil {
			return false, err
		}
		if err := txn.Delete(r.key); err != nil {
			return false, err
		}
	}
	return len(rows) > 0, nil
}

// Migration brings a store to a list layout once: the first [Migration.Run]
// applies the change unless the store's marker says it was applied, and
// later calls return at once. Migrations run at the first read of a list
// where the service's constructor cannot do I/O, so a store with nothing
// to migrate is not written to: a read does not change it. Its zero value
// is ready; it is safe for concurrent use.
type Migration struct {
	done atomic.Bool
	mu   sync.Mutex // held while a Run applies the change, so that concurrent Runs wait for it
}

// Run applies apply in one transaction, unless the key marker is set,
// and sets marker in it when apply reports that it changed something (so
// that later processes skip the work). apply must be idempotent and, as
// every transaction function, safe to run more than once. Once Run
// returned nil, later calls do nothing; after an error, the next call
// tries again.
func (m *Migration) Run(ctx context.Context, st store.Store, marker string, apply func(store.Txn) (changed bool, err error)) error {
	if m.done.Load() {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done.Load() {
		return nil
	}
	have := false
	err := st.View(ctx, func(r store.Reader) error {
		_, err := r.Get([]byte(marker))
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		have = err == nil
		return err
	})
	if err == nil && !have {
		err = st.Update(ctx, func(txn store.Txn) error {
			if _, err := txn.Get([]byte(marker)); err == nil {
				return nil // another process did it
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
			changed, err := apply(txn)
			if err != nil || !changed {
				return err
			}
			return txn.Set([]byte(marker), []byte("1"))
		})
	}
	if err != nil {
		return fmt.Errorf("seqlist: migrate %s: %w", marker, err)
	}
	m.done.Store(true)
	return nil
}
