package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
)

// A cursor is the base64url (no padding) encoding of 12 bytes: the last
// seq returned (8 bytes, big-endian) and a 4-byte tag, the first bytes of
// SHA-256(cursorID ‖ seq) where cursorID is derived from the log's origin.
// The tag is not a secret MAC (anyone may read the log, so a forged cursor
// gains nothing); it makes a cursor minted by another deployment, or a
// mistyped one, fail loudly as ErrBadCursor instead of silently paging
// from some other position.

const cursorLen = 16 // base64url characters for 12 bytes

func cursorID(origin string) [8]byte {
	sum := sha256.Sum256([]byte("countersign audit cursor\n" + origin))
	var id [8]byte
	copy(id[:], sum[:])
	return id
}

func cursorTag(id [8]byte, seq uint64) []byte {
	var buf [16]byte
	copy(buf[:8], id[:])
	binary.BigEndian.PutUint64(buf[8:], seq)
	sum := sha256.Sum256(buf[:])
	return sum[:4]
}

// CursorAfter returns the page cursor that continues after entry seq
// (CursorAfter(0) starts at the beginning, like ""). Page hands these out
// as NextCursor; a tailing reader can mint one from the last entry it
// holds.
func (l *Log) CursorAfter(seq uint64) string {
	var b [12]byte
	binary.BigEndian.PutUint64(b[:8], seq)
	copy(b[8:], cursorTag(l.cursorID, seq))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// decodeCursor returns the seq a cursor continues after, or an error
// matching ErrBadCursor.
func (l *Log) decodeCursor(c string) (uint64, error) {
	if len(c) != cursorLen {
		return 0, fmt.Errorf("%w: wrong length", ErrBadCursor)
	}
	// Strict: non-zero padding bits would give one cursor two spellings.
	b, err := base64.RawURLEncoding.Strict().DecodeString(c)
	if err != nil || len(b) != 12 {
		return 0, fmt.Errorf("%w: not base64url", ErrBadCursor)
	}
	seq := binary.BigEndian.Uint64(b[:8])
	if !bytes.Equal(b[8:], cursorTag(l.cursorID, seq)) {
		return 0, fmt.Errorf("%w: not minted by this log", ErrBadCursor)
	}
	return seq, nil
}

// ParseCursor returns the seq that a cursor minted by this log (see
// CursorAfter) continues after, or an error matching ErrBadCursor. Other
// packages that page record entries by seq (an intent's events) use it so
// that every cursor on the wire has one format.
func (l *Log) ParseCursor(c string) (uint64, error) { return l.decodeCursor(c) }
