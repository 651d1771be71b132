// The page's transit race as a file receiver: WebRTC when the peer has it, WebSocket relays
// when it has not, or when WebRTC has not opened its data channel RELAY_FALLBACK_MS after the
// page started waiting for it, or as soon as WebRTC fails. As protocol notes §5.3 has it for
// a receiver, the first connection on which the sender says "go" wins; every other one is
// closed (the sender says "nevermind" on any later one, which fails that attempt).
import { handshake } from "./transit.js";
import { openRelay } from "./relay.js";

/** How long WebRTC has to open its data channel, after the accept, before the relays are
 * dialled too. ICE has been running since the offer arrived and a working path needs a few
 * round trips, so 5 s is ample; a WebRTC whose checks go unanswered (ICE says "failed" only
 * after ~30 s) then costs 5 s, and one that fails outright starts the relays at once. The
 * hilltop sender waits for WebRTC as well: its relay dials start 2 s after its WebRTC
 * attempt, and a ready relay leaves a running WebRTC attempt 0.5 s more. */
export const RELAY_FALLBACK_MS = 5000;

/** The transit handshake's time on an open connection (the sender writes first, at once). */
const HANDSHAKE_MS = 30000;

function withDeadline(promise, ms) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no transit handshake within ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/**
 * ``webrtc``: a promise of the negotiated ChannelStream, or null when the peer has no
 * WebRTC. ``relays``: WebSocket relay URLs (relay.js relaysToDial). Resolves with
 * ``{transit, stream, kind, url}`` for the winner; rejects with every attempt's reason.
 */
export function connectAsReceiver({ webrtc, relays, tk, side, fallbackMs = RELAY_FALLBACK_MS,
  relayTimeoutMs = 60000, onStatus = () => {}, WebSocketImpl = globalThis.WebSocket }) {
  const abort = new AbortController();
  const reasons = [];
  let running = 0;
  let won = false;
  let relaysStarted = false;
  let timer = null;
  const open = new Set();  // streams in their handshake, closed when another one wins
  return new Promise((resolve, reject) => {
    const lose = (kind, err, stream) => {
      if (stream) stream.close().catch(() => {});
      reasons.push(`${kind}: ${err.message ?? err}`);
      running -= 1;
      if (kind === "webrtc") startRelays();
      if (!won && running === 0 && (relaysStarted || !relays.length)) {
        clearTimeout(timer);
        reject(new Error(`no transit connection could be made (${reasons.join("; ")})`));
      }
    };
    const attempt = (kind, url, opened) => {
      running += 1;
      opened.then((stream) => {
        if (won) { stream.close().catch(() => {}); running -= 1; return; }
        if (kind === "webrtc") clearTimeout(timer);  // the channel is open: no relay needed
        open.add(stream);
        withDeadline(handshake(stream, "receiver", tk), HANDSHAKE_MS).then((transit) => {
          open.delete(stream);
          if (won) { stream.close().catch(() => {}); running -= 1; return; }
          won = true;
          clearTimeout(timer);
          abort.abort();
          for (const other of open) other.close().catch(() => {});
          resolve({ transit, stream, kind, url });
        }, (err) => { open.delete(stream); lose(kind, err, stream); });
      }, (err) => lose(kind, err, null));
    };
    function startRelays() {
      if (relaysStarted || won || !relays.length) return;
      relaysStarted = true;
      clearTimeout(timer);
      onStatus(`Connecting through the relay ${relays[0]}...`);
      for (const url of relays) {
        attempt("relay", url, openRelay(url, tk, side, { timeoutMs: relayTimeoutMs,
          signal: abort.signal, WebSocketImpl }));
      }
    }
    if (webrtc) {
      onStatus("Connecting over WebRTC...");
      attempt("webrtc", null, webrtc);
      if (relays.length) timer = setTimeout(startRelays, fallbackMs);
    } else {
      startRelays();
    }
    if (!webrtc && !relays.length) reject(new Error("no way to connect: neither WebRTC nor a relay"));
  });
}
