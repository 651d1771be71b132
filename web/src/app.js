// The page: receive (code typed in or taken from the URL fragment) or send (a file or a
// text, with a code allocated by the mailbox). Its state is mirrored on <body data-state>
// (idle, working, offer, done, error) so people and tests see the same thing.
import wordsText from "../../core/rendezvous/pgp_words.txt";
import { randomBytes, sha256Stream, toHex, utf8, fromUtf8 } from "./crypto.js";
import { Wormhole, WrongCodeError } from "./wormhole.js";
import { HINT, describePath, handshake, openChannel } from "./transit.js";
import { openSink } from "./sink.js";
import { parseFragment } from "./settings.js";
import { safeName, size } from "./format.js";

const $ = (id) => document.getElementById(id);
/** How long a receiver waits for its sender to close after the ack (it closes at once). */
const ACK_LINGER_MS = 10000;
const WORDS = wordsText.split("\n").filter((l) => l && !l.startsWith("#"))
  .map((l) => l.trim().split(/\s+/));  // [hex, even, odd]
const NEEDS_WEBRTC = "Files need a peer with hilltop's webrtc transport (hilltop installed "
  + "with its webrtc extra, e.g. pip install -e '.[webrtc]' in its checkout); official "
  + "wormhole and wormhole-william can exchange text with this page, not files.";

function pickWord(position) {
  const row = WORDS[randomBytes(1)[0]];
  return position % 2 === 0 ? row[2] : row[1];  // odd (3-syllable) words first
}


function setState(state, text) {
  document.body.dataset.state = state;
  if (text !== undefined) $("status").textContent = text;
}

function fail(err) {
  const text = err instanceof WrongCodeError ? err.message : `Failed: ${err.message ?? err}`;
  $("error").textContent = text;
  $("error").hidden = false;
  $("progress").hidden = true;
  $("offer").hidden = true;
  setState("error", "Transfer failed.");
  for (const b of document.querySelectorAll("button.go")) b.disabled = false;
}

function peerSpeaksWebrtc(versions) {
  const entry = versions && versions.hilltop;
  return !!(entry && Array.isArray(entry.transports) && entry.transports.includes("webrtc"));
}

/** The verifier, for comparing with a sender that runs `wormhole send --verify`. */
function showVerifier(w) {
  $("verifier").textContent = `Verifier: ${w.verifier()}`;
  $("verifier").hidden = false;
}

function transitMessage() {
  return { transit: { "abilities-v1": [{ type: HINT.type }], "hints-v1": [HINT] } };
}

class Progress {
  constructor(total, verb) {
    this.total = total;
    this.done = 0;
    this.verb = verb;
    this.started = performance.now();
    this.shown = 0;
    $("progress").max = Math.max(total, 1);
    $("progress").value = 0;
    $("progress").hidden = false;
  }
  add(n) {
    this.done += n;
    const now = performance.now();
    if (now - this.shown > 100 || this.done === this.total) {
      this.shown = now;
      $("progress").value = this.done;
      const rate = this.done / Math.max((now - this.started) / 1000, 0.001);
      setState("working", `${this.verb} ${size(this.done)} of ${size(this.total)} `
        + `(${size(rate)}/s)`);
    }
  }
  summary(via) {
    const seconds = (performance.now() - this.started) / 1000;
    const rate = this.total / Math.max(seconds, 0.001);
    return `${size(this.total)} in ${seconds.toFixed(2)} s (${size(rate)}/s) via ${via}`;
  }
}

function makeWormhole(settings) {
  return new Wormhole(settings.mailbox, {
    onStatus: (text) => setState("working", text[0].toUpperCase() + text.slice(1) + "..."),
  });
}

/** Ask the user to accept the offer; resolves true (accept) or false (decline). */
function askAccept(description) {
  $("offer-text").textContent = description;
  $("offer").hidden = false;
  setState("offer", description);
  return new Promise((resolve) => {
    $("accept").onclick = () => { $("offer").hidden = true; resolve(true); };
    $("decline").onclick = () => { $("offer").hidden = true; resolve(false); };
  });
}

async function receive(settings, code) {
  const w = makeWormhole(settings);
  try {
    await w.setCode(code);
    const versions = await w.versions();
    showVerifier(w);
    for (;;) {
      const msg = await w.next();
      if (msg.error) throw new Error(`the sender abandoned the transfer: ${msg.error}`);
      if (!msg.offer) continue;  // transit, or unknown keys from newer peers
      const offer = msg.offer;
      if (typeof offer.message === "string") {
        w.send({ answer: { message_ack: "ok" } });
        $("text-out").textContent = offer.message;
        $("text-out").hidden = false;
        setState("done", "Received a text message.");
        await w.close("happy");
        return;
      }
      const file = offer.file ?? offer.directory;
      if (!file) {
        w.send({ error: "unknown offer type" });
        throw new Error("the sender offered something this page cannot receive");
      }
      if (!peerSpeaksWebrtc(versions)) {
        w.send({ error: "transfer rejected: a browser can receive files only over WebRTC" });
        throw new Error(`the sender has no WebRTC transport. ${NEEDS_WEBRTC}`);
      }
      const name = offer.file ? safeName(file.filename) : `${safeName(file.dirname)}.zip`;
      const total = offer.file ? file.filesize : file.zipsize;
      if (!Number.isSafeInteger(total) || total < 0) {
        w.send({ error: "transfer rejected" });
        throw new Error("the sender's offer has no usable size");
      }
      await receiveFile(settings, w, name, total, offer.directory ? " (a folder, as a zip)" : "");
      return;
    }
  } catch (err) {
    fail(err);
    await w.close(err instanceof WrongCodeError ? "scary" : "errory");
  }
}

async function receiveFile(settings, w, name, total, note) {
  w.send(transitMessage());
  // negotiate at once: ICE and DTLS run while the user decides
  const channel = openChannel("receiver", { iceServers: settings.iceServers,
    relayOnly: settings.relayOnly,
    sendSignal: (s) => w.sendSignal(s), nextSignal: () => w.nextSignal() });
  channel.catch(() => {});
  if (!await askAccept(`Receive ${name}${note}, ${size(total)}?`)) {
    w.send({ error: "transfer rejected" });
    channel.then((s) => s.pc.close(), () => {});
    setState("done", "Declined.");
    await w.close("happy");
    return;
  }
  const sink = await openSink(name, total);
  let progress, via, digest;
  try {
    w.send({ answer: { file_ack: "ok" } });
    setState("working", "Connecting over WebRTC...");
    const stream = await channel;
    const transit = await handshake(stream, "receiver", w.transitKey());
    via = `webrtc ${await describePath(stream.pc)}`;
    progress = new Progress(total, `Receiving ${name} (${via}):`);
    const hash = sha256Stream();
    await receiveRecords(transit, stream, sink, total, hash, progress);
    await sink.close();
    digest = toHex(hash.digest());
    await transit.send(utf8(JSON.stringify({ ack: "ok", sha256: digest })));
    await transit.close({ lingerMs: ACK_LINGER_MS });
  } catch (err) {
    sink.abort(err);  // a cancelled download: nothing half-written is left looking complete
    throw err;
  }
  await w.close("happy");
  document.body.dataset.sha256 = digest;
  $("result").textContent = `Received ${name}: ${progress.summary(via)}; `
    + `SHA-256 ${digest.slice(0, 16)}... (${sink.kind})`;
  $("result").hidden = false;
  $("progress").hidden = true;
  setState("done", `Received ${name}.`);
}

/** Every record into ``sink`` in order, until ``total`` bytes are written (not just
 * received): the download may lag, and then the channel is held, which withholds the
 * peer's credits and so stops the sender. */
function receiveRecords(transit, stream, sink, total, hash, progress) {
  let received = 0;
  let written = 0;
  let held = false;
  return new Promise((resolve, reject) => {
    let chain = Promise.resolve();
    transit.listen((record) => {
      received += record.length;
      if (received > total) { reject(new Error("the sender sent more than it offered")); return; }
      hash.update(record);
      chain = chain.then(() => sink.write(record)).then(() => {
        written += record.length;
        progress.add(record.length);
        if (written === total) resolve();
      }).catch(reject);
      if (sink.backlog > 0 && !held) {
        held = true;
        stream.pause();
        sink.ready().then(() => { held = false; stream.resume(); }, reject);
      }
    }, (err) => { if (received < total) reject(err); });
    if (total === 0) resolve();
  });
}

async function send(settings, what) {
  const w = makeWormhole(settings);
  try {
    const code = await w.allocateCode(pickWord, 2);
    $("code-out").textContent = code;
    $("code-out").hidden = false;
    setState("working", `Wormhole code: ${code} (on the other computer: wormhole receive ${code})`);
    const versions = await w.versions();
    showVerifier(w);
    if (what.text !== undefined) {
      w.send({ offer: { message: what.text } });
      const answer = await nextAnswer(w);
      if (answer.message_ack !== "ok") throw new Error("the receiver did not accept the text");
      setState("done", "Text sent.");
      await w.close("happy");
      return;
    }
    if (!peerSpeaksWebrtc(versions)) {
      w.send({ error: "a browser can send files only over WebRTC, and this receiver has no "
        + "webrtc transport (hilltop installed with its webrtc extra has one)" });
      throw new Error(`the receiver has no WebRTC transport. ${NEEDS_WEBRTC}`);
    }
    await sendFile(settings, w, what.file, versions);
  } catch (err) {
    fail(err);
    await w.close(err instanceof WrongCodeError ? "scary" : "errory");
  }
}

async function nextAnswer(w) {
  for (;;) {
    const msg = await w.next();
    if (msg.error) throw new Error(`the receiver refused: ${msg.error}`);
    if (msg.answer) return msg.answer;
  }
}

async function sendFile(settings, w, file, versions) {
  w.send(transitMessage());
  w.send({ offer: { file: { filename: file.name, filesize: file.size } } });
  const channel = openChannel("sender", { iceServers: settings.iceServers,
    relayOnly: settings.relayOnly,
    sendSignal: (s) => w.sendSignal(s), nextSignal: () => w.nextSignal() });
  channel.catch(() => {});
  setState("working", "Waiting for the receiver to accept...");
  const answer = await nextAnswer(w);
  if (answer.file_ack !== "ok") throw new Error("the receiver did not accept the file");
  setState("working", "Connecting over WebRTC...");
  const stream = await channel;
  const transit = await handshake(stream, "sender", w.transitKey());
  const via = `webrtc ${await describePath(stream.pc)}`;
  const features = versions.hilltop?.features ?? [];
  const recordSize = features.includes("big-records") ? 256 * 1024 : 64 * 1024;
  const progress = new Progress(file.size, `Sending ${file.name} (${via}):`);
  const hash = sha256Stream();
  for (let at = 0; at < file.size; at += recordSize) {
    const chunk = new Uint8Array(await file.slice(at, at + recordSize).arrayBuffer());
    hash.update(chunk);
    await transit.send(chunk);
    progress.add(chunk.length);
  }
  const digest = toHex(hash.digest());
  const ack = JSON.parse(fromUtf8(await transit.nextRecord()));
  if (ack.ack !== "ok") throw new Error(`the receiver did not confirm: ${JSON.stringify(ack)}`);
  if (ack.sha256 !== undefined && ack.sha256 !== digest) {
    throw new Error("the receiver got different bytes than we sent (SHA-256 mismatch)");
  }
  await transit.close();
  await w.close("happy");
  document.body.dataset.sha256 = digest;
  $("result").textContent = `Sent ${file.name}: ${progress.summary(via)}`;
  $("result").hidden = false;
  $("progress").hidden = true;
  setState("done", `Sent ${file.name}.`);
}

function start() {
  const settings = parseFragment(location.hash, location.protocol);
  $("mailbox").value = settings.mailbox;
  $("code").value = settings.code;
  const current = () => ({ ...settings, mailbox: $("mailbox").value.trim() });
  const busy = () => { for (const b of document.querySelectorAll("button.go")) b.disabled = true; };
  $("receive").onclick = () => { busy(); receive(current(), $("code").value); };
  $("send-file").onclick = () => {
    const file = $("file").files[0];
    if (!file) { fail(new Error("choose a file first")); return; }
    busy();
    send(current(), { file });
  };
  $("send-text").onclick = () => { busy(); send(current(), { text: $("text").value }); };
  setState("idle", "Type a code to receive, or choose something to send.");
  if (settings.code) {
    busy();
    receive(settings, settings.code);
  }
}

start();
