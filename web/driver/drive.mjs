// Drives the page in Debian's headless Chromium (puppeteer-core; no browser download), for
// tests and the benchmark. Prints one JSON object per line on stdout:
//   {"event": "code", "code": ...}       when the page allocated a code (sending)
//   {"event": "end", "state": "done"|"error", "status", "error", "text", "result",
//    "sha256", "download", "seconds"}
//
//   node drive.mjs --url URL [--send-file PATH | --send-text TEXT] [--downloads DIR]
//                  [--shots DIR --shot-prefix NAME] [--timeout S] [--secure-origin ORIGIN]
import puppeteer from "puppeteer-core";
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({ options: {
  url: { type: "string" },
  "send-file": { type: "string" },
  "send-text": { type: "string" },
  downloads: { type: "string" },
  shots: { type: "string" },
  "shot-prefix": { type: "string", default: "page" },
  timeout: { type: "string", default: "180" },
  "secure-origin": { type: "string" },
  chromium: { type: "string", default: process.env.HILLTOP_CHROMIUM ?? "/usr/bin/chromium" },
  "no-accept": { type: "boolean", default: false },
  code: { type: "string" },
} });

const say = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
const profile = mkdtempSync(join(tmpdir(), "hilltop-chromium-"));
const flags = [
  "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
  "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--disable-default-apps",
  "--disable-domain-reliability", "--metrics-recording-only", "--password-store=basic",
  `--user-data-dir=${profile}`, "--window-size=720,900",
];
if (args["secure-origin"]) flags.push(`--unsafely-treat-insecure-origin-as-secure=${args["secure-origin"]}`);

const started = Date.now();
const browser = await puppeteer.launch({ executablePath: args.chromium, args: flags,
  headless: true, defaultViewport: { width: 720, height: 900 }, protocolTimeout: 600000 });
let exitCode = 1;
try {
  const page = await browser.newPage();
  page.on("console", (m) => process.stderr.write(`[page] ${m.type()}: ${m.text()}\n`));
  page.on("pageerror", (e) => process.stderr.write(`[page error] ${e.message}\n`));
  const downloads = args.downloads;
  const finished = new Map();
  if (downloads) {
    mkdirSync(downloads, { recursive: true });
    const cdp = await browser.target().createCDPSession();
    await cdp.send("Browser.setDownloadBehavior", { behavior: "allow", downloadPath: downloads,
      eventsEnabled: true });
    cdp.on("Browser.downloadWillBegin", (e) => finished.set(e.guid, { name: e.suggestedFilename }));
    cdp.on("Browser.downloadProgress", (e) => {
      const entry = finished.get(e.guid) ?? {};
      entry.state = e.state;
      finished.set(e.guid, entry);
    });
  }
  const shot = async (name) => {
    if (!args.shots) return;
    mkdirSync(args.shots, { recursive: true });
    await page.screenshot({ path: join(args.shots, `${args["shot-prefix"]}-${name}.png`) });
  };
  await page.goto(args.url, { waitUntil: "load" });
  if (args.code !== undefined) {  // typed in, as a person with a static copy of the page would
    await page.waitForFunction(() => document.body.dataset.state === "idle");
    await page.type("#code", args.code);
    await page.click("#receive");
  } else if (args["send-file"] || args["send-text"] !== undefined) {
    await page.waitForFunction(() => document.body.dataset.state === "idle");
    if (args["send-file"]) {
      const input = await page.$("#file");
      await input.uploadFile(args["send-file"]);
      await page.click("#send-file");
    } else {
      await page.type("#text", args["send-text"]);
      await page.click("#send-text");
    }
    await page.waitForFunction(() => !document.getElementById("code-out").hidden
      || document.body.dataset.state === "error", { timeout: 60000 });
    const code = await page.$eval("#code-out", (e) => e.textContent);
    if (code) say({ event: "code", code });
  }
  const deadline = Date.now() + Number(args.timeout) * 1000;
  let shotDuring = false;
  let heapPeak = 0;
  let lastHeap = 0;
  for (;;) {
    if (Date.now() - lastHeap > 250) {  // the page's JavaScript heap, sampled during the run
      lastHeap = Date.now();
      heapPeak = Math.max(heapPeak, (await page.metrics()).JSHeapUsedSize);
    }
    const s = await page.evaluate(() => ({ state: document.body.dataset.state,
      value: document.getElementById("progress").value,
      max: document.getElementById("progress").max,
      offerShown: !document.getElementById("offer").hidden }));
    if (s.state === "offer" && s.offerShown) {
      await shot("offer");
      if (args["no-accept"]) await page.click("#decline"); else await page.click("#accept");
    }
    if (!shotDuring && s.state === "working" && s.value > s.max * 0.3 && s.value < s.max * 0.8) {
      shotDuring = true;
      await shot("during");
    }
    if (s.state === "done" || s.state === "error") break;
    if (Date.now() > deadline) throw new Error(`timed out in state ${s.state}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const end = await page.evaluate(() => ({
    state: document.body.dataset.state,
    status: document.getElementById("status").textContent,
    error: document.getElementById("error").hidden ? null : document.getElementById("error").textContent,
    text: document.getElementById("text-out").hidden ? null : document.getElementById("text-out").textContent,
    result: document.getElementById("result").hidden ? null : document.getElementById("result").textContent,
    sha256: document.body.dataset.sha256 ?? null,
    verifier: document.getElementById("verifier").hidden ? null
      : document.getElementById("verifier").textContent.replace("Verifier: ", ""),
  }));
  await shot("after");
  if (downloads && end.state === "done" && end.sha256) {
    while (![...finished.values()].some((d) => d.state === "completed")) {
      if ([...finished.values()].some((d) => d.state === "canceled")) throw new Error("download canceled");
      if (Date.now() > deadline) throw new Error("the download did not complete");
      await new Promise((r) => setTimeout(r, 50));
    }
    end.download = readdirSync(downloads).filter((n) => !n.endsWith(".crdownload"))[0] ?? null;
  }
  end.seconds = (Date.now() - started) / 1000;
  end.heap_peak_mb = Math.round(heapPeak / 1e5) / 10;
  say({ event: "end", ...end });
  exitCode = end.state === "done" ? 0 : 3;
} catch (err) {
  say({ event: "end", state: "driver-error", error: String(err && err.message || err) });
  exitCode = 2;
} finally {
  await browser.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(exitCode);
