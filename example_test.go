package countersign_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store/memstore"
)

// The whole service on an in-memory store, in-process. examples/embed
// goes on to pay, buy, remember and read the record.
func ExampleOpen() {
	ctx := context.Background()
	st := memstore.New(nil)
	defer st.Close()
	card, _ := fake.New(fake.SandboxCard, &fake.Options{Store: st})
	_, recordKey, _ := ed25519.GenerateKey(nil)
	operatorPub, _, _ := ed25519.GenerateKey(nil)

	node, err := countersign.Open(ctx, st, &countersign.Options{
		RecordKey:    recordKey,
		OperatorKeys: []operator.PublicKey{{KeyID: "op-alice", Public: operatorPub}},
		Rails:        []settle.Rail{card},
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	defer node.Close(ctx)

	fmt.Println(node.Pay().Policy().Rails[0].Name)
	// node.Handler() is the HTTP surface: http.ListenAndServe(addr, node.Handler())
	// Output:
	// sandbox-card
}
