// The page's service worker: it turns a stream handed over by the page into a download, so
// a received file goes to disk as it arrives (sink.js). It serves nothing else: every other
// request goes to the network (the local server or the static host) untouched.
const downloads = new Map();

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

self.addEventListener("message", (event) => {
  const msg = event.data;
  if (msg && msg.type === "hilltop-download") {
    downloads.set(msg.id, msg);
    msg.port?.postMessage("held");  // only now may the page ask for it (sink.js)
  }
});

self.addEventListener("fetch", (event) => {
  const match = new URL(event.request.url).pathname.match(/\/hilltop-download\/([a-z0-9]+)\//);
  if (!match) return;
  const entry = downloads.get(match[1]);
  if (!entry) {
    event.respondWith(new Response("no such download", { status: 404 }));
    return;
  }
  downloads.delete(match[1]);
  entry.port?.postMessage("fetched");
  const headers = {
    "Content-Type": "application/octet-stream",
    "Content-Disposition": entry.disposition,
    "X-Content-Type-Options": "nosniff",
  };
  if (Number.isSafeInteger(entry.size)) headers["Content-Length"] = String(entry.size);
  event.respondWith(new Response(entry.stream, { headers }));
});
