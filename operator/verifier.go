package operator

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/store"
)

// DefaultWindow is how far ts may be from the server's clock, either way,
// when [VerifierOptions.Window] is zero (DESIGN §5: 300 s).
const DefaultWindow = 300 * time.Second

// NoncePrefix is the store key prefix this package owns. Each accepted
// nonce is a key NoncePrefix+nonce whose value is "{expiry} {keyid}":
// the Unix second after which [Verifier.SweepNonces] may delete it, and
// the key that spent it (for a person reading the store).
const NoncePrefix = "operator/nonce/"

// VerifierOptions configures a [Verifier]. The zero value gives the
// defaults.
type VerifierOptions struct {
	// Now returns the server's current time. The default is time.Now.
	Now func() time.Time

	// Window is the largest accepted |now − ts|. The default (0) is
	// DefaultWindow; it must be at least one second (ts has one-second
	// resolution). Accepted nonces are kept for twice the window; see
	// [Verifier.SweepNonces].
	Window time.Duration

	// Logger receives the Verifier's own faults (an unreadable nonce
	// record) at Error. Refused requests are not logged: they are returned
	// as errors, and OnRefused sees each. The default is slog.Default().
	Logger *slog.Logger

	// OnRefused, when set, is called once for every request Verify refuses
	// (never for a store failure), before Verify returns, with the
	// request's context, the reason, and the keyid the header claimed ("" if
	// it did not parse; unauthenticated except for ReasonReplayedNonce).
	// The reference server appends an "operator.refused" record entry here.
	// It runs on the request's goroutine: keep it short. How often it may
	// write is the caller's concern; anyone can make requests fail.
	OnRefused func(ctx context.Context, r *http.Request, operationID string, reason Reason, keyID string)
}

// Identity is the operator whose signature opened a request.
type Identity struct {
	// KeyID is the operator key id ("op-alice").
	KeyID string
}

// Verifier checks Svc-Operator signatures: the server half of the scheme.
// It is safe for concurrent use. It holds no resources of its own; the
// store belongs to the caller.
type Verifier struct {
	st        store.Store
	keys      map[string]trustedKey // by kid; never changes after construction
	base      string
	now       func() time.Time
	window    time.Duration
	log       *slog.Logger
	onRefused func(context.Context, *http.Request, string, Reason, string)
}

// NewVerifier returns a Verifier that trusts keys (at least one; unique
// valid kids; Ed25519 or P-256; no key under two kids), records nonces in
// st, and rebuilds signed URLs from baseURL, the server's public base URL
// (trailing "/" removed). opts may be nil; it is copied.
func NewVerifier(st store.Store, keys []PublicKey, baseURL string, opts *VerifierOptions) (*Verifier, error) {
	var o VerifierOptions
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if st == nil {
		return nil, errors.New("operator: verifier: no store")
	}
	if o.Window < time.Second {
		return nil, fmt.Errorf("operator: verifier: window %v is shorter than one second", o.Window)
	}
	idx, err := indexKeys(keys)
	if err != nil {
		return nil, fmt.Errorf("operator: verifier: %w", err)
	}
	base, err := normalizeBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	return &Verifier{
		st: st, keys: idx, base: base, now: o.Now, window: o.Window, log: o.Logger, onRefused: o.OnRefused,
	}, nil
}

// Verify checks the Svc-Operator header of r, a request as the server
// received it, for the operation operationID (its id in /openapi.json)
// with the raw body body (nil or empty for none). It returns the operator
// on success, a [*UnauthorizedError] for a refusal, and any other error
// for a fault (a store failure, an empty operationID): the caller must not
// treat those as the client's fault.
//
// r must carry the URL as received: mount the handler so that nothing
// (http.StripPrefix, a rewriting middleware) changes r.URL before Verify.
// On success the nonce is durably spent: the same header is refused from
// then on, across restarts, and of concurrent requests with one nonce
// exactly one succeeds.
//
// The reference server adapts this to httpserver.OperatorVerifier by
// wrapping the Identity in an httpserver.Operator.
func (v *Verifier) Verify(r *http.Request, operationID string, body []byte) (Identity, error) {
	if err := checkOperationID(operationID); err != nil {
		return Identity{}, err
	}
	id, err := v.verify(r, operationID, body)
	if ue, ok := err.(*UnauthorizedError); ok && v.onRefused != nil {
		v.onRefused(r.Context(), r, operationID, ue.Reason, ue.KeyID)
	}
	if err != nil {
		return Identity{}, err
	}
	return id, nil
}

func (v *Verifier) verify(r *http.Request, operationID string, body []byte) (Identity, error) {
	// RFC 8941 §4.2: several field lines are one value, joined by commas.
	// Empty lines are dropped first, as RFC 9110 §5.6.1 drops empty list
	// elements.
	var lines []string
	for _, l := range r.Header.Values(HeaderName) {
		if l = strings.Trim(l, " \t"); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return Identity{}, refuse(ReasonMissingHeader, "", "the request has no %s header", HeaderName)
	}
	raw := strings.Join(lines, ", ")
	h, err := ParseHeader(raw)
	if err != nil {
		return Identity{}, refuse(ReasonMalformedHeader, "", "%s", strings.TrimPrefix(err.Error(), ErrMalformedHeader.Error()+": "))
	}
	key, ok := v.keys[h.KeyID]
	if !ok {
		return Identity{}, refuse(ReasonUnknownKey, h.KeyID, "keyid %q names no trusted operator key", h.KeyID)
	}

	now := v.now()
	// Sub saturates instead of overflowing, so a ts of ±10^15 s is safe.
	age := now.Sub(time.Unix(h.Timestamp, 0))
	win := int64(v.window / time.Second)
	switch {
	case age > v.window:
		return Identity{}, refuse(ReasonStaleTimestamp, h.KeyID,
			"ts is %s before the server's clock; at most %d s is accepted, so sign again", seconds(age), win)
	case age < -v.window:
		return Identity{}, refuse(ReasonFutureTimestamp, h.KeyID,
			"ts is %s after the server's clock; at most %d s is accepted, so check the signer's clock", seconds(-age), win)
	}

	if len(h.Signature) != signatureLen {
		hint := ""
		if key.alg == algES256 {
			hint = " (r||s as in JWS, not ASN.1 DER)"
		}
		return Identity{}, refuse(ReasonAlgMismatch, h.KeyID,
			"key %q uses %v, whose signatures are %d bytes%s, but sig has %d", h.KeyID, key.alg, signatureLen, hint, len(h.Signature))
	}

	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	target := requestTarget(v.base, "", r.URL)
	msg, err := signedMessage(operationID, method, target, h.Timestamp, h.Nonce, body)
	if err != nil || !verifySignature(key, msg, h.Signature) {
		return Identity{}, refuse(ReasonBadSignature, h.KeyID,
			"the signature by %q does not verify over operation %s, %s %s%s, ts, nonce and the body's digest",
			h.KeyID, operationID, strings.ToUpper(method), v.base+targetPath(r), queryNote(r))
	}

	if err := v.spendNonce(r.Context(), h, now); err != nil {
		if errors.Is(err, errReplayed) {
			return Identity{}, refuse(ReasonReplayedNonce, h.KeyID, "the nonce was already used; sign every request afresh")
		}
		return Identity{}, fmt.Errorf("operator: record nonce: %w", err)
	}
	return Identity{KeyID: key.id}, nil
}

// targetPath is the path of r as used in the signed URL, for details.
func targetPath(r *http.Request) string {
	if p := r.URL.EscapedPath(); p != "" {
		return p
	}
	return "/"
}

// queryNote says that a query was signed without repeating it: a query
// may carry things the client would not want in a log.
func queryNote(r *http.Request) string {
	if r.URL.RawQuery != "" {
		return " (with its query)"
	}
	return ""
}

// seconds formats a duration as whole seconds, rounded away from the
// window so that "301 s" is never reported as "300 s".
func seconds(d time.Duration) string {
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return strconv.FormatInt(s, 10) + " s"
}

func verifySignature(k trustedKey, msg, sig []byte) bool {
	switch k.alg {
	case algEdDSA:
		return ed25519.Verify(k.pub.(ed25519.PublicKey), msg, sig)
	case algES256:
		digest := sha256.Sum256(msg)
		r := new(big.Int).SetBytes(sig[:32])
		s := new(big.Int).SetBytes(sig[32:])
		// ecdsa.Verify refuses r or s outside [1, n-1]. ECDSA signatures
		// are malleable ((r, n−s) verifies too); that is harmless here
		// because replay is keyed on the signed nonce, not on sig.
		return ecdsa.Verify(k.pub.(*ecdsa.PublicKey), digest[:], r, s)
	}
	return false
}

// errReplayed is returned from inside the nonce transaction when the
// nonce exists; it never leaves this package.
var errReplayed = errors.New("operator: nonce replayed")

func nonceKey(nonce string) []byte { return []byte(NoncePrefix + nonce) }

// spendNonce records h.Nonce as used, in one serializable transaction that
// first checks it is new. The record expires at now + 2·window: the nonce
// was accepted with ts ≥ now − window, so its ts stops being acceptable at
// ts + window ≤ now + 2·window, and the record outlives that. Any existing
// record refuses the nonce, expired or not; SweepNonces removes only
// records whose ts can no longer pass the window check anyway.
func (v *Verifier) spendNonce(ctx context.Context, h Header, now time.Time) error {
	key := nonceKey(h.Nonce)
	exp := now.Add(2 * v.window)
	expSec := exp.Unix()
	if exp.Nanosecond() != 0 {
		expSec++ // round up: keeping a nonce a little longer is free
	}
	val := []byte(strconv.FormatInt(expSec, 10) + " " + h.KeyID)
	return v.st.Update(ctx, func(tx store.Txn) error {
		// Retry-safe: reads and writes only through tx, keeps nothing.
		switch _, err := tx.Get(key); {
		case err == nil:
			return errReplayed
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		return tx.Set(key, val)
	})
}

// sweepBatch is how many nonce records one sweep transaction visits, so
// that a sweep never holds one long transaction over a large store.
const sweepBatch = 1024

// SweepNonces deletes the nonce records whose retention (twice the window
// after acceptance) has passed, and returns how many it deleted. Call it
// periodically (once per window is plenty); nonce records otherwise
// accumulate at the rate operators act. A deleted nonce cannot be
// replayed: by then its ts is more than a window old, and Verify refuses
// it as stale before it looks at nonces. The second window of retention
// is slack for the server's clock: a request signed on time stays
// refused even if the clock later steps back by up to about one window.
//
// Each batch of records is its own transaction, so a sweep that fails or
// is cancelled midway keeps what it deleted; it reports the count so far
// with the error. A record it cannot read is kept (refusing its nonce
// forever is the safe side) and logged at Error.
func (v *Verifier) SweepNonces(ctx context.Context) (int, error) {
	now := v.now().Unix()
	lower := []byte(NoncePrefix)
	upper := store.PrefixEnd(lower)
	total := 0
	for {
		var (
			deleted, corrupt int
			next             []byte
		)
		err := v.st.Update(ctx, func(tx store.Txn) error {
			deleted, corrupt, next = 0, 0, nil // fn may run more than once
			var dead [][]byte
			it := tx.Iterate(lower, upper, false)
			for n := 0; it.Next(); n++ {
				if n == sweepBatch {
					next = append([]byte(nil), it.Key()...)
					break
				}
				exp, ok := parseNonceRecord(it.Value())
				switch {
				case !ok:
					corrupt++
				case exp < now:
					dead = append(dead, append([]byte(nil), it.Key()...))
				}
			}
			if err := it.Close(); err != nil {
				return err
			}
			for _, k := range dead {
				if err := tx.Delete(k); err != nil {
					return err
				}
			}
			deleted = len(dead)
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("operator: sweep nonces: %w", err)
		}
		total += deleted
		if corrupt > 0 {
			v.log.LogAttrs(ctx, slog.LevelError, "operator: unreadable nonce records kept",
				slog.Int("count", corrupt))
		}
		if next == nil {
			return total, nil
		}
		lower = next
	}
}

// parseNonceRecord returns the expiry of a nonce record.
func parseNonceRecord(v []byte) (int64, bool) {
	s, _, ok := strings.Cut(string(v), " ")
	if !ok {
		return 0, false
	}
	exp, err := strconv.ParseInt(s, 10, 64)
	return exp, err == nil
}
