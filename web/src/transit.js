// Transit over a WebRTC data channel, exactly as hilltop's `webrtc` transport carries it
// (docs/webrtc.md): signalling as {"hilltop-webrtc": {kind, sdp}} app messages through the
// encrypted mailbox, no trickle (the whole SDP once gathering is complete), a channel named
// "hilltop-transit" opened by the file sender, then the transit handshake and the records of
// protocol notes §5.3-5.4, with the reader's byte credits as string messages.
import { concat, deriveKey, openSealed, recordNonce, seal, toHex, utf8 } from "./crypto.js";

export const SIGNAL_KEY = "hilltop-webrtc";
export const CHANNEL_LABEL = "hilltop-transit";
export const HINT = { type: "webrtc-v1", priority: 0.0 };
const GO = "go\n";
const NEVERMIND = "nevermind\n";

export function senderHandshake(tk) {
  return `transit sender ${toHex(deriveKey(tk, "transit_sender"))} ready\n\n`;
}

export function receiverHandshake(tk) {
  return `transit receiver ${toHex(deriveKey(tk, "transit_receiver"))} ready\n\n`;
}

/** {write, read}: each side writes records with its own role's key. */
export function recordKeys(tk, role) {
  const sender = deriveKey(tk, "transit_record_sender_key");
  const receiver = deriveKey(tk, "transit_record_receiver_key");
  return role === "sender" ? { write: sender, read: receiver } : { write: receiver, read: sender };
}

export class RecordWriter {
  constructor(key) { this.key = key; this.seq = 0; }

  /** [4-byte big-endian length][24-byte counter nonce][tag][ciphertext] */
  frame(plaintext) {
    const box = seal(this.key, plaintext, recordNonce(this.seq++));
    const out = new Uint8Array(4 + box.length);
    new DataView(out.buffer).setUint32(0, box.length);
    out.set(box, 4);
    return out;
  }
}

const MAX_RECORD = 64 * 1024 * 1024;

/** Bytes in arbitrary pieces -> whole records, buffering without quadratic copies. */
class ByteQueue {
  constructor() { this.chunks = []; this.length = 0; this.offset = 0; }
  push(bytes) { if (bytes.length) { this.chunks.push(bytes); this.length += bytes.length; } }
  peek(n) {  // the first n bytes (n <= length), copied only when they span chunks
    const first = this.chunks[0];
    if (first.length - this.offset >= n) return first.subarray(this.offset, this.offset + n);
    const out = new Uint8Array(n);
    let at = 0, i = 0, off = this.offset;
    while (at < n) {
      const c = this.chunks[i++];
      const take = Math.min(n - at, c.length - off);
      out.set(c.subarray(off, off + take), at);
      at += take;
      off = 0;
    }
    return out;
  }
  take(n) {
    const out = this.peek(n);
    this.length -= n;
    let left = n;
    while (left > 0) {
      const avail = this.chunks[0].length - this.offset;
      if (avail > left) { this.offset += left; left = 0; } else {
        left -= avail; this.chunks.shift(); this.offset = 0;
      }
    }
    return out;
  }
}

export class RecordReader {
  constructor(key) { this.key = key; this.seq = 0; this.queue = new ByteQueue(); }

  /** Feed bytes; returns the plaintexts of every record now complete. Throws on a record
   * that does not open under the next counter (tampered, replayed, reordered). */
  feed(bytes) {
    this.queue.push(bytes);
    const out = [];
    while (this.queue.length >= 4) {
      const head = this.queue.peek(4);
      const n = new DataView(head.buffer, head.byteOffset, 4).getUint32(0);
      if (n < 40 || n > MAX_RECORD) throw new Error(`bad transit record length ${n}`);
      if (this.queue.length < 4 + n) break;
      this.queue.take(4);
      const box = this.queue.take(n);
      const expected = recordNonce(this.seq);
      for (let i = 0; i < 24; i++) {
        if (box[i] !== expected[i]) throw new Error("transit record out of order");
      }
      try {
        out.push(openSealed(this.key, box));
      } catch {
        throw new Error("transit record does not open: corrupted or forged");
      }
      this.seq += 1;
    }
    return out;
  }
}

export function isSignal(msg) {
  return msg && typeof msg === "object" && Object.keys(msg).length === 1 && SIGNAL_KEY in msg;
}

function waitForGathering(pc, timeoutMs = 10000) {
  if (pc.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      if (pc.iceGatheringState === "complete") { clearTimeout(timer); resolve(); }
    };
    const timer = setTimeout(resolve, timeoutMs);  // send what we have
    pc.addEventListener("icegatheringstatechange", done);
    pc.addEventListener("icecandidate", (e) => { if (!e.candidate) done(); });
  });
}

/**
 * A byte stream over an ordered, reliable RTCDataChannel, with hilltop's flow control:
 * writes are cut into 64 KiB binary messages and wait while more than HIGH bytes are
 * buffered or more than WINDOW bytes have not been credited by the peer's reader; our reader
 * credits the peer every CREDIT_EVERY bytes with the running total as a string message.
 */
export class ChannelStream {
  static CHUNK = 64 * 1024;
  static HIGH = 4 * 1024 * 1024;
  static LOW = 1024 * 1024;
  static WINDOW = 8 * 1024 * 1024;
  static CREDIT_EVERY = 1024 * 1024;

  constructor(pc, channel) {
    this.pc = pc;
    this.channel = channel;
    channel.binaryType = "arraybuffer";
    channel.bufferedAmountLowThreshold = ChannelStream.LOW;
    this.written = 0;
    this.creditedByPeer = 0;
    this.taken = 0;
    this.reported = 0;
    this.onData = null;
    this.paused = false;
    this.held = [];
    this.closedReason = null;
    this.wakers = [];
    this.lostWaiters = [];
    channel.addEventListener("message", (e) => this.message(e.data));
    channel.addEventListener("bufferedamountlow", () => this.wake());
    channel.addEventListener("close", () => this.lost("the data channel closed"));
    pc.addEventListener("connectionstatechange", () => {
      if (pc.connectionState === "failed") this.lost("the WebRTC connection failed");
    });
  }

  message(data) {
    if (typeof data === "string") {
      const n = Number(data);
      if (/^[0-9]+$/.test(data) && n >= this.creditedByPeer && n <= this.written) {
        this.creditedByPeer = n;
        this.wake();
      }
      return;
    }
    const bytes = new Uint8Array(data);
    if (!this.onData || this.paused || this.held.length) { this.held.push(bytes); return; }
    this.deliver(bytes);
  }

  /** Hold received bytes back (and so the peer's credits: it stops after WINDOW bytes). */
  pause() { this.paused = true; }

  resume() {
    this.paused = false;
    while (this.held.length && !this.paused && this.onData) this.deliver(this.held.shift());
  }

  deliver(bytes) {
    this.taken += bytes.length;
    if (this.taken - this.reported >= ChannelStream.CREDIT_EVERY && !this.closedReason) {
      this.reported = this.taken;
      try { this.channel.send(String(this.taken)); } catch { /* closing */ }
    }
    this.onData(bytes);
  }

  /** Start handing received bytes to ``onData`` (those that arrived before, first). */
  read(onData) {
    this.onData = onData;
    this.resume();
  }

  lost(why) {
    if (this.closedReason) return;
    this.closedReason = why;
    this.wake();
    for (const f of this.lostWaiters.splice(0)) f(why);
  }

  /** Resolves with the reason once the channel is gone. */
  whenLost() {
    if (this.closedReason) return Promise.resolve(this.closedReason);
    return new Promise((resolve) => this.lostWaiters.push(resolve));
  }

  wake() {
    for (const w of this.wakers.splice(0)) w();
  }

  congested() {
    return this.channel.bufferedAmount > ChannelStream.HIGH
      || this.written - this.creditedByPeer > ChannelStream.WINDOW;
  }

  /** Send bytes; resolves once they are queued and the flow control allows more. */
  async write(bytes) {
    for (let i = 0; i < bytes.length; i += ChannelStream.CHUNK) {
      while (this.congested() && !this.closedReason) {
        await new Promise((resolve) => this.wakers.push(resolve));
      }
      if (this.closedReason) throw new Error(`transit connection lost: ${this.closedReason}`);
      this.channel.send(bytes.subarray(i, i + ChannelStream.CHUNK));
    }
    this.written += bytes.length;
  }

  /**
   * Wait until everything we sent has left the buffer, then close the channel. With
   * ``lingerMs``, first give the peer that long to close it: an empty buffer only says the
   * browser took our last message, and closing the whole connection half a second later
   * once lost a receiver's ack on the way (the page was done, its sender failed: 1 test in
   * about 110 runs), so a receiver waits for the sender, which closes once it has the ack.
   */
  async close({ lingerMs = 0 } = {}) {
    const deadline = Date.now() + 30000;
    while (this.channel.bufferedAmount > 0 && !this.closedReason && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    if (lingerMs > 0 && !this.closedReason) {
      await Promise.race([this.whenLost(), new Promise((r) => setTimeout(r, lingerMs))]);
    }
    try { this.channel.close(); } catch { /* already */ }
    setTimeout(() => this.pc.close(), 500);
  }
}

/**
 * Negotiate the data channel with the peer. ``role`` is "sender" (we offer and create the
 * channel) or "receiver" (we answer). ``signals`` is an async iterator of the peer's signal
 * bodies; ``sendSignal(body)`` sends ours. ``iceServers`` is always passed explicitly, so
 * the browser never asks a server it was not told about.
 */
export async function openChannel(role, { iceServers, relayOnly = false, sendSignal, nextSignal,
  timeoutMs = 30000 }) {
  const pc = new RTCPeerConnection({ iceServers: iceServers ?? [],
    iceTransportPolicy: relayOnly ? "relay" : "all" });
  const failed = new Promise((_, reject) => {
    pc.addEventListener("connectionstatechange", () => {
      if (pc.connectionState === "failed") {
        reject(new Error("WebRTC: ICE found no working candidate pair"));
      }
    });
    setTimeout(() => reject(new Error("WebRTC: no connection within 30 s")), timeoutMs);
  });
  failed.catch(() => {});
  try {
    if (role === "sender") {
      const channel = pc.createDataChannel(CHANNEL_LABEL, { ordered: true });
      const stream = new ChannelStream(pc, channel);
      const opened = new Promise((resolve) => channel.addEventListener("open", resolve));
      await pc.setLocalDescription(await pc.createOffer());
      await waitForGathering(pc);
      sendSignal({ kind: "offer", sdp: pc.localDescription.sdp });
      const answer = await Promise.race([nextSignal(), failed]);
      if (answer.kind !== "answer") throw new Error(`WebRTC: the peer sent ${answer.kind}`);
      await pc.setRemoteDescription({ type: "answer", sdp: answer.sdp });
      await Promise.race([opened, failed]);
      return stream;
    }
    const arrived = new Promise((resolve) => {
      pc.addEventListener("datachannel", (e) => resolve(new ChannelStream(pc, e.channel)));
    });
    const offer = await Promise.race([nextSignal(), failed]);
    if (offer.kind !== "offer") throw new Error(`WebRTC: the peer sent ${offer.kind}`);
    await pc.setRemoteDescription({ type: "offer", sdp: offer.sdp });
    await pc.setLocalDescription(await pc.createAnswer());
    await waitForGathering(pc);
    sendSignal({ kind: "answer", sdp: pc.localDescription.sdp });
    const stream = await Promise.race([arrived, failed]);
    if (stream.channel.readyState !== "open") {
      await Promise.race([new Promise((r) => stream.channel.addEventListener("open", r)), failed]);
    }
    return stream;
  } catch (err) {
    pc.close();
    throw err;
  }
}

/** ``local->remote address:port`` of the candidate pair in use, as hilltop's status line
 * names it (e.g. "host->prflx 198.18.0.11:40527"); "data channel" when unknown. */
export async function describePath(pc) {
  try {
    const stats = await pc.getStats();
    let pair = null;
    stats.forEach((s) => {
      if (s.type === "transport" && s.selectedCandidatePairId) pair = stats.get(s.selectedCandidatePairId);
    });
    if (!pair) stats.forEach((s) => { if (s.type === "candidate-pair" && s.nominated) pair = s; });
    const local = pair && stats.get(pair.localCandidateId);
    const remote = pair && stats.get(pair.remoteCandidateId);
    if (!local || !remote) return "data channel";
    return `${local.candidateType}->${remote.candidateType} `
      + `${remote.address ?? remote.ip}:${remote.port}`;
  } catch {
    return "data channel";
  }
}

/** Collects bytes until ``want`` bytes are there; the rest stays for the records. */
class LineReader {
  constructor(stream) {
    this.buffer = new Uint8Array(0);
    this.waiter = null;
    stream.read((bytes) => {
      if (this.sink) { this.sink(bytes); return; }
      this.buffer = concat(this.buffer, bytes);
      if (this.waiter) this.waiter();
    });
    stream.whenLost().then((why) => { this.lostWhy = why; if (this.waiter) this.waiter(); });
  }

  async expect(text, what) {
    const want = utf8(text);
    for (;;) {
      const have = this.buffer.subarray(0, want.length);
      for (let i = 0; i < have.length; i++) {
        if (have[i] !== want[i]) throw new Error(`unexpected ${what} from the peer`);
      }
      if (have.length === want.length) {
        this.buffer = this.buffer.subarray(want.length);
        return;
      }
      if (this.lostWhy) throw new Error(`${this.lostWhy} during the transit handshake`);
      await new Promise((resolve) => { this.waiter = resolve; });
      this.waiter = null;
    }
  }

  /** The sender's choice: go, or nevermind (it picked another connection). */
  async expectGo() {
    while (this.buffer.length < GO.length || (this.buffer[0] === 0x6e
      && this.buffer.length < NEVERMIND.length)) {
      if (this.lostWhy) throw new Error(`${this.lostWhy} during the transit handshake`);
      await new Promise((resolve) => { this.waiter = resolve; });
      this.waiter = null;
    }
    if (this.buffer[0] === 0x6e) await this.expect(NEVERMIND, "answer to the handshake");
    if (this.buffer[0] !== 0x67) throw new Error("the sender chose another connection");
    await this.expect(GO, "answer to the handshake");
  }

  /** Hand every byte from now on to ``sink`` (the record reader). */
  handOver(sink) {
    this.sink = sink;
    const rest = this.buffer;
    this.buffer = new Uint8Array(0);
    if (rest.length) sink(rest);
  }
}

/**
 * The transit handshake over ``stream`` (protocol notes §5.3, no relay): the sender writes
 * its line, the receiver answers with its own, and the sender then says go. Returns a
 * Transit with records in both directions.
 *
 * The protocol lets both write at once, but the receiver here waits for the sender's line:
 * Chromium 156 now and then kept a message written while it was still announcing a channel
 * the peer opened (in the same task as the "datachannel" event) in its buffer for good
 * (traced: bufferedAmount stayed at 89 until the sender gave up after 60 s, 1 page test in
 * about 270). The sender's line arrives in a later task, and every sender writes first.
 */
export async function handshake(stream, role, tk) {
  const lines = new LineReader(stream);
  if (role === "sender") {
    await stream.write(utf8(senderHandshake(tk)));
    await lines.expect(receiverHandshake(tk), "transit handshake");
    await stream.write(utf8(GO));
  } else {
    await lines.expect(senderHandshake(tk), "transit handshake");
    await stream.write(utf8(receiverHandshake(tk)));
    await lines.expectGo();
  }
  return new Transit(stream, lines, recordKeys(tk, role));
}

/** Records both ways over a handshaken stream. */
export class Transit {
  constructor(stream, lines, keys) {
    this.stream = stream;
    this.writer = new RecordWriter(keys.write);
    this.reader = new RecordReader(keys.read);
    this.onRecord = null;
    this.records = [];
    this.error = null;
    this.waiter = null;
    lines.handOver((bytes) => {
      try {
        for (const r of this.reader.feed(bytes)) {
          if (this.onRecord) this.onRecord(r); else this.records.push(r);
        }
      } catch (err) {
        this.fail(err);
      }
      if (this.waiter) this.waiter();
    });
    stream.whenLost().then((why) => {
      this.fail(new Error(`transit connection lost: ${why}`));
    });
  }

  fail(err) {
    if (!this.error) this.error = err;
    if (this.onError) this.onError(this.error);
    if (this.waiter) this.waiter();
  }

  /** Receive records through ``onRecord(bytes)`` from now on; errors go to ``onError``. */
  listen(onRecord, onError) {
    this.onRecord = onRecord;
    this.onError = onError;
    for (const r of this.records.splice(0)) onRecord(r);
    if (this.error) onError(this.error);
  }

  /** The next record (for the final ack). */
  async nextRecord() {
    for (;;) {
      if (this.records.length) return this.records.shift();
      if (this.error) throw this.error;
      await new Promise((resolve) => { this.waiter = resolve; });
      this.waiter = null;
    }
  }

  async send(plaintext) {
    await this.stream.write(this.writer.frame(plaintext));
  }

  close(options) {
    return this.stream.close(options);
  }
}
