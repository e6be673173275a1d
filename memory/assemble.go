package memory

import (
	"context"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/countersign/countersign/store"
)

// Tokenizer counts the tokens a text costs in a model's context. Plug in
// an exact BPE tokenizer where one is available offline; the default is
// [EstimateTokenizer].
type Tokenizer interface {
	// Name names the tokenizer and its version; contexts carry it, so a
	// reader knows what the counts mean.
	Name() string
	// Count returns the tokens of text. It must be deterministic.
	Count(text string) int
}

// EstimateTokenizer is the default tokenizer: a documented, deterministic
// estimate, not a model's exact count. A text costs one token per four
// bytes of UTF-8 (rounded up), and at least one per word or punctuation
// mark, whichever is more: about what BPE tokenizers of English text
// spend, and never an underestimate for short, dense text.
type EstimateTokenizer struct{}

// Name implements Tokenizer.
func (EstimateTokenizer) Name() string { return "estimate-v1" }

// Count implements Tokenizer.
func (EstimateTokenizer) Count(text string) int {
	byBytes := (len(text) + 3) / 4
	words, inWord := 0, false
	for _, r := range text {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if !inWord {
				words++
				inWord = true
			}
		case unicode.IsSpace(r):
			inWord = false
		default:
			words++ // punctuation and symbols
			inWord = false
		}
	}
	return max(byBytes, words)
}

// AssembleRequest is the body of POST /memory/assemble.
type AssembleRequest struct {
	Mandate        string     `json:"mandate" validate:"required,max=8192" doc:"A memory mandate granting canRead over the namespace."`
	Namespace      string     `json:"namespace" validate:"required,max=256"`
	Budget         Budget     `json:"budget" validate:"required"`
	Query          string     `json:"query,omitempty" validate:"max=4096" doc:"What the context is for: records that contain none of its terms are left out (irrelevant). Without a query every visible record is a candidate, newest first."`
	Subject        string     `json:"subject,omitempty" validate:"max=256"`
	ValidAt        *time.Time `json:"validAt,omitempty" doc:"Default: now."`
	TxAt           *time.Time `json:"txAt,omitempty" doc:"Default: now; never after now, never before the mandate's asOfFloor."`
	ExcludeTainted *bool      `json:"excludeTainted,omitempty" doc:"Leave tainted records out. Default true: a context goes into a model's prompt."`
}

// MaxCandidates is how many of the newest visible records Assemble
// considers.
const MaxCandidates = 256

const maxOmissions = 100

// Assemble builds a context within a token budget (POST
// /memory/assemble). The candidates are the records Recall would return
// (at most MaxCandidates, newest first). With a query, each is scored by
// the distinct query terms its subject, kind and body contain; a record
// with none is irrelevant. The relevant records are taken by score, then
// newest first, while they fit the budget. When nothing relevant fits,
// the context abstains: abstained true with the reason, never padding and
// never an error.
func (s *Service) Assemble(ctx context.Context, c Caller, q AssembleRequest) (AssembledContext, error) {
	if err := validName(q.Namespace); err != nil {
		return AssembledContext{}, invalid("namespace", "%v", err)
	}
	if err := validFilters(q.Subject, ""); err != nil {
		return AssembledContext{}, err
	}
	if q.Budget.MaxTokens < 1 || q.Budget.MaxTokens > 1_000_000 {
		return AssembledContext{}, invalid("budget.maxTokens", "must be 1 to 1000000")
	}
	m, va, ta, err := s.authorizeRead(q.Mandate, &c, q.Namespace, q.ValidAt, q.TxAt)
	if err != nil {
		return AssembledContext{}, err
	}
	exclude := q.ExcludeTainted == nil || *q.ExcludeTainted
	vw := view{ns: q.Namespace, subject: q.Subject, validAt: va, txAt: ta}
	terms := queryTerms(q.Query)

	type cand struct {
		rec    Record
		tokens int
		score  int
	}
	var cands []cand
	err = s.st.View(ctx, func(r store.Reader) error {
		if err := checkRevoked(r, m); err != nil {
			return err
		}
		cands = cands[:0]
		return s.scan(r, vw, nil, func(st *stored, _ []byte) (bool, error) {
			rec, err := s.hydrate(r, st)
			if err != nil {
				return false, err
			}
			text := render(&rec)
			cands = append(cands, cand{rec: rec, tokens: s.tok.Count(text), score: score(text, terms)})
			return len(cands) < MaxCandidates, nil
		})
	})
	if err != nil {
		return AssembledContext{}, err
	}

	out := AssembledContext{Namespace: q.Namespace, ValidAt: formatTime(va), TxAt: formatTime(ta), Query: q.Query,
		Subject: q.Subject, Budget: q.Budget, Tokenizer: s.tok.Name(), ExcludeTainted: exclude,
		Items: []ContextItem{}, Omitted: []Omission{}}
	omit := func(c cand, reason string) {
		out.OmittedCount++
		if len(out.Omitted) < maxOmissions {
			out.Omitted = append(out.Omitted, Omission{ID: c.rec.ID, Reason: reason, Tokens: c.tokens})
		}
	}
	// Candidates arrive newest first; a stable sort by score keeps that
	// order among equals.
	slices.SortStableFunc(cands, func(a, b cand) int { return b.score - a.score })
	relevant, clean := 0, 0
	for _, c := range cands {
		switch {
		case len(terms) > 0 && c.score == 0:
			omit(c, "irrelevant")
			continue
		case exclude && c.rec.Taint != nil:
			relevant++
			omit(c, "tainted")
			continue
		}
		relevant++
		clean++
		if out.TokensUsed+c.tokens > q.Budget.MaxTokens {
			omit(c, "over_budget")
			continue
		}
		out.TokensUsed += c.tokens
		out.Items = append(out.Items, ContextItem{Record: c.rec, Tokens: c.tokens, Score: c.score})
	}
	if len(out.Items) == 0 {
		out.Abstained = true
		switch {
		case len(cands) == 0:
			out.AbstainReason = "no_records"
		case relevant == 0:
			out.AbstainReason = "no_relevant_records"
		case clean == 0:
			out.AbstainReason = "all_tainted"
		default:
			out.AbstainReason = "nothing_fits_budget"
		}
	}
	if err := s.signContext(&out); err != nil {
		return AssembledContext{}, err
	}
	return out, nil
}

// render is the text of a record a model would read: subject, kind and
// body.
func render(r *Record) string {
	var b strings.Builder
	b.Grow(len(r.Subject) + len(r.Kind) + len(r.Body) + 4)
	b.WriteString(r.Subject)
	b.WriteString(" (")
	b.WriteString(r.Kind)
	b.WriteString("): ")
	b.Write(r.Body)
	return b.String()
}

// queryTerms are the distinct lower-case words of a query, of at least
// two characters.
func queryTerms(q string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if utf8.RuneCountInString(f) >= 2 && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

func score(text string, terms []string) int {
	if len(terms) == 0 {
		return 0
	}
	lower := strings.ToLower(text)
	n := 0
	for _, t := range terms {
		if strings.Contains(lower, t) {
			n++
		}
	}
	return n
}
