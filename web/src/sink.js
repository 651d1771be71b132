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

/** How long the browser may take to activate our service worker, or to start a download the
 * worker holds; past it the page saves the file in a Blob instead. */
const START_TIMEOUT_MS = 30000;

/** A download whose bytes stream through the service worker as they arrive. */
export class StreamSink {
  /**
   * The worker must hold the stream before the iframe asks for it: a message and a fetch
   * reach the worker as separate tasks in no fixed order, and under load the fetch came
   * first, got a 404, and the page then waited for a download that never read a byte (a
   * browser test stalled 120 s in about 1 of 10 runs beside three busy processes). So the
   * worker answers on a port, once when it holds the stream and once when the browser
   * fetched it; we go on only after both.
   */
  static async open(worker, filename, size) {
    const id = Math.random().toString(36).slice(2);
    const strategy = new ByteLengthQueuingStrategy({ highWaterMark: BACKLOG });
    const { readable, writable } = new TransformStream({}, strategy);
    const { port1, port2 } = new MessageChannel();
    const told = new Set();
    const waiters = [];
    port1.onmessage = (e) => {
      told.add(e.data);
      for (const w of waiters.splice(0)) w();
    };
    const heard = (what) => new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(
        `the browser did not start the download (service worker: no "${what}")`)),
      START_TIMEOUT_MS);
      const check = () => {
        if (told.has(what)) { clearTimeout(timer); resolve(); } else waiters.push(check);
      };
      check();
    });
    worker.postMessage({ type: "hilltop-download", id, filename, size,
      disposition: attachmentName(filename), stream: readable, port: port2 },
    [readable, port2]);
    await heard("held");
    const frame = document.createElement("iframe");
    frame.hidden = true;
    frame.src = `./hilltop-download/${id}/${encodeURIComponent(filename)}`;
    document.body.appendChild(frame);
    try {
      await heard("fetched");
    } catch (err) {
      frame.remove();
      throw err;
    } finally {
      port1.close();
    }
    return new StreamSink(writable.getWriter(), filename, frame);
  }

  constructor(writer, filename, frame) {
    this.filename = filename;
    this.kind = "streamed to disk";
    this.writer = writer;
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
      if (reg.active) return reg.active;
      // a worker that fails to install turns "redundant" and never activates: without the
      // time-out the page would wait for it, and never answer the sender's offer
      return await new Promise((resolve) => {
        const w = reg.installing ?? reg.waiting;
        const timer = setTimeout(() => resolve(null), START_TIMEOUT_MS);
        w.addEventListener("statechange", () => {
          if (w.state === "activated") { clearTimeout(timer); resolve(w); }
          if (w.state === "redundant") { clearTimeout(timer); resolve(null); }
        });
      });
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
      return await StreamSink.open(worker, filename, size);
    } catch (err) {
      // no transferable streams (DataCloneError), or the download did not start: the
      // file still arrives, collected in a Blob
      console.warn(`streaming download unavailable, saving at the end: ${err.message}`);
    }
  }
  return new BlobSink(filename);
}
