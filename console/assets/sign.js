// Operator request signing in the browser: the Svc-Operator header of
// docs/DESIGN.md §5, byte for byte as the Go signer (package operator)
// makes it. The private key is imported once into a non-extractable
// WebCrypto CryptoKey: after import no script, this one included, can
// read it back, and it is never sent or stored.

const enc = new TextEncoder();

// b64 encodes bytes as standard base64 with padding; b64url without
// padding (RFC 4648 §5), the nonce's and the body digest's encoding.
export function b64(bytes) {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

export function b64url(bytes) {
  return b64(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export function unb64(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export async function sha256(bytes) {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
}

// importOperatorKey turns a private JWK (text) into the key the console
// signs with. Only an Ed25519 (OKP) or P-256 (EC) private key with a kid
// is accepted; the kid is the key id the server knows the key by.
export async function importOperatorKey(text) {
  let jwk;
  try {
    jwk = JSON.parse(text);
  } catch {
    throw new Error("the key is not JSON: paste or choose the operator's private JWK file");
  }
  if (jwk === null || typeof jwk !== "object" || Array.isArray(jwk)) {
    throw new Error("the key is not a JWK object");
  }
  if (typeof jwk.kid !== "string" || !/^[\x21-\x7e]{1,128}$/.test(jwk.kid)) {
    throw new Error("the key has no kid (the key id the server trusts it under)");
  }
  if (typeof jwk.d !== "string") {
    throw new Error("this is a public key: the console needs the private key (it has a \"d\" member)");
  }
  let alg, params;
  if (jwk.kty === "OKP" && jwk.crv === "Ed25519") {
    alg = "EdDSA";
    params = { name: "Ed25519" };
  } else if (jwk.kty === "EC" && jwk.crv === "P-256") {
    alg = "ES256";
    params = { name: "ECDSA", namedCurve: "P-256" };
  } else {
    throw new Error("unsupported key: an operator key is Ed25519 (OKP) or P-256 (EC)");
  }
  // Only the members that define the key: use, key_ops, alg and ext in a
  // file could otherwise make the import fail or widen the key's use.
  const bare = { kty: jwk.kty, crv: jwk.crv, x: jwk.x, d: jwk.d };
  if (jwk.kty === "EC") bare.y = jwk.y;
  let key;
  try {
    key = await crypto.subtle.importKey("jwk", bare, params, false, ["sign"]);
  } catch (e) {
    throw new Error("the browser refused the key: " + (e && e.message ? e.message : e));
  }
  return { key, kid: jwk.kid, alg };
}

// requestTarget is {base_url}{path}[?{query}]: the base URL with trailing
// slashes removed, then the path and query as sent on the request line.
// pathAndQuery must already be percent-encoded as it will be sent.
export function requestTarget(baseURL, pathAndQuery) {
  const base = baseURL.replace(/\/+$/, "");
  const basePath = new URL(base).pathname.replace(/\/+$/, "");
  let p = pathAndQuery;
  if (basePath && p.startsWith(basePath + "/")) p = p.slice(basePath.length);
  return base + p;
}

// signedMessage returns the seven lines the signature covers, joined by
// "\n" with no trailing newline.
export async function signedMessage(operationId, method, target, ts, nonce, body) {
  for (const l of [operationId, method, target, nonce]) {
    if (!l || /[\r\n]/.test(l)) throw new Error("operation id, method and URL must be non-empty and hold no line break");
  }
  const digest = b64url(await sha256(body || new Uint8Array()));
  return enc.encode(["svc-operator-v1", operationId, method.toUpperCase(), target, String(ts), nonce, digest].join("\n"));
}

// sfString serializes an RFC 8941 String (visible ASCII; \ and " escaped).
function sfString(s) {
  if (!/^[\x20-\x7e]*$/.test(s)) throw new Error("not an RFC 8941 string");
  return '"' + s.replace(/[\\"]/g, (c) => "\\" + c) + '"';
}

// formatHeader serializes the header's four members in the Go signer's
// order.
export function formatHeader(kid, ts, nonce, sig) {
  return `keyid=${sfString(kid)}, ts=${ts}, nonce=${sfString(nonce)}, sig=:${b64(sig)}:`;
}

// signBytes signs msg: Ed25519 signs it as is; ECDSA P-256 signs its
// SHA-256 and WebCrypto returns the 64-byte r||s form JWS uses, the form
// the header carries.
export async function signBytes(op, msg) {
  const params = op.alg === "EdDSA" ? { name: "Ed25519" } : { name: "ECDSA", hash: "SHA-256" };
  return new Uint8Array(await crypto.subtle.sign(params, op.key, msg));
}

// sign returns the Svc-Operator header for one request. A fresh 16-byte
// nonce each call: a header is accepted once, so every attempt is signed
// again. ts and nonce may be given (vectors); normally they are not.
export async function sign(op, { operationId, method, baseURL, pathAndQuery, body, ts, nonce }) {
  if (ts === undefined) ts = Math.floor(Date.now() / 1000);
  if (nonce === undefined) nonce = b64url(crypto.getRandomValues(new Uint8Array(16)));
  const msg = await signedMessage(operationId, method, requestTarget(baseURL, pathAndQuery), ts, nonce, body);
  return formatHeader(op.kid, ts, nonce, await signBytes(op, msg));
}
