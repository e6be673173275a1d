package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestEntryHashPreimage(t *testing.T) {
	if Genesis != strings.Repeat("0", 64) {
		t.Fatal("Genesis")
	}
	pre, err := Canonicalize(map[string]any{"index": 3, "disclosureDigest": "dd", "agentId": "a\"b", "issuedAt": "t", "prevHash": Genesis})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(pre)
	if got := EntryHash(3, "dd", "a\"b", "t", Genesis); got != hex.EncodeToString(sum[:]) {
		t.Errorf("EntryHash %s, want sha256(%s)", got, pre)
	}
}

func TestTransparencyLog(t *testing.T) {
	var l TransparencyLog
	if l.Head() != Genesis || l.Verify() != nil || l.Contains("x") {
		t.Fatal("empty log")
	}
	if _, ok := l.InclusionProof(0); ok {
		t.Fatal("proof from an empty log")
	}
	key := adpKey(60)
	var digests []string
	for i := range 3 {
		d := adpSample(adpHex(key))
		d.Nonce = strings.Repeat("n", i+1)
		e, err := l.Append(d)
		if err != nil {
			t.Fatal(err)
		}
		// The digest is the one Verify reports for the signed envelope.
		dec := Verify(adpSigned(t, key, func(x *Disclosure) { x.Nonce = d.Nonce }), Policy{Now: adpNow})
		if e.DisclosureDigest != dec.Digest || e.Index != i {
			t.Errorf("entry %+v, decision digest %s", e, dec.Digest)
		}
		digests = append(digests, e.DisclosureDigest)
	}
	// A decision can be logged by digest directly.
	e := l.AppendDigest("ff", "agent", "2026-06-24T12:00:00.000Z")
	if e.Index != 3 || e.PrevHash != l.Entries()[2].Hash || l.Head() != e.Hash {
		t.Errorf("AppendDigest %+v", e)
	}
	if err := l.Verify(); err != nil {
		t.Fatal(err)
	}
	for _, d := range digests {
		if !l.Contains(d) {
			t.Errorf("log lacks %s", d)
		}
	}
	p, ok := l.InclusionProof(1)
	if !ok || !p.Recomputes || p.Entry != l.Entries()[1] || VerifyInclusionProof(p.Entry) != nil {
		t.Errorf("proof %+v", p)
	}

	entries := l.Entries()
	for name, c := range map[string]struct {
		edit func([]TransparencyEntry) []TransparencyEntry
		at   int
	}{
		"edited digest": {func(es []TransparencyEntry) []TransparencyEntry { es[1].DisclosureDigest = "00"; return es }, 1},
		"rehashed edit": {func(es []TransparencyEntry) []TransparencyEntry {
			es[1].AgentID = "x"
			es[1].Hash = rehash(es[1])
			return es
		}, 2},
		"deleted entry": {func(es []TransparencyEntry) []TransparencyEntry { return append(es[:1], es[2:]...) }, 1},
		"reordered":     {func(es []TransparencyEntry) []TransparencyEntry { es[0], es[1] = es[1], es[0]; return es }, 0},
		"bad genesis":   {func(es []TransparencyEntry) []TransparencyEntry { es[0].PrevHash = strings.Repeat("1", 64); return es }, 0},
		"index shifted": {func(es []TransparencyEntry) []TransparencyEntry {
			es[2].Index = 5
			es[2].Hash = rehash(es[2])
			return es
		}, 2},
		"truncated is ok": {func(es []TransparencyEntry) []TransparencyEntry { return es[:2] }, -1},
	} {
		cp := append([]TransparencyEntry(nil), entries...)
		err := VerifyLog(c.edit(cp))
		var lb *LogBrokenError
		switch {
		case c.at < 0 && err != nil:
			t.Errorf("%s: %v", name, err)
		case c.at >= 0 && (!errors.As(err, &lb) || lb.Index != c.at || !errors.Is(err, ErrTampered)):
			t.Errorf("%s: %v, want broken at %d", name, err, c.at)
		}
	}
	tampered := entries[0]
	tampered.IssuedAt = "2026-01-01T00:00:00.000Z"
	if err := VerifyInclusionProof(tampered); !errors.Is(err, ErrTampered) {
		t.Errorf("tampered entry: %v", err)
	}
}

func rehash(e TransparencyEntry) string {
	return EntryHash(e.Index, e.DisclosureDigest, e.AgentID, e.IssuedAt, e.PrevHash)
}
