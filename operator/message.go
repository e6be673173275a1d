package operator

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// messageVersion is the first signed line. A change to what is signed, or
// to the members of the header, gets a new version.
const messageVersion = "svc-operator-v1"

// signedMessage returns the bytes a signature covers (DESIGN §5). target
// is {base_url}{path}[?{query}]. Every line is checked to hold no line
// break, so no two different requests can produce the same bytes by moving
// text from one line to the next.
func signedMessage(operationID, method, target string, ts int64, nonce string, body []byte) ([]byte, error) {
	for _, l := range [...]string{operationID, method, target, nonce} {
		if l == "" || strings.ContainsAny(l, "\r\n") {
			return nil, errBadLine
		}
	}
	sum := sha256.Sum256(body)
	var b []byte
	b = append(b, messageVersion...)
	b = append(b, '\n')
	b = append(b, operationID...)
	b = append(b, '\n')
	b = append(b, strings.ToUpper(method)...)
	b = append(b, '\n')
	b = append(b, target...)
	b = append(b, '\n')
	b = strconv.AppendInt(b, ts, 10)
	b = append(b, '\n')
	b = append(b, nonce...)
	b = append(b, '\n')
	b = base64.RawURLEncoding.AppendEncode(b, sum[:])
	return b, nil
}

// errBadLine is returned by signedMessage for an empty line or one with a
// line break.
var errBadLine = errors.New("operator: operation id, method and URL must be non-empty and hold no line break")

// checkOperationID refuses an operation id that cannot be a signed line.
func checkOperationID(id string) error {
	if id == "" || strings.ContainsAny(id, "\r\n") {
		return fmt.Errorf("operator: operation id %.64q must be non-empty and hold no line break", id)
	}
	return nil
}

// normalizeBaseURL checks that s is an absolute http(s) URL without query,
// fragment or user info, and returns it with trailing slashes removed: the
// same spelling the reference server publishes in /openapi.json. Nothing
// else is normalised (not even the case of the host), because both sides
// must sign the same string and the published one is the reference.
func normalizeBaseURL(s string) (string, error) {
	base := strings.TrimRight(s, "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" ||
		strings.ContainsAny(base, "\r\n") {
		return "", fmt.Errorf("operator: base URL %.200q must be an absolute http(s) URL without query or fragment", s)
	}
	return base, nil
}

// requestTarget returns {base}{path}[?{query}] for u, where path is u's
// path as sent on the request line. A non-empty stripPrefix (the base
// URL's own path) is removed from the front of the path when present; see
// the package documentation.
func requestTarget(base, stripPrefix string, u *url.URL) string {
	path := u.EscapedPath()
	if path == "" {
		path = "/" // what a client puts on the request line for an empty path
	}
	if stripPrefix != "" && strings.HasPrefix(path, stripPrefix+"/") {
		path = path[len(stripPrefix):]
	}
	t := base + path
	if u.RawQuery != "" {
		t += "?" + u.RawQuery
	}
	return t
}
