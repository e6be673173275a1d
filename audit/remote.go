package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

// Fetcher reads a record from wherever it is published: a running server
// ([HTTPFetcher]), files, a cache, or a [*Log] opened with its key
// ([Open]), which implements it. [VerifyRemote] trusts nothing a Fetcher
// returns.
type Fetcher interface {
	// Checkpoint returns the latest signed checkpoint, as
	// GET /audit/checkpoint serves it.
	Checkpoint(ctx context.Context) (Checkpoint, error)
	// Page returns up to limit entries after cursor in ascending seq
	// order, as GET /audit?cursor=&limit= serves them: cursor "" starts
	// at seq 1, and otherwise is the NextCursor of the previous page.
	Page(ctx context.Context, cursor string, limit int) (Page, error)
}

// RemoteOptions configures [VerifyRemote]. The zero value, or a nil
// pointer, gives the defaults.
type RemoteOptions struct {
	// Signatures also checks the Ed25519 signature of every entry that
	// carries one of its own ([Record].Signed, or an entry written before
	// checkpoints were signed per commit). Without it such an entry is
	// still authenticated, like every other, by the signed checkpoint.
	Signatures bool

	// Trusted is a checkpoint the caller verified earlier, for example
	// kept from the previous run. The served record must extend it: its
	// first Trusted.TreeSize entries must hash to Trusted's root, so a
	// server that rewrote history since, or shows this caller a fork, fails
	// with ErrTampered even if it re-signed everything. A served checkpoint
	// smaller than Trusted (a rollback) fails too.
	Trusted *Checkpoint

	// Progress, if set, is called after each page with the number of
	// entries verified so far and the served checkpoint's tree size.
	Progress func(done, total uint64)
}

// RemoteReport is what [VerifyRemote] established. On an error it holds
// what was established before the failure.
type RemoteReport struct {
	// Checkpoint is the served checkpoint, once its signature verified.
	Checkpoint Checkpoint
	// Verified is the number of entries, from seq 1, whose hashes and
	// links verified. After a successful VerifyRemote it is
	// Checkpoint.TreeSize, and the Merkle root over them is the signed one.
	Verified uint64
}

// VerifyRemote verifies a whole record as a client sees it, trusting only
// the verifier key: it fetches the latest checkpoint and checks its
// signature, then pages every entry from seq 1 up to the checkpoint's
// tree size and checks each one's hash, seq and prev link (a
// [ChainVerifier]), and finally that the Merkle root over them is the
// root the checkpoint signs. With opts.Trusted it also checks that the
// record extends that earlier checkpoint. Entries past the checkpoint's
// size (the record grew meanwhile) are not read.
//
// A record that does not verify yields an error matching ErrTampered: a
// *[TamperError] naming the first bad seq for a bad entry, a missing one
// (the server served fewer entries than its checkpoint states) or a root
// that does not match. A malformed verifier key yields ErrBadVerifierKey.
// An error of the fetcher is returned as it is.
func VerifyRemote(ctx context.Context, verifierKey string, f Fetcher, opts *RemoteOptions) (RemoteReport, error) {
	var o RemoteOptions
	if opts != nil {
		o = *opts
	}
	var rep RemoteReport
	v, pub, err := parseVerifierKey(strings.TrimSpace(verifierKey))
	if err != nil {
		return rep, err
	}
	trustedSize := uint64(0)
	trustedRoot := tlog.Hash(emptyTreeHash())
	if o.Trusted != nil {
		size, root, err := openCheckpoint(v, *o.Trusted)
		if err != nil {
			return rep, fmt.Errorf("audit: verify remote: trusted %w", err)
		}
		trustedSize, trustedRoot = size, root
	}
	cp, err := f.Checkpoint(ctx)
	if err != nil {
		return rep, err
	}
	size, root, err := openCheckpoint(v, cp)
	if err != nil {
		return rep, fmt.Errorf("audit: verify remote: served %w", err)
	}
	rep.Checkpoint = cp
	if size < trustedSize {
		return rep, fmt.Errorf("audit: verify remote: the served checkpoint states %d entries, fewer than the trusted one's %d: %w", size, trustedSize, ErrTampered)
	}

	cv := NewChainVerifier(pub, o.Signatures)
	checkTrusted := func() error {
		if o.Trusted != nil && cv.Size() == trustedSize && cv.Root() != trustedRoot {
			return &TamperError{Seq: trustedSize, Reason: fmt.Sprintf("the served entries do not extend the trusted checkpoint of %d entries: the record forked", trustedSize)}
		}
		return nil
	}
	if err := checkTrusted(); err != nil {
		return rep, err
	}
	cursor := ""
	for cv.Size() < size {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		page, err := f.Page(ctx, cursor, MaxPageLimit)
		if err != nil {
			return rep, err
		}
		for _, e := range page.Data {
			if cv.Size() == size {
				break
			}
			if err := cv.Add(e); err != nil {
				return rep, err
			}
			rep.Verified = cv.Size()
			if err := checkTrusted(); err != nil {
				return rep, err
			}
		}
		if o.Progress != nil {
			o.Progress(cv.Size(), size)
		}
		if page.NextCursor == nil || len(page.Data) == 0 {
			break
		}
		cursor = *page.NextCursor
	}
	if cv.Size() != size {
		return rep, &TamperError{Seq: cv.Size() + 1, Reason: fmt.Sprintf("the checkpoint states %d entries, the server served %d", size, cv.Size())}
	}
	if cv.Root() != root {
		return rep, &TamperError{Seq: size, Reason: "Merkle root of the served entries does not match the signed checkpoint"}
	}
	return rep, nil
}

// HTTPFetcher is a [Fetcher] that reads a running Countersign server's
// record over HTTP: GET /audit/checkpoint and GET /audit. The zero value
// is not usable: BaseURL is required.
type HTTPFetcher struct {
	// BaseURL is the server's base URL, e.g. "https://pay.example.com".
	BaseURL string
	// Client makes the requests. The default is http.DefaultClient.
	Client *http.Client
	// Credential, if set, is an agent credential sent as
	// "Authorization: Bearer <Credential>": the record's routes need one.
	Credential string
}

var _ Fetcher = (*Log)(nil)

// maxFetchBody bounds a response body HTTPFetcher reads.
const maxFetchBody = 16 << 20

// HTTPError is the error of an [HTTPFetcher] request the server answered
// with a status other than 200 OK.
type HTTPError struct {
	URL        string // the URL requested
	StatusCode int    // e.g. 401
	Status     string // e.g. "401 Unauthorized"
	Body       string // the start of the response body, trimmed
}

func (e *HTTPError) Error() string {
	return "GET " + e.URL + ": " + e.Status + ": " + e.Body
}

// Checkpoint fetches GET /audit/checkpoint.
func (h *HTTPFetcher) Checkpoint(ctx context.Context) (Checkpoint, error) {
	var cp Checkpoint
	err := h.get(ctx, "/audit/checkpoint", &cp)
	return cp, err
}

// Page fetches GET /audit with the cursor and, if limit is not 0, the
// limit.
func (h *HTTPFetcher) Page(ctx context.Context, cursor string, limit int) (Page, error) {
	q := url.Values{}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := "/audit"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var p Page
	err := h.get(ctx, path, &p)
	return p, err
}

// get fetches BaseURL+path and decodes the JSON answer into v. A transport
// error is returned as the client returned it (a *url.Error), a status
// other than 200 as an *HTTPError.
func (h *HTTPFetcher) get(ctx context.Context, path string, v any) error {
	u := strings.TrimRight(h.BaseURL, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if h.Credential != "" {
		req.Header.Set("Authorization", "Bearer "+h.Credential)
	}
	c := h.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxFetchBody))
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(body))
		if len(msg) > 4096 {
			msg = msg[:4096] + "…"
		}
		return &HTTPError{URL: u, StatusCode: resp.StatusCode, Status: resp.Status, Body: msg}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}
