package audit_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"golang.org/x/mod/sumdb/note"
)

// exampleKey is a fixed record key so the examples' output is stable. A
// deployment generates its own with ed25519.GenerateKey.
func exampleKey() ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
}

func exampleNow() time.Time { return time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC) }

// Open a log, append entries inside store transactions, and verify it.
func ExampleOpen() {
	ctx := context.Background()
	var st memstore.Store
	l, err := audit.Open(ctx, &st, exampleKey(), &audit.Options{Origin: "pay.example.com/audit", Now: exampleNow})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	// The entry commits in the same transaction as the state change it
	// records: both or neither.
	var e audit.Entry
	err = l.Update(ctx, func(txn store.Txn) error {
		if err := txn.Set([]byte("payments/int_1"), []byte("settled")); err != nil {
			return err
		}
		e, err = l.Append(txn, audit.Record{
			Type:     "payment.settled",
			IntentID: "int_1",
			Actor:    audit.Actor{Kind: "system", ID: "settle"},
			Data:     json.RawMessage(`{"amount": {"value": "12.50", "currency": "EUR"}}`),
		})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(e.Seq, e.At, e.Type)
	fmt.Println(string(e.Data))

	if err := l.Verify(ctx, 0, 0, audit.Full, nil); err != nil {
		log.Fatal(err)
	}
	fmt.Println("verified")

	// Output:
	// 1 2026-11-22T10:00:00.123456Z payment.settled
	// {"amount":{"currency":"EUR","value":"12.50"}}
	// verified
}

// A verifier who holds only the verifier key checks that an entry is in
// the log.
func ExampleVerifyInclusion() {
	ctx := context.Background()
	var st memstore.Store
	l, err := audit.Open(ctx, &st, exampleKey(), &audit.Options{Origin: "pay.example.com/audit", Now: exampleNow})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	for i := range 5 {
		err := l.Update(ctx, func(txn store.Txn) error {
			_, err := l.Append(txn, audit.Record{Type: "gate.decision", Actor: audit.Actor{Kind: "agent", ID: fmt.Sprint("ak_", i)}})
			return err
		})
		if err != nil {
			log.Fatal(err)
		}
	}

	// Server side: the entry and its proof, as GET /audit/{seq} and its
	// proof endpoint would serve them.
	e, err := l.Get(ctx, 3)
	if err != nil {
		log.Fatal(err)
	}
	proof, err := l.Inclusion(ctx, 3, 0)
	if err != nil {
		log.Fatal(err)
	}

	// Client side: only the public verifier key.
	vkey := l.VerifierKey()
	fmt.Println(audit.VerifyInclusion(vkey, e, proof))
	e.Actor.ID = "ak_forged"
	fmt.Println(errors.Is(audit.VerifyInclusion(vkey, e, proof), audit.ErrTampered))

	// Output:
	// <nil>
	// true
}

// Tail the log: the backlog first, then entries as they commit.
func ExampleLog_Subscribe() {
	ctx := context.Background()
	var st memstore.Store
	l, err := audit.Open(ctx, &st, exampleKey(), &audit.Options{Now: exampleNow})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	appendOne := func(typ string) {
		err := l.Update(ctx, func(txn store.Txn) error {
			_, err := l.Append(txn, audit.Record{Type: typ, Actor: audit.Actor{Kind: "operator", ID: "op_1"}})
			return err
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	appendOne("operator.kill_switch")

	sub := l.Subscribe(ctx, 0)
	defer sub.Close()
	go appendOne("operator.breaker_reset") // a live entry
	for range 2 {
		e, err := sub.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(e.Seq, e.Type)
	}

	// Output:
	// 1 operator.kill_switch
	// 2 operator.breaker_reset
}

// Wait for the log to grow past what a follower has handled, then read
// what it needs itself.
func ExampleLog_WaitPast() {
	ctx := context.Background()
	var st memstore.Store
	l, err := audit.Open(ctx, &st, exampleKey(), &audit.Options{Now: exampleNow})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	handled, err := l.Size(ctx)
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		err := l.Update(ctx, func(txn store.Txn) error {
			_, err := l.Append(txn, audit.Record{Type: "operator.kill_switch", Actor: audit.Actor{Kind: "operator", ID: "op_1"}})
			return err
		})
		if err != nil {
			log.Fatal(err)
		}
	}()
	if err := l.WaitPast(ctx, handled); err != nil {
		log.Fatal(err)
	}
	e, err := l.Get(ctx, handled+1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(e.Seq, e.Type)

	// Output:
	// 1 operator.kill_switch
}

// Page through the log the way GET /audit does.
func ExampleLog_Page() {
	ctx := context.Background()
	var st memstore.Store
	l, err := audit.Open(ctx, &st, exampleKey(), &audit.Options{Now: exampleNow})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	err = l.Update(ctx, func(txn store.Txn) error {
		for i := range 5 {
			if _, err := l.Append(txn, audit.Record{Type: "agent.created", Actor: audit.Actor{Kind: "operator", ID: fmt.Sprint("op_", i)}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	cursor := ""
	for {
		p, err := l.Page(ctx, cursor, 2)
		if err != nil {
			log.Fatal(err)
		}
		for _, e := range p.Data {
			fmt.Print(e.Seq, " ")
		}
		fmt.Println("hasMore:", p.HasMore)
		if p.NextCursor == nil {
			break
		}
		cursor = *p.NextCursor
	}

	// Output:
	// 1 2 hasMore: true
	// 3 4 hasMore: true
	// 5 hasMore: false
}

// A client that pages the served entries re-verifies the hash chain and
// checks the Merkle root against the signed checkpoint.
func ExampleChainVerifier() {
	ctx := context.Background()
	var st memstore.Store
	l, err := audit.Open(ctx, &st, exampleKey(), &audit.Options{Now: exampleNow})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	err = l.Update(ctx, func(txn store.Txn) error {
		for i := range 3 {
			if _, err := l.Append(txn, audit.Record{Type: "memory.recorded", Actor: audit.Actor{Kind: "agent", ID: fmt.Sprint("ak_", i)}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	cp, err := l.Checkpoint(ctx) // GET /audit/checkpoint
	if err != nil {
		log.Fatal(err)
	}

	c := audit.NewChainVerifier(l.PublicKey(), true)
	for e, err := range l.Entries(ctx, 1, cp.TreeSize) { // GET /audit, page by page
		if err != nil {
			log.Fatal(err)
		}
		if err := c.Add(e); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(c.Size(), c.VerifyCheckpoint(l.VerifierKey(), cp))

	// Output:
	// 3 <nil>
}

// Prove to a client holding an older checkpoint that the log only grew.
func ExampleVerifyConsistency() {
	ctx := context.Background()
	var st memstore.Store
	l, err := audit.Open(ctx, &st, exampleKey(), &audit.Options{Now: exampleNow})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	add := func(n int) {
		err := l.Update(ctx, func(txn store.Txn) error {
			for range n {
				if _, err := l.Append(txn, audit.Record{Type: "gate.decision", Actor: audit.Actor{Kind: "agent", ID: "ak_1"}}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	add(3)
	old, err := l.Checkpoint(ctx) // the client saved this earlier
	if err != nil {
		log.Fatal(err)
	}
	add(4)
	p, err := l.Consistency(ctx, old.TreeSize, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.From, p.To, audit.VerifyConsistency(l.VerifierKey(), p, old))

	// Output:
	// 3 7 <nil>
}

// OpenReader verifies a log with only the public key, as
// "countersign audit verify --data DIR" does.
func ExampleOpenReader() {
	ctx := context.Background()
	var st memstore.Store
	w, err := audit.Open(ctx, &st, exampleKey(), &audit.Options{Now: exampleNow})
	if err != nil {
		log.Fatal(err)
	}
	err = w.Update(ctx, func(txn store.Txn) error {
		_, err := w.Append(txn, audit.Record{Type: "agent.revoked", Actor: audit.Actor{Kind: "operator", ID: "op_1"}})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	r, err := audit.OpenReader(ctx, &st, w.PublicKey(), nil)
	if err != nil {
		log.Fatal(err)
	}
	err = r.Verify(ctx, 0, 0, audit.Full, func(done, total uint64) { fmt.Printf("%d/%d\n", done, total) })
	fmt.Println(err)

	// Output:
	// 1/1
	// <nil>
}

// Appending through the store's own Update works too; subscribers then
// need a Notify after the commit.
func ExampleLog_Notify() {
	ctx := context.Background()
	var st memstore.Store
	l, err := audit.Open(ctx, &st, exampleKey(), &audit.Options{Now: exampleNow})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	sub := l.Subscribe(ctx, 0)
	defer sub.Close()

	err = st.Update(ctx, func(txn store.Txn) error {
		_, err := l.Append(txn, audit.Record{Type: "breaker.tripped", Actor: audit.Actor{Kind: "system", ID: "gate"}})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	l.Notify() // after the commit, not inside the function

	e, err := sub.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(e.Seq, e.Type)

	// Output:
	// 1 breaker.tripped
}

// A checkpoint is a C2SP signed note; anyone with the verifier key can
// open it with golang.org/x/mod/sumdb/note.
func ExampleLog_Checkpoint() {
	ctx := context.Background()
	var st memstore.Store
	l, err := audit.Open(ctx, &st, exampleKey(), &audit.Options{Origin: "pay.example.com/audit", Now: exampleNow})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	cp, err := l.Checkpoint(ctx)
	if err != nil {
		log.Fatal(err)
	}
	v, err := note.NewVerifier(l.VerifierKey())
	if err != nil {
		log.Fatal(err)
	}
	n, err := note.Open([]byte(cp.Note), note.VerifierList(v))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(n.Text)
	fmt.Println(audit.VerifyCheckpoint(l.VerifierKey(), cp))

	// Output:
	// pay.example.com/audit
	// 0
	// 47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=
	// <nil>
}

// Verify reports the first damaged entry as a *TamperError.
func ExampleLog_Verify() {
	ctx := context.Background()
	var st memstore.Store
	l, err := audit.Open(ctx, &st, exampleKey(), &audit.Options{Now: exampleNow})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	err = l.Update(ctx, func(txn store.Txn) error {
		for range 3 {
			if _, err := l.Append(txn, audit.Record{Type: "gate.decision", Actor: audit.Actor{Kind: "agent", ID: "ak_1"}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(l.Verify(ctx, 0, 0, audit.Full, nil))

	// Someone edits entry 2 behind the log's back. (The key layout is an
	// implementation detail, used here only to simulate the damage.)
	key := []byte("audit/e/\x00\x00\x00\x00\x00\x00\x00\x02")
	err = st.Update(ctx, func(txn store.Txn) error {
		v, err := txn.Get(key)
		if err != nil {
			return err
		}
		v[len(v)-3] ^= 1 // a letter of "type"
		return txn.Set(key, v)
	})
	if err != nil {
		log.Fatal(err)
	}
	err = l.Verify(ctx, 0, 0, audit.Hashes, nil)
	var te *audit.TamperError
	if errors.As(err, &te) {
		fmt.Println(errors.Is(err, audit.ErrTampered), te.Seq, te.Reason)
	}

	// Output:
	// <nil>
	// true 2 entry hash does not match the stored entry
}
