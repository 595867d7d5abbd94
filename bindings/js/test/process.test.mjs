// Sandbox.spawn and Sandbox.pty against the real server (AGENTBOX_BIN):
// streamed stdin, output as it comes, a pty's size and resize, signals.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { ProtocolError } from "../dist/index.js";
import { sandbox } from "./helpers.mjs";

describe("process", () => {
  it("feeds cat through stdin and ends it on eof", async (t) => {
    const { sb } = await sandbox(t);
    const p = sb.spawn(["cat"], { timeout: 60 });
    await p.write("hello\n");
    assert.equal(await p.readUntil("hello\n"), "hello\n");
    await p.write(Buffer.from([0, 0x62]), true);
    const r = await p.wait();
    assert.equal(r.exit_code, 0);
    assert.equal(r.stdout, "hello\n\u0000b");
    await assert.rejects(p.write("late"), ProtocolError);
  });

  it("gives a pty its size, a resize, Ctrl-C and Ctrl-D", async (t) => {
    const { sb } = await sandbox(t);
    const p = sb.pty(["sh", "-c", "stty size; trap 'stty size' WINCH; echo ready; cat; echo cat=$?"], 33, 101, { timeout: 60 });
    const first = await p.readUntil("ready");
    assert.match(first, /33 101\r\n/);
    await p.resize(40, 120);
    await p.write("typed\n");
    // echoed, then cat's; the WINCH trap's line may come between them
    await p.readUntil("typed\r\n");
    await p.readUntil("typed\r\n");
    await p.closeStdin(); // Ctrl-D: cat ends
    await p.readUntil("cat=0");
    const r = await p.wait();
    assert.equal(r.exit_code, 0);
    assert.match(String(r.stdout), /40 120\r\n/);
  });

  it("sends signals to the process group", async (t) => {
    const { sb } = await sandbox(t);
    const p = sb.spawn(["sleep", "30"], { timeout: 60 });
    await p.signal("TERM");
    const r = await p.wait();
    assert.equal(r.signal, "SIGTERM");
    assert.equal(p.running, false);
    const chunks = [];
    for await (const c of p) chunks.push(c);
    assert.deepEqual(chunks, []);
  });
});
