package jcsenc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"

	"github.com/gowebpki/jcs"
)

// ErrInexactNumber is matched by the error [Transform] returns for a
// number that RFC 8785 cannot carry exactly.
var ErrInexactNumber = errors.New("jcsenc: number cannot be carried exactly")

// Transform returns the RFC 8785 form of the JSON value raw, as
// jcs.Transform does, but refuses a number whose value the canonical form
// would change. RFC 8785 writes every number as the IEEE 754 double
// nearest to it, so 9223372036854775808 would become 9223372036854776000
// and 0.30000000000000000001 would become 0.3: a signed or hashed
// statement must mean what its author sent, so such a number is an error
// (wrapping [ErrInexactNumber], naming the number) and the client is told
// to send it as a string. Numbers outside the double range are refused
// the same way.
func Transform(raw []byte) ([]byte, error) {
	if err := checkNumbers(raw); err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

// checkNumbers walks raw's tokens and checks every number.
func checkNumbers(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return nil // not JSON: jcs.Transform reports it
		}
		if n, ok := tok.(json.Number); ok && !exact(string(n)) {
			shown := string(n)
			if len(shown) > 40 {
				shown = shown[:40] + "…"
			}
			return fmt.Errorf("%w: %s is not an IEEE 754 double (RFC 8785); send it as a string", ErrInexactNumber, shown)
		}
	}
}

// exact reports whether the decimal n equals the double nearest to it, as
// RFC 8785 would write it.
func exact(n string) bool {
	f, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return false // out of the double range
	}
	if f == 0 {
		// 0, -0, 0.000 and 0e5 are zero; a non-zero literal that became 0
		// underflowed.
		for i := 0; i < len(n) && n[i] != 'e' && n[i] != 'E'; i++ {
			if n[i] >= '1' && n[i] <= '9' {
				return false
			}
		}
		return true
	}
	var want, got big.Rat
	if _, ok := want.SetString(n); !ok {
		return false
	}
	if _, ok := got.SetString(strconv.FormatFloat(f, 'g', -1, 64)); !ok {
		return false
	}
	return want.Cmp(&got) == 0
}
