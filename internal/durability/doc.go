// Package durability holds the tests that cut the power under the money
// path and break its disk. It has no code of its own; everything is in its
// tests.
//
// # Why not kill the process
//
// A SIGKILL ends the process but not the machine: every byte the process
// handed to the kernel with write(2) is still in the page cache, and the
// kernel writes it to disk later whether or not anyone called fsync. A
// store that forgot to sync, or a money path that told its caller
// "settled" before the commit was synced, passes every kill test. (The
// crash tests of cmd/countersign kill the server, and are worth having for
// what they do test: the reconciler, the idempotency resume, the webhook
// cursor across a restart.) Only losing what was not synced tests a sync.
//
// # Power cuts
//
// The power-cut tests run the real stack — store/pebblestore, audit.Log,
// pay.Service with a settle/fake card rail whose ledger lives in the same
// store (sharing its log, fake.Options.SharedLog, as the reference
// server's sandbox does; a quarter of the runs give it commits of its
// own), and a webhook.Dispatcher delivering to a receiver on the loopback
// interface — on Pebble's crashable in-memory file system
// (vfs.NewCrashableMem). That file system remembers, per file and per
// directory, what was last synced; MemFS.CrashClone copies it as a power
// cut at that instant would leave it: everything synced, and a seeded
// random share (UnsyncedDataPercent, 0 to 100) of the 4 KiB blocks and
// directory entries that were written but not synced.
//
// TestPowerCut runs a workload — several goroutines paying under fresh
// idempotency keys (some above the confirm threshold, so held), an
// operator approving the held ones, refunds of settled ones, the webhook
// dispatcher, the reconciler, and shreds (pebblestore.Store.Shred, as
// memory erasure does: a memtable flush, a compaction and the overwriting
// of obsolete logs) — with a rail that loses about one answer in thirty. At
// seeded random counts of acknowledgements it notes every outcome already
// acknowledged to a caller (a call that returned) and what reads of the
// store showed (reads only ever see synced data: the newest record entry,
// the webhook deliveries marked delivered), then takes a clone. After ten
// clones it stops the workload and starts a fresh one, so that the record
// each clone must verify stays short. Each clone, and finally the live
// files after a clean stop, is opened as a restarted server opens its data
// directory — store, record, rail, payment service and its reconciler,
// webhook dispatcher — and checked:
//
//   - no acknowledged payment, approval or refund is lost: each intent
//     exists with at least its acknowledged status, its receipt, and the
//     record entry the receipt names; the idempotency replay returns the
//     acknowledged result (every payment acknowledged since the previous
//     clone and a sample of the older ones; all of them after the clean
//     stop); and what a read showed before the cut is still there;
//   - nothing settled twice: one intent per idempotency key, at most one
//     rail payment per intent, amounts, references and refunds agreeing
//     with the rail both ways, the rail's own ledger invariants
//     (fake.Rail.CheckLedger) and the custody books (ledger.Check);
//   - the record is unbroken: audit.Log.Verify at full depth, from entry 1
//     to the head;
//   - every intent is resolvable: after the reconciler ran none is left
//     settling or with a refund in flight, and the rail agrees with each;
//   - no webhook delivery is lost: the delivered stay delivered, and every
//     payment.settled entry is delivered once the dispatcher caught up;
//   - and the recovered server takes a new payment.
//
// TestPowerCutAtEveryWrite cuts, instead of at random, before every
// write, sync, create, rename and removal the store makes during one
// payment, one approval, one refund, one delivery pass, one shred and one
// payment after it.
//
// TestPowerCutCatchesSkippedSync makes the syncs of the same file system
// lie once the server is set up, and requires the harness to find
// acknowledged payments lost at every cut: a harness that cannot fail
// proves nothing.
//
// # Disk faults
//
// TestDiskFault wraps the file system with Pebble's errorfs and makes the
// write-ahead log's fsync fail, its write fail, or every write fail with
// ENOSPC (a full disk), at each of the commits a payment makes. After the
// fault the store must refuse every later commit (pebblestore.ErrFailed),
// the payment service must answer an error and no outcome, reads must show
// nothing half-written, and a restart on a healthy disk — the files as the
// process left them, or what a power cut would leave of them — must
// recover to a consistent state in which the failed payment, retried as
// it was, gets one answer, and new payments succeed. (The HTTP side, a 503
// store.unavailable with action retry-as-is, is tested in package
// httpserver.)
//
// # Running
//
// The seeds of the default run are in testdata/seeds.txt; the run logs the
// seed of every epoch. Replay one, or run more cuts, with
//
//	go test ./internal/durability -run 'TestPowerCut$' -durability.seed 12345
//	go test ./internal/durability -run 'TestPowerCut$' -durability.cuts 2000
//
// (-durability.seed 0 draws a fresh seed from the clock and logs it.) A
// seed fixes the keys, the amounts, which payments are held or refunded,
// the rail's lost answers, when each clone is taken (after which
// acknowledgement) and which unsynced blocks it keeps; it cannot fix the
// goroutine schedule, so which commits are in flight at a cut can differ
// between runs of one seed, and a failure names its epoch and cut to look
// at rather than promising to repeat exactly.
package durability
