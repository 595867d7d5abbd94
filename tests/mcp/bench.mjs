// The round trip of execute("true") through agentbox mcp against the same
// command as an exec of the session protocol (agentbox serve), one server
// each, warmed up, requests interleaved, medians (docs/mcp.md):
//   node tests/mcp/bench.mjs path/to/agentbox [N]
// Raw JSON lines on both sides, so it measures the servers, not a client.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const bin = process.argv[2];
const n = Number(process.argv[3] ?? 400);
if (!bin) {
  console.error("usage: node bench.mjs AGENTBOX [N]");
  process.exit(2);
}

function server(args, ws) {
  const p = spawn(bin, [...args, "--workspace", ws], { stdio: ["pipe", "pipe", "inherit"] });
  let buf = "";
  let waiting = null;
  p.stdout.on("data", (d) => {
    buf += d;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const m = JSON.parse(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
      if (waiting && waiting.match(m)) {
        const w = waiting;
        waiting = null;
        w.resolve(m);
      }
    }
  });
  const ask = (line, match) =>
    new Promise((resolve) => {
      waiting = { match, resolve };
      p.stdin.write(line + "\n");
    });
  return { p, ask };
}

const ws = mkdtempSync(join(tmpdir(), "agentbox-bench-"));
const serve = server(["serve"], ws);
const mcp = server(["mcp"], ws);
let id = 0;
const viaServe = () => {
  const i = ++id;
  return serve.ask(JSON.stringify({ op: "exec", id: i, command: "true" }), (m) => m.id === i && m.type !== "hello");
};
const viaMcp = () => {
  const i = ++id;
  return mcp.ask(
    JSON.stringify({ jsonrpc: "2.0", id: i, method: "tools/call", params: { name: "execute", arguments: { command: "true" } } }),
    (m) => m.id === i,
  );
};
const time = async (f) => {
  const t0 = process.hrtime.bigint();
  const m = await f();
  const us = Number(process.hrtime.bigint() - t0) / 1000;
  return { us, m };
};
const median = (a) => {
  const s = [...a].sort((x, y) => x - y);
  return s[Math.floor(s.length / 2)];
};

await mcp.ask(JSON.stringify({ jsonrpc: "2.0", id: "init", method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "bench", version: "1" } } }), (m) => m.id === "init");
for (let i = 0; i < 50; i++) {
  await viaServe();
  await viaMcp();
}
// the server process's own CPU time (user + system), in clock ticks (100/s)
const cpu = (p) => {
  const f = readFileSync(`/proc/${p.pid}/stat`, "utf8").split(") ")[1].split(" ");
  return Number(f[11]) + Number(f[12]);
};
const cpu0 = [cpu(serve.p), cpu(mcp.p)];
const a = [], b = [];
for (let i = 0; i < n; i++) {
  const order = i % 2 ? [[viaServe, a], [viaMcp, b]] : [[viaMcp, b], [viaServe, a]];
  for (const [f, into] of order) {
    const { us, m } = await time(f);
    if (m.error || m.type === "error" || m.result?.isError) throw new Error(JSON.stringify(m));
    into.push(us);
  }
}
const perCall = (p, i) => (((cpu(p) - cpu0[i]) * 10) / n).toFixed(3);
console.log(`serve exec("true"):   median ${(median(a) / 1000).toFixed(3)} ms over ${n}, server CPU ${perCall(serve.p, 0)} ms a call`);
console.log(`mcp execute("true"):  median ${(median(b) / 1000).toFixed(3)} ms over ${n}, server CPU ${perCall(mcp.p, 1)} ms a call`);
serve.p.stdin.end();
mcp.p.stdin.end();
await Promise.all([serve.p, mcp.p].map((p) => new Promise((r) => p.on("exit", r))));
rmSync(ws, { recursive: true, force: true });
