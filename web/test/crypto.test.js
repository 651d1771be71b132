// Known-answer tests: the page's SPAKE2 and key schedule against python-spake2 and the
// official client. The fixed values are those of shared/protocol/wormhole-protocol.md
// (computed by magic-wormhole 0.24 and spake2 0.9); the rest come from vectors.json, or from
// the file named by HILLTOP_WEB_VECTORS, which tests/web/test_node.py writes fresh each run.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import {
  APPID, SYMMETRIC_ELEMENT_HEX, Spake2, fromHex, openSealed, passwordScalar, phaseKey, seal,
  toHex, transitKey, utf8, verifier, deriveKey,
} from "../src/crypto.js";
import { RecordReader, RecordWriter, senderHandshake, receiverHandshake, recordKeys }
  from "../src/transit.js";

const file = process.env.HILLTOP_WEB_VECTORS ?? new URL("./vectors.json", import.meta.url);
const vectors = JSON.parse(readFileSync(file, "utf8"));
const fixedEntropy = (byte) => (n) => new Uint8Array(n).fill(byte);

test("the blinding element S is python-spake2's", () => {
  assert.equal(SYMMETRIC_ELEMENT_HEX,
    "6f00dae87c1be1a73b5922ef431cd8f57879569c222d22b1cd71e8546ab8e6f1");
});

test("SPAKE2 of the protocol notes: password scalar, both messages, shared key", () => {
  const pw = utf8("7-guitarist-revenge");
  assert.equal(passwordScalar(pw).toString(16),
    "90c2e9192f24606b80b28d2eca49ec3026961519764264342308f72fd30ae88");
  const a = new Spake2(pw, utf8(APPID), fixedEntropy(1));
  const b = new Spake2(pw, utf8(APPID), fixedEntropy(2));
  assert.equal(toHex(a.start()), "5322b13d0111adbd58bb6d1e3c685d710201f0df7b78caa7a314fd8df696944912");
  assert.equal(toHex(b.start()), "533f0d34c9d7d6563feaa9dd341710066b1a90f1c278ca748556c9c291a42701f1");
  const key = "26d3c5fb75f3fd2d2ec036bd0a8e3094381309fe3aa486a8fb6911534c975700";
  assert.equal(toHex(a.finish(b.start())), key);
  assert.equal(toHex(b.finish(a.start())), key);
});

for (const v of vectors.spake2) {
  test(`SPAKE2 against python-spake2: ${JSON.stringify(v.code).slice(0, 40)} (${v.appid})`, () => {
    const a = new Spake2(utf8(v.code), utf8(v.appid), () => fromHex(v.entropy_a));
    const b = new Spake2(utf8(v.code), utf8(v.appid), () => fromHex(v.entropy_b));
    assert.equal(toHex(a.start()), v.msg_a);
    assert.equal(toHex(b.start()), v.msg_b);
    assert.equal(toHex(a.finish(fromHex(v.msg_b))), v.key);
    assert.equal(toHex(b.finish(fromHex(v.msg_a))), v.key);
  });
}

test("SPAKE2: a different code gives a different key", () => {
  const v = vectors.spake2[0];
  const wrong = new Spake2(utf8(v.code + "x"), utf8(v.appid), () => fromHex(v.entropy_a));
  assert.notEqual(toHex(wrong.finish(fromHex(v.msg_b))), v.key);
});

test("SPAKE2 refuses a reflected, truncated or off-curve message", () => {
  const a = new Spake2(utf8("1-a-b"));
  assert.throws(() => a.finish(a.start()), /reflected/);
  assert.throws(() => a.finish(a.start().slice(0, 20)), /bad SPAKE2/);
  const notS = a.start();
  notS[0] = 0x41;
  assert.throws(() => a.finish(notS), /bad SPAKE2/);
  const small = new Uint8Array(33);
  small[0] = 0x53;  // the identity's y = 1 is a point, but not an acceptable element
  small[1] = 1;
  assert.throws(() => a.finish(small), /outside the group/);
});

test("key schedule of the protocol notes (official 0.24)", () => {
  const key = Uint8Array.from({ length: 32 }, (_, i) => i);
  assert.equal(toHex(phaseKey(key, "abcdef0123", "version")),
    "fb0634a65fc823a06c93860cac98f8281255f0d897e9024984e68715b7cdf94b");
  assert.equal(toHex(phaseKey(key, "abcdef0123", "0")),
    "1f8ddc17c9c811c962d0d910f8024045ba4831ab9e51ae71376172b42ee9f1cd");
  assert.equal(toHex(verifier(key)),
    "116c6e41d0faf2886a5b488079748585db2c4d6d151cca6c580055e1bd176459");
  const box = seal(phaseKey(key, "abcdef0123", "version"), utf8('{"app_versions": {}}'),
    new Uint8Array(24));
  assert.equal(toHex(box), "000000000000000000000000000000000000000000000000b744d7c2df746686"
    + "8affdd287f862a8c0b7d0a5e8db1570507e3707d09e7e445d1480a06");
  const tk = transitKey(key);
  assert.equal(toHex(tk), "9329a646acaba7172c557c7971191ec6a1e287f84abe58c60dce2659c44c2925");
  assert.equal(toHex(deriveKey(tk, "transit_record_sender_key")),
    "4860c8f20d819f7caff59f3e9c6c90c7d70405c6e1247fc6eebb6686768b0d75");
  assert.match(senderHandshake(tk),
    /^transit sender 6fa5ad1bb11461d5165ff989e5ce9bf1c2d464385caf06870527e62fc0643f4c ready\n\n$/);
  assert.match(receiverHandshake(tk),
    /^transit receiver 0b5d03da4672ec8428bd2485e126faf13ef3ffb278196ddc2f95d96d3d82c1fd ready\n\n$/);
  const writer = new RecordWriter(recordKeys(tk, "sender").write);
  assert.equal(toHex(writer.frame(utf8("hello"))),
    "0000002d" + "00".repeat(24) + "c4c7142d3b1c49ae2ef740567bff62b0e6bdbe5baa");
});

for (const [i, v] of vectors.schedule.entries()) {
  test(`key schedule against hilltop's Python (case ${i})`, () => {
    const key = fromHex(v.key);
    for (const [phase, expected] of Object.entries(v.phase_keys)) {
      assert.equal(toHex(phaseKey(key, v.side, phase)), expected, phase);
    }
    assert.equal(toHex(verifier(key)), v.verifier);
    const tk = transitKey(key);
    assert.equal(toHex(tk), v.transit_key);
    assert.equal(senderHandshake(tk), v.sender_handshake);
    assert.equal(receiverHandshake(tk), v.receiver_handshake);
    assert.equal(toHex(recordKeys(tk, "sender").write), v.record_sender_key);
    assert.equal(toHex(recordKeys(tk, "receiver").write), v.record_receiver_key);
    const sealed = seal(key, fromHex(v.seal.plaintext), fromHex(v.seal.nonce));
    assert.equal(toHex(sealed), v.seal.sealed);
    assert.equal(toHex(openSealed(key, fromHex(v.seal.sealed))), v.seal.plaintext);
    const tampered = fromHex(v.seal.sealed);
    tampered[30] ^= 1;
    assert.throws(() => openSealed(key, tampered));
  });
}

test("records: a reader opens what a writer framed, in pieces, and insists on the counter", () => {
  const tk = new Uint8Array(32).fill(7);
  const writer = new RecordWriter(recordKeys(tk, "sender").write);
  const reader = new RecordReader(recordKeys(tk, "receiver").read);
  const frames = [writer.frame(utf8("one")), writer.frame(new Uint8Array(70000)),
    writer.frame(utf8("three"))];
  const all = new Uint8Array(frames.reduce((n, f) => n + f.length, 0));
  let at = 0;
  for (const f of frames) { all.set(f, at); at += f.length; }
  const got = [];
  for (let i = 0; i < all.length; i += 999) got.push(...reader.feed(all.subarray(i, i + 999)));
  assert.deepEqual(got.map((r) => r.length), [3, 70000, 5]);
  const replay = new RecordReader(recordKeys(tk, "receiver").read);
  replay.feed(frames[0]);
  assert.throws(() => replay.feed(frames[0]), /record/);
});
