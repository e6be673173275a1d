package audit

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/store"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// memHashes is an independent tlog tree built in memory from the served
// entries, to check the stored tree against.
type memHashes []tlog.Hash

func (m memHashes) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = m[x]
	}
	return out, nil
}

func buildMemTree(t *testing.T, l *Log) memHashes {
	t.Helper()
	var m memHashes
	for e, err := range l.Entries(t.Context(), 0, 0) {
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := hex.DecodeString(e.Hash)
		hs, err := tlog.StoredHashes(int64(e.Seq-1), raw, m)
		if err != nil {
			t.Fatal(err)
		}
		m = append(m, hs...)
	}
	return m
}

func decodeB64Hash(t *testing.T, s string) tlog.Hash {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != 32 {
		t.Fatalf("bad hash %q", s)
	}
	return tlog.Hash(b)
}

func TestCheckpointNote(t *testing.T) {
	ctx := t.Context()
	l := newTestLog(t, newMem(t))
	appendN(t, l, 37, 10)
	cp, err := l.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(l.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open([]byte(cp.Note), note.VerifierList(v))
	if err != nil {
		t.Fatalf("note.Open: %v", err)
	}
	root, err := tlog.TreeHash(37, buildMemTree(t, l))
	if err != nil {
		t.Fatal(err)
	}
	want := l.Origin() + "\n37\n" + base64.StdEncoding.EncodeToString(root[:]) + "\n"
	if n.Text != want {
		t.Errorf("checkpoint text = %q, want %q", n.Text, want)
	}
	if cp.Origin != l.Origin() || cp.TreeSize != 37 || cp.RootHash != base64.StdEncoding.EncodeToString(root[:]) {
		t.Errorf("checkpoint fields = %+v", cp)
	}
	if err := VerifyCheckpoint(l.VerifierKey(), cp); err != nil {
		t.Error(err)
	}
	// Another key with the same name does not verify it.
	other, err := note.NewEd25519VerifierKey(l.Origin(), testKey(9).Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyCheckpoint(other, cp); !errors.Is(err, ErrTampered) {
		t.Errorf("VerifyCheckpoint with another key: %v, want ErrTampered", err)
	}
	bad := cp
	bad.TreeSize = 36
	if err := VerifyCheckpoint(l.VerifierKey(), bad); !errors.Is(err, ErrTampered) {
		t.Errorf("VerifyCheckpoint with wrong size field: %v, want ErrTampered", err)
	}
	bad = cp
	bad.Note = strings.Replace(cp.Note, "\n37\n", "\n38\n", 1)
	if err := VerifyCheckpoint(l.VerifierKey(), bad); !errors.Is(err, ErrTampered) {
		t.Errorf("VerifyCheckpoint with edited note: %v, want ErrTampered", err)
	}
	if err := VerifyCheckpoint("not a key", cp); err == nil || errors.Is(err, ErrTampered) {
		t.Errorf("VerifyCheckpoint with a malformed key: %v, want a plain error", err)
	}

	// The checkpoint of the empty log states the RFC 6962 empty root.
	empty := newTestLog(t, newMem(t))
	cp, err = empty.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cp.TreeSize != 0 || cp.RootHash != "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=" {
		t.Errorf("empty checkpoint = %+v", cp)
	}
}

func TestInclusionProofs(t *testing.T) {
	ctx := t.Context()
	l := newTestLog(t, newMem(t))
	const n = 300
	appendN(t, l, n, 50)
	mem := buildMemTree(t, l)
	vkey := l.VerifierKey()
	rng := rand.New(rand.NewPCG(7, 8))

	cases := [][2]uint64{{1, 1}, {1, n}, {n, n}, {n, 0}, {128, 128}, {128, 129}, {129, 256}}
	for range 40 {
		size := 1 + rng.Uint64N(n)
		cases = append(cases, [2]uint64{1 + rng.Uint64N(size), size})
	}
	for _, c := range cases {
		seq, size := c[0], c[1]
		t.Run(strconv.FormatUint(seq, 10)+"in"+strconv.FormatUint(size, 10), func(t *testing.T) {
			p, err := l.Inclusion(ctx, seq, size)
			if err != nil {
				t.Fatal(err)
			}
			if size == 0 {
				size = n
			}
			if p.Seq != seq || p.LeafIndex != seq-1 || p.TreeSize != size || p.Checkpoint.TreeSize != size {
				t.Fatalf("proof header = %+v", p)
			}
			e, err := l.Get(ctx, seq)
			if err != nil {
				t.Fatal(err)
			}
			// tlog's own check, against a root computed independently.
			root, err := tlog.TreeHash(int64(size), mem)
			if err != nil {
				t.Fatal(err)
			}
			if got := decodeB64Hash(t, p.Checkpoint.RootHash); got != root {
				t.Fatalf("checkpoint root %v, independent root %v", got, root)
			}
			raw, _ := hex.DecodeString(e.Hash)
			var proof tlog.RecordProof
			for _, h := range p.Hashes {
				proof = append(proof, decodeB64Hash(t, h))
			}
			if err := tlog.CheckRecord(proof, int64(size), root, int64(seq-1), tlog.RecordHash(raw)); err != nil {
				t.Fatalf("tlog.CheckRecord: %v", err)
			}
			if err := VerifyInclusion(vkey, e, p); err != nil {
				t.Fatalf("VerifyInclusion: %v", err)
			}
			// The proof survives a JSON round trip, as served.
			var p2 InclusionProof
			b, _ := json.Marshal(p)
			if err := json.Unmarshal(b, &p2); err != nil {
				t.Fatal(err)
			}
			if err := VerifyInclusion(vkey, e, p2); err != nil {
				t.Fatalf("VerifyInclusion after JSON: %v", err)
			}

			forge(t, vkey, e, p, l)
		})
	}

	for _, c := range [][2]uint64{{0, 5}, {6, 5}, {1, n + 1}, {n + 1, 0}} {
		if _, err := l.Inclusion(ctx, c[0], c[1]); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("Inclusion(%d, %d): %v, want ErrOutOfRange", c[0], c[1], err)
		}
	}
}

// forge checks that altered proofs and entries fail VerifyInclusion.
func forge(t *testing.T, vkey string, e Entry, p InclusionProof, l *Log) {
	t.Helper()
	type mod struct {
		name string
		e    Entry
		p    InclusionProof
	}
	var mods []mod
	add := func(name string, fe func(*Entry), fp func(*InclusionProof)) {
		e2, p2 := e, p
		p2.Hashes = append([]string(nil), p.Hashes...)
		if fe != nil {
			fe(&e2)
		}
		if fp != nil {
			fp(&p2)
		}
		mods = append(mods, mod{name, e2, p2})
	}
	for i := range p.Hashes {
		add("flip hash "+strconv.Itoa(i), nil, func(p *InclusionProof) {
			b, _ := base64.StdEncoding.DecodeString(p.Hashes[i])
			b[i%32] ^= 0x80
			p.Hashes[i] = base64.StdEncoding.EncodeToString(b)
		})
	}
	add("extra hash", nil, func(p *InclusionProof) { p.Hashes = append(p.Hashes, p.Checkpoint.RootHash) })
	add("wrong index", nil, func(p *InclusionProof) { p.LeafIndex++ })
	add("wrong seq", nil, func(p *InclusionProof) { p.Seq++ })
	add("wrong size", nil, func(p *InclusionProof) { p.TreeSize-- })
	add("bad leaf hash", nil, func(p *InclusionProof) { p.LeafHash = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=" })
	add("entry edited", func(e *Entry) { e.Type += "x" }, nil)
	add("entry data edited", func(e *Entry) { e.Data = json.RawMessage(`{"forged":true}`) }, nil)
	if e.Sig != "" {
		add("entry sig", func(e *Entry) {
			b, _ := base64.RawURLEncoding.DecodeString(e.Sig)
			b[10] ^= 1
			e.Sig = base64.RawURLEncoding.EncodeToString(b)
		}, nil)
	} else {
		add("forged entry sig", func(e *Entry) { e.Sig = base64.RawURLEncoding.EncodeToString(make([]byte, 64)) }, nil)
	}
	add("checkpoint size", nil, func(p *InclusionProof) { p.Checkpoint.TreeSize++; p.TreeSize++ })
	add("checkpoint root", nil, func(p *InclusionProof) {
		p.Checkpoint.Note = strings.Replace(p.Checkpoint.Note, p.Checkpoint.RootHash, "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", 1)
		p.Checkpoint.RootHash = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
	})
	if e.Seq > 1 {
		other, err := l.Get(t.Context(), e.Seq-1)
		if err != nil {
			t.Fatal(err)
		}
		add("another entry", func(e *Entry) { *e = other }, nil)
		add("another entry and index", func(e *Entry) { *e = other }, func(p *InclusionProof) { p.Seq--; p.LeafIndex-- })
	}
	for _, m := range mods {
		err := VerifyInclusion(vkey, m.e, m.p)
		if !errors.Is(err, ErrTampered) {
			t.Errorf("forged proof (%s) verified: %v", m.name, err)
		}
	}
}

func TestConsistencyProofs(t *testing.T) {
	ctx := t.Context()
	l := newTestLog(t, newMem(t))
	const n = 300
	appendN(t, l, n, 50)
	mem := buildMemTree(t, l)
	vkey := l.VerifierKey()
	rng := rand.New(rand.NewPCG(9, 10))

	cases := [][2]uint64{{1, 1}, {1, 2}, {1, n}, {n, n}, {0, n}, {0, 0}, {7, 0}, {128, 256}, {127, 129}}
	for range 40 {
		to := 1 + rng.Uint64N(n)
		cases = append(cases, [2]uint64{1 + rng.Uint64N(to), to})
	}
	for _, c := range cases {
		from, to := c[0], c[1]
		t.Run(strconv.FormatUint(from, 10)+"to"+strconv.FormatUint(to, 10), func(t *testing.T) {
			p, err := l.Consistency(ctx, from, to)
			if err != nil {
				t.Fatal(err)
			}
			if to == 0 {
				to = n
			}
			if p.From != from || p.To != to || p.Checkpoint.TreeSize != to {
				t.Fatalf("proof header = %+v", p)
			}
			old := checkpointAt(t, l, from)
			oldRoot, _ := tlog.TreeHash(int64(from), mem)
			newRoot, _ := tlog.TreeHash(int64(to), mem)
			if got := decodeB64Hash(t, p.Checkpoint.RootHash); got != newRoot {
				t.Fatalf("checkpoint root %v, independent root %v", got, newRoot)
			}
			if from > 0 {
				var proof tlog.TreeProof
				for _, h := range p.Hashes {
					proof = append(proof, decodeB64Hash(t, h))
				}
				if err := tlog.CheckTree(proof, int64(to), newRoot, int64(from), oldRoot); err != nil {
					t.Fatalf("tlog.CheckTree: %v", err)
				}
			}
			if err := VerifyConsistency(vkey, p, old); err != nil {
				t.Fatalf("VerifyConsistency: %v", err)
			}
			if from == 0 || from == to {
				return
			}
			// Forgeries.
			for i := range p.Hashes {
				q := p
				q.Hashes = append([]string(nil), p.Hashes...)
				b, _ := base64.StdEncoding.DecodeString(q.Hashes[i])
				b[3] ^= 1
				q.Hashes[i] = base64.StdEncoding.EncodeToString(b)
				if err := VerifyConsistency(vkey, q, old); !errors.Is(err, ErrTampered) {
					t.Errorf("flipped hash %d verified: %v", i, err)
				}
			}
			q := p
			q.From--
			if err := VerifyConsistency(vkey, q, old); !errors.Is(err, ErrTampered) {
				t.Errorf("wrong from verified: %v", err)
			}
			if from > 1 {
				if err := VerifyConsistency(vkey, p, checkpointAt(t, l, from-1)); !errors.Is(err, ErrTampered) {
					t.Errorf("wrong old checkpoint verified: %v", err)
				}
			}
			if to > from+1 {
				q, err := l.Consistency(ctx, from, to-1)
				if err != nil {
					t.Fatal(err)
				}
				q.Checkpoint = p.Checkpoint
				if err := VerifyConsistency(vkey, q, old); !errors.Is(err, ErrTampered) {
					t.Errorf("proof for another size verified: %v", err)
				}
			}
		})
	}
	for _, c := range [][2]uint64{{5, 4}, {1, n + 1}, {n + 1, 0}} {
		if _, err := l.Consistency(ctx, c[0], c[1]); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("Consistency(%d, %d): %v, want ErrOutOfRange", c[0], c[1], err)
		}
	}
}

// A log that forked (rewritten after a checkpoint was published) fails
// consistency against the published checkpoint.
func TestConsistencyDetectsFork(t *testing.T) {
	ctx := t.Context()
	st := newMem(t)
	l := newTestLog(t, st)
	appendN(t, l, 20, 20)
	published := checkpointAt(t, l, 20)

	// Rewrite history from seq 11 with the real key: drop 11..20 and
	// append different entries.
	err := st.Update(ctx, func(txn store.Txn) error {
		for seq := uint64(11); seq <= 20; seq++ {
			if err := txn.Delete(entryKey(seq)); err != nil {
				return err
			}
			if err := txn.Delete(treeKey(seq - 1)); err != nil {
				return err
			}
		}
		v, err := txn.Get(entryKey(10))
		if err != nil {
			return err
		}
		var h head
		h.size = 10
		copy(h.hash[:], v[storedHashOff:storedSigOff])
		return txn.Set(headKey, encodeHead(h))
	})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 15, 15)
	if err := l.Verify(ctx, 0, 0, Full, nil); err != nil {
		t.Fatalf("the forked log is internally consistent, Verify says %v", err)
	}
	p, err := l.Consistency(ctx, 20, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyConsistency(l.VerifierKey(), p, published); !errors.Is(err, ErrTampered) {
		t.Fatalf("consistency with the published checkpoint: %v, want ErrTampered", err)
	}
}

func checkpointAt(t *testing.T, l *Log, size uint64) Checkpoint {
	t.Helper()
	if size == 0 {
		// Consistency(0, 0) means "to the current size"; sign size 0
		// explicitly.
		cp, err := l.signCheckpoint(0, tlog.Hash(emptyTreeHash()))
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}
	p, err := l.Consistency(t.Context(), 0, size)
	if err != nil {
		t.Fatal(err)
	}
	return p.Checkpoint
}
