#!/usr/bin/env node
// bench/js-roundtrip.mjs: the round trip of execute("true") through the
// JavaScript client (one agentbox serve session) next to Node's own
// child_process.execSync("true") on the host, back to back and with gaps.
//
//   (cd bindings/js && npm ci && npm run build)
//   AGENTBOX_BIN=build/agentbox node bench/js-roundtrip.mjs [-n RUNS] [--gap-runs N] [--gap-ms MS]
//
// Prints the median, min and max of each, in milliseconds, and the ratio of
// the medians. The two are interleaved run by run, so the noise of a shared
// machine hits both alike. Started as root it runs the sandbox as uid 65534.
import { execSync } from "node:child_process";
import { chownSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";

import { Sandbox } from "../bindings/js/dist/index.js";

const { values } = parseArgs({
  options: {
    n: { type: "string", short: "n", default: "500" },
    "gap-runs": { type: "string", default: "60" },
    "gap-ms": { type: "string", default: "300" },
  },
});
const runs = Number(values.n);
const gapRuns = Number(values["gap-runs"]);
const gapMs = Number(values["gap-ms"]);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const fmt = (xs) => `median ${median(xs).toFixed(3)} ms (min ${Math.min(...xs).toFixed(3)}, max ${Math.max(...xs).toFixed(3)}, n=${xs.length})`;

const root = process.getuid() === 0;
const ws = mkdtempSync(join(tmpdir(), "agentbox-bench-js-"));
if (root) chownSync(ws, 65534, 65534);
const sb = await Sandbox.create({ workspace: ws, ...(root ? { hostUid: 65534 } : {}) });

async function measure(count, gap) {
  const box = [];
  const host = [];
  for (let i = 0; i < count; i++) {
    let t = performance.now();
    const r = await sb.execute("true");
    box.push(performance.now() - t);
    if (r.exitCode !== 0) throw new Error(`execute("true") exited ${r.exitCode}`);
    if (gap) await sleep(gap / 2);
    t = performance.now();
    execSync("true");
    host.push(performance.now() - t);
    if (gap) await sleep(gap / 2);
  }
  return { box, host };
}

try {
  await measure(20, 0); // warm up both
  const b2b = await measure(runs, 0);
  const gaps = await measure(gapRuns, gapMs);
  console.log(`node ${process.version}, agentbox ${sb.hello.version}, ${root ? "root (sandbox uid 65534)" : "uid " + process.getuid()}`);
  for (const [name, m] of [["back to back", b2b], [`${gapMs} ms gaps`, gaps]]) {
    console.log(`${name}:`);
    console.log(`  agentbox execute("true")   ${fmt(m.box)}`);
    console.log(`  execSync("true") on host   ${fmt(m.host)}`);
    console.log(`  ratio of medians           ${(median(m.box) / median(m.host)).toFixed(2)}x`);
  }
} finally {
  await sb.close();
  rmSync(ws, { recursive: true, force: true });
}
