// Package memory is Countersign's bi-temporal, signed memory store: an
// agent remembers facts with two clocks, recalls exactly what was known at
// any past moment, assembles a context within a token budget, anyone
// verifies what it was given with only the deployment's public key, and
// only a person erases (DESIGN §9, docs/design/memory.md).
//
// # Two clocks
//
// Every record has a valid time (ValidFrom, ValidTo: when the fact is true
// in the world, given by the caller, ValidTo open-ended when nil) and a
// transaction time (RecordedAt, SupersededAt: when this store learned it
// and when it stopped believing it, set by the server only). Recall at
// (validAt, txAt) returns the records valid at validAt as the store knew
// them at txAt: a record recorded after txAt is invisible, one superseded
// after txAt is still returned. Nothing is overwritten: remembering a
// record whose subject already has a current record overlapping it in
// valid time supersedes that record (closing its transaction time) and,
// where the old record was valid over more time than the new one covers,
// the store writes the remainder as a new record derived from the old one
// (clipping), so that at every transaction time the current records of a
// subject never overlap in valid time.
//
// # Seals and artifacts
//
// A record's content (its id, namespace, subject, kind, body, valid time,
// recording time, source, edges and a random salt) has a SHA-256 digest
// over its RFC 8785 canonical JSON; the memory.recorded entry that commits
// it to the signed record carries that digest, never the body. Everything
// the store hands out — a record, a recall page, an assembled context, an
// erasure proof — is an artifact signed as a whole with the record key
// (audit.Log.SignStatement), so [Verify] checks it offline with the
// deployment's verifier key alone.
//
// # Crypto-shredding
//
// Each body is encrypted under its own random key (AES-256-GCM, the
// record id as additional data); the key is stored sealed under the
// server's seal key when one is configured. The record holds digests only,
// so erasure destroys the key, the ciphertext and every index entry while
// the record stays append-only. A store that can purge deleted data
// physically ([store.Shredder], pebblestore) is asked to after every
// erasure.
package memory
