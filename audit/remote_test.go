package audit

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/store"
)

func newTestLogKey(t testing.TB, key []byte) *Log {
	t.Helper()
	l, err := Open(context.Background(), newMem(t), key, &Options{Now: testClock()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// lyingFetcher serves a log through hooks that may change what it says.
type lyingFetcher struct {
	l     *Log
	cp    func(Checkpoint) Checkpoint
	page  func(p Page, n int) Page // n counts pages from 0
	pages int
	err   error // returned by Page, after the first page
}

func (f *lyingFetcher) Checkpoint(ctx context.Context) (Checkpoint, error) {
	cp, err := f.l.Checkpoint(ctx)
	if err == nil && f.cp != nil {
		cp = f.cp(cp)
	}
	return cp, err
}

func (f *lyingFetcher) Page(ctx context.Context, cursor string, limit int) (Page, error) {
	if limit != MaxPageLimit {
		return Page{}, errors.New("VerifyRemote should ask for the largest page")
	}
	n := f.pages
	f.pages++
	if f.err != nil && n > 0 {
		return Page{}, f.err
	}
	p, err := f.l.Page(ctx, cursor, limit)
	if err == nil && f.page != nil {
		p = f.page(p, n)
	}
	return p, err
}

func appendSigned(t testing.TB, l *Log) {
	t.Helper()
	err := l.Update(context.Background(), func(txn store.Txn) error {
		_, err := l.Append(txn, Record{Type: "memory.recorded", Actor: Actor{Kind: "system", ID: "memory"}, Signed: true})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestVerifyRemote(t *testing.T) {
	ctx := context.Background()

	// The genuine record: 250 entries, entry 101 signed on its own; its
	// checkpoint at 100 entries is what a client kept from an earlier run.
	a := newTestLog(t, newMem(t))
	appendN(t, a, 100, 7)
	at100, err := a.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	appendSigned(t, a)
	appendN(t, a, 149, 10)
	at250, err := a.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vkey := a.VerifierKey()

	// A fork: the same key and origin, the same first 60 entries, then
	// other ones; everything re-signed, so it verifies on its own.
	fork := newTestLog(t, newMem(t))
	appendN(t, fork, 60, 7)
	err = fork.Update(ctx, func(txn store.Txn) error {
		_, err := fork.Append(txn, Record{Type: "operator.kill_switch", Actor: Actor{Kind: "operator", ID: "op_rewritten"}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, fork, 189, 10)
	forkCP, err := fork.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if forkCP.Origin != at250.Origin || forkCP.TreeSize != 250 || forkCP.RootHash == at250.RootHash {
		t.Fatalf("the fork is not a fork: %+v", forkCP)
	}

	otherKey := newTestLogKey(t, testKey(2))
	appendN(t, otherKey, 250, 50)
	otherCP, err := otherKey.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}

	editEntry := func(seq uint64, f func(*Entry)) func(Page, int) Page {
		return func(p Page, _ int) Page {
			for i := range p.Data {
				if p.Data[i].Seq == seq {
					f(&p.Data[i])
				}
			}
			return p
		}
	}
	served := func(cp Checkpoint) func(Checkpoint) Checkpoint {
		return func(Checkpoint) Checkpoint { return cp }
	}
	errDown := errors.New("server down")

	for _, c := range []struct {
		name     string
		f        *lyingFetcher
		opts     RemoteOptions
		verified uint64 // on success
		tampered uint64 // the first bad seq of a *TamperError; 0: success or another error
		err      error  // an error other than a TamperError, matched with errors.Is
	}{
		{name: "genuine", f: &lyingFetcher{l: a}, verified: 250},
		{name: "genuine, with signatures", f: &lyingFetcher{l: a}, opts: RemoteOptions{Signatures: true}, verified: 250},
		{name: "extends the trusted checkpoint", f: &lyingFetcher{l: a}, opts: RemoteOptions{Trusted: &at100}, verified: 250},
		{name: "trusted is the served one", f: &lyingFetcher{l: a}, opts: RemoteOptions{Trusted: &at250}, verified: 250},
		{name: "the record grew after the checkpoint", f: &lyingFetcher{l: a, cp: served(at100)}, verified: 100},
		{name: "a fork verifies on its own", f: &lyingFetcher{l: fork}, verified: 250},

		{name: "tampered entry", f: &lyingFetcher{l: a, page: editEntry(150, func(e *Entry) { e.Type = "payment.refunded" })}, tampered: 150},
		{name: "tampered data", f: &lyingFetcher{l: a, page: editEntry(4, func(e *Entry) { e.Data = json.RawMessage(`{"amount":{"currency":"EUR","value":"9999.00"}}`) })}, tampered: 4},
		{name: "entry re-hashed", f: &lyingFetcher{l: a, page: editEntry(7, func(e *Entry) { e.Hash = e.Prev })}, tampered: 7},
		{name: "bad signature, checked", f: &lyingFetcher{l: a, page: editEntry(101, func(e *Entry) { e.Sig = "A" + e.Sig[1:] })}, opts: RemoteOptions{Signatures: true}, tampered: 101},
		{name: "bad signature, unchecked", f: &lyingFetcher{l: a, page: editEntry(101, func(e *Entry) { e.Sig = "A" + e.Sig[1:] })}, verified: 250},
		{name: "entry dropped", f: &lyingFetcher{l: a, page: func(p Page, n int) Page {
			if n == 1 {
				p.Data = append(p.Data[:19:19], p.Data[20:]...)
			}
			return p
		}}, tampered: 120},
		{name: "entries swapped", f: &lyingFetcher{l: a, page: func(p Page, n int) Page {
			if n == 2 {
				p.Data[0], p.Data[1] = p.Data[1], p.Data[0]
			}
			return p
		}}, tampered: 201},
		{name: "truncated page", f: &lyingFetcher{l: a, page: func(p Page, n int) Page {
			if n == 1 {
				p.Data, p.NextCursor, p.HasMore = p.Data[:50], nil, false
			}
			return p
		}}, tampered: 151},
		{name: "empty page with a cursor", f: &lyingFetcher{l: a, page: func(p Page, n int) Page {
			if n == 2 {
				p.Data = nil
			}
			return p
		}}, tampered: 201},
		{name: "forked checkpoint", f: &lyingFetcher{l: a, cp: served(forkCP)}, tampered: 250},
		{name: "forked record", f: &lyingFetcher{l: fork}, opts: RemoteOptions{Trusted: &at100}, tampered: 100},
		{name: "same size as the trusted checkpoint, another root", f: &lyingFetcher{l: fork, cp: served(forkCP)}, opts: RemoteOptions{Trusted: &at250}, tampered: 250},
		{name: "rolled back", f: &lyingFetcher{l: a, cp: served(at100)}, opts: RemoteOptions{Trusted: &at250}, err: ErrTampered},
		{name: "checkpoint size inflated", f: &lyingFetcher{l: a, cp: func(cp Checkpoint) Checkpoint { cp.TreeSize++; return cp }}, err: ErrTampered},
		{name: "checkpoint note edited", f: &lyingFetcher{l: a, cp: func(cp Checkpoint) Checkpoint {
			cp.Note = strings.Replace(cp.Note, "\n250\n", "\n249\n", 1)
			cp.TreeSize = 249
			return cp
		}}, err: ErrTampered},
		{name: "checkpoint of another key", f: &lyingFetcher{l: a, cp: served(otherCP)}, err: ErrTampered},
		{name: "another key's record", f: &lyingFetcher{l: otherKey}, err: ErrTampered},
		{name: "trusted checkpoint not signed", f: &lyingFetcher{l: a}, opts: RemoteOptions{Trusted: &otherCP}, err: ErrTampered},
		{name: "fetch error", f: &lyingFetcher{l: a, err: errDown}, err: errDown},
	} {
		t.Run(c.name, func(t *testing.T) {
			var calls [][2]uint64
			c.opts.Progress = func(done, total uint64) { calls = append(calls, [2]uint64{done, total}) }
			rep, err := VerifyRemote(ctx, vkey, c.f, &c.opts)
			var te *TamperError
			switch {
			case c.tampered != 0:
				if !errors.As(err, &te) || te.Seq != c.tampered {
					t.Fatalf("VerifyRemote = %+v, %v; want a TamperError at seq %d", rep, err, c.tampered)
				}
				t.Log(err)
			case c.err != nil:
				if !errors.Is(err, c.err) {
					t.Fatalf("VerifyRemote = %+v, %v; want %v", rep, err, c.err)
				}
				t.Log(err)
			default:
				if err != nil || rep.Verified != c.verified || rep.Checkpoint.TreeSize != c.verified {
					t.Fatalf("VerifyRemote = %+v, %v; want %d entries verified", rep, err, c.verified)
				}
				if len(calls) == 0 || calls[len(calls)-1] != [2]uint64{c.verified, c.verified} {
					t.Fatalf("progress calls %v", calls)
				}
			}
		})
	}

	// The trusted checkpoint is checked before anything is fetched.
	if _, err := VerifyRemote(ctx, "garbage", &lyingFetcher{l: a}, nil); !errors.Is(err, ErrBadVerifierKey) {
		t.Fatalf("a bad verifier key: %v", err)
	}
	empty := newTestLog(t, newMem(t))
	if rep, err := VerifyRemote(ctx, empty.VerifierKey(), empty, nil); err != nil || rep.Verified != 0 {
		t.Fatalf("an empty record: %+v, %v", rep, err)
	}
}

// serveLog serves l's GET /audit and GET /audit/checkpoint as the
// reference server does, to holders of credential.
func serveLog(l *Log, credential string) http.Handler {
	mux := http.NewServeMux()
	send := func(w http.ResponseWriter, v any, err error) {
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /audit/checkpoint", func(w http.ResponseWriter, r *http.Request) {
		cp, err := l.Checkpoint(r.Context())
		send(w, cp, err)
	})
	mux.HandleFunc("GET /audit", func(w http.ResponseWriter, r *http.Request) {
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		p, err := l.Page(r.Context(), r.URL.Query().Get("cursor"), limit)
		send(w, p, err)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+credential {
			http.Error(w, `{"code":"auth.unauthenticated"}`, http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func TestHTTPFetcher(t *testing.T) {
	ctx := context.Background()
	l := newTestLog(t, newMem(t))
	appendN(t, l, 230, 23)
	srv := httptest.NewServer(serveLog(l, "svc_ak_test"))
	defer srv.Close()

	rep, err := VerifyRemote(ctx, l.VerifierKey(), &HTTPFetcher{BaseURL: srv.URL + "/", Credential: "svc_ak_test"}, &RemoteOptions{Signatures: true})
	if err != nil || rep.Verified != 230 {
		t.Fatalf("VerifyRemote over HTTP = %+v, %v", rep, err)
	}

	p, err := (&HTTPFetcher{BaseURL: srv.URL, Client: srv.Client(), Credential: "svc_ak_test"}).Page(ctx, "", 0)
	if err != nil || len(p.Data) != DefaultPageLimit || p.NextCursor == nil {
		t.Fatalf("a page with the server's default limit: %d entries, %v", len(p.Data), err)
	}

	_, err = VerifyRemote(ctx, l.VerifierKey(), &HTTPFetcher{BaseURL: srv.URL}, nil)
	var he *HTTPError
	if !errors.As(err, &he) || he.StatusCode != http.StatusUnauthorized || he.URL != srv.URL+"/audit/checkpoint" ||
		err.Error() != "GET "+srv.URL+"/audit/checkpoint: 401 Unauthorized: "+`{"code":"auth.unauthenticated"}` {
		t.Fatalf("without a credential: %#v", err)
	}

	notJSON := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>")) }))
	defer notJSON.Close()
	if _, err := (&HTTPFetcher{BaseURL: notJSON.URL}).Checkpoint(ctx); err == nil || !strings.HasPrefix(err.Error(), "GET "+notJSON.URL+"/audit/checkpoint: ") {
		t.Fatalf("a server that answers HTML: %v", err)
	}
	if _, err := (&HTTPFetcher{BaseURL: "http://127.0.0.1:1"}).Checkpoint(ctx); err == nil {
		t.Fatal("a server that is not there answered")
	}
}

// fuzzRecord is a small genuine record for FuzzVerifyRemote.
func fuzzRecord(t testing.TB) (*Log, Checkpoint, Page) {
	t.Helper()
	l, err := Open(context.Background(), newMem(t), testKey(1), &Options{Origin: "fuzz.example/audit", Now: testClock()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	appendN(t, l, 4, 2)
	appendSigned(t, l)
	cp, err := l.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.Page(context.Background(), "", MaxPageLimit)
	if err != nil {
		t.Fatal(err)
	}
	return l, cp, p
}

// staticFetcher serves one checkpoint and one page, as a server might.
type staticFetcher struct {
	cp   Checkpoint
	page Page
}

func (f staticFetcher) Checkpoint(context.Context) (Checkpoint, error) { return f.cp, nil }
func (f staticFetcher) Page(context.Context, string, int) (Page, error) {
	return f.page, nil
}

// FuzzVerifyRemote serves whatever checkpoint and page bytes the fuzzer
// makes, for a genuine record of 5 entries: a record that verifies is the
// genuine one, entry for entry.
func FuzzVerifyRemote(f *testing.F) {
	l, cp, page := fuzzRecord(f)
	cpJSON, _ := json.Marshal(cp)
	pageJSON, _ := json.Marshal(page)
	f.Add(cpJSON, pageJSON)
	f.Add(cpJSON, []byte(strings.Replace(string(pageJSON), `"seq":2`, `"seq":3`, 1)))
	f.Add([]byte(`{"origin":"fuzz.example/audit","treeSize":0,"rootHash":"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=","note":""}`), []byte(`{"data":[]}`))
	vkey := l.VerifierKey()
	if rep, err := VerifyRemote(context.Background(), vkey, staticFetcher{cp, page}, nil); err != nil || rep.Verified != 5 {
		f.Fatalf("the genuine record: %+v, %v", rep, err)
	}
	// An entry is compared without its sig, which its hash does not cover;
	// a sig that is served must be the genuine one.
	var genuine [][]byte
	for _, e := range page.Data {
		e.Sig = ""
		b, err := AppendCanonical(nil, &e)
		if err != nil {
			f.Fatal(err)
		}
		genuine = append(genuine, b)
	}
	f.Fuzz(func(t *testing.T, cpBytes, pageBytes []byte) {
		var fetch staticFetcher
		if json.Unmarshal(cpBytes, &fetch.cp) != nil || json.Unmarshal(pageBytes, &fetch.page) != nil {
			return
		}
		rep, err := VerifyRemote(context.Background(), vkey, fetch, &RemoteOptions{Signatures: true})
		if err != nil {
			if !errors.Is(err, ErrTampered) {
				t.Fatalf("error %v is not ErrTampered", err)
			}
			return
		}
		if rep.Checkpoint != cp {
			t.Fatalf("verified a checkpoint that is not the genuine one: %+v", rep.Checkpoint)
		}
		for i := range rep.Verified {
			e := fetch.page.Data[i]
			if e.Sig != "" && e.Sig != page.Data[i].Sig {
				t.Fatalf("entry %d verified with another signature: %s", i+1, e.Sig)
			}
			e.Sig = ""
			b, err := AppendCanonical(nil, &e)
			if err != nil || string(b) != string(genuine[i]) {
				t.Fatalf("entry %d verified but is not the genuine one:\n%s\n%s", i+1, b, genuine[i])
			}
		}
	})
}
