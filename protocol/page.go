package protocol

import (
	"context"
	"encoding/binary"
	"strconv"

	"github.com/countersign/countersign/internal/errcode"
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

// pageIndex pages an index whose keys are prefix + id, ids sorting in
// creation order (ULIDs): after cursor (the last id of the previous
// page), up to limit ids that fn includes (fn sees each id and its value
// and says whether it counted). The next cursor is "" on the last page.
func pageIndex(r store.Reader, prefix []byte, cursor string, limit int, fn func(id string, v []byte) (bool, error)) (string, error) {
	if limit <= 0 || limit > maxLimit {
		limit = min(max(limit, defaultLimit), maxLimit)
	}
	lower := prefix
	if cursor != "" {
		lower = append(append([]byte(nil), prefix...), cursor...)
		lower = append(lower, 0)
	}
	it := r.Iterate(lower, store.PrefixEnd(prefix), false)
	defer it.Close()
	n, last := 0, ""
	for it.Next() {
		if n == limit {
			return last, it.Close()
		}
		id := string(it.Key()[len(prefix):])
		ok, err := fn(id, it.Value())
		if err != nil {
			return "", err
		}
		if ok {
			n++
			last = id
		}
	}
	return "", it.Close()
}

// listPage reads one page of objects through an index (see pageIndex):
// load turns an id into its object, or says it is filtered out.
func listPage[T any](ctx context.Context, s *Service, prefix []byte, cursor string, limit int,
	load func(r store.Reader, id string) (T, bool, error)) ([]T, string, error) {
	items := []T{}
	var next string
	err := s.st.View(ctx, func(r store.Reader) error {
		items = items[:0]
		var err error
		next, err = pageIndex(r, prefix, cursor, limit, func(id string, _ []byte) (bool, error) {
			v, ok, err := load(r, id)
			if err != nil || !ok {
				return false, err
			}
			items = append(items, v)
			return true, nil
		})
		return err
	})
	return items, next, err
}
