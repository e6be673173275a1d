package audit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// exampleRecord returns a log of n entries.
func exampleRecord(st store.Store, n int) *audit.Log {
	ctx := context.Background()
	l, err := audit.Open(ctx, st, exampleKey(), &audit.Options{Origin: "pay.example.com/audit", Now: exampleNow})
	if err != nil {
		log.Fatal(err)
	}
	for i := range n {
		err := l.Update(ctx, func(txn store.Txn) error {
			_, err := l.Append(txn, audit.Record{Type: "gate.decision", Actor: audit.Actor{Kind: "agent", ID: fmt.Sprint("ak_", i)}})
			return err
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	return l
}

// The verifier key is the one line of record.pub.
func ExampleParseVerifierKey() {
	recordPub := "pay.example.com/audit+0bfab9a2+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop\n"
	origin, pub, err := audit.ParseVerifierKey(recordPub)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(origin, len(pub))

	_, _, err = audit.ParseVerifierKey("pay.example.com/audit+00000000+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop")
	fmt.Println(errors.Is(err, audit.ErrBadVerifierKey))

	// Output:
	// pay.example.com/audit 32
	// true
}

// A checkpoint kept as its signed note (what "countersign audit checkpoint"
// prints) is opened with the verifier key.
func ExampleParseCheckpoint() {
	var st memstore.Store
	l := exampleRecord(&st, 3)
	defer l.Close()
	served, err := l.Checkpoint(context.Background())
	if err != nil {
		log.Fatal(err)
	}

	cp, err := audit.ParseCheckpoint(l.VerifierKey(), served.Note)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cp.Origin, cp.TreeSize, cp == served)

	forged := served.Note[:len("pay.example.com/audit\n")] + "4" + served.Note[len("pay.example.com/audit\n3"):]
	_, err = audit.ParseCheckpoint(l.VerifierKey(), forged)
	fmt.Println(errors.Is(err, audit.ErrTampered))

	// Output:
	// pay.example.com/audit 3 true
	// true
}

// lyingServer serves a record but edits one entry.
type lyingServer struct{ *audit.Log }

func (s lyingServer) Page(ctx context.Context, cursor string, limit int) (audit.Page, error) {
	p, err := s.Log.Page(ctx, cursor, limit)
	for i := range p.Data {
		if p.Data[i].Seq == 2 {
			p.Data[i].Actor.ID = "ak_someone_else"
		}
	}
	return p, err
}

// VerifyRemote checks a whole record from anything that serves its
// checkpoint and pages: here the log itself, then a server that lies
// about one entry.
func ExampleVerifyRemote() {
	ctx := context.Background()
	var st memstore.Store
	l := exampleRecord(&st, 3)
	defer l.Close()
	vkey := l.VerifierKey() // the client holds this, from record.pub

	rep, err := audit.VerifyRemote(ctx, vkey, l, nil)
	fmt.Println(rep.Verified, rep.Checkpoint.RootHash, err)

	// Keep rep.Checkpoint: the next run passes it as Trusted, and a record
	// rewritten since fails even if it was signed again.
	_, err = audit.VerifyRemote(ctx, vkey, lyingServer{l}, &audit.RemoteOptions{Trusted: &rep.Checkpoint})
	var te *audit.TamperError
	if errors.As(err, &te) {
		fmt.Println(te.Seq, te.Reason)
	}

	// Output:
	// 3 2IEVhZD+skkH1xYuuZ5Zmaj74On32l1trj4NjRZ2kME= <nil>
	// 2 hash does not match the entry
}

// HTTPFetcher reads a running server's record; the record's routes need an
// agent credential.
func ExampleHTTPFetcher() {
	ctx := context.Background()
	var st memstore.Store
	l := exampleRecord(&st, 250)
	defer l.Close()

	// A stand-in for the server's GET /audit/checkpoint and GET /audit.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer svc_ak_example" {
			http.Error(w, `{"code":"auth.unauthenticated"}`, http.StatusUnauthorized)
			return
		}
		var v any
		var err error
		switch r.URL.Path {
		case "/audit/checkpoint":
			v, err = l.Checkpoint(r.Context())
		case "/audit":
			limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
			v, err = l.Page(r.Context(), r.URL.Query().Get("cursor"), limit)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		json.NewEncoder(w).Encode(v)
	}))
	defer srv.Close()

	pages := 0
	rep, err := audit.VerifyRemote(ctx, l.VerifierKey(),
		&audit.HTTPFetcher{BaseURL: srv.URL, Credential: "svc_ak_example"},
		&audit.RemoteOptions{Progress: func(done, total uint64) { pages++ }})
	fmt.Println(rep.Verified, pages, err)

	_, err = audit.VerifyRemote(ctx, l.VerifierKey(), &audit.HTTPFetcher{BaseURL: srv.URL}, nil)
	var he *audit.HTTPError
	fmt.Println(errors.As(err, &he), he.StatusCode)

	// Output:
	// 250 3 <nil>
	// true 401
}
