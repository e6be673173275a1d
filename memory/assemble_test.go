package memory

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func (f *fixture) assemble(q AssembleRequest) (AssembledContext, error) {
	f.t.Helper()
	q.Namespace = "ns"
	if q.Mandate == "" {
		q.Mandate = f.mandate("ns", nil)
	}
	return f.svc.Assemble(f.t.Context(), f.caller, q)
}

// checkContext checks what holds of every context: it verifies, the
// tokens add up and stay within the budget, every item's count is the
// tokenizer's count of its rendering, an abstention has no items.
func checkContext(t *testing.T, f *fixture, c AssembledContext, tok Tokenizer) {
	t.Helper()
	if v := Verify(f.svc.VerifierKey(), mustJSON(t, c)); !v.Holds || v.Records != len(c.Items) {
		t.Fatalf("the context does not verify: %+v", v)
	}
	sum := 0
	for _, it := range c.Items {
		if n := tok.Count(render(&it.Record)); it.Tokens != n {
			t.Fatalf("%s counted %d tokens, the tokenizer says %d", it.Record.ID, it.Tokens, n)
		}
		sum += it.Tokens
	}
	if sum != c.TokensUsed || c.TokensUsed > c.Budget.MaxTokens {
		t.Fatalf("tokensUsed %d, items sum %d, budget %d", c.TokensUsed, sum, c.Budget.MaxTokens)
	}
	if c.Abstained != (len(c.Items) == 0) || c.Abstained != (c.AbstainReason != "") {
		t.Fatalf("abstained %v (%q) with %d items", c.Abstained, c.AbstainReason, len(c.Items))
	}
	if c.Tokenizer != tok.Name() {
		t.Fatalf("tokenizer %q, want %q", c.Tokenizer, tok.Name())
	}
	if c.OmittedCount < len(c.Omitted) || len(c.Omitted) > 100 {
		t.Fatalf("omitted %d of %d", len(c.Omitted), c.OmittedCount)
	}
}

// referenceAssemble is the documented rule: candidates newest first; with
// a query, those containing none of its terms are irrelevant; tainted ones
// are left out when excluded; the rest by score, then newest first, each
// taken when it still fits.
func referenceAssemble(cands []Record, terms []string, tok Tokenizer, budget int, exclude bool) (items []string, omitted map[string]string) {
	type c struct {
		r      Record
		score  int
		tokens int
	}
	var cs []c
	for _, r := range cands {
		text := strings.ToLower(render(&r))
		n := 0
		for _, term := range terms {
			if strings.Contains(text, term) {
				n++
			}
		}
		cs = append(cs, c{r, n, tok.Count(render(&r))})
	}
	slices.SortStableFunc(cs, func(a, b c) int { return b.score - a.score })
	omitted = map[string]string{}
	used := 0
	for _, x := range cs {
		switch {
		case len(terms) > 0 && x.score == 0:
			omitted[x.r.ID] = "irrelevant"
		case exclude && x.r.Taint != nil:
			omitted[x.r.ID] = "tainted"
		case used+x.tokens > budget:
			omitted[x.r.ID] = "over_budget"
		default:
			used += x.tokens
			items = append(items, x.r.ID)
		}
	}
	return items, omitted
}

func contextIDs(c AssembledContext) []string {
	var out []string
	for _, it := range c.Items {
		out = append(out, it.Record.ID)
	}
	return out
}

func TestAssembleBudget(t *testing.T) {
	f := newFixture(t, nil)
	green := f.mustRemember("ns", fact{subject: "d1", body: "likes green tea"})
	both := f.mustRemember("ns", fact{subject: "d2", body: "likes black tea and coffee"})
	coffee := f.mustRemember("ns", fact{subject: "d3", body: "likes coffee very much indeed, a large cup every single morning before work"})
	chess := f.mustRemember("ns", fact{subject: "d4", body: "plays chess"})
	tok := EstimateTokenizer{}
	cost := func(r Record) int { return tok.Count(render(&r)) }

	// The scenario by hand: both (2 terms) first, then of the one-term
	// records the newest (coffee) does not fit, the older (green) does.
	budget := cost(both) + cost(green)
	if cost(coffee) <= cost(green) {
		t.Fatal("the scenario needs coffee to cost more than green")
	}
	c, err := f.assemble(AssembleRequest{Query: "Tea, COFFEE!", Budget: Budget{MaxTokens: budget}})
	if err != nil {
		t.Fatal(err)
	}
	checkContext(t, f, c, tok)
	if !slices.Equal(contextIDs(c), []string{both.ID, green.ID}) || c.TokensUsed != budget {
		t.Fatalf("items %v (%d tokens), want both, green", contextIDs(c), c.TokensUsed)
	}
	if c.Items[0].Score != 2 || c.Items[1].Score != 1 {
		t.Fatalf("scores %d, %d", c.Items[0].Score, c.Items[1].Score)
	}
	want := []Omission{{ID: coffee.ID, Reason: "over_budget", Tokens: cost(coffee)}, {ID: chess.ID, Reason: "irrelevant", Tokens: cost(chess)}}
	if !slices.Equal(c.Omitted, want) || c.OmittedCount != 2 || c.Abstained {
		t.Fatalf("omitted %+v (%d), want %+v", c.Omitted, c.OmittedCount, want)
	}

	// Every budget, with and without a query: the documented rule.
	all, err := f.recallAll("ns", RecallRequest{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, query := range []string{"", "tea coffee", "chess", "likes"} {
		for budget := 1; budget <= 80; budget++ {
			c, err := f.assemble(AssembleRequest{Query: query, Budget: Budget{MaxTokens: budget}})
			if err != nil {
				t.Fatal(err)
			}
			checkContext(t, f, c, tok)
			items, omitted := referenceAssemble(all, queryTerms(query), tok, budget, true)
			if !slices.Equal(contextIDs(c), items) || len(c.Omitted) != len(omitted) || c.OmittedCount != len(omitted) {
				t.Fatalf("query %q budget %d: items %v omitted %+v; want %v %v", query, budget, contextIDs(c), c.Omitted, items, omitted)
			}
			for _, o := range c.Omitted {
				if omitted[o.ID] != o.Reason {
					t.Fatalf("query %q budget %d: %s omitted as %s, want %s", query, budget, o.ID, o.Reason, omitted[o.ID])
				}
			}
		}
	}
}

func TestAssembleAbstention(t *testing.T) {
	for _, tc := range []struct {
		name   string
		facts  []fact
		taint  []int // facts to taint
		q      AssembleRequest
		reason string
	}{
		{name: "no records", q: AssembleRequest{Budget: Budget{MaxTokens: 100}}, reason: "no_records"},
		{name: "no records at that time", facts: []fact{{subject: "s", body: "likes tea", from: t0}},
			q: AssembleRequest{Budget: Budget{MaxTokens: 100}, ValidAt: ptr(t0.Add(-time.Hour))}, reason: "no_records"},
		{name: "nothing relevant", facts: []fact{{subject: "s", body: "likes tea"}},
			q: AssembleRequest{Query: "astronomy", Budget: Budget{MaxTokens: 100}}, reason: "no_relevant_records"},
		{name: "query without terms of two letters", facts: []fact{{subject: "s", body: "likes tea"}},
			q: AssembleRequest{Query: "a b c", Budget: Budget{MaxTokens: 100}}, reason: ""},
		{name: "all tainted", facts: []fact{{subject: "s", body: "likes tea"}, {subject: "t", body: "plays chess"}}, taint: []int{0},
			q: AssembleRequest{Query: "tea", Budget: Budget{MaxTokens: 100}}, reason: "all_tainted"},
		{name: "all tainted without a query", facts: []fact{{subject: "s", body: "likes tea"}}, taint: []int{0},
			q: AssembleRequest{Budget: Budget{MaxTokens: 100}}, reason: "all_tainted"},
		{name: "tainted but included", facts: []fact{{subject: "s", body: "likes tea"}}, taint: []int{0},
			q: AssembleRequest{Budget: Budget{MaxTokens: 100}, ExcludeTainted: ptr(false)}, reason: ""},
		{name: "nothing fits", facts: []fact{{subject: "s", body: "likes tea"}},
			q: AssembleRequest{Budget: Budget{MaxTokens: 1}}, reason: "nothing_fits_budget"},
		{name: "the clean one does not fit", facts: []fact{{subject: "s", body: "likes tea"}, {subject: "t", body: "likes tea a lot, every day of the week"}}, taint: []int{0},
			q: AssembleRequest{Query: "tea", Budget: Budget{MaxTokens: 8}}, reason: "nothing_fits_budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			var recs []Record
			for _, x := range tc.facts {
				recs = append(recs, f.mustRemember("ns", x))
			}
			for _, i := range tc.taint {
				if _, err := f.svc.Taint(t.Context(), TaintRequest{RecordID: recs[i].ID, Rationale: "found to be wrong"}, f.op()); err != nil {
					t.Fatal(err)
				}
			}
			c, err := f.assemble(tc.q)
			if err != nil {
				t.Fatalf("an abstention is an answer, not an error: %v", err)
			}
			checkContext(t, f, c, EstimateTokenizer{})
			if c.AbstainReason != tc.reason || c.Abstained != (tc.reason != "") {
				t.Fatalf("abstained %v %q, want %q (items %v, omitted %+v)", c.Abstained, c.AbstainReason, tc.reason, contextIDs(c), c.Omitted)
			}
			if c.Abstained && (len(c.Items) != 0 || c.TokensUsed != 0) {
				t.Fatalf("an abstention padded: %+v", c.Items)
			}
		})
	}
}

func TestEstimateTokenizer(t *testing.T) {
	for _, tc := range []struct {
		text string
		want int
	}{
		{"", 0},
		{"a", 1},           // 1 byte → 1; 1 word
		{"abcd", 1},        // 4 bytes → 1
		{"abcde", 2},       // 5 bytes → 2
		{"abcdefgh", 2},    // 8 bytes → 2
		{"abcdefghi", 3},   // 9 bytes → 3
		{"a b c d e", 5},   // 9 bytes → 3, but 5 words
		{"!!!!", 4},        // 4 bytes → 1, but 4 marks
		{"a,b", 3},         // word, mark, word
		{"hello world", 3}, // 11 bytes → 3; 2 words
		{"hello, world.", 4},
		{"x1 y2", 2},       // letters and digits make one word
		{"héllo", 2},       // 6 bytes of UTF-8 → 2; 1 word
		{"日本語", 3},         // 9 bytes → 3; 1 word
		{"\t\n  ", 1},      // 4 bytes → 1; no words
		{"😀😀", 2},          // 8 bytes → 2; 2 symbols
		{`"likes tea"`, 4}, // 11 bytes → 3; quote, word, word, quote
		{strings.Repeat("word ", 100), 125},
	} {
		if got := (EstimateTokenizer{}).Count(tc.text); got != tc.want {
			t.Errorf("Count(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
	if n := (EstimateTokenizer{}).Name(); n != "estimate-v1" {
		t.Errorf("name %q", n)
	}
}

// wordTokenizer counts space-separated fields: a custom tokenizer.
type wordTokenizer struct{}

func (wordTokenizer) Name() string          { return "words-v0" }
func (wordTokenizer) Count(text string) int { return len(strings.Fields(text)) }

func TestAssembleCustomTokenizer(t *testing.T) {
	f := newFixture(t, &Options{Tokenizer: wordTokenizer{}})
	a := f.mustRemember("ns", fact{subject: "s1", body: "one two three"})       // s1 (note): "one two three" → 5
	b := f.mustRemember("ns", fact{subject: "s2", body: "four five six seven"}) // → 6
	c, err := f.assemble(AssembleRequest{Budget: Budget{MaxTokens: 5}})
	if err != nil {
		t.Fatal(err)
	}
	checkContext(t, f, c, wordTokenizer{})
	if c.Tokenizer != "words-v0" || !slices.Equal(contextIDs(c), []string{a.ID}) || c.TokensUsed != 5 {
		t.Fatalf("context %+v", c)
	}
	if len(c.Omitted) != 1 || c.Omitted[0] != (Omission{ID: b.ID, Reason: "over_budget", Tokens: 6}) {
		t.Fatalf("omitted %+v", c.Omitted)
	}
}

func TestAssembleOmissionsCapped(t *testing.T) {
	f := newFixture(t, nil)
	for i := range 105 {
		f.mustRemember("ns", fact{subject: fmt.Sprintf("s%d", i), body: "plays chess"})
	}
	f.mustRemember("ns", fact{subject: "tea", body: "likes tea"})
	c, err := f.assemble(AssembleRequest{Query: "tea", Budget: Budget{MaxTokens: 100}})
	if err != nil {
		t.Fatal(err)
	}
	checkContext(t, f, c, EstimateTokenizer{})
	if len(c.Items) != 1 || len(c.Omitted) != 100 || c.OmittedCount != 105 {
		t.Fatalf("%d items, %d omitted of %d", len(c.Items), len(c.Omitted), c.OmittedCount)
	}
}

// TestAssembleTwoClocks: assemble sees what recall sees at the same point
// of view.
func TestAssembleTwoClocks(t *testing.T) {
	f := newFixture(t, nil)
	paris := f.mustRemember("ns", fact{subject: "user:1", body: "lives in Paris", from: t0.Add(-48 * time.Hour)})
	before := f.clock.Now()
	f.clock.Advance(time.Hour)
	berlin := f.mustRemember("ns", fact{subject: "user:1", body: "lives in Berlin", from: t0})
	for _, tc := range []struct {
		name    string
		validAt *time.Time
		txAt    *time.Time
		want    string
	}{
		{"now", nil, nil, berlin.ID},
		{"as known before Berlin", nil, &before, paris.ID},
		{"valid before Berlin", ptr(t0.Add(-time.Hour)), nil, ""}, // the remainder of Paris
	} {
		c, err := f.assemble(AssembleRequest{Query: "lives", ValidAt: tc.validAt, TxAt: tc.txAt, Budget: Budget{MaxTokens: 100}})
		if err != nil {
			t.Fatal(err)
		}
		checkContext(t, f, c, EstimateTokenizer{})
		if len(c.Items) != 1 || tc.want != "" && c.Items[0].Record.ID != tc.want {
			t.Fatalf("%s: %v", tc.name, contextIDs(c))
		}
		if tc.want == "" && string(c.Items[0].Record.Body) != `"lives in Paris"` {
			t.Fatalf("%s: %s", tc.name, c.Items[0].Record.Body)
		}
	}
}

func TestAssembleRefusals(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		name string
		q    AssembleRequest
		want error
	}{
		{"no budget", AssembleRequest{}, ErrInvalid},
		{"negative budget", AssembleRequest{Budget: Budget{MaxTokens: -1}}, ErrInvalid},
		{"too big a budget", AssembleRequest{Budget: Budget{MaxTokens: 1_000_001}}, ErrInvalid},
		{"txAt in the future", AssembleRequest{Budget: Budget{MaxTokens: 10}, TxAt: ptr(f.clock.Now().Add(time.Hour))}, ErrInvalid},
	} {
		if _, err := f.assemble(tc.q); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if _, err := f.svc.Assemble(t.Context(), f.caller, AssembleRequest{Mandate: f.mandate("ns", nil), Namespace: "", Budget: Budget{MaxTokens: 10}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("no namespace: %v", err)
	}
}
