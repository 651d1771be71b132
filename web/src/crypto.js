// The wormhole client protocol's cryptography, on audited libraries only (@noble/*):
// SPAKE2 exactly as python-spake2 0.9's SPAKE2_Symmetric computes it (Ed25519 group, HKDF
// password scalar, the "symmetric" blinding element), the HKDF key schedule of the wormhole
// client, and NaCl secretbox. Nothing here does I/O, so node runs the known-answer tests
// (test/crypto.test.js) against vectors that python-spake2 itself produced.
import { ed25519 } from "@noble/curves/ed25519.js";
import { hkdf as nobleHkdf } from "@noble/hashes/hkdf.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { xsalsa20poly1305 } from "@noble/ciphers/salsa.js";

export const APPID = "lothar.com/wormhole/text-or-file-xfer";
const Point = ed25519.Point;
const L = Point.Fn.ORDER;
const P = Point.Fp.ORDER;

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

export function utf8(text) {
  return encoder.encode(text.normalize("NFC"));
}

export function fromUtf8(bytes) {
  return decoder.decode(bytes);
}

export function toHex(bytes) {
  let out = "";
  for (const b of bytes) out += b.toString(16).padStart(2, "0");
  return out;
}

export function fromHex(hex) {
  if (typeof hex !== "string" || hex.length % 2 || /[^0-9a-fA-F]/.test(hex)) {
    throw new Error("not a hex string");
  }
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

export function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function bigEndian(bytes) {
  return bytes.length ? BigInt("0x" + toHex(bytes)) : 0n;
}

function compareBytes(a, b) {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a[i] !== b[i]) return a[i] - b[i];
  }
  return a.length - b.length;
}

export function randomBytes(n) {
  const out = new Uint8Array(n);
  globalThis.crypto.getRandomValues(out);
  return out;
}

/** RFC 5869 HKDF-SHA256 with no salt, as every wormhole derivation uses it. */
export function hkdf(ikm, length, info) {
  return nobleHkdf(sha256, ikm, undefined, typeof info === "string" ? utf8(info) : info, length);
}

export function sha256Digest(bytes) {
  return sha256(bytes);
}

/** A SHA-256 that takes the data in pieces (the whole-file hash of file transfer). */
export function sha256Stream() {
  return sha256.create();
}

/** python-spake2's password scalar: HKDF("SPAKE2 pw", 48 bytes) read big-endian, mod L. */
export function passwordScalar(password) {
  return bigEndian(nobleHkdf(sha256, password, new Uint8Array(0), utf8("SPAKE2 pw"), 48)) % L;
}

function encodeY(y) {
  const out = new Uint8Array(32);
  let v = y;
  for (let i = 0; i < 32; i++) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;  // bit 255 (the sign of x) stays 0: the even x, as python-spake2 picks it
}

/** python-spake2's arbitrary_element(seed): the first valid y from the HKDF of the seed,
 * with its even x, times the cofactor 8, skipping the identity. */
export function arbitraryElement(seed) {
  const y = bigEndian(nobleHkdf(sha256, seed, new Uint8Array(0),
    utf8("SPAKE2 arbitrary element"), 48)) % P;
  for (let plus = 0n; ; plus++) {
    let point;
    try {
      point = Point.fromBytes(encodeY((y + plus) % P));
    } catch {
      continue;  // not on the curve (on the twist)
    }
    const cleared = point.clearCofactor();
    if (!cleared.is0()) return cleared;
  }
}

const S = arbitraryElement(utf8("symmetric"));
export const SYMMETRIC_ELEMENT_HEX = S.toHex();

function multiply(point, scalar) {
  return scalar === 0n ? Point.ZERO : point.multiply(scalar);
}

/**
 * One side of SPAKE2_Symmetric. ``entropy`` (a function n -> n bytes) exists for the
 * known-answer tests; the page always uses the browser's CSPRNG.
 */
export class Spake2 {
  constructor(password, idSymmetric = utf8(APPID), entropy = randomBytes) {
    this.password = password;
    this.idSymmetric = idSymmetric;
    this.pw = passwordScalar(password);
    this.x = bigEndian(entropy(64)) % L;
    const element = multiply(Point.BASE, this.x).add(multiply(S, this.pw));
    this.ours = element.toBytes();
  }

  /** The 33-byte outbound message: "S" then our element. */
  start() {
    return concat(new Uint8Array([0x53]), this.ours);
  }

  /** The shared 32-byte key from the peer's message; throws on a malformed or reflected one. */
  finish(message) {
    if (message.length !== 33 || message[0] !== 0x53) {
      throw new Error("bad SPAKE2 message from the peer");
    }
    const theirs = message.slice(1);
    const Y = Point.fromBytes(theirs);
    if (!Y.isTorsionFree() || Y.is0()) throw new Error("SPAKE2 element outside the group");
    if (compareBytes(theirs, this.ours) === 0) throw new Error("SPAKE2 message reflected");
    const K = multiply(Y.subtract(multiply(S, this.pw)), this.x);
    const [first, second] = compareBytes(this.ours, theirs) < 0
      ? [this.ours, theirs] : [theirs, this.ours];
    return sha256(concat(sha256(this.password), sha256(this.idSymmetric), first, second,
      K.toBytes()));
  }
}

/** The secretbox key of one mailbox phase, from the *sending* side's id. */
export function phaseKey(key, side, phase) {
  return hkdf(key, 32, concat(utf8("wormhole:phase:"), sha256(utf8(side)), sha256(utf8(phase))));
}

export function deriveKey(key, purpose, length = 32) {
  return hkdf(key, length, purpose);
}

export function verifier(key) {
  return hkdf(key, 32, "wormhole:verifier");
}

/** The transit key; like official 0.24 it always uses the CLI appid (protocol notes #339). */
export function transitKey(key, appid = APPID) {
  return hkdf(key, 32, appid + "/transit-key");
}

/** NaCl secretbox: nonce (24) then tag and ciphertext, as PyNaCl's SecretBox.encrypt. */
export function seal(key, plaintext, nonce = randomBytes(24)) {
  return concat(nonce, xsalsa20poly1305(key, nonce).encrypt(plaintext));
}

/** Opens what seal() made; throws when the key is wrong or the data was altered. */
export function openSealed(key, data) {
  if (data.length < 40) throw new Error("sealed message too short");
  return xsalsa20poly1305(key, data.subarray(0, 24)).decrypt(data.subarray(24));
}

/** The box of one transit record under ``key`` with the counter ``seq`` as its nonce. */
export function recordNonce(seq) {
  const nonce = new Uint8Array(24);
  let v = BigInt(seq);
  for (let i = 23; i >= 0 && v > 0n; i--) {
    nonce[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return nonce;
}
