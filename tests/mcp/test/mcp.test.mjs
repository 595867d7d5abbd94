// agentbox mcp through the official MCP TypeScript SDK's client
// (@modelcontextprotocol/sdk, pinned in ../package-lock.json), started with
// the configuration lines of docs/mcp.md: the tools and their schemas, each
// tool, a timeout, bad paths and arguments, malformed input, cancellation,
// progress, logging, the overlay's tools (a commit of many files beside an
// execute and its deadline, a cancelled commit), and end of file ending the server
// and its sandbox with nothing left. Run as root and as a plain user.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { EmptyResultSchema, LATEST_PROTOCOL_VERSION, LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const BIN = process.env.AGENTBOX_BIN;
const DOC = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "docs", "mcp.md");
const PROJECT = "/path/to/project";

// The four hosts' lines of docs/mcp.md, each as [command, ...args].
function docLines() {
  const doc = readFileSync(DOC, "utf8");
  const blocks = [...doc.matchAll(/```(\w+)\n([\s\S]*?)```/g)].map((m) => ({ lang: m[1], text: m[2] }));
  const claude = blocks.find((b) => b.lang === "sh" && b.text.startsWith("claude mcp add agentbox -- "));
  assert.ok(claude, "docs/mcp.md has the claude mcp add line");
  assert.doesNotMatch(claude.text, /['"\\]/, "the claude line splits on spaces");
  const toml = blocks.find((b) => b.lang === "toml");
  assert.ok(toml, "docs/mcp.md has Codex's config.toml");
  const tomlCommand = JSON.parse(toml.text.match(/^command = (.*)$/m)[1]);
  const tomlArgs = JSON.parse(toml.text.match(/^args = (.*)$/m)[1]);
  const json = blocks.filter((b) => b.lang === "json").map((b) => JSON.parse(b.text));
  const cursor = json.find((j) => j.mcpServers)?.mcpServers.agentbox;
  const vscode = json.find((j) => j.servers)?.servers.agentbox;
  assert.ok(cursor && vscode, "docs/mcp.md has Cursor's and VS Code's mcp.json");
  assert.equal(vscode.type, "stdio");
  return {
    claude: claude.text.trim().split(/\s+/).slice(5),
    codex: [tomlCommand, ...tomlArgs],
    cursor: [cursor.command, ...cursor.args],
    vscode: [vscode.command, ...vscode.args],
  };
}

// The docs' line for workspace ws: [binary, args].
function docCommand(ws) {
  const line = docLines().claude;
  assert.equal(line[0], "agentbox");
  return line.slice(1).map((a) => (a === PROJECT ? ws : a));
}

function tempDir(tag) {
  return mkdtempSync(join(tmpdir(), `agentbox-mcp-${tag}-`));
}

async function connect(args) {
  const transport = new StdioClientTransport({ command: BIN, args, stderr: "pipe", env: { ...process.env } });
  let stderr = "";
  transport.stderr?.on("data", (d) => (stderr += d));
  const client = new Client({ name: "agentbox-tests", version: "1.0.0" }, { capabilities: {} });
  try {
    await client.connect(transport);
  } catch (e) {
    throw new Error(`agentbox mcp did not start: ${e.message}; stderr: ${stderr}`);
  }
  return { client, transport, stderr: () => stderr };
}

const text = (r) => r.content.map((c) => c.text ?? "").join("");
const call = (client, name, args, options) => client.callTool({ name, arguments: args }, undefined, options);

// Processes of this machine whose command line has s.
function processesWith(s) {
  const found = [];
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, "latin1").includes(s)) found.push(pid);
    } catch {}
  }
  return found;
}

async function waitFor(what, cond, ms = 5000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (cond()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  assert.fail(`timed out waiting for ${what}`);
}

test("the docs' configuration lines are one command, for every host", () => {
  const lines = docLines();
  assert.deepEqual(lines.codex, lines.claude);
  assert.deepEqual(lines.cursor, lines.claude);
  assert.deepEqual(lines.vscode, lines.claude);
  assert.deepEqual(lines.claude.slice(0, 2), ["agentbox", "mcp"]);
  assert.ok(lines.claude.includes("--profile") && lines.claude.some((a) => a.startsWith("allow=")));
});

describe("agentbox mcp, as the docs start it", () => {
  let ws, srv;
  before(async () => {
    ws = tempDir("ws");
    writeFileSync(join(ws, "notes.txt"), "one\ntwo\nthree\nfour\nfive\n");
    srv = await connect(docCommand(ws));
  });
  after(async () => {
    await srv?.client.close();
    rmSync(ws, { recursive: true, force: true });
  });

  test("initialize names the server and its sandbox", () => {
    assert.equal(srv.client.getServerVersion().name, "agentbox");
    assert.deepEqual(srv.client.getServerCapabilities().tools, { listChanged: false });
    assert.ok(srv.client.getServerCapabilities().logging);
    assert.match(srv.client.getInstructions(), /\/workspace/);
    assert.match(srv.client.getInstructions(), /allowlist/);
  });

  test("lists the deepagents tools with their schemas", async () => {
    const { tools } = await srv.client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    assert.deepEqual(Object.keys(byName).sort(), ["edit_file", "execute", "glob", "grep", "ls", "read_file", "write_file"]);
    const props = (n) => Object.keys(byName[n].inputSchema.properties).sort();
    assert.deepEqual(props("execute"), ["command", "timeout"]);
    assert.deepEqual(props("read_file"), ["file_path", "limit", "offset"]);
    assert.deepEqual(props("write_file"), ["content", "file_path"]);
    assert.deepEqual(props("edit_file"), ["file_path", "new_string", "old_string", "replace_all"]);
    assert.deepEqual(props("ls"), ["path"]);
    assert.deepEqual(props("glob"), ["path", "pattern"]);
    assert.deepEqual(props("grep"), ["glob", "max_count", "output_mode", "path", "pattern"]);
    assert.deepEqual(byName.execute.inputSchema.required, ["command"]);
    assert.deepEqual(byName.edit_file.inputSchema.required, ["file_path", "old_string", "new_string"]);
    for (const t of tools) {
      assert.equal(t.inputSchema.type, "object");
      assert.ok(t.description.length > 80, `${t.name} has a description an LLM can act on`);
    }
    assert.equal(byName.read_file.annotations.readOnlyHint, true);
    assert.equal(byName.execute.annotations.readOnlyHint, false);
  });

  test("execute: output, exit code, in the sandbox", async () => {
    let r = await call(srv.client, "execute", { command: "echo out; echo err >&2; pwd; id -u; exit 3" });
    assert.equal(r.isError, false);
    assert.match(text(r), /^out\nerr\n\/workspace\n\d+\n\n\[Command failed with exit code 3\]$/);
    r = await call(srv.client, "execute", { command: "ls /root /home 2>&1; cat /workspace/notes.txt | wc -l" });
    assert.match(text(r), /5\n\n\[Command (succeeded|failed) with exit code \d+\]$/);
    assert.doesNotMatch(text(r), new RegExp(ws));
  });

  test("the file tools", async () => {
    let r = await call(srv.client, "write_file", { file_path: "/workspace/src/app.py", content: "print('hi')\nprint('hi')\n" });
    assert.equal(text(r), "Successfully wrote to '/workspace/src/app.py'");
    assert.equal(readFileSync(join(ws, "src/app.py"), "utf8"), "print('hi')\nprint('hi')\n");

    r = await call(srv.client, "read_file", { file_path: "/workspace/notes.txt", offset: 1, limit: 2 });
    assert.equal(text(r), "@@ lines 2-3 of 5 | next offset 3 @@\ntwo\nthree");
    r = await call(srv.client, "read_file", { file_path: "notes.txt" });
    assert.equal(text(r), "@@ lines 1-5 of 5 @@\none\ntwo\nthree\nfour\nfive");

    r = await call(srv.client, "read_file", { file_path: "notes.txt", offset: 9 });
    assert.equal(r.isError, true);
    assert.equal(text(r), "Error: Line offset 9 exceeds file length (5 lines)");
    writeFileSync(join(ws, "empty.txt"), "");
    r = await call(srv.client, "read_file", { file_path: "empty.txt" });
    assert.equal(text(r), "System reminder: File exists but has empty contents");
    rmSync(join(ws, "empty.txt"));
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d]);
    writeFileSync(join(ws, "dot.png"), png);
    writeFileSync(join(ws, "blob.bin"), Buffer.from([1, 0, 2, 0xff]));
    r = await call(srv.client, "read_file", { file_path: "dot.png" });
    assert.deepEqual(r.content, [{ type: "image", data: png.toString("base64"), mimeType: "image/png" }]);
    r = await call(srv.client, "read_file", { file_path: "/workspace/blob.bin" });
    assert.deepEqual(r.content, [{ type: "resource", resource: { uri: "file:///workspace/blob.bin", mimeType: "application/octet-stream", blob: "AQAC/w==" } }]);
    rmSync(join(ws, "dot.png"));
    rmSync(join(ws, "blob.bin"));

    r = await call(srv.client, "edit_file", { file_path: "/workspace/src/app.py", old_string: "hi", new_string: "hello" });
    assert.equal(r.isError, true, "two occurrences without replace_all");
    assert.match(text(r), /^Error: .*2 times/);
    r = await call(srv.client, "edit_file", { file_path: "/workspace/src/app.py", old_string: "hi", new_string: "hello", replace_all: true });
    assert.equal(text(r), "Successfully replaced 2 occurrence(s) in '/workspace/src/app.py'");
    assert.equal(readFileSync(join(ws, "src/app.py"), "utf8"), "print('hello')\nprint('hello')\n");

    r = await call(srv.client, "ls", { path: "/workspace" });
    assert.equal(text(r), "/workspace/notes.txt (24 bytes)\n/workspace/src (directory)");
    r = await call(srv.client, "glob", { pattern: "**/*.py" });
    assert.equal(text(r), "/workspace/src/app.py");
    r = await call(srv.client, "glob", { pattern: "*.rs" });
    assert.equal(text(r), "No files found matching pattern '*.rs'");
    r = await call(srv.client, "grep", { pattern: "hello", path: "/workspace", glob: "*.py" });
    assert.equal(text(r), "/workspace/src/app.py:\n  1: print('hello')\n  2: print('hello')");
    r = await call(srv.client, "grep", { pattern: "hello", output_mode: "count" });
    assert.equal(text(r), "/workspace/src/app.py: 2");
    r = await call(srv.client, "grep", { pattern: "o", output_mode: "files_with_matches", max_count: 1 });
    assert.match(text(r), /^\/workspace\/notes\.txt\n\nNote: the search stopped early/);
  });

  test("a timeout ends the command with its output", async () => {
    const t0 = Date.now();
    const r = await call(srv.client, "execute", { command: "echo started; sleep 30", timeout: 0.5 });
    assert.ok(Date.now() - t0 < 10000, "the call came back soon after its timeout");
    assert.equal(text(r), "started\n\n[Command timed out after 0.5 seconds and was killed]\n[Command failed with exit code 124]");
  });

  test("bad paths and bad arguments are tool errors", async () => {
    for (const [name, args, why] of [
      ["read_file", { file_path: "/root/.ssh/id_rsa" }, /No such file|Permission denied/],
      ["read_file", { file_path: `${ws}/notes.txt` }, /No such file/],
      ["ls", { path: "/nonexistent" }, /No such file/],
      ["write_file", { file_path: "/usr/bin/planted", content: "x" }, /Read-only|read-only|Permission denied/],
      ["read_file", { file_path: 42 }, /argument 'file_path' must be a string/],
      ["read_file", { path: "notes.txt" }, /unknown argument 'path'/],
      ["execute", {}, /the argument 'command' is required/],
      ["execute", { command: "true", timeout: -1 }, /timeout/],
      ["grep", { pattern: "x", output_mode: "lines" }, /must be one of/],
    ]) {
      const r = await call(srv.client, name, args);
      assert.equal(r.isError, true, `${name} ${JSON.stringify(args)}`);
      assert.match(text(r), why);
    }
    await assert.rejects(call(srv.client, "rm_rf", {}), (e) => e.code === -32602);
  });

  test("malformed input gets an error and the server stays up", async () => {
    const stdin = srv.transport._process?.stdin;
    assert.ok(stdin, "the SDK transport exposes the server's stdin");
    stdin.write("garbage{\n");
    stdin.write("[1,2]\n");
    stdin.write('{"jsonrpc":"1.0","id":"x","method":"ping"}\n');
    stdin.write(`{"jsonrpc":"2.0","id":"big","method":"ping","params":{"pad":"${"x".repeat(1 << 20)}"}}\n`);
    stdin.write('{"jsonrpc":"2.0","id":"y","method":"tools/call","params":{"name":"execute","arguments":"ls"}}\n');
    stdin.write(Buffer.from([0xff, 0xfe, 0x0a]));
    await srv.client.ping();
    const r = await call(srv.client, "execute", { command: "echo alive" });
    assert.equal(text(r), "alive\n\n[Command succeeded with exit code 0]");
  });

  test("cancellation ends a long execute and every process it started", async () => {
    const ac = new AbortController();
    const pending = call(srv.client, "execute", { command: "sleep 37.4321 & sleep 38.4321; wait" }, { signal: ac.signal });
    await waitFor("the command to run", () => processesWith("38.4321").length > 0);
    ac.abort();
    await assert.rejects(pending);
    await waitFor("the command's processes to end", () => processesWith("7.4321").length === 0 && processesWith("8.4321").length === 0);
    const r = await call(srv.client, "execute", { command: "echo after" });
    assert.equal(text(r), "after\n\n[Command succeeded with exit code 0]");
  });

  test("a long call reports progress, and logging says what ran", async () => {
    const logs = [];
    srv.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params));
    await srv.client.setLoggingLevel("debug");
    const progress = [];
    const r = await call(srv.client, "execute", { command: "sleep 2.6; echo done" }, { onprogress: (p) => progress.push(p) });
    assert.equal(text(r), "done\n\n[Command succeeded with exit code 0]");
    assert.ok(progress.length >= 2, `progress: ${JSON.stringify(progress)}`);
    assert.ok(progress[1].progress > progress[0].progress);
    assert.match(progress[0].message, /running for/);
    await waitFor("the log messages", () => logs.some((l) => /execute: done in/.test(l.data)), 2000);
    assert.equal(logs[0].logger, "agentbox");
    await srv.client.setLoggingLevel("error");
    await assert.rejects(srv.client.request({ method: "logging/setLevel", params: { level: "loud" } }, EmptyResultSchema), (e) => e.code === -32602);
  });
});

// A server spoken to line by line, for what the SDK would not send.
// servers a failed test left running end with the file's tests, so that no
// child keeps node (and ctest) waiting
const liveServers = new Set();
after(() => {
  for (const p of liveServers) p.kill("SIGKILL");
});

function rawServer(args) {
  const p = spawn(BIN, args, { stdio: ["pipe", "pipe", "pipe"] });
  liveServers.add(p);
  p.on("exit", () => liveServers.delete(p));
  const messages = [];
  const stderr = [];
  p.stderr.on("data", (d) => stderr.push(d));
  let buf = "";
  p.stdout.on("data", (d) => {
    buf += d;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      messages.push(JSON.parse(buf.slice(0, nl)));
      buf = buf.slice(nl + 1);
    }
  });
  const exited = new Promise((resolve) => p.on("exit", (code, signal) => resolve({ code, signal })));
  const send = (o) => p.stdin.write(JSON.stringify({ jsonrpc: "2.0", ...o }) + "\n");
  const reply = async (id) => {
    await waitFor(`the reply to ${id}`, () => messages.some((m) => m.id === id), 10000);
    return messages.find((m) => m.id === id);
  };
  return { p, messages, send, reply, exited, stderr: () => Buffer.concat(stderr).toString() };
}

function agentboxCgroups(pid) {
  const dirs = [];
  for (const line of readFileSync(`/proc/${pid}/cgroup`, "utf8").trim().split("\n")) {
    const [, ctrl, path] = line.split(":");
    if (!path.includes("agentbox")) continue;
    const root = ctrl === "" ? (existsSync("/sys/fs/cgroup/cgroup.controllers") ? "/sys/fs/cgroup" : "/sys/fs/cgroup/unified") : `/sys/fs/cgroup/${ctrl.replace(/^name=/, "")}`;
    dirs.push(root + path);
  }
  return dirs;
}

test("versions, and end of file ends the server and the sandbox with nothing left", async () => {
  const ws = tempDir("eof");
  try {
    const s = rawServer(docCommand(ws));
    s.send({ id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } } });
    assert.equal((await s.reply(1)).result.protocolVersion, "2025-06-18");
    s.send({ id: 2, method: "initialize", params: { protocolVersion: "1999-01-01", capabilities: {}, clientInfo: { name: "raw", version: "1" } } });
    assert.equal((await s.reply(2)).result.protocolVersion, LATEST_PROTOCOL_VERSION);
    s.send({ method: "notifications/initialized" });
    s.p.stdin.write("{not json\n");
    await waitFor("the parse error", () => s.messages.some((m) => m.id === null && m.error?.code === -32700));
    s.p.stdin.write(`{"jsonrpc":"2.0","id":"huge","method":"ping","params":{"pad":"${"x".repeat(17 << 20)}"}}\n`);
    s.send({ id: "after", method: "ping" });
    assert.deepEqual((await s.reply("after")).result, {});
    assert.ok(s.messages.some((m) => m.id === null && m.error?.code === -32600 && /longer than/.test(m.error.message)), "a line over 16 MiB is refused");
    s.send({ id: 3, method: "resources/list" });
    assert.equal((await s.reply(3)).error.code, -32601);
    s.send({ id: 4, method: "tools/call", params: { name: "execute", arguments: { command: "sleep 39.4321" } } });
    await waitFor("the command to run", () => processesWith("39.4321").length > 0);
    // the sandbox's init: the server's child that is pid 1 of its own pid
    // namespace (the launcher's helpers, the network proxy's among them, are
    // its children too)
    const init = readFileSync(`/proc/${s.p.pid}/task/${s.p.pid}/children`, "utf8").trim().split(/\s+/)
      .find((pid) => { try { return /^NSpid:\s+\d+\s+1$/m.test(readFileSync(`/proc/${pid}/status`, "latin1")); } catch { return false; } });
    const cgroups = agentboxCgroups(init);
    if (process.getuid() === 0) assert.ok(cgroups.length > 0, "as root the sandbox has its own cgroups");
    s.p.stdin.end();
    const t0 = Date.now();
    assert.deepEqual(await s.exited, { code: 0, signal: null });
    assert.ok(Date.now() - t0 < 5000, "the server ended soon after end of file");
    assert.equal((await s.reply(4)).result.isError, true, "the running call was answered");
    assert.deepEqual(processesWith("39.4321"), []);
    assert.ok(!existsSync(`/proc/${init}`), "the sandbox's init is gone");
    for (const d of cgroups) assert.ok(!existsSync(d), `${d} is removed`);
    // what serve's hello says of limits not held by a cgroup, mcp says on stderr
    const sv = rawServer(["serve", ...docCommand(ws).slice(1)]);
    await waitFor("serve's hello", () => sv.messages.length > 0, 10000);
    const weaker = Object.entries(sv.messages[0].limits).filter(([, v]) => v?.value != null && v.how && v.how !== "cgroup").map(([k]) => k);
    sv.p.stdin.end();
    await sv.exited;
    const said = [...s.stderr().matchAll(/^agentbox: mcp: the (\w+) limit is (applied as|not applied)/gm)].map((m) => m[1]);
    assert.deepEqual(said, weaker, s.stderr());
  } finally {
    rmSync(ws, { recursive: true, force: true });
  }
});

test("overlay: changes, commit and discard", async () => {
  const ws = tempDir("overlay");
  const srv = await connect(["mcp", "--workspace", ws, "--workspace-mode", "overlay", "--model-commits"]);
  try {
    const { tools } = await srv.client.listTools();
    for (const n of ["changes", "commit", "discard"]) assert.ok(tools.some((t) => t.name === n), n);
    await call(srv.client, "write_file", { file_path: "a.txt", content: "A\n" });
    assert.ok(!existsSync(join(ws, "a.txt")), "the write is in the layer only");
    let r = await call(srv.client, "changes", { diff: true });
    assert.match(text(r), /^added a\.txt\n/);
    r = await call(srv.client, "commit", {});
    assert.equal(text(r), "Committed 1 path(s) to the workspace: a.txt");
    assert.equal(readFileSync(join(ws, "a.txt"), "utf8"), "A\n");
    await call(srv.client, "write_file", { file_path: "b.txt", content: "B\n" });
    let closed = false;
    srv.client.onclose = () => (closed = true);
    r = await call(srv.client, "discard", {});
    assert.equal(text(r), "Discarded every change; the sandbox has ended");
    await waitFor("the server to end", () => closed);
    assert.ok(!existsSync(join(ws, "b.txt")));
  } finally {
    await srv.client.close();
    rmSync(ws, { recursive: true, force: true });
  }
});

test("--audit-log: a line per tool call and per result, as serve's", async () => {
  const ws = tempDir("audit");
  const log = join(ws, "..", `${ws.split("/").pop()}.audit`);
  const srv = await connect(["mcp", "--workspace", ws, "--audit-log", log]);
  try {
    await call(srv.client, "execute", { command: "echo audited" });
  } finally {
    await srv.client.close();
  }
  try {
    await waitFor("the end line", () => existsSync(log) && readFileSync(log, "utf8").includes('"end"'));
    const lines = readFileSync(log, "utf8").trim().split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(lines.map((l) => l.event), ["start", "request", "result", "end"]);
    assert.equal(lines[1].command, "echo audited");
    assert.equal(lines[2].exit_code, 0);
  } finally {
    rmSync(ws, { recursive: true, force: true });
    rmSync(log, { force: true });
  }
});

test("overlay: commit is the user's unless --model-commits", async () => {
  const ws = tempDir("review");
  const srv = await connect(["mcp", "--workspace", ws, "--workspace-mode", "overlay"]);
  try {
    const { tools } = await srv.client.listTools();
    const names = tools.map((t) => t.name);
    assert.ok(names.includes("changes"), "the model may review");
    assert.ok(!names.includes("commit") && !names.includes("discard"), `offered: ${names}`);
    await assert.rejects(srv.client.callTool({ name: "commit", arguments: {} }), /Unknown tool: commit/);
    await call(srv.client, "write_file", { file_path: "a.txt", content: "A\n" });
    assert.ok(!existsSync(join(ws, "a.txt")), "nothing reaches the workspace");
  } finally {
    await srv.client.close();
    rmSync(ws, { recursive: true, force: true });
  }
});

test("overlay: checkpoint and restore undo a step (docs/checkpoints.md)", async () => {
  const ws = tempDir("ckpt");
  const srv = await connect(["mcp", "--workspace", ws, "--workspace-mode", "overlay"]);
  try {
    await call(srv.client, "write_file", { file_path: "a.txt", content: "A\n" });
    assert.equal(text(await call(srv.client, "checkpoint", {})), "Checkpoint 'c1' taken");
    await call(srv.client, "write_file", { file_path: "a.txt", content: "broken\n" });
    const r = await call(srv.client, "restore", { checkpoint: "c1" });
    assert.equal(text(r), "The workspace is as it was at checkpoint 'c1'");
    assert.match(text(await call(srv.client, "read_file", { file_path: "a.txt" })), /A/);
    assert.ok(!existsSync(join(ws, "a.txt")), "nothing reaches the workspace");
  } finally {
    await srv.client.close();
    rmSync(ws, { recursive: true, force: true });
  }
});

test("overlay: a commit of many files stops no other call and no deadline", async () => {
  const ws = tempDir("bigcommit");
  const srv = await connect(["mcp", "--workspace", ws, "--workspace-mode", "overlay", "--model-commits"]);
  try {
    const made = await call(srv.client, "execute", {
      command: "mkdir -p many && cd many && seq -f f%g 20000 | xargs touch && echo made",
      timeout: 120,
    });
    assert.match(text(made), /^made\n/);
    const t0 = Date.now();
    let committed = false;
    const commit = call(srv.client, "commit", {}, { timeout: 600000 }).finally(() => (committed = true));
    // the commit is running (its child writes the host's files) before the execute
    await waitFor("the commit to start", () => existsSync(join(ws, "many")), 30000);
    const t1 = Date.now();
    const r = await call(srv.client, "execute", { command: "echo hi; sleep 30", timeout: 2 });
    const answered = Date.now() - t1;
    assert.match(text(r), /timed out after 2 seconds/);
    assert.ok(answered < 5000, `the execute came back after ${answered} ms`);
    // 20,000 files take the commit far longer than 2 s (about 12 s here)
    assert.ok(!committed, "the commit was still running when the execute came back");
    const done = await commit;
    assert.match(text(done), /^Committed 20001 path\(s\)/);
    console.log(`# commit of 20,000 files: ${Date.now() - t0} ms; the execute answered after ${answered} ms`);
    assert.equal(readdirSync(join(ws, "many")).length, 20000);
  } finally {
    await srv.client.close();
    rmSync(ws, { recursive: true, force: true });
  }
});

test("overlay: a cancelled commit is stopped; end of file waits for a commit sent before it", async () => {
  const ws = tempDir("cancelcommit");
  try {
    const srv = await connect(["mcp", "--workspace", ws, "--workspace-mode", "overlay", "--model-commits"]);
    try {
      const made = await call(srv.client, "execute", {
        command: "mkdir -p many && cd many && seq -f f%g 20000 | xargs touch && echo made",
        timeout: 120,
      });
      assert.match(text(made), /^made\n/);
      const ac = new AbortController();
      const pending = call(srv.client, "commit", {}, { signal: ac.signal, timeout: 600000 });
      await waitFor("the commit to start", () => existsSync(join(ws, "many")), 30000);
      ac.abort();
      await assert.rejects(pending);
      // stopped: the next layer call does not wait for the rest of it (had
      // it waited, the workspace would hold all 20,000 when it answered; no
      // clock: a listing of 20,000 files took 5 s on a loaded CI host)
      const r = await call(srv.client, "changes", {});
      assert.match(text(r), /^added many\/f\d+/m);
      const copied = readdirSync(join(ws, "many")).length;
      assert.ok(copied < 20000, "the commit was stopped part way");
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(readdirSync(join(ws, "many")).length, copied, "nothing copied after the cancel");
    } finally {
      await srv.client.close();
    }
    const s = rawServer(["mcp", "--workspace", ws, "--workspace-mode", "overlay", "--model-commits"]);
    s.send({ id: 1, method: "initialize", params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: "raw", version: "1" } } });
    await s.reply(1);
    s.send({ id: 2, method: "tools/call", params: { name: "write_file", arguments: { file_path: "late.txt", content: "L\n" } } });
    await s.reply(2);
    s.send({ id: 3, method: "tools/call", params: { name: "commit", arguments: {} } });
    s.p.stdin.end();
    assert.deepEqual(await s.exited, { code: 0, signal: null });
    assert.match((await s.reply(3)).result.content[0].text, /^Committed 1 path\(s\) to the workspace: late\.txt/);
    assert.equal(readFileSync(join(ws, "late.txt"), "utf8"), "L\n");
  } finally {
    rmSync(ws, { recursive: true, force: true });
  }
});
