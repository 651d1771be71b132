// What the page is told in its URL fragment (never sent to any server, so the code reaches no
// server log): `#code=7-guitarist-revenge&mailbox=ws://...&stun=stun:h:3478&turn=turn:h:3478
// &turn-user=u&turn-password=p&relay-only=1&relay=ws://h:4002/`, or just `#7-guitarist-revenge`.
// ICE servers are only ever the ones given here: with none the page offers host candidates
// only, as hilltop does. `relay` (repeatable) names a transit relay's WebSocket side, which
// the page dials when WebRTC cannot carry a file (relay.js); malformed ones are dropped.
import { checkRelayUrl } from "./relay.js";

export const PUBLIC_MAILBOX = "ws://relay.magic-wormhole.io:4000/v1";
export const PUBLIC_MAILBOX_TLS = "wss://relay.magic-wormhole.io/v1";

export function defaultMailbox(protocol) {
  // an https page may not open a plain ws:// socket (mixed content)
  return protocol === "https:" ? PUBLIC_MAILBOX_TLS : PUBLIC_MAILBOX;
}

export function parseFragment(hash, protocol = "http:") {
  const text = hash.startsWith("#") ? hash.slice(1) : hash;
  const params = new URLSearchParams(text.includes("=") ? text : "");
  const code = text && !text.includes("=") ? decodeURIComponent(text) : params.get("code");
  const iceServers = params.getAll("stun").filter(Boolean).map((urls) => ({ urls }));
  const user = params.get("turn-user");
  const credential = params.get("turn-password");
  for (const urls of params.getAll("turn").filter(Boolean)) {
    iceServers.push({ urls, username: user ?? "", credential: credential ?? "" });
  }
  return {
    code: code || "",
    mailbox: params.get("mailbox") || defaultMailbox(protocol),
    iceServers,
    relayOnly: params.get("relay-only") === "1",
    relays: params.getAll("relay").map(checkRelayUrl).filter(Boolean),
  };
}
