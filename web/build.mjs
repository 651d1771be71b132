// Builds the page into ../cli/browser_page/ (committed, shipped as package data): one
// JavaScript bundle with every dependency inside (nothing is fetched at run time), the
// service worker, the HTML and the CSS. `node build.mjs --check` builds into a temporary
// folder and fails if the committed files differ (.ci/run does this).
import { build } from "esbuild";
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const here = new URL(".", import.meta.url).pathname;
const committed = join(here, "../cli/browser_page");
const check = process.argv.includes("--check");
const out = check ? mkdtempSync(join(tmpdir(), "hilltop-page-")) : committed;

mkdirSync(out, { recursive: true });
const common = { bundle: true, minify: true, format: "iife", target: ["es2022"],
  legalComments: "eof", logLevel: "warning", loader: { ".txt": "text" } };
await build({ ...common, entryPoints: [join(here, "src/app.js")], outfile: join(out, "hilltop.js") });
await build({ ...common, entryPoints: [join(here, "src/sw.js")], outfile: join(out, "sw.js") });
for (const name of ["index.html", "page.css"]) cpSync(join(here, "src", name), join(out, name));

if (check) {
  const differ = [];
  const names = new Set([...readdirSync(out), ...readdirSync(committed)]);
  for (const name of names) {
    if (name === "__init__.py") continue;
    let a = null, b = null;
    try { a = readFileSync(join(out, name)); } catch { /* missing */ }
    try { b = readFileSync(join(committed, name)); } catch { /* missing */ }
    if (!a || !b || !a.equals(b)) differ.push(name);
  }
  rmSync(out, { recursive: true, force: true });
  if (differ.length) {
    console.error(`cli/browser_page differs from a fresh build of web/: ${differ.join(", ")}`
      + " (run: cd web && npm ci && node build.mjs, then commit)");
    process.exit(1);
  }
  console.log("cli/browser_page matches a fresh build of web/");
}
