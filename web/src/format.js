// What the page shows and saves under: sizes as official 0.24 words them, and offered names.

/** Decimal units with one decimal ("30.0 MB"), as official 0.24 and hilltop's CLI show sizes. */
export function size(n) {
  if (n < 1000) return `${n} B`;
  const units = ["kB", "MB", "GB", "TB"];
  let v = n / 1000, i = 0;
  while (v >= 1000 && i < units.length - 1) { v /= 1000; i++; }
  return `${v.toFixed(1)} ${units[i]}`;
}

/** The offered name without any folder part, as official receivers apply basename(); the
 * browser then cleans what its own file system needs. "." and ".." become "download". */
export function safeName(offered) {
  const base = String(offered ?? "").split(/[\\/]/).pop().replace(/^\.+$/, "");
  return base || "download";
}
