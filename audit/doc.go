// Package audit keeps Countersign's record: an append-only log of signed,
// hash-linked entries, one for every state change, that is also the leaf
// sequence of a Merkle tree with signed checkpoints. Anyone holding the
// record's public key can check that an entry is genuine, that it is in the
// log, and that the log only ever grew.
//
// # Entries
//
// An [Entry] is served as JSON:
//
//	{"seq":42,"at":"2026-11-22T10:00:00.123456Z","type":"payment.settled",
//	 "intentId":"int_01J...","actor":{"kind":"agent","id":"ak_..."},
//	 "requestId":"req_...","rationale":"...","data":{...},
//	 "prev":"<hex>","hash":"<hex>","sig":"<base64url>"}
//
// seq starts at 1 and has no gaps. prev is the previous entry's hash (64
// zeros for seq 1). hash is the lowercase hex SHA-256 of the RFC 8785 (JCS)
// canonical JSON of the entry without "hash" and "sig"; sig is the
// unpadded base64url Ed25519 signature by the record key over the 32 raw
// hash bytes. at is RFC 3339 UTC with exactly six fractional digits.
//
// A caller supplies a [Record]: a non-empty Type, an [Actor] whose Kind is
// agent, operator or system and whose ID is non-empty, optional ids and
// rationale (valid UTF-8), and optional Data, which must be a JSON object.
// Data is stored and served in canonical form (keys sorted, numbers in
// ECMAScript form); because RFC 8785 reads every number as an IEEE double,
// amounts and other exact values belong in Data as strings. A canonical
// entry may not exceed 1 MiB. Entries must never carry secrets.
//
// # Appending
//
// [Log.Append] runs inside the caller's store transaction, so an entry
// commits exactly when the change it records does:
//
//	err := l.Update(ctx, func(txn store.Txn) error {
//		if err := txn.Set(paymentKey, settled); err != nil {
//			return err
//		}
//		_, err := l.Append(txn, audit.Record{Type: "payment.settled", ...})
//		return err
//	})
//
// Append reads the head from the transaction and keeps nothing between
// calls, so it is correct when the store re-runs the function, and an
// aborted transaction leaves no trace (its seq is reused). [Log.Update]
// wakes subscribers after a commit that appended; code that appends through
// the store's own Update must call [Log.Notify] after that Update returns.
//
// # Reading
//
// [Log.Get], [Log.Page] (opaque cursors bound to the log's origin; see
// [Log.CursorAfter]), [Log.Entries] and [Log.Subscribe], a live tail that
// delivers the backlog and then new entries with no gap and no duplicate.
// Reads check each entry's hash against its stored body and return an error
// matching [ErrTampered] for a damaged one rather than serve it.
//
// # Merkle tree and checkpoints
//
// Leaf i (0-based) of the tree is entry seq i+1; its record data are the 32
// raw entry-hash bytes, so its leaf hash is tlog.RecordHash(hash) =
// SHA-256(0x00 ‖ hash) and the tree is RFC 6962's, computed with
// golang.org/x/mod/sumdb/tlog. tlog's stored hashes are written in the same
// transaction as the entry.
//
// A checkpoint ([Log.Checkpoint]) is a C2SP tlog-checkpoint
//
//	<origin>
//	<tree size, decimal>
//	<root hash, standard base64>
//
// signed as a C2SP signed note (golang.org/x/mod/sumdb/note) with the
// record key under the key name origin ([Options.Origin]). The verifier
// key, [Log.VerifierKey], is "<origin>+<key hash>+<base64 key>" and is all
// a client needs: [VerifyCheckpoint], [VerifyInclusion] (which also
// re-hashes the entry and checks its signature), [VerifyConsistency], and
// [ChainVerifier] for a client that pages the whole log. [Log.Inclusion]
// and [Log.Consistency] serve proofs for any past tree size, with a
// checkpoint signed for that size on demand.
//
// # Verification
//
// [Log.Verify] re-checks the stored log at two depths. [Hashes]: every
// entry present, its body hashing to its hash, seq continuity, prev links,
// every stored Merkle hash against the hashes recomputed from the leaves,
// the root against a checkpoint for that size, and the head record.
// [Full] adds every Ed25519 signature, that every entry parses and is in
// RFC 8785 canonical form, and the checkpoint signature. Every finding is a
// *[TamperError] naming the first bad seq. [OpenReader] opens a log with
// the public key only, for offline verification.
//
// # Storage layout
//
// All keys live under "audit/": audit/e/<seq> holds an entry, audit/t/<leaf>
// the tlog hashes that became final when that leaf was added (the leaf hash
// and one interior hash per trailing 1 bit of the leaf index, so one key
// per leaf rather than one per hash), and audit/head the size and newest
// hash. Integers are 8-byte big-endian so key order is seq order.
//
// An entry is stored as one format byte, the 32-byte hash, the 64-byte
// signature and the canonical body: the exact bytes that were hashed,
// computed once at append. Verification at depth Hashes is then SHA-256
// over stored bytes plus a single-pass scan for seq and prev, with no JSON
// decoding and no re-canonicalization, which is what makes it run at
// several hundred thousand entries a second; depth Full re-parses the body,
// checks that re-encoding it reproduces it byte for byte and that Data is
// canonical (jcs.Transform), and checks the signature. Reads reconstruct
// the served Entry from the body and the same round-trip check guarantees
// that what is served is what was hashed. The body is written by a small
// hand-rolled encoder rather than json.Marshal plus jcs.Transform, because
// it runs inside every append; tests and a fuzzer check it against
// jcs.Transform, and the JCS library reproduces all canonicalization vectors
// of the ADP conformance suite (testdata/adp).
//
// # Performance
//
// Measured on the 2-core development machine (AMD EPYC, shared with other
// work, so numbers vary by ±30%):
//
//	go test -run '^$' -bench 'Append64|AppendFn' -benchtime 3s ./audit/
//	go test -run '^$' -bench Verify -benchtime 3x ./audit/
//	go test -run '^$' -bench InclusionProof -benchtime 5000x -timeout 30m ./audit/
//
//	BenchmarkAppend64 (64 appenders, pebblestore, fsync)  ~22,000-24,000 entries/s, ~30 txn/fsync
//	                                                       (3,000-16,000 while other jobs load the machine)
//	BenchmarkAppendFn (Append alone)                       ~25 µs/entry, 19 µs of it Ed25519 signing
//	BenchmarkVerifyHashes (100k entries)                   ~750,000 (memstore) / ~900,000 (pebble) entries/s
//	BenchmarkVerifyFull (100k entries, 2 cores)            ~28,500 entries/s
//	BenchmarkInclusionProof (1M entries, memstore)         ~36 µs/proof at the latest size,
//	                                                       ~71 µs at a past size (one signature),
//	                                                       ~96 µs to verify one (two Ed25519 checks)
//
// Appends are serialized by the store (each entry's hash covers its
// predecessor's), and pebblestore runs transaction functions on its single
// committer goroutine, so append throughput is bounded by Append's cost on
// that goroutine plus the committer's idle time during each group's fsync.
// Signing is 70% of Append (CPU profile of BenchmarkAppend64); the rest is
// canonicalizing Data (8%), reading the head and the tlog hashes, and three
// Sets. The committer runs no functions while a group's fsync is in flight,
// so a group of ~30 appends costs ~750 µs of signing and hashing plus the
// fsync; overlapping the next group's functions with the previous group's
// fsync (in pebblestore) would lift the ceiling towards 1/25 µs = 40,000
// entries/s. Depth Full is bound by Ed25519 verification (87% of its time),
// which runs on GOMAXPROCS goroutines.
package audit
