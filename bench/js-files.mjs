#!/usr/bin/env node
// bench/js-files.mjs: a large file into and out of the sandbox through the
// JavaScript client beside Node's fs.copyFile of the same file on the host,
// interleaved round by round, medians.
//
//   (cd bindings/js && npm ci && npm run build)
//   AGENTBOX_BIN=build/agentbox node bench/js-files.mjs [--size MIB] [--runs R] [--chunks]
//
// uploadFile/downloadFile take the server's host_files path where the hello
// has it; upload/download of bytes in memory (what deepagents' uploadFiles
// and downloadFiles call) go through a private file in /dev/shm and that
// path above 1 MiB. --chunks adds both on base64 chunks (hostFiles hidden
// from the client), the path a client through `via` takes. Each step starts
// with a new destination on both sides. Started as root it runs the sandbox
// as uid 65534.
import { randomBytes } from "node:crypto";
import { chownSync, copyFileSync, mkdtempSync, openSync, readFileSync, rmSync, closeSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";

import { Sandbox } from "../bindings/js/dist/index.js";

const { values } = parseArgs({
  options: {
    size: { type: "string", default: "256" },
    runs: { type: "string", default: "5" },
    chunks: { type: "boolean", default: false },
  },
});
const MiB = 1024 * 1024;
const size = Number(values.size) * MiB;
const runs = Number(values.runs);
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

const root = process.getuid() === 0;
const ws = mkdtempSync(join(tmpdir(), "agentbox-bench-js-"));
const host = mkdtempSync(join(tmpdir(), "agentbox-bench-js-host-"));
if (root) chownSync(ws, 65534, 65534);
const src = join(host, "big.bin");
const fd = openSync(src, "w");
const block = randomBytes(MiB);
for (let done = 0; done < size; done += MiB) writeSync(fd, block);
closeSync(fd);

const sb = await Sandbox.create({ workspace: ws, ...(root ? { hostUid: 65534 } : {}) });
const fast = sb.hostFiles;
const chunked = (fn) => async () => {
  Object.defineProperty(sb, "hostFiles", { get: () => false, configurable: true });
  try {
    await fn();
  } finally {
    delete sb.hostFiles;
  }
};
const steps = {
  "host copyFile": async () => copyFileSync(src, join(host, "copy")),
  uploadFile: () => sb.uploadFile("big", src),
  downloadFile: () => sb.downloadFile("big", join(host, "out")),
  "upload (memory)": async () => sb.upload("big2", readFileSync(src)),
  "download (memory)": () => sb.download("big2"),
};
if (values.chunks) {
  steps["uploadFile chunks"] = chunked(() => sb.uploadFile("big3", src));
  steps["downloadFile chunks"] = chunked(() => sb.downloadFile("big3", join(host, "out3")));
}
const times = Object.fromEntries(Object.keys(steps).map((k) => [k, []]));
try {
  for (let r = 0; r < runs; r++) {
    for (const [name, fn] of Object.entries(steps)) {
      // a new destination each time, on both sides
      for (const p of [join(host, "copy"), join(host, "out"), join(host, "out3")]) rmSync(p, { force: true });
      for (const p of ["big", "big2", "big3"]) if (name.startsWith("upload")) await sb.delete(p).catch(() => {});
      const t = performance.now();
      await fn();
      times[name].push((performance.now() - t) / 1000);
    }
  }
} finally {
  await sb.close();
  rmSync(ws, { recursive: true, force: true });
  rmSync(host, { recursive: true, force: true });
}
const hostT = median(times["host copyFile"]);
console.log(`${values.size} MiB file, median of ${runs} (hostFiles: ${fast}):`);
for (const [name, xs] of Object.entries(times)) {
  const t = median(xs);
  console.log(`  ${name.padEnd(20)} ${t.toFixed(3)} s  ${(size / MiB / t).toFixed(1).padStart(7)} MiB/s  ${(t / hostT).toFixed(2)}x host copy`);
}
