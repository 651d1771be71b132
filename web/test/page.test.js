// The page's own small pieces: the URL fragment it is told its settings in, and the names
// and sizes it shows and saves under.
import { test } from "node:test";
import assert from "node:assert/strict";
import { PUBLIC_MAILBOX, PUBLIC_MAILBOX_TLS, parseFragment } from "../src/settings.js";
import { safeName, size } from "../src/format.js";

test("settings from the URL fragment", () => {
  assert.deepEqual(parseFragment("#7-guitarist-revenge"),
    { code: "7-guitarist-revenge", mailbox: PUBLIC_MAILBOX, iceServers: [], relayOnly: false,
      relays: [] });
  assert.equal(parseFragment("", "https:").mailbox, PUBLIC_MAILBOX_TLS);
  const s = parseFragment("#code=3-a-b&mailbox=ws%3A%2F%2F198.18.0.1%3A4000%2Fv1"
    + "&stun=stun:h:3478&turn=turn:h:3478&turn-user=u&turn-password=p&relay-only=1");
  assert.equal(s.relayOnly, true);
  assert.equal(s.code, "3-a-b");
  assert.equal(s.mailbox, "ws://198.18.0.1:4000/v1");
  assert.deepEqual(s.iceServers, [{ urls: "stun:h:3478" },
    { urls: "turn:h:3478", username: "u", credential: "p" }]);
});

test("offered names lose their folders; sizes read as official shows them", () => {
  assert.equal(safeName("../../etc/passwd"), "passwd");
  assert.equal(safeName("a\\b\\c.txt"), "c.txt");
  assert.equal(safeName(".."), "download");
  assert.equal(safeName(""), "download");
  assert.equal(safeName("ünïcode name.bin"), "ünïcode name.bin");
  assert.equal(size(999), "999 B");
  assert.equal(size(50_000_000), "50.0 MB");
  assert.equal(size(1_234_567_890), "1.2 GB");
});
