// Package countersign is the whole service in one call: agents pay and buy
// under human oversight, through a deny-first gate whose every decision is
// appended to a signed, hash-linked record in the same transaction that
// makes it.
//
// [Open] builds the service on a store (Pebble, the in-memory store, or
// your own store.Store that passes storetest): the record, the money path
// with commerce and the protocol surface attached, the ADP identity, the
// memory, the webhooks, and the background work that keeps them. The
// node's domain services are for in-process use; [Node.Handler] is the
// whole HTTP surface, the one the reference server (cmd/countersign)
// serves.
//
//	st := memstore.New(nil)
//	node, err := countersign.Open(ctx, st, &countersign.Options{
//		RecordKey:    recordKey,
//		OperatorKeys: []operator.PublicKey{{KeyID: "op-alice", Public: alice}},
//		Rails:        sandboxRails,
//	})
//	if err != nil { ... }
//	defer node.Close(ctx)
//	res, err := node.Pay().PayInstruction(ctx, caller, instruction, "", "req-1")
//	http.ListenAndServe("127.0.0.1:8080", node.Handler())
//
// The store stays yours: open it before, close it after [Node.Close].
package countersign
