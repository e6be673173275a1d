// Package jsonscan finds where a JSON value ends without decoding it. The
// fast paths of package pay (walking an instruction that json.Valid has
// accepted) and package audit (canonicalizing record data) use it to skip
// a member's value in one linear pass; both check what they then read by
// other means, so this scan does not validate.
package jsonscan

// ValueEnd returns the index just past the JSON value that starts at b[i]:
// past the closing quote of a string, past the bracket that closes a
// container (nested containers are counted, and brackets inside strings
// ignored), or, for a number or literal, at the first ',', '}', ']' or
// white space after it (or len(b)). It reports false when b ends inside a
// string or an open container. On valid JSON it is exact; on anything else
// it finds some end in linear time and never reads outside b.
func ValueEnd(b []byte, i int) (int, bool) {
	nest := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			i++
			for i < len(b) && b[i] != '"' {
				if b[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(b) {
				return len(b), false
			}
			i++
			if nest == 0 {
				return i, true
			}
			continue
		case '{', '[':
			nest++
		case '}', ']':
			if nest == 0 {
				return i, true // a scalar ends at its container's close
			}
			nest--
			if nest == 0 {
				return i + 1, true
			}
		case ',', ' ', '\t', '\n', '\r':
			if nest == 0 {
				return i, true
			}
		}
		i++
	}
	return len(b), nest == 0
}
