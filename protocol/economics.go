package protocol

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/countersign/countersign/pay"
)

// Namespace economics: read-only aggregates over the caller's intents,
// computed from the intents as stored (whose every change is in the
// record; a test recomputes them from the record alone and compares).

// EconomicsSummaryRequest is the body of economics.summary.
type EconomicsSummaryRequest struct {
	Since   time.Time `json:"since" doc:"Intents created at or after (RFC 3339)."`
	Until   time.Time `json:"until" doc:"Intents created before (RFC 3339); after since, at most 366 days later."`
	GroupBy string    `json:"groupBy" validate:"required,oneof=payee rail mandate tag" doc:"payee, rail, mandate or tag (an intent with several tags counts in each; one without in \"\")."`
}

// EconomicsGroup is one group of a summary, in one currency.
type EconomicsGroup struct {
	Key      string `json:"key"`
	Currency string `json:"currency"`
	Intents  int    `json:"intents"`
	// SettledMinor is what settled (captures count what was captured).
	SettledMinor  int64 `json:"settledMinor"`
	RefundedMinor int64 `json:"refundedMinor"`
	// HeldMinor is what is reserved now: waiting for approval, settling or
	// authorized.
	HeldMinor   int64 `json:"heldMinor"`
	Denied      int   `json:"denied"`
	DeniedMinor int64 `json:"deniedMinor"`
	Failed      int   `json:"failed"`
}

// EconomicsSummary is the answer of economics.summary.
type EconomicsSummary struct {
	Since   time.Time        `json:"since"`
	Until   time.Time        `json:"until"`
	GroupBy string           `json:"groupBy"`
	Groups  []EconomicsGroup `json:"groups"`
}

// Summarize folds intents into groups: the one definition of the
// aggregates, shared by the method and the tests that recompute it.
func Summarize(intents []*pay.Intent, groupBy string) []EconomicsGroup {
	idx := map[[2]string]*EconomicsGroup{}
	for _, in := range intents {
		var keys []string
		switch groupBy {
		case "payee":
			keys = []string{in.Payee}
		case "rail":
			keys = []string{in.Terms.Rail}
		case "mandate":
			keys = []string{in.MandateID}
		case "tag":
			keys = in.Tags
			if len(keys) == 0 {
				keys = []string{""}
			}
		}
		for _, k := range keys {
			g := idx[[2]string{k, in.Amount.Currency}]
			if g == nil {
				g = &EconomicsGroup{Key: k, Currency: in.Amount.Currency}
				idx[[2]string{k, in.Amount.Currency}] = g
			}
			g.Intents++
			g.SettledMinor += in.SettledMinor()
			g.RefundedMinor += in.RefundedMinor
			g.HeldMinor += in.ReservedMinor
			switch in.Status {
			case pay.StatusDenied:
				g.Denied++
				g.DeniedMinor += in.Amount.Minor
			case pay.StatusFailed:
				g.Failed++
			}
		}
	}
	out := make([]EconomicsGroup, 0, len(idx))
	for _, g := range idx {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Key != out[j].Key {
			return out[i].Key < out[j].Key
		}
		return out[i].Currency < out[j].Currency
	})
	return out
}

// EconomicsSummaryGet aggregates the caller's intents created in
// [since, until).
func (s *Service) EconomicsSummaryGet(ctx context.Context, call Call, req *EconomicsSummaryRequest) (*EconomicsSummary, error) {
	if !req.Until.After(req.Since) || req.Until.Sub(req.Since) > 366*24*time.Hour {
		return nil, fmt.Errorf("%w: until must be after since, by at most 366 days", errFieldInvalid)
	}
	var intents []*pay.Intent
	err := s.pay.IntentsOf(ctx, call.Agent.KeyID, req.Since, req.Until, func(in *pay.Intent) bool {
		intents = append(intents, in)
		return true
	})
	if err != nil {
		return nil, err
	}
	return &EconomicsSummary{Since: req.Since.UTC(), Until: req.Until.UTC(), GroupBy: req.GroupBy, Groups: Summarize(intents, req.GroupBy)}, nil
}

// EconomicsBudgetRequest is the body of economics.budget.
type EconomicsBudgetRequest struct {
	MandateID string `json:"mandateId,omitempty" validate:"omitempty,max=128" doc:"One mandate; all the caller's live mandates when empty."`
}

// MandateBudget is the burn of one mandate in its current period.
type MandateBudget struct {
	MandateID      string    `json:"mandateId"`
	Currency       string    `json:"currency"`
	PeriodStart    time.Time `json:"periodStart"`
	PeriodEnd      time.Time `json:"periodEnd"`
	CapMinor       int64     `json:"capMinor"`
	CountedMinor   int64     `json:"countedMinor" doc:"Settled plus reserved this period."`
	RemainingMinor int64     `json:"remainingMinor"`
	// BurnPerHourMinor is what was counted this period per hour elapsed.
	BurnPerHourMinor int64 `json:"burnPerHourMinor"`
	// ProjectedExhaustion is when the cap is reached at that rate, if
	// before the period ends; absent otherwise.
	ProjectedExhaustion *time.Time `json:"projectedExhaustion,omitempty"`
}

// EconomicsBudget is the answer of economics.budget.
type EconomicsBudget struct {
	Mandates []MandateBudget `json:"mandates"`
}

// EconomicsBudgetGet reports burn rate and projected exhaustion per
// mandate.
func (s *Service) EconomicsBudgetGet(ctx context.Context, call Call, req *EconomicsBudgetRequest) (*EconomicsBudget, error) {
	var list []pay.KnownMandate
	if req.MandateID != "" {
		v, err := s.MandateGet(ctx, call, &MandateRef{MandateID: req.MandateID})
		if err != nil {
			return nil, err
		}
		list = []pay.KnownMandate{v.Mandate}
	} else {
		page, err := s.MandateList(ctx, call, &MandateListRequest{Limit: maxLimit})
		if err != nil {
			return nil, err
		}
		for _, v := range page.Data {
			list = append(list, v.Mandate)
		}
		slices.SortFunc(list, func(a, b pay.KnownMandate) int { return strings.Compare(a.ID, b.ID) }) // a report, by id
	}
	out := &EconomicsBudget{Mandates: []MandateBudget{}}
	now := s.now().UTC()
	for _, km := range list {
		u, err := s.pay.MandateUsage(ctx, km)
		if err != nil {
			return nil, err
		}
		b := MandateBudget{MandateID: km.ID, Currency: km.Currency, PeriodStart: u.Start, PeriodEnd: u.End,
			CapMinor: km.PerPeriodCapMinor, CountedMinor: u.CountedMinor, RemainingMinor: max(0, km.PerPeriodCapMinor-u.CountedMinor)}
		if hours := now.Sub(u.Start).Hours(); hours > 0 && u.CountedMinor > 0 {
			b.BurnPerHourMinor = int64(float64(u.CountedMinor) / hours)
			if b.BurnPerHourMinor > 0 {
				at := now.Add(time.Duration(float64(b.RemainingMinor) / float64(b.BurnPerHourMinor) * float64(time.Hour))).Truncate(time.Second)
				if at.Before(u.End) {
					b.ProjectedExhaustion = &at
				}
			}
		}
		out.Mandates = append(out.Mandates, b)
	}
	return out, nil
}
