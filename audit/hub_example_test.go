package audit_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// appendExample appends one system entry of type typ.
func appendExample(ctx context.Context, l *audit.Log, typ string) {
	err := l.Update(ctx, func(txn store.Txn) error {
		_, err := l.Append(txn, audit.Record{Type: typ, Actor: audit.Actor{Kind: "system", ID: "example"}})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Many subscribers share one Hub; each gets its backlog and then the live
// entries, in order, exactly once.
func ExampleHub() {
	ctx := context.Background()
	var st memstore.Store
	l, err := audit.Open(ctx, &st, exampleKey(), &audit.Options{Origin: "pay.example.com/audit", Now: exampleNow})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	appendExample(ctx, l, "agent.created")

	hub := audit.NewHub(l, nil)
	defer hub.Close()

	// After seq 0: the backlog (seq 1), then what is appended next.
	sub, err := hub.Subscribe(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	appendExample(ctx, l, "gate.decision")
	appendExample(ctx, l, "payment.settled")

	for range 3 {
		e, err := sub.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(e.Entry.Seq, e.Entry.Type)
	}
	// Output:
	// 1 agent.created
	// 2 gate.decision
	// 3 payment.settled
}

// NewHub with a smaller buffer: a subscriber more than 64 live entries
// behind is dropped with ErrSlowSubscriber.
func ExampleNewHub() {
	ctx := context.Background()
	var st memstore.Store
	l, err := audit.Open(ctx, &st, exampleKey(), &audit.Options{Origin: "pay.example.com/audit", Now: exampleNow})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	hub := audit.NewHub(l, &audit.HubOptions{BufferSize: 64})
	defer hub.Close()
	fmt.Printf("%+v\n", hub.Stats())
	// Output:
	// {Subscribers:0 Live:0 Position:0 Buffered:0 Dropped:0 History:0}
}

// A streaming server waits on the subscription and a heartbeat at once:
// it drains TryNext, then selects on Ready. A subscriber that was dropped
// resumes after the last seq it delivered.
func ExampleHubSub_TryNext() {
	ctx := context.Background()
	var st memstore.Store
	l, err := audit.Open(ctx, &st, exampleKey(), &audit.Options{Origin: "pay.example.com/audit", Now: exampleNow})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	hub := audit.NewHub(l, nil)
	defer hub.Close()
	sub, err := hub.Subscribe(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	go func() {
		appendExample(ctx, l, "gate.decision")
		appendExample(ctx, l, "payment.settled")
	}()

	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	received := 0
	for {
		for {
			e, ok, err := sub.TryNext(ctx)
			if errors.Is(err, audit.ErrSlowSubscriber) {
				return // the client resumes after the last seq it got
			}
			if err != nil {
				log.Fatal(err)
			}
			if !ok {
				break
			}
			fmt.Printf("id: %d\nevent: %s\n\n", e.Entry.Seq, e.Entry.Type)
			received++
		}
		if received == 2 {
			break
		}
		select {
		case <-sub.Ready():
		case <-heartbeat.C:
			fmt.Println(": heartbeat")
		}
	}
	// Output:
	// id: 1
	// event: gate.decision
	//
	// id: 2
	// event: payment.settled
}

// Closing the hub ends every subscription with ErrHubClosed, which a
// server treats as the clean end of its streams.
func ExampleHub_Close() {
	ctx := context.Background()
	var st memstore.Store
	l, err := audit.Open(ctx, &st, exampleKey(), &audit.Options{Origin: "pay.example.com/audit", Now: exampleNow})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	hub := audit.NewHub(l, nil)
	sub, err := hub.Subscribe(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	hub.Close()
	_, err = sub.Next(ctx)
	fmt.Println(errors.Is(err, audit.ErrHubClosed))
	_, err = hub.Subscribe(ctx, 0)
	fmt.Println(errors.Is(err, audit.ErrHubClosed))
	// Output:
	// true
	// true
}

// Subscribe resumes after the last seq a client received; a resume point
// past the newest entry belongs to another log and is refused.
func ExampleHub_Subscribe() {
	ctx := context.Background()
	var st memstore.Store
	l, err := audit.Open(ctx, &st, exampleKey(), &audit.Options{Origin: "pay.example.com/audit", Now: exampleNow})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	for _, typ := range []string{"agent.created", "gate.decision", "payment.settled"} {
		appendExample(ctx, l, typ)
	}
	hub := audit.NewHub(l, nil)
	defer hub.Close()

	sub, err := hub.Subscribe(ctx, 1) // the client last saw seq 1
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	for range 2 {
		e, err := sub.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(e.Entry.Seq, e.Entry.Type)
	}

	_, err = hub.Subscribe(ctx, 99)
	fmt.Println(errors.Is(err, audit.ErrOutOfRange))
	// Output:
	// 2 gate.decision
	// 3 payment.settled
	// true
}

// A subscriber that stops reading is dropped once it is more than
// BufferSize entries behind; Done tells a caller busy elsewhere (a server
// blocked writing to the client), Err says why, and Stats counts it.
func ExampleHubSub_Done() {
	ctx := context.Background()
	var st memstore.Store
	l, err := audit.Open(ctx, &st, exampleKey(), &audit.Options{Origin: "pay.example.com/audit", Now: exampleNow})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	hub := audit.NewHub(l, &audit.HubOptions{BufferSize: 2})
	defer hub.Close()
	sub, err := hub.Subscribe(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	if _, _, err := sub.TryNext(ctx); err != nil { // caught up: now reading live
		log.Fatal(err)
	}
	for range 3 { // and then it reads nothing
		appendExample(ctx, l, "gate.decision")
	}
	<-sub.Done()
	fmt.Println(errors.Is(sub.Err(), audit.ErrSlowSubscriber))
	s := hub.Stats()
	fmt.Println(s.Subscribers, s.Dropped, s.Position)
	// Output:
	// true
	// 0 1 3
}
