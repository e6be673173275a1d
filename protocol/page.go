package protocol

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/internal/ids"
	"github.com/countersign/countersign/internal/seqlist"
	"github.com/countersign/countersign/store"
)

// Pages follow /audit: a cursor from the previous page, limit 1..100
// (default 20).
const (
	defaultLimit = 20
	maxLimit     = 100
)

// CodeBadCursor is the problem of a cursor no page returned.
const CodeBadCursor = "protocol.bad_cursor"

var errBadCursor = errcode.New(CodeBadCursor, "protocol: the cursor is not one a page returned")

// pageArgs reads a numeric cursor and a limit.
func pageArgs(cursor string, limit int) (uint64, int, error) {
	if limit == 0 {
		limit = defaultLimit
	}
	if cursor == "" {
		return 0, limit, nil
	}
	n, err := strconv.ParseUint(cursor, 10, 64)
	if err != nil {
		return 0, 0, errBadCursor
	}
	return n, limit, nil
}

func be8(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

// The lists of this package (disputes, evidence, claims, obligations)
// follow commit order (package seqlist): an item's place is the seq of an
// entry appended in the transaction that put it into the list (the first
// of the entries its object lists), and a cursor names that place. Their
// order rows, group + seq + id → value:
const (
	keyDisputesOf    = "protocol/disputes-of/"    // + agent + "/" + seq + dispute id → dispute id
	keyEvidenceOrder = "protocol/evidence-order/" // + subject + "/" + seq + evidence id → empty
	keyClaimsOf      = "protocol/claims-of/"      // + agent key id + "/" + seq + claim id → claim id
	keyObligationsOf = "protocol/obligations-of/" // + agent key id + "/" + seq + obligation id → empty
	keyListLayout    = "protocol/list-layout"     // set once a store written before has them
)

// listPage reads one page of objects through the order rows under prefix
// (see above), after cursor (the nextCursor of a page of the same list,
// naming an id with idPrefix): load turns an id into its object, or says
// it is filtered out. The next cursor is "" on the last page.
func listPage[T any](ctx context.Context, s *Service, prefix, idPrefix, cursor string, limit int,
	load func(r store.Reader, id string) (T, bool, error)) ([]T, string, error) {
	if limit <= 0 || limit > maxLimit {
		limit = min(max(limit, defaultLimit), maxLimit)
	}
	after, err := seqlist.ParseCursor(cursor)
	if err != nil || (cursor != "" && !ids.Valid(idPrefix, after.ID)) {
		return nil, "", errBadCursor
	}
	if err := s.migrateLists(ctx); err != nil {
		return nil, "", err
	}
	items := []T{}
	var (
		last seqlist.Pos
		more bool
	)
	err = s.st.View(ctx, func(r store.Reader) error {
		items = items[:0]
		var err error
		last, more, err = seqlist.Page(r, prefix, after, limit, func(id string, _ []byte) (bool, error) {
			v, ok, err := load(r, id)
			if err != nil || !ok {
				return false, err
			}
			items = append(items, v)
			return true, nil
		})
		return err
	})
	if err != nil || !more {
		return items, "", err
	}
	return items, last.Cursor(), nil
}

// firstEntry returns the first record entry an object under key lists:
// the one its creating transaction appended; 0 for an object that lists
// none.
func firstEntry(r store.Reader, key []byte) (uint64, error) {
	var obj struct {
		Entries []uint64 `json:"entries"`
	}
	if err := getJSON(r, key, &obj); errors.Is(err, store.ErrNotFound) {
		return 0, nil // a row without its object: first, rather than stuck
	} else if err != nil {
		return 0, err
	}
	if len(obj.Entries) == 0 {
		return 0, nil
	}
	return obj.Entries[0], nil
}

// migrateLists brings a store written when the lists paged by id (index
// rows group + id) to their order rows, each item at the first entry its
// object lists. It runs once per store, at the first list: the Service is
// built inside pay.New, which cannot do I/O.
func (s *Service) migrateLists(ctx context.Context) error {
	err := s.lists.Run(ctx, s.st, keyListLayout, func(txn store.Txn) (bool, error) {
		byObject := func(key func(id string) []byte) func(r store.Reader, _, id string) (uint64, error) {
			return func(r store.Reader, _, id string) (uint64, error) { return firstEntry(r, key(id)) }
		}
		disputes, err := seqlist.Move(txn, "protocol/dispute-by-agent/", keyDisputesOf, byObject(disputeKey))
		if err != nil {
			return false, err
		}
		claims, err := seqlist.Move(txn, "protocol/claims-by-key/", keyClaimsOf, byObject(claimKey))
		if err != nil {
			return false, err
		}
		obligations, err := seqlist.Move(txn, "protocol/obl-by-key/", keyObligationsOf, func(r store.Reader, _, id string) (uint64, error) {
			intentID, _ := prefixID(id, "obl_", "int_")
			seqs, err := s.books.IntentEntrySeqs(r, intentID)
			if err != nil || len(seqs) == 0 {
				return 0, err
			}
			return seqs[0], nil
		})
		if err != nil {
			return false, err
		}
		// Evidence keeps its by-subject rows (the clearing reads their
		// classes) and gets order rows beside them.
		evidence, err := backfillEvidence(txn)
		return disputes || claims || obligations || evidence, err
	})
	if err != nil {
		return fmt.Errorf("protocol: %w", err)
	}
	return nil
}

// backfillEvidence writes the order row of every piece of evidence that
// has none, and reports whether it wrote any.
func backfillEvidence(txn store.Txn) (bool, error) {
	prefix := []byte("protocol/evidence-by-subject/")
	var rows []string // subject + "/" + id
	it := txn.Iterate(prefix, store.PrefixEnd(prefix), false)
	for it.Next() {
		rows = append(rows, string(it.Key()[len(prefix):]))
	}
	if err := it.Close(); err != nil {
		return false, err
	}
	changed := false
	for _, row := range rows {
		i := strings.LastIndexByte(row, '/')
		subject, id := row[:i], row[i+1:]
		seq, err := firstEntry(txn, evidenceKey(id))
		if err != nil {
			return false, err
		}
		added, err := seqlist.Add(txn, evidenceOrder(subject), seq, id)
		if err != nil {
			return false, err
		}
		changed = changed || added
	}
	return changed, nil
}
