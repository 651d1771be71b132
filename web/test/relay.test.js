// The page's relay path: the relay line and transit records against PyNaCl's output
// (vectors.json, or a fresh file from tests/web/test_node.py), which relays the page dials,
// and the whole exchange (relay line, "ok", handshake, records, ack) over a WebSocket whose
// messages are cut and joined anywhere, played by a fake relay and a fake official sender.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { concat, fromHex, fromUtf8, toHex, utf8 } from "../src/crypto.js";
import { RecordReader, RecordWriter, recordKeys, receiverHandshake, senderHandshake }
  from "../src/transit.js";
import { MAX_RELAYS, openRelay, peerRelayUrls, relayHandshake, relayHints, relaysToDial }
  from "../src/relay.js";
import { connectAsReceiver } from "../src/connect.js";
import { parseFragment } from "../src/settings.js";

const file = process.env.HILLTOP_WEB_VECTORS ?? new URL("./vectors.json", import.meta.url);
const vectors = JSON.parse(readFileSync(file, "utf8"));

/** Deterministic cut points, so a failure can be replayed. */
function pieces(bytes, seed) {
  const out = [];
  let x = seed;
  for (let at = 0; at < bytes.length;) {
    x = (x * 1103515245 + 12345) % 2147483648;
    const n = 1 + (x % 97);
    out.push(bytes.subarray(at, at + n));
    at += n;
  }
  return out;
}

for (const [i, v] of vectors.records.entries()) {
  test(`relay line and records against PyNaCl (case ${i})`, () => {
    const tk = fromHex(v.transit_key);
    assert.equal(relayHandshake(tk, v.side), v.relay_line);
    for (const [role, plaintexts, stream] of [
      ["sender", v.sender_plaintexts, v.sender_stream],
      ["receiver", v.receiver_plaintexts, v.receiver_stream]]) {
      const writer = new RecordWriter(recordKeys(tk, role).write);
      assert.equal(plaintexts.map((p) => toHex(writer.frame(fromHex(p)))).join(""), stream, role);
      const other = role === "sender" ? "receiver" : "sender";
      const reader = new RecordReader(recordKeys(tk, other).read);
      const got = [];
      for (const piece of pieces(fromHex(stream), i + 1)) got.push(...reader.feed(piece));
      assert.deepEqual(got.map(toHex), plaintexts, role);
    }
    const tampered = fromHex(v.sender_stream);
    tampered[tampered.length - 1] ^= 1;
    const reader = new RecordReader(recordKeys(tk, "receiver").read);
    assert.throws(() => reader.feed(tampered), /corrupted or forged/);
  });
}

test("relay side must be 16 hex digits", () => {
  assert.throws(() => relayHandshake(new Uint8Array(32), "abc"), /16 hex/);
});

test("the relays the page dials: its own, then the peer's WebSocket ones, capped", () => {
  const peer = { "hints-v1": [
    { type: "direct-tcp-v1", hostname: "10.0.0.1", port: 1234 },
    { type: "relay-v1", hints: [{ type: "direct-tcp-v1", hostname: "r", port: 4001 },
      { type: "websocket-v1", url: "ws://r.example:4002/" }] },
    { type: "relay-v1", hints: [{ type: "websocket", url: "wss://rs.example/" },
      { type: "websocket-v1", url: "http://not-ws/" }, { type: "websocket-v1", url: 7 },
      { type: "websocket-v1", url: "ws://bad host/" }] },
    { type: "relay-v1", hints: "garbage" }, null] };
  assert.deepEqual(peerRelayUrls(peer), ["ws://r.example:4002/", "wss://rs.example/"]);
  assert.deepEqual(peerRelayUrls(null), []);
  assert.deepEqual(peerRelayUrls({ "hints-v1": "x" }), []);
  assert.deepEqual(relaysToDial(["ws://mine:4002/", "ws://R.example:4002"], peer),
    ["ws://mine:4002/", "ws://R.example:4002", "wss://rs.example/"]);
  assert.deepEqual(relaysToDial([], peer, "https:"), ["wss://rs.example/"]);  // no mixed content
  const many = Array.from({ length: 10 }, (_, n) => `ws://r${n}.example/`);
  assert.equal(relaysToDial(many, null).length, MAX_RELAYS);
  assert.deepEqual(relayHints(["ws://mine:4002/"]), [{ type: "relay-v1",
    hints: [{ type: "websocket-v1", url: "ws://mine:4002/", priority: 0 }] }]);
});

test("relays from the URL fragment", () => {
  const s = parseFragment("#code=3-a-b&relay=ws%3A%2F%2F198.18.0.1%3A4002%2F&relay=wss://x/"
    + "&relay=tcp:bad:4001&relay=");
  assert.deepEqual(s.relays, ["ws://198.18.0.1:4002/", "wss://x/"]);
  assert.deepEqual(parseFragment("#7-a-b").relays, []);
});

/** A WebSocket whose far end is a script: ``peer.take()`` gives what the page sent, and
 * ``peer.give(bytes)`` delivers bytes in one message. Sends before the relay's "ok" are
 * recorded as impatient, as the real relay would drop the connection for them. */
class FakeSocket extends EventTarget {
  static made = [];
  constructor(url) {
    super();
    this.url = url;
    this.bufferedAmount = 0;
    this.sent = [];
    this.closed = false;
    FakeSocket.made.push(this);
    setTimeout(() => this.dispatchEvent(new Event("open")), 0);
  }
  send(bytes) { this.sent.push(new Uint8Array(bytes)); }
  close() {
    if (this.closed) return;
    this.closed = true;
    setTimeout(() => this.dispatchEvent(new Event("close")), 0);
  }
  give(bytes) {
    const e = new Event("message");
    e.data = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length);
    this.dispatchEvent(e);
  }
  take() { return concat(...this.sent.splice(0)); }
}

const tick = (ms = 5) => new Promise((r) => setTimeout(r, ms));

async function until(check, what, ms = 2000) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await tick();
  }
}

test("a file through the relay: line alone first, nothing before ok, records in pieces", async () => {
  FakeSocket.made = [];
  const tk = new Uint8Array(32).fill(9);
  const side = "0123456789abcdef";
  const won = connectAsReceiver({ webrtc: null, relays: ["ws://relay.test:4002/"], tk, side,
    WebSocketImpl: FakeSocket });
  await until(() => FakeSocket.made.length === 1 && FakeSocket.made[0].sent.length, "the line");
  const ws = FakeSocket.made[0];
  assert.equal(ws.sent.length, 1, "the relay line goes alone, as the first message");
  assert.equal(fromUtf8(ws.take()), relayHandshake(tk, side));
  await tick(20);
  assert.equal(ws.sent.length, 0, "nothing before the relay's ok");
  // the relay's ok, the sender's handshake and go, then records: cut and joined anywhere
  const writer = new RecordWriter(recordKeys(tk, "sender").write);
  const body = [utf8("first record"), new Uint8Array(5000).fill(3), utf8("last")];
  const wire = concat(utf8("ok\n" + senderHandshake(tk)), utf8("go\n"),
    ...body.map((b) => writer.frame(b)));
  for (const cut of pieces(wire, 42)) {
    ws.give(cut);
    await tick(0);
  }
  await until(() => ws.sent.length, "the receiver's handshake");
  assert.equal(fromUtf8(ws.take()), receiverHandshake(tk));
  const { transit, kind, url } = await won;
  assert.equal(kind, "relay");
  assert.equal(url, "ws://relay.test:4002/");
  const got = [];
  transit.listen((r) => got.push(r), (err) => { throw err; });
  await until(() => got.length === 3, "three records");
  assert.deepEqual(got.map(toHex), body.map(toHex));
  await transit.send(utf8(JSON.stringify({ ack: "ok", sha256: "ab" })));
  const reader = new RecordReader(recordKeys(tk, "sender").read);  // the sender reads it
  const [ack] = reader.feed(ws.take());
  assert.deepEqual(JSON.parse(fromUtf8(ack)), { ack: "ok", sha256: "ab" });
});

test("a relay that refuses the line is named in the error", async () => {
  FakeSocket.made = [];
  const tk = new Uint8Array(32).fill(1);
  const opening = openRelay("ws://relay.test/", tk, "0123456789abcdef",
    { WebSocketImpl: FakeSocket });
  await until(() => FakeSocket.made[0]?.sent.length, "the line");
  FakeSocket.made[0].give(utf8("bad handshake\n"));
  await assert.rejects(opening, /relay ws:\/\/relay.test\/: the relay answered "bad handshake\?"/);
  assert.equal(FakeSocket.made[0].closed, true);
  const silent = openRelay("ws://quiet.test/", tk, "0123456789abcdef",
    { WebSocketImpl: FakeSocket, timeoutMs: 30 });
  await assert.rejects(silent, /did not reach it within 0.03 s/);
});

test("WebRTC first: relays only after the fallback time, or at once when WebRTC fails",
  async () => {
    FakeSocket.made = [];
    const tk = new Uint8Array(32).fill(2);
    const never = new Promise(() => {});
    const started = Date.now();
    const quiet = connectAsReceiver({ webrtc: never, relays: ["ws://late.test/"], tk,
      side: "0123456789abcdef", fallbackMs: 150, relayTimeoutMs: 100,
      WebSocketImpl: FakeSocket });
    quiet.catch(() => {});
    await tick(100);
    assert.equal(FakeSocket.made.length, 0, "no relay while WebRTC has its time");
    await until(() => FakeSocket.made.length === 1, "the fallback dial");
    assert.ok(Date.now() - started >= 150);
    FakeSocket.made = [];
    let fail;
    const failing = new Promise((_, reject) => { fail = reject; });
    const quick = connectAsReceiver({ webrtc: failing, relays: ["ws://soon.test/"], tk,
      side: "0123456789abcdef", fallbackMs: 60000, relayTimeoutMs: 50,
      WebSocketImpl: FakeSocket });
    fail(new Error("WebRTC: ICE found no working candidate pair"));
    await until(() => FakeSocket.made.length === 1, "the relay dial after WebRTC failed", 500);
    await assert.rejects(quick, /webrtc: WebRTC: ICE found no working.*relay: relay ws:\/\/soon/);
  });
