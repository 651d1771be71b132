// Transit through a transit relay's WebSocket side (magic-wormhole-transit-relay 0.3+ run with
// --websocket), for a peer the page cannot reach over WebRTC: official 0.24, wormhole-william,
// hilltop without its webrtc extra. The relay pairs a TCP client with a WebSocket one when
// both show the same token from different sides, so the peer dials its relay over TCP and the
// page the same relay's WebSocket port. What crosses the WebSocket is a byte stream: messages
// are cut and joined anywhere (the relay forwards what one read of the other socket gave it).
//
// Protocol notes §5.2-5.3 and §5.6: the page writes "please relay TOKEN for side SIDE\n" as
// its first message, alone (the relay reads the first message as the whole line), and sends
// nothing else until the relay says "ok\n" (bytes before pairing end the connection with
// "impatient"). Then the ordinary transit handshake and records run over the stream.
import { concat, deriveKey, randomBytes, toHex } from "./crypto.js";

const OK = new TextEncoder().encode("ok\n");
const ascii = new TextEncoder();
/** Relays dialled at most (of ours and the peer's together): each dial shows the relay
 * token and our address to that host, and a hostile peer could list hundreds. */
export const MAX_RELAYS = 3;

/** A fresh relay side: 8 random bytes as 16 hex digits, one per transfer. */
export function newSide() {
  return toHex(randomBytes(8));
}

export function relayHandshake(tk, side) {
  if (!/^[0-9a-f]{16}$/.test(side)) throw new Error("relay side must be 16 hex digits");
  return `please relay ${toHex(deriveKey(tk, "transit_relay_token"))} for side ${side}\n`;
}

/** A ws:// or wss:// URL with a host, printable ASCII; anything else is null. */
export function checkRelayUrl(text) {
  if (typeof text !== "string" || !text || !/^[\x21-\x7e]+$/.test(text)) return null;
  let url;
  try { url = new URL(text); } catch { return null; }
  if ((url.protocol !== "ws:" && url.protocol !== "wss:") || !url.hostname) return null;
  return text;
}

/** Our relays as a ``relay-v1`` hint each (one ``websocket-v1`` endpoint), so a hilltop
 * peer dials them too; official 0.24 and wormhole-william skip the endpoint type. */
export function relayHints(urls) {
  return urls.map((url) => ({ type: "relay-v1",
    hints: [{ type: "websocket-v1", url, priority: 0.0 }] }));
}

/** The WebSocket endpoints of the peer's ``relay-v1`` hints (``websocket-v1``, or
 * ``websocket`` as magic-wormhole.rs writes it), in its order; malformed ones skipped. */
export function peerRelayUrls(transit) {
  const hints = transit && Array.isArray(transit["hints-v1"]) ? transit["hints-v1"] : [];
  const out = [];
  for (const hint of hints) {
    if (!hint || hint.type !== "relay-v1" || !Array.isArray(hint.hints)) continue;
    for (const inner of hint.hints) {
      if (!inner || (inner.type !== "websocket-v1" && inner.type !== "websocket")) continue;
      const url = checkRelayUrl(inner.url);
      if (url) out.push(url);
    }
  }
  return out;
}

/** What the page dials: its own relays first, then the peer's, each once, at most
 * MAX_RELAYS. A page loaded over https may not open ws:// (mixed content): those are left
 * out rather than failing in the browser. */
export function relaysToDial(own, peerTransit, pageProtocol = "http:") {
  const seen = new Set();
  const out = [];
  for (const url of [...own, ...peerRelayUrls(peerTransit)]) {
    if (pageProtocol === "https:" && url.startsWith("ws:")) continue;
    const key = url.toLowerCase().replace(/\/$/, "");
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(url);
  }
  return out.slice(0, MAX_RELAYS);
}

function bytesOf(data) {
  return typeof data === "string" ? ascii.encode(data) : new Uint8Array(data);
}

function preview(bytes) {
  const text = String.fromCharCode(...bytes.subarray(0, 40)).replace(/[^\x20-\x7e]/g, "?");
  return JSON.stringify(text);
}

/**
 * A byte stream over one WebSocket, with the interface of transit.js's ChannelStream
 * (read, write, pause, resume, whenLost, close), so the transit handshake and records run
 * over it unchanged. Writes wait while more than HIGH bytes are buffered. Reading cannot
 * push back (the WebSocket API has no read back-pressure): ``pause`` holds what arrives.
 */
export class SocketStream {
  static HIGH = 4 * 1024 * 1024;

  constructor(ws, url, leftover = new Uint8Array(0)) {
    this.ws = ws;
    this.url = url;
    this.onData = null;
    this.paused = false;
    this.held = leftover.length ? [leftover] : [];
    this.closedReason = null;
    this.lostWaiters = [];
    ws.addEventListener("message", (e) => this.message(bytesOf(e.data)));
    ws.addEventListener("close", () => this.lost("the relay closed the connection"));
    ws.addEventListener("error", () => this.lost("the relay connection failed"));
  }

  message(bytes) {
    if (!bytes.length) return;
    if (!this.onData || this.paused || this.held.length) { this.held.push(bytes); return; }
    this.onData(bytes);
  }

  pause() { this.paused = true; }

  resume() {
    this.paused = false;
    while (this.held.length && !this.paused && this.onData) this.onData(this.held.shift());
  }

  read(onData) {
    this.onData = onData;
    this.resume();
  }

  lost(why) {
    if (this.closedReason) return;
    this.closedReason = why;
    for (const f of this.lostWaiters.splice(0)) f(why);
  }

  whenLost() {
    if (this.closedReason) return Promise.resolve(this.closedReason);
    return new Promise((resolve) => this.lostWaiters.push(resolve));
  }

  async write(bytes) {
    while (this.ws.bufferedAmount > SocketStream.HIGH && !this.closedReason) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    if (this.closedReason) throw new Error(`transit connection lost: ${this.closedReason}`);
    this.ws.send(bytes);
  }

  /** As ChannelStream.close: drain, then with ``lingerMs`` let the peer close first. */
  async close({ lingerMs = 0 } = {}) {
    const deadline = Date.now() + 30000;
    while (this.ws.bufferedAmount > 0 && !this.closedReason && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    if (lingerMs > 0 && !this.closedReason) {
      await Promise.race([this.whenLost(), new Promise((r) => setTimeout(r, lingerMs))]);
    }
    try { this.ws.close(); } catch { /* already */ }
    this.lost("closed");
  }
}

/**
 * Connect to the relay at ``url`` and wait until it pairs us with the peer: resolves with a
 * SocketStream (bytes the relay sent after "ok\n" already in it), rejects with a reason
 * naming the relay. ``signal`` (an AbortSignal) cancels; ``timeoutMs`` bounds the wait for
 * the peer (60 s, the official client's time per connection).
 */
export function openRelay(url, tk, side, { timeoutMs = 60000, signal = null,
  WebSocketImpl = globalThis.WebSocket } = {}) {
  return new Promise((resolve, reject) => {
    let ws;
    try {
      ws = new WebSocketImpl(url);
    } catch (err) {
      reject(new Error(`relay ${url}: ${err.message ?? err}`));
      return;
    }
    ws.binaryType = "arraybuffer";
    let got = new Uint8Array(0);
    let opened = false;
    const onOpen = () => { opened = true; ws.send(ascii.encode(relayHandshake(tk, side))); };
    const onMessage = (e) => {
      got = concat(got, bytesOf(e.data));
      for (let i = 0; i < Math.min(got.length, OK.length); i++) {
        if (got[i] !== OK[i]) { fail(`the relay answered ${preview(got)}`); return; }
      }
      if (got.length < OK.length) return;
      cleanup();
      resolve(new SocketStream(ws, url, got.subarray(OK.length)));
    };
    const onClose = () => fail(opened ? "the relay closed the connection before pairing us"
      : "cannot connect");
    const onAbort = () => fail("cancelled");
    const timer = setTimeout(() => fail(`the peer did not reach it within ${timeoutMs / 1000} s`),
      timeoutMs);
    function cleanup() {
      clearTimeout(timer);
      ws.removeEventListener("open", onOpen);
      ws.removeEventListener("message", onMessage);
      ws.removeEventListener("close", onClose);
      ws.removeEventListener("error", onClose);
      if (signal) signal.removeEventListener("abort", onAbort);
    }
    function fail(why) {
      cleanup();
      try { ws.close(); } catch { /* already */ }
      reject(new Error(`relay ${url}: ${why}`));
    }
    ws.addEventListener("open", onOpen);
    ws.addEventListener("message", onMessage);
    ws.addEventListener("close", onClose);
    ws.addEventListener("error", onClose);
    if (signal) {
      if (signal.aborted) { fail("cancelled"); return; }
      signal.addEventListener("abort", onAbort);
    }
  });
}
