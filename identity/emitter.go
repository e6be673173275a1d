package identity

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/audit"
)

// Facts are what a disclosure states about the running deployment, gathered
// from the components that enforce them (the gate, the contract model, the
// mandates, the operator configuration) at the moment of signing. History
// and the audit anchor are not among them: the service computes those from
// the record itself.
type Facts struct {
	SystemPrompt SystemPrompt
	Constitution Constitution
	Tools        ToolInventory
	Capital      Capital
	Operator     OperatorIdentity
	// Model is optional: a deployment that runs no model states none.
	Model *ModelIdentity
	// Provenance says which component each field comes from; the service
	// adds history's ("audit-chain").
	Provenance map[string]FieldProvenance
}

// issued is one signed disclosure, in both envelopes.
type issued struct {
	v1, jws  []byte
	headSeq  uint64 // the record size its history and anchor are computed to
	issuedAt time.Time
	gen      uint64 // the cache generation it was signed in; see invalidate
}

// disclosureCache keeps the current signed disclosure so that serving it
// costs no signature: a new one is signed (with a new nonce and id) only
// when the cached one has used half its freshness window, the key rotated,
// or the record head moved and the last signature is older than
// Options.Refresh.
type disclosureCache struct {
	cur atomic.Pointer[issued]
	gen atomic.Uint64
	mu  sync.Mutex // serialises refreshes: one signer at a time
}

func (c *disclosureCache) invalidate() { c.gen.Add(1) }

// fresh reports whether it may still be served at now with the record at
// size entries.
func (s *Service) fresh(it *issued, now time.Time, size uint64) bool {
	if it == nil || it.gen != s.cache.gen.Load() {
		return false
	}
	if now.Before(it.issuedAt) || now.After(it.issuedAt.Add(s.ttl/2)) {
		return false
	}
	return it.headSeq == size || now.Sub(it.issuedAt) < s.refresh
}

// Disclose returns this deployment's signed disclosure in the given
// envelope ([EnvelopeV1] or [EnvelopeJWS]), from the cache when it is still
// fresh (see [Options.Refresh]). Every field is read from the running
// deployment: the facts from Options.Facts, the history and the audit
// anchor from the record.
func (s *Service) Disclose(ctx context.Context, envelope string) ([]byte, error) {
	if envelope != EnvelopeV1 && envelope != EnvelopeJWS {
		return nil, fmt.Errorf("identity: unknown envelope %q", envelope)
	}
	if err := s.sync(ctx, false); err != nil {
		return nil, err
	}
	size, err := s.log.Size(ctx)
	if err != nil {
		return nil, fmt.Errorf("identity: disclose: %w", err)
	}
	it := s.cache.cur.Load()
	if !s.fresh(it, s.now(), size) {
		if it, err = s.reissue(ctx); err != nil {
			return nil, err
		}
	}
	if envelope == EnvelopeJWS {
		return it.jws, nil
	}
	return it.v1, nil
}

func (s *Service) reissue(ctx context.Context) (*issued, error) {
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	size, err := s.log.Size(ctx)
	if err != nil {
		return nil, fmt.Errorf("identity: disclose: %w", err)
	}
	if it := s.cache.cur.Load(); s.fresh(it, s.now(), size) {
		return it, nil // another request refreshed it while this one waited
	}
	gen := s.cache.gen.Load()
	issuedAt := s.now()
	d, headSeq, err := s.document(ctx, issuedAt)
	if err != nil {
		return nil, err
	}
	key, _, chain := s.signer()
	canon, err := Canonicalize(&d)
	if err != nil {
		return nil, fmt.Errorf("identity: disclose: %w", err)
	}
	v1, jws, err := SignCanonical(canon, key, chain)
	if err != nil {
		return nil, fmt.Errorf("identity: disclose: %w", err)
	}
	it := &issued{v1: v1, jws: jws, headSeq: headSeq, issuedAt: issuedAt, gen: gen}
	s.cache.cur.Store(it)
	return it, nil
}

// Document builds a new, unsigned disclosure of this deployment: fresh id
// and nonce, the facts as they are now, the history recomputed up to the
// record's current head, which is also its audit anchor.
func (s *Service) Document(ctx context.Context) (Disclosure, error) {
	d, _, err := s.document(ctx, s.now())
	return d, err
}

// document is Document at now; it also returns the record size the
// history was computed to.
func (s *Service) document(ctx context.Context, now time.Time) (Disclosure, uint64, error) {
	if s.facts == nil {
		return Disclosure{}, 0, fmt.Errorf("%w: the service has no Facts source", ErrDisclosureUnavailable)
	}
	f, err := s.facts(ctx)
	if err != nil {
		return Disclosure{}, 0, fmt.Errorf("%w: %v", ErrDisclosureUnavailable, err)
	}
	h, err := s.history.advance(ctx, s.log)
	if err != nil {
		return Disclosure{}, 0, fmt.Errorf("identity: history: %w", err)
	}
	_, agentID, _ := s.signer()
	id, err := randomHex(s.rand, 16)
	if err != nil {
		return Disclosure{}, 0, err
	}
	nonce, err := randomHex(s.rand, 16)
	if err != nil {
		return Disclosure{}, 0, err
	}
	prov := map[string]FieldProvenance{}
	for k, v := range f.Provenance {
		prov[k] = v
	}
	prov["history"] = FieldProvenance{DerivedFrom: "audit-chain", AttestedBy: s.log.Origin()}
	hint := "Every entry commits to the previous entry's hash; the record's signed checkpoints and proofs are served at GET /audit/checkpoint and /audit/entries/{seq}, and `countersign audit verify --url <base>` recomputes the chain and these counts."
	if s.baseURL != "" {
		hint = fmt.Sprintf("Every entry commits to the previous entry's hash; verify the chain at %s/audit/checkpoint and %s/audit/entries/{seq} with the record key (origin %s), or run `countersign audit verify --url %s`.",
			s.baseURL, s.baseURL, s.log.Origin(), s.baseURL)
	}
	d := Disclosure{
		Version:      1,
		DisclosureID: "dsc_" + id,
		AgentID:      agentID,
		IssuedAt:     Timestamp(now),
		ValidUntil:   Timestamp(now.Add(s.ttl)),
		Nonce:        nonce,
		AuditAnchor:  h.Head,
		SystemPrompt: f.SystemPrompt,
		Constitution: f.Constitution,
		Tools:        f.Tools,
		Capital:      f.Capital,
		Operator:     f.Operator,
		History: History{
			ChainAnchor:      h.Head,
			Summary:          h.Summary(),
			VerificationHint: hint,
		},
		Model:      f.Model,
		Provenance: prov,
	}
	return d, h.Seq, nil
}

func randomHex(r io.Reader, n int) (string, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", fmt.Errorf("identity: randomness: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// historyCounter keeps the deployment's history summary, advanced
// incrementally over the record: each refresh reads only the entries
// appended since the last one. The counts are a pure function of the
// record, so anyone holding it recomputes them ([Summarize]).
type historyCounter struct {
	mu sync.Mutex // guards t; held while advancing, so one reader scans
	t  Tally
}

// Tally is the deployment history recomputed from a prefix of the record:
// what ADP's history.summary states.
type Tally struct {
	// Seq is the last entry counted and Head its hash.
	Seq  uint64
	Head string
	// Decisions counts gate.decision entries, Blocked those whose outcome
	// is deny, Settled payment.settled entries.
	Decisions, Settled, Blocked uint64
	// FirstSeen is the time of the record's first entry, LastActive the
	// time of its latest gate decision (zero when none).
	FirstSeen, LastActive time.Time
}

// Add counts one entry; entries must be added in sequence order.
func (t *Tally) Add(e audit.Entry) {
	at, _ := time.Parse(time.RFC3339Nano, e.At)
	if t.FirstSeen.IsZero() {
		t.FirstSeen = at
	}
	switch e.Type {
	case "gate.decision":
		t.Decisions++
		t.LastActive = at
		var d struct {
			Outcome string `json:"outcome"`
		}
		if json.Unmarshal(e.Data, &d) == nil && d.Outcome == "deny" {
			t.Blocked++
		}
	case "payment.settled":
		t.Settled++
	}
	t.Seq, t.Head = e.Seq, e.Hash
}

// Summarize recomputes the tally of the record's entries 1..to (0: up to
// the newest entry).
func Summarize(ctx context.Context, lg *audit.Log, to uint64) (Tally, error) {
	var t Tally
	for e, err := range lg.Entries(ctx, 1, to) {
		if err != nil {
			return Tally{}, err
		}
		t.Add(e)
	}
	return t, nil
}

// Summary is the tally as ADP's history.summary.
func (t Tally) Summary() HistorySummary {
	s := HistorySummary{
		TotalDecisions: int64(t.Decisions),
		SettledCount:   int64(t.Settled),
		BlockedCount:   int64(t.Blocked),
	}
	if !t.FirstSeen.IsZero() {
		s.FirstSeen = Timestamp(t.FirstSeen)
	}
	if !t.LastActive.IsZero() {
		s.LastActive = Timestamp(t.LastActive)
	}
	return s
}

// advance counts the entries appended since the last call and returns the
// tally up to the record's current head.
func (h *historyCounter) advance(ctx context.Context, lg *audit.Log) (Tally, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	size, err := lg.Size(ctx)
	if err != nil {
		return Tally{}, err
	}
	if size > h.t.Seq {
		t := h.t // a copy: an error halfway leaves the counter as it was
		for e, err := range lg.Entries(ctx, h.t.Seq+1, size) {
			if err != nil {
				return Tally{}, err
			}
			t.Add(e)
		}
		h.t = t
	}
	return h.t, nil
}
