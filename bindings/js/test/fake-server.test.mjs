// The client against a scripted stand-in for agentbox serve: what the real
// server never does on purpose (a reply no call can be told from, a line
// that is not JSON, another protocol) must fail calls, never leave them waiting.
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { ProtocolError, Sandbox, SandboxClosed } from "../dist/index.js";

// Answers ping; exec "lost" gets an error with id null, exec "garbage" a line
// that is not JSON; any other exec is never answered.
const SERVER = `#!${process.execPath}
const readline = require("node:readline");
const say = (m) => process.stdout.write(JSON.stringify(m) + "\\n");
say({ type: "hello", protocol: process.env.FAKE_PROTOCOL || "agentbox/1", version: "0", sandbox_id: "fake-1",
      max_line: 4096, max_concurrent: 8, max_queue: 16, workspace: "/workspace", cwd: "/workspace" });
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const req = JSON.parse(line);
  if (req.op === "ping") say({ type: "pong", id: req.id });
  else if (req.op === "shutdown") { say({ type: "ok", id: req.id, op: "shutdown" }); process.exit(0); }
  else if (req.command === "lost") say({ type: "error", id: null, code: "too_large", message: "a line too long" });
  else if (req.command === "garbage") process.stdout.write("not json at all\\n");
});
`;

let dir;
let binary;
before(() => {
  dir = mkdtempSync(join(tmpdir(), "agentbox-js-fake-"));
  binary = join(dir, "agentbox");
  writeFileSync(binary, SERVER);
  chmodSync(binary, 0o755);
  writeFileSync(join(dir, "package.json"), '{"type":"commonjs"}');
});
after(() => rmSync(dir, { recursive: true, force: true }));

describe("a server out of step", () => {
  it("fails every pending call on an error it cannot attribute, and goes on", async (t) => {
    const sb = await Sandbox.create({ binary, workspace: dir });
    t.after(() => sb.close());
    const waiting = [sb.exec("never answered"), sb.exec("never answered either")];
    const lost = sb.exec("lost");
    for (const p of [...waiting, lost]) {
      await assert.rejects(p, (e) => e instanceof ProtocolError && e.code === "out_of_step" && /too_large: a line too long/.test(e.message));
    }
    await sb.ping();
  });

  it("fails every pending call on a line that is not JSON", async (t) => {
    const sb = await Sandbox.create({ binary, workspace: dir });
    t.after(() => sb.close());
    const waiting = sb.exec("never answered");
    await assert.rejects(sb.exec("garbage"), /not JSON: not json at all/);
    await assert.rejects(waiting, (e) => e.code === "out_of_step");
  });

  it("refuses a server of another protocol", async () => {
    process.env.FAKE_PROTOCOL = "agentbox/2";
    try {
      await assert.rejects(Sandbox.create({ binary, workspace: dir }), /speaks "agentbox\/2", this client agentbox\/1/);
    } finally {
      delete process.env.FAKE_PROTOCOL;
    }
  });

  it("checks lines against the hello's max_line", async (t) => {
    const sb = await Sandbox.create({ binary, workspace: dir });
    t.after(() => sb.close());
    await assert.rejects(sb.write("f", "x".repeat(5000)), (e) => e.code === "too_large" && /over the server's max_line of 4096/.test(e.message));
    await sb.ping();
  });

  it("a pending call fails when the server exits", async () => {
    const sb = await Sandbox.create({ binary, workspace: dir });
    const waiting = sb.exec("never answered");
    await sb.close();
    await assert.rejects(waiting, SandboxClosed);
  });
});
