// Where a received file goes. Preferred: a download streamed through our service worker
// (sw.js), so the browser writes the file to disk as it arrives and the page holds only a few
// MiB; that needs a secure context (https, or http on localhost). Elsewhere (a phone opening
// http://LAN-ADDRESS) the bytes are collected in a Blob and saved at the end: Chrome keeps
// large blobs on disk, other browsers may hold them in memory.

const BACKLOG = 4 * 1024 * 1024;

function attachmentName(name) {
  return `attachment; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/** Collects the file in a Blob, saved through a download link at the end. */
export class BlobSink {
  constructor(filename) {
    this.filename = filename;
    this.kind = "blob (saved when complete)";
    this.parts = [];
  }
  get backlog() { return 0; }
  ready() { return Promise.resolve(); }
  async write(bytes) { this.parts.push(bytes); }
  async close() {
    const url = URL.createObjectURL(new Blob(this.parts, { type: "application/octet-stream" }));
    this.parts = [];
    const a = document.createElement("a");
    a.href = url;
    a.download = this.filename;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  }
  abort() { this.parts = []; }
}

/** A download whose bytes stream through the service worker as they arrive. */
export class StreamSink {
  constructor(worker, filename, size) {
    this.filename = filename;
    this.kind = "streamed to disk";
    const id = Math.random().toString(36).slice(2);
    const strategy = new ByteLengthQueuingStrategy({ highWaterMark: BACKLOG });
    const { readable, writable } = new TransformStream({}, strategy);
    this.writer = writable.getWriter();
    worker.postMessage({ type: "hilltop-download", id, filename, size,
      disposition: attachmentName(filename), stream: readable }, [readable]);
    const frame = document.createElement("iframe");
    frame.hidden = true;
    frame.src = `./hilltop-download/${id}/${encodeURIComponent(filename)}`;
    document.body.appendChild(frame);
    this.frame = frame;
  }
  get backlog() { return this.writer.desiredSize > 0 ? 0 : BACKLOG; }
  /** Resolves once the download has taken enough that writing may go on. */
  ready() { return this.writer.ready; }
  async write(bytes) {
    await this.writer.ready;
    this.writer.write(bytes);
  }
  async close() {
    await this.writer.close();
    setTimeout(() => this.frame.remove(), 60000);
  }
  abort(reason) {
    this.writer.abort(reason).catch(() => {});
  }
}

let workerPromise = null;

/** Our active service worker, or null where the browser cannot stream downloads. */
export function streamingWorker() {
  if (workerPromise) return workerPromise;
  workerPromise = (async () => {
    if (!globalThis.isSecureContext || !navigator.serviceWorker
      || typeof TransformStream === "undefined") return null;
    try {
      const reg = await navigator.serviceWorker.register("./sw.js", { scope: "./" });
      const worker = reg.active ?? await new Promise((resolve) => {
        const w = reg.installing ?? reg.waiting;
        w.addEventListener("statechange", () => { if (w.state === "activated") resolve(w); });
      });
      return worker;
    } catch {
      return null;
    }
  })();
  return workerPromise;
}

export async function openSink(filename, size) {
  const worker = await streamingWorker();
  if (worker) {
    try {
      return new StreamSink(worker, filename, size);
    } catch { /* a browser without transferable streams */ }
  }
  return new BlobSink(filename);
}
