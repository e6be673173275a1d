// Checking the record in the browser with nothing but the deployment's
// record verifier key: an entry's hash (SHA-256 of its RFC 8785 canonical
// JSON without hash and sig), its signature when it has one, its RFC 6962
// inclusion proof, and the C2SP signed checkpoint the proof leads to.
// The same checks as the Go verifier (audit.VerifyInclusion); the server
// is trusted for nothing but bytes.

import { b64, unb64, sha256 } from "./sign.js";

const enc = new TextEncoder();

// canonical is RFC 8785 (JCS) for values JSON.parse produced: ECMAScript
// number and string serialization, object members sorted by UTF-16 code
// units (what Array.prototype.sort compares).
export function canonical(v) {
  if (v === null || typeof v === "boolean" || typeof v === "string") return JSON.stringify(v);
  if (typeof v === "number") {
    if (!Number.isFinite(v)) throw new Error("a number JSON cannot hold");
    return JSON.stringify(v);
  }
  if (Array.isArray(v)) return "[" + v.map(canonical).join(",") + "]";
  if (typeof v === "object") {
    return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + canonical(v[k])).join(",") + "}";
  }
  throw new Error("not a JSON value");
}

function hex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function equal(a, b) {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a[i] ^ b[i];
  return d === 0;
}

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let i = 0;
  for (const p of parts) {
    out.set(p, i);
    i += p.length;
  }
  return out;
}

// parseVerifierKey reads "<name>+<8 hex key hash>+<base64(0x01 ‖ key)>",
// the line of record.pub, and checks the key hash.
export async function parseVerifierKey(vkey) {
  // The name holds no "+"; the base64 key may.
  const m = /^([^+\s]+)\+([0-9a-f]{8})\+([A-Za-z0-9+/=]+)$/.exec(vkey.trim());
  if (!m) throw new Error("not a note verifier key");
  const [, name, hash] = m;
  let raw;
  try {
    raw = unb64(m[3]);
  } catch {
    throw new Error("the verifier key's key is not base64");
  }
  if (raw.length !== 33 || raw[0] !== 1) throw new Error("the verifier key is not an Ed25519 note key");
  const h = await sha256(concat(enc.encode(name + "\n"), raw));
  if (hex(h.slice(0, 4)) !== hash) throw new Error("the verifier key's hash does not match its key");
  const pub = await crypto.subtle.importKey("raw", raw.slice(1), { name: "Ed25519" }, false, ["verify"]);
  return { name, keyHash: h.slice(0, 4), pub };
}

// openCheckpoint verifies a C2SP signed note by the key and returns the
// checkpoint it states: origin, tree size and root hash.
export async function openCheckpoint(vk, note) {
  const split = note.lastIndexOf("\n\n");
  if (split < 0 || !note.endsWith("\n")) throw new Error("the checkpoint is not a signed note");
  const text = note.slice(0, split + 1);
  const sigLines = note.slice(split + 2, -1).split("\n");
  let ok = false;
  for (const l of sigLines) {
    const m = /^\u2014 (\S+) (\S+)$/.exec(l);
    if (!m) throw new Error("malformed signature line in the checkpoint");
    if (m[1] !== vk.name) continue;
    const sig = unb64(m[2]);
    if (sig.length !== 68 || !equal(sig.slice(0, 4), vk.keyHash)) continue;
    if (await crypto.subtle.verify({ name: "Ed25519" }, vk.pub, sig.slice(4), enc.encode(text))) ok = true;
  }
  if (!ok) throw new Error("the checkpoint is not signed by the record key");
  const lines = text.split("\n");
  if (lines.length < 4 || lines[0] !== vk.name) throw new Error("the checkpoint's origin is not the record's");
  if (!/^(0|[1-9][0-9]{0,15})$/.test(lines[1])) throw new Error("the checkpoint's tree size is malformed");
  const root = unb64(lines[2]);
  if (root.length !== 32) throw new Error("the checkpoint's root hash is malformed");
  return { origin: lines[0], size: BigInt(lines[1]), root };
}

// entryHash recomputes an entry's hash: SHA-256 of its canonical JSON
// without hash and sig (members that are empty are absent, as served).
export async function entryHash(entry) {
  const body = {};
  for (const [k, v] of Object.entries(entry)) {
    if (k === "hash" || k === "sig") continue;
    if ((k === "intentId" || k === "rationale" || k === "requestId") && v === "") continue;
    body[k] = v;
  }
  return sha256(enc.encode(canonical(body)));
}

async function node(l, r) {
  return sha256(concat(Uint8Array.of(1), l, r));
}

// rootFromInclusion runs RFC 9162 §2.1.3.2: the root that leaf at index
// in a tree of size gives with the proof's hashes, or an error.
export async function rootFromInclusion(index, size, leaf, proof) {
  if (index >= size) throw new Error("the leaf is outside the tree");
  let fn = index, sn = size - 1n, r = leaf;
  for (const p of proof) {
    if (p.length !== 32) throw new Error("a proof hash is malformed");
    if (sn === 0n) throw new Error("the proof is too long");
    if ((fn & 1n) === 1n || fn === sn) {
      r = await node(p, r);
      while ((fn & 1n) === 0n && fn !== 0n) {
        fn >>= 1n;
        sn >>= 1n;
      }
    } else {
      r = await node(r, p);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  if (sn !== 0n) throw new Error("the proof is too short");
  return r;
}

// verifyEntry checks an entry and its inclusion proof (GET
// /audit/entries/{seq}) against the signed checkpoint in the proof.
// It resolves to {treeSize} or throws an Error saying what failed.
export async function verifyEntry(vk, entry, proof) {
  const h = await entryHash(entry);
  if (hex(h) !== entry.hash) throw new Error("the entry's hash does not match its contents");
  if (entry.sig) {
    const s = unb64(entry.sig.replace(/-/g, "+").replace(/_/g, "/") + "==".slice(0, (4 - (entry.sig.length % 4)) % 4));
    if (!(await crypto.subtle.verify({ name: "Ed25519" }, vk.pub, s, h))) throw new Error("the entry's signature does not verify");
  }
  const cp = await openCheckpoint(vk, proof.checkpoint.note);
  const seq = BigInt(entry.seq);
  if (BigInt(proof.seq) !== seq || BigInt(proof.leafIndex) !== seq - 1n || BigInt(proof.treeSize) !== cp.size) {
    throw new Error("the proof is for another entry or tree");
  }
  const leaf = await sha256(concat(Uint8Array.of(0), h));
  if (proof.leafHash && proof.leafHash !== b64(leaf)) throw new Error("the proof's leaf hash is not the entry's");
  const root = await rootFromInclusion(seq - 1n, cp.size, leaf, proof.hashes.map(unb64));
  if (!equal(root, cp.root)) throw new Error("the proof does not lead to the signed root");
  return { treeSize: cp.size };
}
