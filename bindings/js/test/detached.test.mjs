// Detached sandboxes from JavaScript (docs/detached.md): Sandbox.create
// with detach, Sandbox.connect, list, pause/resume, destroy, results kept
// for the next client; AgentboxSandbox.create({ detach }), fromId/fromName,
// stop/start, destroy and the factories. As root and as a plain user.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";

import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { createDeepAgent } from "deepagents";

import { ProtocolError, Sandbox, SandboxClosed, SandboxError } from "../dist/index.js";
import { AgentboxSandbox, createAgentboxSandboxFactory, createAgentboxSandboxFactoryFromSandbox } from "../dist/deepagents.js";
import { ROOT, base, removeTree, tempTree } from "./helpers.mjs";

const BIN = process.env.AGENTBOX_BIN;
// this file's own sandboxes: a runtime directory of its own (0700, the caller's)
const RUNTIME = mkdtempSync(join(tmpdir(), "agentbox-js-rt-"));
process.env.AGENTBOX_RUNTIME_DIR = RUNTIME;
after(() => rmSync(RUNTIME, { recursive: true, force: true }));

/** A workspace, removed when the test ends; any sandbox left is removed first. */
function workspace(t) {
  const ws = tempTree();
  t.after(() => {
    for (const entry of readdirSync(RUNTIME)) spawnSync(BIN, ["rm", "-f", entry], { stdio: "ignore" });
    removeTree(ws);
  });
  return ws;
}

/** The one sandbox `agentbox ls` lists with this id, or undefined. */
async function listed(id) {
  return (await Sandbox.list()).find((e) => e.id === id);
}

/** Connect, trying again while the last client's bridge is still going away (busy). */
async function reconnect(id) {
  for (let i = 0; ; i++) {
    try {
      return await Sandbox.connect(id);
    } catch (e) {
      if (i >= 50 || !/^busy: /.test(e.message)) throw e;
      await sleep(100);
    }
  }
}

/** Wait (at most 10 s) until the sandbox id has `running` commands running. */
async function running(id, count) {
  let entry;
  for (let i = 0; i < 200; i++) {
    entry = await listed(id);
    if (entry?.running === count && entry?.queued === 0) return;
    await sleep(50);
  }
  assert.fail(`sandbox ${id} never had ${count} commands running: ${JSON.stringify(entry)}`);
}

/** Wait until process pid is gone (at most 5 s). */
async function gone(pid) {
  for (let i = 0; i < 100 && existsSync(`/proc/${pid}`); i++) await sleep(50);
  let cmdline = "";
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    // gone
  }
  return cmdline === "";
}

/** A node process that connects, prints its request's id, and waits to be killed. */
function clientThatSends(id, request) {
  const code = `
    const { Sandbox } = await import(${JSON.stringify(new URL("../dist/index.js", import.meta.url).href)});
    const sb = await Sandbox.connect(${JSON.stringify(id)});
    sb.request("exec", ${JSON.stringify(request)}, { onId: (rid) => console.log(rid) }).catch(() => {});
    setInterval(() => {}, 1000);
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", code], { stdio: ["ignore", "pipe", "inherit"] });
  const firstLine = new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).once("line", resolve);
    child.once("exit", (status) => reject(new Error(`the client ended first (${status})`)));
  });
  return { child, firstLine };
}

/** The pid of this process's `agentbox connect ID` (its bridge to sandbox id). */
function bridgePid(id) {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const argv = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
      if (ppid === process.pid && argv[1] === "connect" && argv[2] === id) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return null;
}

describe("detached sandboxes (Sandbox)", () => {
  it("create with a name, exec, one client at a time, close, reattach by name and by id, destroy leaves nothing", async (t) => {
    const ws = workspace(t);
    const sb = await Sandbox.create(base({ workspace: ws, detach: true, name: "js1" }));
    assert.equal(sb.id, "js1");
    assert.equal(sb.detached, true);
    assert.equal((await sb.execute("echo hi > f; cat f")).output, "hi\n");
    await assert.rejects(Sandbox.connect("js1"), /^SandboxError: busy: .*another client is attached/);
    assert.equal((await listed("js1")).attached, true);

    await sb.close(); // a disconnect: the sandbox and its files stay
    assert.equal(sb.closed, true);
    await assert.rejects(sb.exec("true"), SandboxClosed);
    const entry = await listed("js1");
    assert.equal(entry.state, "running");
    assert.equal(entry.name, "js1");
    assert.equal(entry.workspace, ws);

    const again = await reconnect("js1");
    assert.equal((await again.execute("cat f")).output, "hi\n");
    assert.deepEqual(again.replayed, []);
    await again.close();

    // a sandbox without a name: an id of agentbox's, reached by it
    const unnamed = await Sandbox.create(base({ workspace: ws, detach: true }));
    assert.match(unnamed.id, /^ab-[0-9a-f]{10}$/);
    await unnamed.close();
    const byId = await reconnect(unnamed.id);
    assert.equal((await byId.execute("cat f")).output, "hi\n");
    assert.deepEqual((await Sandbox.list()).map((e) => e.id).sort(), [unnamed.id, "js1"].sort());
    await byId.destroy();

    const last = await reconnect("js1");
    await last.destroy();
    assert.deepEqual(await Sandbox.list(), []);
    assert.deepEqual(readdirSync(RUNTIME), []); // no socket, state or log left
    assert.ok(await gone(entry.pid), `the launcher ${entry.pid} is still running`);
    await assert.rejects(Sandbox.connect("js1"), /connect did not start \(exit status 125\): .*no sandbox js1/);
  });

  it("forks: new sandboxes from a checkpoint, each its own writes, the parent undisturbed", async (t) => {
    const ws = workspace(t);
    const sb = await Sandbox.create(base({ workspace: ws, detach: true, workspaceMode: "overlay" }));
    assert.equal((await sb.exec("echo v2 > f.txt")).exit_code, 0);
    const c = await sb.checkpoint();
    const ids = await sb.fork({ count: 2, from: c });
    assert.equal(new Set(ids).size, 2);
    for (const id of ids) {
      const f = await Sandbox.connect(id);
      assert.equal((await f.execute(`cat f.txt; echo ${id} > me`)).output, "v2\n");
      await f.destroy();
    }
    assert.equal((await sb.execute("test -e me || echo none")).output, "none\n");
    await assert.rejects(sb.fork({ count: 101 }), ProtocolError);
    await sb.destroy();
    assert.deepEqual(await Sandbox.list(), []);
  });

  it("refuses a second sandbox of the same name, and detached options without detach", async (t) => {
    const ws = workspace(t);
    const sb = await Sandbox.create(base({ workspace: ws, detach: true, name: "dup" }));
    await assert.rejects(Sandbox.create(base({ workspace: ws, detach: true, name: "dup" })), (e) => {
      assert.ok(e instanceof SandboxError);
      assert.match(e.message, /dup/);
      return true;
    });
    await assert.rejects(Sandbox.create(base({ workspace: ws, name: "x" })), /name is an option of a detached sandbox/);
    await sb.destroy();
    assert.deepEqual(await Sandbox.list(), []);
  });

  it("delivers the result of a command whose client was SIGKILLed to the next client", async (t) => {
    const ws = workspace(t);
    const sb = await Sandbox.create(base({ workspace: ws, detach: true, name: "kill" }));
    await sb.close();
    const { child, firstLine } = clientThatSends("kill", { command: "sleep 1; echo late" });
    const sentId = Number(await firstLine);
    assert.ok(sentId >= 2 ** 40, `a detached client's ids start high, not at ${sentId}`);
    await running("kill", 1);
    child.kill("SIGKILL");
    await new Promise((resolve) => child.once("exit", resolve));
    await running("kill", 0); // the command ends while no client is attached

    const next = await reconnect("kill");
    assert.equal((await next.execute("echo mine")).output, "mine\n"); // replayed lines come before it
    assert.equal(next.replayed.length, 1, JSON.stringify(next.replayed));
    const [r] = next.replayed;
    assert.deepEqual([r.type, r.id, r.stdout, r.exit_code], ["result", sentId, "late\n", 0]);
    await next.destroy();
  });

  it("does not take a replayed result of an earlier client for a reply to this one's requests", async (t) => {
    const ws = workspace(t);
    const sb = await Sandbox.create(base({ workspace: ws, detach: true, name: "ids" }));
    await sb.close();
    // an earlier client that numbered its requests from 1, as a plain session does
    const raw = spawn(BIN, ["connect", "ids"], { stdio: ["pipe", "pipe", "inherit"] });
    const hello = await new Promise((resolve) => createInterface({ input: raw.stdout }).once("line", resolve));
    assert.equal(JSON.parse(hello).type, "hello");
    raw.stdin.write('{"op":"exec","id":1,"command":"sleep 1; echo earlier"}\n{"op":"exec","id":2,"command":"sleep 1; exit 3"}\n');
    await running("ids", 2);
    raw.kill("SIGKILL");
    await new Promise((resolve) => raw.once("exit", resolve));
    await running("ids", 0);

    const next = await reconnect("ids");
    const [a, b] = await Promise.all([next.exec("echo first"), next.exec("echo second")]);
    assert.deepEqual([a.stdout, a.exit_code, b.stdout], ["first\n", 0, "second\n"]);
    const byId = Object.fromEntries(next.replayed.map((m) => [m.id, m]));
    assert.deepEqual(Object.keys(byId).sort(), ["1", "2"]);
    assert.equal(byId[1].stdout, "earlier\n");
    assert.equal(byId[2].exit_code, 3);
    await next.destroy();
  });

  it("resumes an exec iteration whose bridge was killed mid-stream: no byte lost or doubled", async (t) => {
    const ws = workspace(t);
    const sb = await Sandbox.create(base({ workspace: ws, detach: true }));
    const lines = 3000000;
    const whole = Buffer.from(Array.from({ length: lines }, (_, i) => `${i + 1}\n`).join(""));
    for (const at of [0.1 + Math.random() * 0.3, 0.5 + Math.random() * 0.4].map((f) => Math.floor(whole.length * f))) {
      const p = sb.spawn(`seq ${lines}`);
      const got = [];
      let size = 0;
      let killed = null;
      for await (const chunk of p) {
        got.push(chunk);
        size += chunk.length;
        if (killed === null && size >= at) {
          killed = bridgePid(sb.id);
          process.kill(killed, "SIGKILL"); // agentbox connect dies mid-stream
        }
      }
      assert.notEqual(killed, null);
      assert.notEqual(bridgePid(sb.id), killed); // a new bridge
      assert.equal((await p.wait()).exit_code, 0);
      const all = Buffer.concat(got);
      assert.equal(all.length, whole.length, `killed at ${at}`);
      assert.ok(all.equals(whole), `killed at ${at}: the bytes differ`);
    }
    assert.equal((await sb.execute("echo still")).output, "still\n");
    await sb.destroy();
  });

  it("pauses and resumes where the sandbox has a freezer cgroup, and refuses where it has none", async (t) => {
    const ws = workspace(t);
    const sb = await Sandbox.create(base({ workspace: ws, detach: true, name: "pz" }));
    let refusal = null;
    try {
      await sb.pause();
    } catch (e) {
      refusal = e;
    }
    if (refusal !== null) {
      // a plain user without a delegated v2 parent: refused with the reason, never pretended
      assert.ok(!ROOT, `root could not pause: ${refusal.message}`);
      assert.ok(refusal instanceof SandboxError);
      assert.match(refusal.message, /pause: sandbox pz: this sandbox has no freezer cgroup, so it cannot be paused/);
      assert.equal((await listed("pz")).state, "running");
      assert.equal((await sb.execute("echo on")).output, "on\n");
    } else {
      assert.equal((await listed("pz")).state, "paused");
      // a request waits while it is paused, and is answered after resume
      let answered = false;
      const waiting = sb.execute("echo thawed").then((r) => ((answered = true), r));
      await sleep(300);
      assert.equal(answered, false, "a paused sandbox ran a command");
      await sb.resume();
      assert.equal((await waiting).output, "thawed\n");
      assert.equal((await listed("pz")).state, "running");
    }
    await sb.destroy();
    assert.deepEqual(await Sandbox.list(), []);
  });

  it("reaches sandboxes through a via transport", async (t) => {
    const ws = workspace(t);
    const sb = await Sandbox.create(base({ workspace: ws, detach: true, name: "via" }));
    await sb.close();
    // env as the transport: any command that runs agentbox's command line carries it
    const via = ["env", `AGENTBOX_RUNTIME_DIR=${RUNTIME}`];
    assert.deepEqual((await Sandbox.list({ via, binary: BIN })).map((e) => e.id), ["via"]);
    const remote = await Sandbox.connect("via", { via, binary: BIN });
    assert.equal((await remote.execute("echo far")).output, "far\n");
    await remote.destroy();
    assert.deepEqual(await Sandbox.list(), []);
  });
});

describe("published ports", () => {
  it("port(n): a server inside reached from the host, listed, the same URL again, closed", async (t) => {
    const ws = workspace(t);
    const sb = await Sandbox.create(base({ workspace: ws, detach: true }));
    t.after(() => sb.destroy().catch(() => {}));
    await sb.request("exec", {
      keep_background: true,
      command: "echo hello from inside > index.html; nohup python3 -m http.server 8000 --bind 127.0.0.1 >/tmp/http.log 2>&1 &",
    });
    const url = await sb.port(8000);
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.equal(await sb.port(8000), url);
    assert.deepEqual((await sb.ports()).map((p) => [p.port, p.url, p.public]), [[8000, url, false]]);
    let body;
    for (let i = 0; i < 200 && body === undefined; i++) {
      try {
        // a deadline of its own: a connection the relay closes before the
        // server inside listens left Node 20's fetch pending now and then
        body = await (await fetch(url + "/index.html", { signal: AbortSignal.timeout(5000) })).text();
      } catch {
        await sleep(100);
      }
    }
    assert.equal(body, "hello from inside\n");
    await assert.rejects(sb.port(8000, { host: "10.0.0.1:80" }), /not a loopback address/);
    await sb.closePort(8000);
    assert.deepEqual(await sb.ports(), []);
    // with a token: told once (a new one) or as given; each connection sends
    // it and a newline first (a non-loopback host needs one; the test stays
    // on loopback)
    const made = await sb.port(8000, { host: "127.0.0.1:0", token: true });
    assert.match(made.url, /^tcp:\/\/127\.0\.0\.1:\d+$/);
    assert.match(made.token, /^[!-~]{16,128}$/);
    assert.deepEqual((await sb.ports()).map((p) => [p.port, p.url, p.token]), [[8000, made.url, true]]);
    const [, addr, hostPort] = made.url.match(/^tcp:\/\/(.*):(\d+)$/);
    const raw = (line) =>
      new Promise((resolve) => {
        const chunks = [];
        const c = net.connect(Number(hostPort), addr, () => c.write(line + "GET /index.html HTTP/1.0\r\n\r\n"));
        c.setTimeout(10000, () => c.destroy());
        c.on("data", (d) => chunks.push(d));
        c.on("error", () => {});
        c.on("close", () => resolve(Buffer.concat(chunks).toString()));
      });
    assert.match(await raw(made.token + "\n"), /hello from inside/);
    assert.doesNotMatch(await raw("not-the-token-at-all\n"), /hello from inside/);
    await sb.closePort(8000);
    const given = "a-token-of-mine-0123456789";
    assert.deepEqual(await sb.port(8000, { host: "127.0.0.1:0", token: given }), {
      url: (await sb.ports())[0].url,
      token: given,
    });
    await assert.rejects(sb.port(8001, { token: 12345 }), TypeError);
    await assert.rejects(sb.port(8001, { token: "short" }), /token/);
    await sb.closePort(8000);
  });
});

describe("detached sandboxes (AgentboxSandbox, deepagents)", () => {
  it("create({ detach, name }), close leaves it running, fromName and fromId attach, stop/start, destroy", async (t) => {
    const ws = workspace(t);
    const backend = await AgentboxSandbox.create(base({ workspace: ws, detach: true, name: "da1", initialFiles: { "seed.txt": "seeded\n" } }));
    assert.equal(backend.id, "da1");
    assert.equal(backend.detached, true);
    assert.equal(backend.isRunning, true);
    assert.equal((await backend.execute("cat seed.txt")).output, "seeded\n");
    await backend.close();
    assert.equal(backend.isRunning, false);
    assert.deepEqual((await AgentboxSandbox.list()).map((e) => [e.id, e.state]), [["da1", "running"]]);

    const byName = await AgentboxSandbox.fromName("da1");
    assert.equal((await byName.read("/workspace/seed.txt")).content, "seeded");
    await byName.write("/workspace/more.txt", "more\n");
    await byName.close();
    const byId = await AgentboxSandbox.fromId("da1");
    assert.equal((await byId.execute("cat more.txt")).output, "more\n");
    await assert.rejects(byId.initialize(), /already initialized/);

    try {
      await byId.stop();
      assert.equal((await AgentboxSandbox.list())[0].state, "paused");
      await byId.start();
      assert.equal((await AgentboxSandbox.list())[0].state, "running");
    } catch (e) {
      assert.ok(!ROOT, `root could not stop: ${e.message}`);
      assert.match(e.message, /cannot be paused/);
    }
    assert.equal((await byId.execute("echo up")).output, "up\n");

    await byId.destroy();
    assert.deepEqual(await AgentboxSandbox.list(), []);
    assert.deepEqual(readdirSync(RUNTIME), []);
    await assert.rejects(AgentboxSandbox.fromId("da1"), (e) => {
      assert.equal(e.code, "SANDBOX_NOT_FOUND");
      assert.match(e.message, /da1/);
      return true;
    });
  });

  it("createAgentboxSandboxFactory makes a new working sandbox per call; …FromSandbox gives the one it holds", async (t) => {
    const ws = workspace(t);
    const factory = createAgentboxSandboxFactory(base({ workspace: ws }));
    const [a, b] = [await factory(), await factory()];
    t.after(() => Promise.all([a.close(), b.close()]));
    assert.ok(a instanceof AgentboxSandbox && b instanceof AgentboxSandbox);
    assert.notEqual(a.id, b.id);
    assert.equal((await a.execute("echo a > a.txt; echo ok")).output, "ok\n");
    assert.equal((await b.execute("cat a.txt")).output, "a\n"); // the same workspace
    assert.equal(a.detached, false);

    const detachedFactory = createAgentboxSandboxFactory(base({ workspace: ws, detach: true }));
    const d = await detachedFactory();
    assert.equal(d.detached, true);
    await d.close();
    assert.deepEqual((await AgentboxSandbox.list()).map((e) => e.id), [d.id]);
    const d2 = await AgentboxSandbox.fromId(d.id);
    const fromSandbox = createAgentboxSandboxFactoryFromSandbox(d2);
    assert.equal(fromSandbox({}), d2);
    assert.equal((await fromSandbox({}).execute("cat a.txt")).output, "a\n");
    await d2.destroy();
    assert.deepEqual(await AgentboxSandbox.list(), []);
  });
});

describe("a deepagents agent on a detached sandbox", () => {
  /** One agent run of scripted tool calls (fakeModel: no network, no LLM); each tool's output by call id. */
  async function run(backend, turns) {
    const model = fakeModel();
    turns.forEach((calls, i) => model.respondWithTools(calls.map(([name, args], j) => ({ name, args, id: `t${i}_${j}` }))));
    model.respond(new AIMessage("All done."));
    const agent = createDeepAgent({ model, backend });
    const result = await agent.invoke({ messages: [new HumanMessage("Work in the sandbox.")] }, { recursionLimit: 50 });
    assert.equal(result.messages.at(-1).content, "All done.");
    const outputs = {};
    for (const m of result.messages) if (ToolMessage.isInstance(m)) outputs[m.tool_call_id] = String(m.content);
    return outputs;
  }

  it("an agent's work stays in the sandbox across clients: a second agent attached by id goes on with it", async (t) => {
    const ws = workspace(t);
    const first = await AgentboxSandbox.create(base({ workspace: ws, detach: true, name: "agent" }));
    const one = await run(createAgentboxSandboxFactoryFromSandbox(first), [
      [["write_file", { file_path: "/workspace/notes.md", content: "step one\n" }]],
      [["execute", { command: "echo scratch > /tmp/state; cat /workspace/notes.md" }]],
    ]);
    assert.equal(one.t0_0, "Successfully wrote to '/workspace/notes.md'");
    assert.match(one.t1_0, /^step one\n/);
    await first.close(); // the agent's process ends; the sandbox, its /tmp included, stays

    const second = await AgentboxSandbox.fromId("agent");
    const two = await run(second, [
      [["edit_file", { file_path: "/workspace/notes.md", old_string: "step one", new_string: "step one\nstep two" }]],
      [["execute", { command: "cat /tmp/state /workspace/notes.md" }]],
    ]);
    assert.match(two.t0_0, /Successfully replaced 1 occurrence/);
    assert.match(two.t1_0, /^scratch\nstep one\nstep two\n/);
    assert.equal(readFileSync(join(ws, "notes.md"), "utf8"), "step one\nstep two\n");
    await second.destroy();
    assert.deepEqual(await AgentboxSandbox.list(), []);
  });
});
