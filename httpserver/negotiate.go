package httpserver

import (
	"strconv"
	"strings"
)

// negotiate picks the offer the Accept header prefers (RFC 9110 §12.5.1):
// the highest q wins, a more specific range decides an offer's q, and ties
// go to the earlier offer. Without a usable Accept header, or when every
// offer is refused, the first offer is chosen: answering in the default
// representation is more useful than 406.
func negotiate(accept string, offers ...string) string {
	if len(offers) == 0 {
		return ""
	}
	if strings.TrimSpace(accept) == "" {
		return offers[0]
	}
	type rng struct {
		typ, sub string
		q        float64
	}
	var ranges []rng
	for part := range strings.SplitSeq(accept, ",") {
		fields := strings.Split(part, ";")
		mt := strings.ToLower(strings.TrimSpace(fields[0]))
		typ, sub, ok := strings.Cut(mt, "/")
		if !ok || typ == "" || sub == "" || (typ == "*" && sub != "*") {
			continue
		}
		q := 1.0
		for _, p := range fields[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil || f < 0 || f > 1 {
					f = 0
				}
				q = f
			}
		}
		ranges = append(ranges, rng{typ, sub, q})
	}
	best, bestQ := offers[0], 0.0
	for _, o := range offers {
		ot, os, _ := strings.Cut(o, "/")
		q, spec := 0.0, -1
		for _, r := range ranges {
			s := -1
			switch {
			case r.typ == ot && r.sub == os:
				s = 2
			case r.typ == ot && r.sub == "*":
				s = 1
			case r.typ == "*":
				s = 0
			}
			if s > spec {
				spec, q = s, r.q
			}
		}
		if q > bestQ {
			best, bestQ = o, q
		}
	}
	return best
}
