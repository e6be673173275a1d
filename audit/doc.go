// Package audit keeps Countersign's record: an append-only log of
// hash-linked entries, one for every state change, that is also the leaf
// sequence of a Merkle tree whose checkpoint is signed once per commit. Anyone holding the
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
//	 "prev":"<hex>","hash":"<hex>"}
//
// seq starts at 1 and has no gaps. prev is the previous entry's hash (64
// zeros for seq 1). hash is the lowercase hex SHA-256 of the RFC 8785 (JCS)
// canonical JSON of the entry without "hash" and "sig". at is RFC 3339 UTC
// with exactly six fractional digits. Entries carry no signature of their
// own: each hash covers the one before it and the Merkle root covers them
// all, so the checkpoint signed once per commit (see below) authenticates
// every entry. Only an entry appended with [Record].Signed also carries
// "sig", the unpadded base64url Ed25519 signature by the record key over
// its 32 raw hash bytes, for an artifact that must verify on its own
// ([VerifyEntry]); so does every entry of a log written before checkpoints
// were kept per commit.
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
// aborted transaction leaves no trace (its seq is reused). Append registers
// a commit hook ([store.Committer]) that signs the checkpoint of the head
// once per commit group and stores it in the same atomic commit, so the
// stored log is never ahead of a stored signature; on a store without the
// hook every Append re-signs it. [Log.Update]
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
// re-hashes the entry, and checks its own signature if it has one),
// [VerifyConsistency], and
// [ChainVerifier] for a client that pages the whole log. [ParseVerifierKey]
// reads the key (the line of record.pub), [ParseCheckpoint] opens a
// checkpoint kept as its bare signed note, and [VerifyRemote] verifies a
// whole record from a [Fetcher] (a running server through [HTTPFetcher],
// files, a cache), optionally against a checkpoint trusted from an earlier
// run, so a fork or a rewrite signed again is caught. [Log.Inclusion]
// and [Log.Consistency] serve proofs for any past tree size, with a
// checkpoint signed for that size on demand.
//
// # Verification
//
// [Log.Verify] re-checks the stored log at two depths. [Hashes]: every
// entry present, its body hashing to its hash, seq continuity, prev links,
// every stored Merkle hash against the hashes recomputed from the leaves,
// the root against a checkpoint for that size, and the head record.
// [Full] adds that every entry parses and is in RFC 8785 canonical form,
// the signature of every entry that has one, and the stored checkpoint's
// signature. Every finding is a
// *[TamperError] naming the first bad seq. [OpenReader] opens a log with
// the public key only, for offline verification.
//
// # Storage layout
//
// All keys live under "audit/": audit/e/<seq> holds an entry, audit/t/<leaf>
// the tlog hashes that became final when that leaf was added (the leaf hash
// and one interior hash per trailing 1 bit of the leaf index, so one key
// per leaf rather than one per hash), audit/head the size and newest
// hash, and audit/cp the signed checkpoint of the head. Integers are 8-byte big-endian so key order is seq order.
//
// An entry is stored as one format byte, the 32-byte hash, the 64-byte
// signature (format 1, entries signed on their own, only) and the
// canonical body: the exact bytes that were hashed,
// computed once at append. Verification at depth Hashes is then SHA-256
// over stored bytes plus a single-pass scan for seq and prev, with no JSON
// decoding and no re-canonicalization, which is what makes it run at
// several hundred thousand entries a second; depth Full re-parses the body,
// checks that re-encoding it reproduces it byte for byte and that Data is
// canonical (jcs.Transform), and checks any signature. Reads reconstruct
// the served Entry from the body and the same round-trip check guarantees
// that what is served is what was hashed. The body is written by a small
// hand-rolled encoder rather than json.Marshal plus jcs.Transform, because
// it runs inside every append; tests and a fuzzer check it against
// jcs.Transform, and the JCS library reproduces all canonicalization vectors
// of the ADP conformance suite (testdata/adp).
//
// # Performance
//
// Measured on the 2-core development machine; docs/PERFORMANCE.md has the
// commands and the current figures:
//
//	go test -run '^$' -bench 'Append64|AppendFn' -benchtime 3s ./audit/
//	go test -run '^$' -bench Verify -benchtime 3x ./audit/
//	go test -run '^$' -bench VerifyFull1M -benchtime 3x -timeout 30m ./audit/
//	go test -run '^$' -bench InclusionProof -benchtime 5000x -timeout 30m ./audit/
//
// Appends are serialized by the store (each entry's hash covers its
// predecessor's), and pebblestore runs transaction functions on its single
// committer goroutine, so append throughput is bounded by Append's cost on
// that goroutine (hashing and the tree, no signature) and the fsync of each
// group; one checkpoint signature per group is amortized over its entries.
package audit
