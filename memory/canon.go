package memory

import (
	"fmt"
	"strconv"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/jcsenc"
	"github.com/gowebpki/jcs"
)

// The artifacts a recall, an assembly and a remember hand out are signed
// over their RFC 8785 form. A general canonicaliser parses the JSON it is
// given and writes it back, which for a page of a hundred records costs
// more than everything else the recall does; for these fixed shapes the
// canonical bytes are written directly (members in sorted order, strings
// by jcsenc, bodies and entry data copied when they are canonical, as
// nearly all are). The verifier keeps
// the general canonicaliser, and TestCanonicalMatchesJCS holds the two
// equal for every artifact shape.

func appendStr(b []byte, name, v string) []byte {
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `":`...)
	return jcsenc.AppendString(b, v)
}

func appendInt(b []byte, name string, v int64) []byte {
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `":`...)
	return strconv.AppendInt(b, v, 10)
}

func appendBool(b []byte, name string, v bool) []byte {
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `":`...)
	return strconv.AppendBool(b, v)
}

func appendOptStr(b []byte, name string, v *string) []byte {
	if v == nil {
		return append(append(append(b, '"'), name...), `":null`...)
	}
	return appendStr(b, name, *v)
}

// appendContentJCS writes what a record's content digest covers (see
// Record.content): body (canon, its RFC 8785 form), edges, id, kind,
// namespace, recordedAt, salt, source, subject, validFrom, validTo.
func appendContentJCS(b []byte, r *Record, canon []byte) []byte {
	b = append(b, `{"body":`...)
	b = append(b, canon...)
	b = appendEdges(b, r.Edges)
	b = appendStr(b, "id", r.ID)
	b = append(b, ',')
	b = appendStr(b, "kind", r.Kind)
	b = append(b, ',')
	b = appendStr(b, "namespace", r.Namespace)
	b = append(b, ',')
	b = appendStr(b, "recordedAt", formatTime(r.RecordedAt))
	b = append(b, ',')
	b = appendStr(b, "salt", r.Seal.Salt)
	b = append(b, ',')
	b = appendSource(b, r.Source)
	b = appendStr(b, "subject", r.Subject)
	b = append(b, ',')
	b = appendStr(b, "validFrom", formatTime(r.ValidFrom))
	b = append(b, ',')
	b = appendOptStr(b, "validTo", optTime(r.ValidTo))
	return append(b, '}')
}

// appendEdges writes `,"edges":[...],`.
func appendEdges(b []byte, edges []Edge) []byte {
	b = append(b, `,"edges":[`...)
	for i, e := range edges {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = appendStr(b, "to", e.To)
		b = append(b, ',')
		b = appendStr(b, "type", e.Type)
		b = append(b, '}')
	}
	return append(b, "],"...)
}

// appendSource writes `"source":{...},`.
func appendSource(b []byte, s Source) []byte {
	b = append(b, `"source":{`...)
	b = appendStr(b, "kind", s.Kind)
	b = append(b, ',')
	b = appendStr(b, "ref", s.Ref)
	return append(b, "},"...)
}

// appendRecordJCS writes a record: body, edges, id, kind, namespace,
// recordedAt, seal, source, subject, supersededAt, taint, validFrom,
// validTo. The body must be canonical (Remember stores it so).
func appendRecordJCS(b []byte, r *Record) ([]byte, error) {
	b = append(b, `{"body":`...)
	if r.bodyCanonical {
		b = append(b, r.Body...)
	} else {
		c, err := jcs.Transform(r.Body)
		if err != nil {
			return nil, err
		}
		b = append(b, c...)
	}
	b = appendEdges(b, r.Edges)
	b = appendStr(b, "id", r.ID)
	b = append(b, ',')
	b = appendStr(b, "kind", r.Kind)
	b = append(b, ',')
	b = appendStr(b, "namespace", r.Namespace)
	b = append(b, ',')
	b = appendStr(b, "recordedAt", formatTime(r.RecordedAt))
	b = append(b, `,"seal":{`...)
	b = appendStr(b, "contentDigest", r.Seal.ContentDigest)
	b = append(b, `,"entry":`...)
	var err error
	if b, err = audit.AppendCanonical(b, &r.Seal.Entry); err != nil {
		return nil, err
	}
	b = append(b, ',')
	b = appendStr(b, "salt", r.Seal.Salt)
	b = append(b, "},"...)
	b = appendSource(b, r.Source)
	b = appendStr(b, "subject", r.Subject)
	b = append(b, ',')
	b = appendOptStr(b, "supersededAt", optTime(r.SupersededAt))
	b = append(b, `,"taint":`...)
	if t := r.Taint; t == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '{')
		b = appendStr(b, "at", formatTime(t.At))
		b = append(b, ',')
		b = appendInt(b, "auditSeq", int64(t.AuditSeq))
		b = append(b, ',')
		b = appendStr(b, "origin", t.Origin)
		b = append(b, ',')
		b = appendStr(b, "reason", t.Reason)
		b = append(b, '}')
	}
	b = append(b, ',')
	b = appendStr(b, "validFrom", formatTime(r.ValidFrom))
	b = append(b, ',')
	b = appendOptStr(b, "validTo", optTime(r.ValidTo))
	return append(b, '}'), nil
}

// canonicalArtifact is the RFC 8785 form of an artifact without its
// signature, written directly for the three hot shapes.
func canonicalArtifact(v any) ([]byte, bool, error) {
	var b []byte
	var err error
	switch a := v.(type) {
	case *RecordArtifact:
		b = append(make([]byte, 0, 2048), '{')
		b = appendStr(b, "issuedAt", a.IssuedAt)
		b = append(b, `,"record":`...)
		if b, err = appendRecordJCS(b, &a.Record); err != nil {
			return nil, true, err
		}
		b = append(b, ',')
		b = appendStr(b, "type", a.Type)
	case *RecallPage:
		b = append(make([]byte, 0, 2048*(1+len(a.Data))), '{')
		if a.Cursor != "" {
			b = appendStr(b, "cursor", a.Cursor)
			b = append(b, ',')
		}
		b = append(b, `"data":[`...)
		for i := range a.Data {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendRecordJCS(b, &a.Data[i]); err != nil {
				return nil, true, err
			}
		}
		b = append(b, "],"...)
		b = appendBool(b, "excludeTainted", a.ExcludeTainted)
		b = append(b, ',')
		b = appendBool(b, "hasMore", a.HasMore)
		b = append(b, ',')
		b = appendStr(b, "issuedAt", a.IssuedAt)
		if a.Kind != "" {
			b = append(b, ',')
			b = appendStr(b, "kind", a.Kind)
		}
		b = append(b, ',')
		b = appendStr(b, "namespace", a.Namespace)
		b = append(b, ',')
		b = appendOptStr(b, "nextCursor", a.NextCursor)
		if a.Subject != "" {
			b = append(b, ',')
			b = appendStr(b, "subject", a.Subject)
		}
		b = append(b, ',')
		b = appendStr(b, "txAt", a.TxAt)
		b = append(b, ',')
		b = appendStr(b, "type", a.Type)
		b = append(b, ',')
		b = appendStr(b, "validAt", a.ValidAt)
	case *AssembledContext:
		b = append(make([]byte, 0, 2048*(1+len(a.Items))), '{')
		if a.AbstainReason != "" {
			b = appendStr(b, "abstainReason", a.AbstainReason)
			b = append(b, ',')
		}
		b = appendBool(b, "abstained", a.Abstained)
		b = append(b, `,"budget":{`...)
		b = appendInt(b, "maxTokens", int64(a.Budget.MaxTokens))
		b = append(b, "},"...)
		b = appendBool(b, "excludeTainted", a.ExcludeTainted)
		b = append(b, ',')
		b = appendStr(b, "issuedAt", a.IssuedAt)
		b = append(b, `,"items":[`...)
		for i := range a.Items {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"record":`...)
			if b, err = appendRecordJCS(b, &a.Items[i].Record); err != nil {
				return nil, true, err
			}
			b = append(b, ',')
			b = appendInt(b, "score", int64(a.Items[i].Score))
			b = append(b, ',')
			b = appendInt(b, "tokens", int64(a.Items[i].Tokens))
			b = append(b, '}')
		}
		b = append(b, "],"...)
		b = appendStr(b, "namespace", a.Namespace)
		b = append(b, `,"omitted":[`...)
		for i, o := range a.Omitted {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			b = appendStr(b, "id", o.ID)
			b = append(b, ',')
			b = appendStr(b, "reason", o.Reason)
			b = append(b, ',')
			b = appendInt(b, "tokens", int64(o.Tokens))
			b = append(b, '}')
		}
		b = append(b, "],"...)
		b = appendInt(b, "omittedCount", int64(a.OmittedCount))
		if a.Query != "" {
			b = append(b, ',')
			b = appendStr(b, "query", a.Query)
		}
		if a.Subject != "" {
			b = append(b, ',')
			b = appendStr(b, "subject", a.Subject)
		}
		b = append(b, ',')
		b = appendStr(b, "tokenizer", a.Tokenizer)
		b = append(b, ',')
		b = appendInt(b, "tokensUsed", int64(a.TokensUsed))
		b = append(b, ',')
		b = appendStr(b, "txAt", a.TxAt)
		b = append(b, ',')
		b = appendStr(b, "type", a.Type)
		b = append(b, ',')
		b = appendStr(b, "validAt", a.ValidAt)
	default:
		return nil, false, nil
	}
	return append(b, '}'), true, nil
}

// artifactDigest is the SHA-256 an artifact's signature covers.
func artifactDigest(v any) ([32]byte, error) {
	b, ok, err := canonicalArtifact(v)
	if err != nil {
		return [32]byte{}, fmt.Errorf("memory: canonical artifact: %w", err)
	}
	if !ok {
		return canonicalDigest(v)
	}
	return sha256Sum(b), nil
}
