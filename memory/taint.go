package memory

import (
	"context"
	"encoding/json"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/ids"
	"github.com/countersign/countersign/store"
)

// TaintRequest is the body of POST /memory/taint (operator): mark a
// source untrusted, or one record.
type TaintRequest struct {
	Source    *Source `json:"source,omitempty" doc:"A source to mark untrusted: its records and their dependents are tainted, and so is every record it gives later."`
	RecordID  string  `json:"recordId,omitempty" validate:"max=64" doc:"Or one record to taint, with its dependents."`
	Rationale string  `json:"rationale" validate:"required,max=1024" doc:"Why, in at least 10 characters; recorded."`
}

// Tainted is the answer of Taint: the records newly tainted, in the order
// the taint reached them.
type Tainted struct {
	Tainted []string `json:"tainted"`
}

type untrustedMark struct {
	Operator  string `json:"operator"`
	Rationale string `json:"rationale"`
	At        string `json:"at"`
}

// Taint marks a source untrusted, or one record tainted, and carries the
// taint along derived_from and cites edges to every dependent record, and
// to records whose source is a tainted record, transitively: each newly
// tainted record gets a memory.tainted entry.
// Operator only. Marking a source is remembered: records it gives later
// are tainted when written.
func (s *Service) Taint(ctx context.Context, q TaintRequest, call OperatorCall) (Tainted, error) {
	if (q.Source == nil) == (q.RecordID == "") {
		return Tainted{}, invalid("source", "give exactly one of source and recordId")
	}
	if q.Source != nil {
		switch q.Source.Kind {
		case "agent", "tool", "url", "operator", "record":
		default:
			return Tainted{}, invalid("source.kind", "must be agent, tool, url, operator or record")
		}
		if err := validName(q.Source.Ref); err != nil {
			return Tainted{}, invalid("source.ref", "%v", err)
		}
	} else if !ids.Valid(ids.Memory, q.RecordID) {
		return Tainted{}, invalid("recordId", "is not a memory record id")
	}
	var out Tainted
	err := s.log.Update(ctx, func(txn store.Txn) error {
		out = Tainted{Tainted: []string{}}
		w := writer{s: s, txn: txn, actor: audit.Actor{Kind: "operator", ID: call.Operator}, requestID: call.RequestID, now: s.stamp()}
		type seed struct{ id, reason, origin string }
		var seeds []seed
		if q.Source != nil {
			b, err := json.Marshal(untrustedMark{Operator: call.Operator, Rationale: call.Rationale, At: formatTime(w.now)})
			if err != nil {
				return err
			}
			if err := txn.Set(untrustKey(*q.Source), b); err != nil {
				return err
			}
			lo := []byte(sourcePrefix(*q.Source))
			it := txn.Iterate(lo, store.PrefixEnd(lo), false)
			for it.Next() {
				seeds = append(seeds, seed{string(it.Key()[len(lo):]), TaintUntrustedSource, q.Source.Kind + ":" + q.Source.Ref})
			}
			if err := it.Close(); err != nil {
				return err
			}
		} else {
			st, err := getStored(txn, q.RecordID)
			if err != nil {
				return err
			}
			if st == nil {
				return s.missing(txn, q.RecordID)
			}
			seeds = append(seeds, seed{q.RecordID, TaintUntrustedSource, "operator:" + call.Operator})
		}
		// Breadth first along derived_from and cites.
		seen := map[string]bool{}
		for len(seeds) > 0 {
			sd := seeds[0]
			seeds = seeds[1:]
			if seen[sd.id] {
				continue
			}
			seen[sd.id] = true
			st, err := getStored(txn, sd.id)
			if err != nil {
				return err
			}
			if st == nil {
				continue
			}
			if st.Taint == nil {
				if err := w.taint(st, sd.reason, sd.origin); err != nil {
					return err
				}
				if err := putStored(txn, st); err != nil {
					return err
				}
				out.Tainted = append(out.Tainted, st.ID)
			}
			deps, err := dependents(txn, st.ID, EdgeDerivedFrom, EdgeCites)
			if err != nil {
				return err
			}
			// Records whose source is this record (kind record) inherit its
			// taint when written after it (Remember); they must inherit it
			// when written before it too, or a record's taint would depend
			// on the order of events.
			lo := []byte(sourcePrefix(Source{Kind: "record", Ref: st.ID}))
			it := txn.Iterate(lo, store.PrefixEnd(lo), false)
			for it.Next() {
				deps = append(deps, string(it.Key()[len(lo):]))
			}
			if err := it.Close(); err != nil {
				return err
			}
			for _, d := range deps {
				seeds = append(seeds, seed{d, TaintInherited, st.ID})
			}
		}
		return nil
	})
	if err != nil {
		return Tainted{}, err
	}
	return out, nil
}
