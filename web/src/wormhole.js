// The wormhole client protocol over the mailbox WebSocket: bind, allocate/claim, open, the
// SPAKE2 exchange in the "pake" phase, "version", then numbered encrypted phases delivered
// in order (protocol notes §1, §3). One Wormhole is one code, as in the official client.
import {
  APPID, Spake2, fromHex, fromUtf8, openSealed, phaseKey, randomBytes, seal, toHex,
  transitKey, utf8, verifier,
} from "./crypto.js";
import { SIGNAL_KEY, isSignal } from "./transit.js";

/** The code was wrong (or someone else joined): the first peer message did not open. */
export class WrongCodeError extends Error {
  constructor() {
    super("Key confirmation failed: the code is wrong, or someone else used it first. "
      + "Nothing was sent; ask for a new code.");
    this.name = "WrongCodeError";
  }
}

/** The mailbox server refused something or went away before we were done. */
export class MailboxError extends Error {
  constructor(message) {
    super(message);
    this.name = "MailboxError";
  }
}

function deferred() {
  let resolve, reject;
  const promise = new Promise((ok, fail) => { resolve = ok; reject = fail; });
  promise.catch(() => {});  // a failure nobody waits for yet is reported by whoever waits
  return { promise, resolve, reject };
}

/** A queue whose get() waits; fail() makes every later get() throw. */
class Inbox {
  constructor() { this.items = []; this.waiters = []; this.error = null; }
  put(item) {
    const w = this.waiters.shift();
    if (w) w.resolve(item); else this.items.push(item);
  }
  fail(error) {
    if (this.error) return;
    this.error = error;
    for (const w of this.waiters.splice(0)) w.reject(error);
  }
  get() {
    if (this.items.length) return Promise.resolve(this.items.shift());
    if (this.error) return Promise.reject(this.error);
    const d = deferred();
    this.waiters.push(d);
    return d.promise;
  }
}

export const PAGE_VERSION = "0.1.0";

/** What the page advertises: a hilltop peer whose only transport is webrtc (a browser has
 * no TCP socket) and that reads records of any size. */
export function pageAppVersions() {
  return { hilltop: { version: PAGE_VERSION + "-browser", transports: ["webrtc"],
    features: ["big-records"] } };
}

export class Wormhole {
  static GIVE_UP_MS = 120000;

  /**
   * @param {string} url mailbox WebSocket URL (ws:// or wss://)
   * @param {object} [options] appid, appVersions, WebSocket (a constructor, for tests),
   *   onStatus (a callback that hears progress lines)
   */
  constructor(url, options = {}) {
    this.url = url;
    this.appid = options.appid ?? APPID;
    this.appVersions = options.appVersions ?? pageAppVersions();
    this.side = toHex(randomBytes(5));
    this.onStatus = options.onStatus ?? (() => {});
    this.WebSocketImpl = options.WebSocket ?? globalThis.WebSocket;
    this.key = null;
    this.seen = new Set();
    this.pending = new Map();  // peer's numbered phases that arrived early
    this.nextPeerPhase = 0;
    this.nextOurPhase = 0;
    this.outbox = [];  // numbered phases waiting for key confirmation
    this.confirmed = false;
    this.inbox = new Inbox();
    this.signals = new Inbox();  // hilltop-webrtc side-channel messages, apart from the app's
    this.peerVersions = deferred();
    this.codeReady = deferred();
    this.mailboxOpen = deferred();
    this.closed = deferred();
    this.nameplate = null;
    this.released = false;
    this.closing = false;
    this.unechoed = new Map();  // phase -> hex body of our adds not yet echoed
    this.everConnected = false;
    this.retryDelay = 1000;
    this.reconnectingSince = 0;
    this.connected = this.connect();
  }

  /** Open the WebSocket. The first connection failing is fatal (as in the official client);
   * a later drop is retried with backoff: bind with the same side, claim again unless
   * released, open the mailbox again and resend every ``add`` the server has not echoed. */
  connect() {
    const ready = deferred();
    let ws;
    try {
      ws = new this.WebSocketImpl(this.url);
    } catch (err) {
      const error = new MailboxError(`cannot open the mailbox ${this.url}: ${err.message}`);
      this.fail(error);
      return Promise.reject(error);
    }
    this.ws = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      this.sendServer({ type: "bind", appid: this.appid, side: this.side,
        client_version: ["hilltop-browser", PAGE_VERSION] });
      if (this.everConnected) this.rejoin();
      this.everConnected = true;
      this.retryDelay = 1000;
      ready.resolve();
    };
    ws.onerror = () => {
      if (this.everConnected) return;  // onclose decides: retry
      const error = new MailboxError(`cannot reach the mailbox server ${this.url}`);
      ready.reject(error);
      this.fail(error);
    };
    ws.onclose = () => {
      if (this.closing || this.failed) {
        this.closed.resolve();
      } else if (this.everConnected) {
        this.reconnectLater(opened);
      } else {
        this.fail(new MailboxError("the mailbox server closed the connection"));
        this.closed.resolve();
      }
    };
    ws.onmessage = (event) => {
      try {
        this.fromServer(JSON.parse(event.data));
      } catch (err) {
        this.fail(err);
      }
    };
    return ready.promise;
  }

  reconnectLater(wasOpen) {
    if (wasOpen) this.reconnectingSince = Date.now();
    if (Date.now() - this.reconnectingSince > Wormhole.GIVE_UP_MS) {
      this.fail(new MailboxError("lost the mailbox server and could not reconnect"));
      this.closed.resolve();
      return;
    }
    this.onStatus("lost the mailbox server, reconnecting");
    setTimeout(() => {
      if (!this.closing && !this.failed) this.connect().catch(() => {});
    }, this.retryDelay);
    this.retryDelay = Math.min(this.retryDelay * 2, 10000);
  }

  rejoin() {
    if (this.nameplate && !this.released) {
      this.sendServer({ type: "claim", nameplate: this.nameplate });
    }
    if (this.mailbox) this.sendServer({ type: "open", mailbox: this.mailbox });
    for (const [phase, body] of this.unechoed) this.sendServer({ type: "add", phase, body });
  }

  fail(error) {
    if (this.failed) return;
    this.failed = error;
    this.inbox.fail(error);
    this.signals.fail(error);
    this.peerVersions.reject(error);
    this.codeReady.reject(error);
    this.mailboxOpen.reject(error);
  }

  sendServer(msg) {
    msg.id = toHex(randomBytes(2));
    // while reconnecting an add waits in unechoed and is sent again once we are back
    if (this.ws.readyState === 1) this.ws.send(JSON.stringify(msg));
  }

  /** Ask the server for a nameplate and make a code of ``words`` PGP words (``pick(i)``
   * gives the word at position i). Resolves to the code. */
  async allocateCode(pick, words = 2) {
    await this.connected;
    this.allocating = { pick, words };
    this.sendServer({ type: "allocate" });
    return this.codeReady.promise;
  }

  /** Use ``code`` (typed by the user or taken from the URL fragment). */
  async setCode(code) {
    const text = code.normalize("NFC").trim();
    const nameplate = text.split("-")[0];
    if (!/^[0-9]{1,40}$/.test(nameplate) || !text.includes("-") || /\s/.test(text)) {
      throw new Error(`not a wormhole code: ${JSON.stringify(code)} `
        + "(a code looks like 7-guitarist-revenge)");
    }
    await this.connected;
    this.code = text;
    this.codeReady.resolve(text);
    this.claim(nameplate);
    return text;
  }

  claim(nameplate) {
    this.nameplate = nameplate;
    this.sendServer({ type: "claim", nameplate });
  }

  fromServer(msg) {
    switch (msg.type) {
      case "welcome":
        if (msg.welcome && msg.welcome.error) {
          throw new MailboxError(`the mailbox server refused us: ${msg.welcome.error}`);
        }
        return;
      case "allocated": {
        const { pick, words } = this.allocating;
        const list = [];
        for (let i = 0; i < words; i++) list.push(pick(i));
        this.code = [msg.nameplate, ...list].join("-");
        this.codeReady.resolve(this.code);
        this.claim(msg.nameplate);
        return;
      }
      case "claimed":
        if (this.mailbox) return;  // claimed again after a reconnection: already open
        this.mailbox = msg.mailbox;
        this.sendServer({ type: "open", mailbox: msg.mailbox });
        this.pake = new Spake2(utf8(this.code), utf8(this.appid));
        this.addPhase("pake", utf8(JSON.stringify({ pake_v1: toHex(this.pake.start()) })));
        this.mailboxOpen.resolve();
        this.onStatus("waiting for the other side");
        return;
      case "message":
        return this.fromPeer(msg);
      case "error":
        throw new MailboxError(`mailbox server error: ${msg.error}`
          + (msg.error === "crowded" ? " (the code is in use by two others already)" : ""));
      case "closed":
        this.ws.close();
        return;
      default:
        return;  // ack, released, nameplates, pong, unknown: nothing to do
    }
  }

  addPhase(phase, body) {
    const hex = toHex(body);
    this.unechoed.set(phase, hex);  // until the server echoes it back to us
    this.sendServer({ type: "add", phase, body: hex });
  }

  fromPeer(msg) {
    if (msg.side === this.side) {  // our own echo: the server has it
      this.unechoed.delete(msg.phase);
      return;
    }
    const id = `${msg.side}/${msg.phase}`;
    if (this.seen.has(id)) return;
    this.seen.add(id);
    const body = fromHex(msg.body);
    if (msg.phase === "pake") return this.gotPake(body);
    if (!this.key) return;  // cannot happen with a well-behaved server; ignore
    let plaintext;
    try {
      plaintext = openSealed(phaseKey(this.key, msg.side, msg.phase), body);
    } catch {
      this.scared();
      return;
    }
    if (!this.confirmed) {
      this.confirmed = true;
      this.onStatus("key confirmed");
      for (const item of this.outbox.splice(0)) this.addPhase(item.phase, item.body);
    }
    if (msg.phase === "version") {
      const parsed = JSON.parse(fromUtf8(plaintext));
      this.peerVersions.resolve(parsed.app_versions ?? {});
      return;
    }
    if (!/^[0-9]+$/.test(msg.phase)) return;  // dilate-N and future phases
    this.pending.set(Number(msg.phase), plaintext);
    while (this.pending.has(this.nextPeerPhase)) {
      const data = this.pending.get(this.nextPeerPhase);
      this.pending.delete(this.nextPeerPhase);
      this.nextPeerPhase += 1;
      const obj = JSON.parse(fromUtf8(data));
      if (isSignal(obj)) this.signals.put(obj[SIGNAL_KEY]); else this.inbox.put(obj);
    }
  }

  gotPake(body) {
    let message;
    try {
      message = fromHex(JSON.parse(fromUtf8(body)).pake_v1);
      this.key = this.pake.finish(message);
    } catch {
      this.scared();
      return;
    }
    if (!this.released) {
      this.released = true;
      this.sendServer({ type: "release", nameplate: this.nameplate });
    }
    this.onStatus("key established");
    const versionKey = phaseKey(this.key, this.side, "version");
    this.addPhase("version", seal(versionKey,
      utf8(JSON.stringify({ app_versions: this.appVersions }))));
  }

  scared() {
    const error = new WrongCodeError();
    this.fail(error);
    this.close("scary");
  }

  /** Send one app message (a JSON object) as the next numbered phase. */
  send(obj) {
    const phase = String(this.nextOurPhase++);
    const key = () => phaseKey(this.key, this.side, phase);
    const plaintext = utf8(JSON.stringify(obj));
    if (this.confirmed) {
      this.addPhase(phase, seal(key(), plaintext));
    } else {
      this.outbox.push({ phase, get body() { return seal(key(), plaintext); } });
    }
  }

  /** The next app message from the peer, in phase order. */
  next() {
    return this.inbox.get();
  }

  /** The peer's next WebRTC signal ({kind, sdp}). */
  nextSignal() {
    return this.signals.get();
  }

  sendSignal(body) {
    this.send({ [SIGNAL_KEY]: body });
  }

  versions() {
    return this.peerVersions.promise;
  }

  verifier() {
    return toHex(verifier(this.key));
  }

  transitKey() {
    return transitKey(this.key);
  }

  /** Close the mailbox with ``mood`` and the WebSocket after the server says closed. */
  async close(mood = "happy") {
    if (this.closing) return this.closed.promise;
    this.closing = true;
    try {
      if (this.ws.readyState === 1) {
        if (this.nameplate && !this.released) {
          this.released = true;
          this.sendServer({ type: "release", nameplate: this.nameplate });
        }
        this.sendServer(this.mailbox ? { type: "close", mailbox: this.mailbox, mood }
          : { type: "close", mood });
        setTimeout(() => this.ws.close(), 2000);  // the server's "closed" normally comes first
      } else {
        this.closed.resolve();
      }
    } catch {
      this.closed.resolve();
    }
    return this.closed.promise;
  }
}
