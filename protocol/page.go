package protocol

import (
	"encoding/binary"
	"strconv"

	"github.com/countersign/countersign/internal/errcode"
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
