// The core client (agentbox) against the real server (AGENTBOX_BIN).
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { FileError, ProtocolError, Sandbox, SandboxClosed, SandboxError, serveArgs } from "../dist/index.js";
import { base, removeTree, sandbox, tempTree } from "./helpers.mjs";

describe("session", () => {
  it("checks the hello and gives the sandbox id", async (t) => {
    const { sb } = await sandbox(t);
    assert.equal(sb.hello.protocol, "agentbox/1");
    assert.match(sb.id, /^ab-/);
    assert.equal(sb.id, sb.hello.sandbox_id);
    assert.equal(sb.closed, false);
    await sb.ping();
    await sb.exec("true");
    const st = await sb.stats();
    assert.equal(st.type, "stats");
    assert.ok(st.commands_run >= 1);
  });

  it("maps its options to agentbox serve's", () => {
    const args = serveArgs({ workspace: "/w", skills: "/s", env: { A: "1" }, timeout: 2.5, memory: "1G", pids: 64, limits: "best", hostUid: 7, tmpfs: ["/a", "/b"] });
    assert.deepEqual(args, ["serve", "--workspace", "/w", "--net", "none", "--seccomp", "default", "--timeout", "2500ms",
      "--isolation", "full", "--skills", "/s", "--env", "A=1", "--memory", "1G", "--pids", "64", "--limits", "best", "--tmpfs", "/a", "--tmpfs", "/b", "--host-uid", "7"]);
    assert.ok(serveArgs({ timeout: null }).includes("none"));
    const sec = serveArgs({ secrets: { GITHUB_TOKEN: ["api.github.com", "github.com"], NPM_TOKEN: "registry.npmjs.org" }, netCa: "/etc/ca.pem" });
    assert.deepEqual(sec.slice(sec.indexOf("--isolation") + 2), ["--net", "secret=GITHUB_TOKEN@api.github.com,github.com",
      "--net", "secret=NPM_TOKEN@registry.npmjs.org", "--net", "ca=/etc/ca.pem"]);
    const rootfs = serveArgs({ rootfs: "/srv/root" });
    assert.equal(rootfs[rootfs.indexOf("--rootfs") + 1], "/srv/root");
    const image = serveArgs({ image: "oci:/srv/img:v1" });
    assert.equal(image[image.indexOf("--image") + 1], "oci:/srv/img:v1");
    const best = serveArgs({ isolation: "best" });
    assert.equal(best[best.indexOf("--isolation") + 1], "best");
  });

  it("rejects with the server's message when the sandbox cannot start", async () => {
    await assert.rejects(Sandbox.create(base({ workspace: "/nonexistent/agentbox-js" })), (e) => {
      assert.ok(e instanceof SandboxError);
      assert.match(e.message, /did not start \(exit status 125\): .*nonexistent/);
      return true;
    });
  });

  it("says when the binary cannot be started", async () => {
    await assert.rejects(Sandbox.create({ binary: "/nonexistent/agentbox", workspace: "/tmp" }), /cannot start \/nonexistent\/agentbox/);
  });
});

describe("commands", () => {
  it("runs shell strings and argv arrays with their exit codes and streams", async (t) => {
    const { sb } = await sandbox(t);
    const r = await sb.exec("echo out; echo err >&2; exit 3");
    assert.equal(r.exit_code, 3);
    assert.equal(r.stdout, "out\n");
    assert.equal(r.stderr, "err\n");
    const a = await sb.exec(["printf", "%s|", "a b", "$HOME"]);
    assert.equal(a.stdout, "a b|$HOME|");
    assert.deepEqual(await sb.execute("echo one; echo two >&2; false"), { output: "one\ntwo\n", exitCode: 1, truncated: false });
  });

  it("passes cwd, env and stdin, and keeps files between calls", async (t) => {
    const { sb, ws } = await sandbox(t);
    await sb.exec("mkdir -p sub && echo kept > sub/f");
    const r = await sb.exec("pwd; echo $GREETING; cat; cat f", { cwd: "sub", env: { GREETING: "hi" }, stdin: "in\n" });
    assert.equal(r.stdout, "/workspace/sub\nhi\nin\nkept\n");
    assert.equal(readFileSync(join(ws, "sub/f"), "utf8"), "kept\n");
  });

  it("ends a command at its timeout with exit code 124 and the output so far", async (t) => {
    const { sb } = await sandbox(t);
    const r = await sb.exec("echo partial; sleep 60", { timeout: 0.5 });
    assert.equal(r.exit_code, 124);
    assert.equal(r.timed_out, true);
    assert.equal(r.stdout, "partial\n");
  });

  it("streams output chunks before the result", async (t) => {
    const { sb } = await sandbox(t);
    const chunks = [];
    let resolved = false;
    const r = await sb.exec("for i in 1 2 3; do echo line$i; sleep 0.05; done; echo err >&2", {
      onOutput: (c) => {
        assert.equal(resolved, false, "an output chunk came after the result");
        chunks.push(c);
      },
    }).then((x) => ((resolved = true), x));
    const out = chunks.filter((c) => c.stream === "stdout").map((c) => c.data).join("");
    const err = chunks.filter((c) => c.stream === "stderr").map((c) => c.data).join("");
    assert.equal(out, "line1\nline2\nline3\n");
    assert.equal(err, "err\n");
    assert.equal(r.stdout, out);
  });

  it("refuses a secret-looking variable with a ProtocolError", async (t) => {
    const { sb } = await sandbox(t);
    await assert.rejects(sb.exec("true", { env: { API_TOKEN: "x" } }), (e) => e instanceof ProtocolError && e.code === "invalid_request");
    assert.equal((await sb.exec("echo still")).stdout, "still\n");
  });

  it("runs calls concurrently and gives each its own reply", async (t) => {
    const { sb } = await sandbox(t);
    // each command waits until all four have started: only concurrent runs finish
    const wait = "touch /tmp/started.$N; i=0; while [ $(ls /tmp/started.* | wc -l) -lt 4 ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; echo $N $(ls /tmp/started.* | wc -l)";
    const results = await Promise.all([1, 2, 3, 4].map((n) => sb.exec(wait, { env: { N: String(n) } })));
    assert.deepEqual(results.map((r) => r.stdout), ["1 4\n", "2 4\n", "3 4\n", "4 4\n"]);
    const files = await Promise.all(["a", "b", "c"].map((n) => sb.write(`c/${n}`, n).then(() => sb.read(`c/${n}`))));
    assert.deepEqual(files.map((f) => f.content), ["a", "b", "c"]);
  });
});

describe("cancel", () => {
  it("cancels a running command through its AbortSignal", async (t) => {
    const { sb } = await sandbox(t);
    const ac = new AbortController();
    const started = [];
    const p = sb.exec("echo started; exec sleep 60", { signal: ac.signal, onOutput: (c) => started.push(c) });
    while (started.length === 0) await new Promise((r) => setTimeout(r, 20));
    ac.abort();
    const r = await p;
    assert.equal(r.cancelled, true);
    assert.equal(r.stdout, "started\n");
    assert.notEqual(r.exit_code, 0);
  });

  it("cancels a queued command, which never starts", async (t) => {
    const { sb, ws } = await sandbox(t, { extraArgs: ["--max-concurrent", "1"] });
    const first = new AbortController();
    const started = [];
    const running = sb.exec("echo go; exec sleep 60", { signal: first.signal, onOutput: (c) => started.push(c) });
    while (started.length === 0) await new Promise((r) => setTimeout(r, 20));
    const second = new AbortController();
    const queued = sb.exec("touch ran", { signal: second.signal });
    second.abort();
    await assert.rejects(queued, (e) => e instanceof ProtocolError && e.code === "cancelled");
    first.abort();
    assert.equal((await running).cancelled, true);
    assert.throws(() => readFileSync(join(ws, "ran")), /ENOENT/);
  });
});

describe("files", () => {
  it("writes, reads windows of lines, and refuses to replace without overwrite", async (t) => {
    const { sb, ws } = await sandbox(t);
    assert.deepEqual(await sb.write("d/n.txt", "one\ntwo\nthree\n"), { type: "result", id: 1, op: "write", path: "/workspace/d/n.txt", bytes: 14, created: true });
    assert.equal(readFileSync(join(ws, "d/n.txt"), "utf8"), "one\ntwo\nthree\n");
    const r = await sb.read("d/n.txt", { offset: 1, limit: 1 });
    assert.equal(r.content, "two\n");
    assert.deepEqual([r.start_line, r.end_line, r.next_offset, r.total_lines], [2, 2, 2, 3]);
    await assert.rejects(sb.write("d/n.txt", "x"), (e) => e instanceof FileError && e.code === "exists" && e.path === "/workspace/d/n.txt");
    await sb.write("d/n.txt", "new", { overwrite: true });
    assert.equal(readFileSync(join(ws, "d/n.txt"), "utf8"), "new");
  });

  it("edits one occurrence, all of them, or says why not", async (t) => {
    const { sb, ws } = await sandbox(t);
    await sb.write("e.txt", "a b a");
    await assert.rejects(sb.edit("e.txt", "a", "x"), (e) => e.code === "not_unique");
    await assert.rejects(sb.edit("e.txt", "zzz", "x"), (e) => e.code === "not_found");
    await assert.rejects(sb.edit("missing.txt", "a", "x"), (e) => e.code === "file_not_found");
    assert.equal((await sb.edit("e.txt", "b", "B")).occurrences, 1);
    assert.equal((await sb.edit("e.txt", "a", "x", { replaceAll: true })).occurrences, 2);
    assert.equal(readFileSync(join(ws, "e.txt"), "utf8"), "x B x");
  });

  it("lists, globs, greps and deletes", async (t) => {
    const { sb } = await sandbox(t);
    await sb.write("src/a.py", "print('hello')\n");
    await sb.write("src/deep/b.py", "Hello\nhello again\n");
    await sb.write("notes.md", "nothing\n");
    const ls = await sb.ls("/workspace");
    assert.deepEqual(ls.entries.map((e) => [e.path, e.is_dir]), [["/workspace/notes.md", false], ["/workspace/src", true]]);
    const g = await sb.glob("**/*.py");
    assert.deepEqual(g.matches.map((m) => m.path).sort(), ["/workspace/src/a.py", "/workspace/src/deep/b.py"]);
    const lit = await sb.grep("hello", { path: "src", glob: "*.py" });
    assert.deepEqual(lit.matches.map((m) => [m.path, m.line]), [["/workspace/src/a.py", 1], ["/workspace/src/deep/b.py", 2]]);
    const ci = await sb.grep("^hello", { regex: true, ignoreCase: true, path: "src/deep" });
    assert.deepEqual(ci.matches.map((m) => m.text), ["Hello", "hello again"]);
    await assert.rejects(sb.grep("(", { regex: true }), (e) => e.code === "invalid_request");
    await assert.rejects(sb.delete("src"), (e) => e.code === "is_directory");
    assert.equal((await sb.delete("src", { recursive: true })).deleted, 4);
    await assert.rejects(sb.ls("src"), (e) => e.code === "file_not_found");
  });

  it("moves bytes exactly with upload and download", async (t) => {
    const { sb, ws } = await sandbox(t);
    const bytes = new Uint8Array(256).map((_, i) => i);
    await sb.upload("bin/all.bin", bytes);
    assert.deepEqual(new Uint8Array(readFileSync(join(ws, "bin/all.bin"))), bytes);
    assert.deepEqual(await sb.download("bin/all.bin"), bytes);
    await assert.rejects(sb.download("bin/none"), (e) => e instanceof FileError && e.code === "file_not_found");
  });

  it("says what is wrong with a path: its code, and the path in the view", async (t) => {
    const { sb, ws } = await sandbox(t);
    await sb.write("plain.txt", "x");
    mkdirSync(join(ws, "locked"));
    chmodSync(join(ws, "locked"), 0o555); // not writable by the sandbox's user, root or not
    const cases = [
      [() => sb.ls("plain.txt"), "not_directory", "/workspace/plain.txt"],
      [() => sb.write("plain.txt/below", "x"), "not_directory", "/workspace/plain.txt/below"],
      [() => sb.read("locked"), "is_directory", "/workspace/locked"],
      [() => sb.write("locked/x", "x"), "permission_denied", "/workspace/locked/x"],
      [() => sb.write("/usr/x", "x"), "read_only", "/usr/x"],
      [() => sb.read(""), "invalid_path", null],
      [() => sb.read("/dev/null"), "invalid_path", "/dev/null"],
    ];
    for (const [call, code, path] of cases) {
      await assert.rejects(call(), (e) => e instanceof FileError && e.code === code && e.path === path, `${code} ${path}`);
    }
  });

  it("cannot write the read-only skills", async (t) => {
    const skills = tempTree("agentbox-js-skills-");
    t.after(() => removeTree(skills));
    writeFileSync(join(skills, "SKILL.md"), "# skill\n");
    const { sb } = await sandbox(t, { skills });
    assert.equal((await sb.read("/skills/SKILL.md")).content, "# skill\n");
    await assert.rejects(sb.write("/skills/x", "x"), (e) => e.code === "read_only");
    await assert.rejects(sb.edit("/skills/SKILL.md", "skill", "x"), (e) => e.code === "read_only");
    assert.equal(readFileSync(join(skills, "SKILL.md"), "utf8"), "# skill\n");
  });

  it("refuses a request over the hello's max_line before sending it", async (t) => {
    const { sb } = await sandbox(t);
    const big = "x".repeat(sb.hello.max_line + 1);
    await assert.rejects(sb.exec("cat", { stdin: big }), (e) => e instanceof ProtocolError && e.code === "too_large" && /max_line/.test(e.message));
    await sb.ping();
  });
});

describe("an ended session", () => {
  it("rejects every pending and later call when the server is killed", async (t) => {
    const { sb } = await sandbox(t);
    const started = [];
    const pending = [1, 2, 3].map(() => sb.exec("echo up; exec sleep 60", { onOutput: (c) => started.push(c) }));
    const read = sb.read("nothing-yet.txt").catch((e) => e);
    while (started.length < 3) await new Promise((r) => setTimeout(r, 20));
    process.kill(sb.pid, "SIGKILL");
    for (const p of pending) {
      await assert.rejects(p, (e) => e instanceof SandboxClosed && /killed by SIGKILL/.test(e.message));
    }
    assert.ok((await read) instanceof Error);
    assert.equal(sb.closed, true);
    await assert.rejects(sb.ping(), SandboxClosed);
    await assert.rejects(sb.write("x", "y"), SandboxClosed);
  });

  it("close ends running commands and is idempotent; asyncDispose closes", async (t) => {
    const { sb } = await sandbox(t);
    const started = [];
    const running = sb.exec("echo up; exec sleep 60", { onOutput: (c) => started.push(c) });
    while (started.length === 0) await new Promise((r) => setTimeout(r, 20));
    const ended = assert.rejects(running, (e) => e instanceof ProtocolError && e.code === "shutdown");
    await sb.close();
    await ended;
    await sb.close();
    await assert.rejects(sb.execute("true"), SandboxClosed);

    const ws = tempTree();
    t.after(() => removeTree(ws));
    const other = await Sandbox.create(base({ workspace: ws }));
    await other[Symbol.asyncDispose]();
    assert.equal(other.closed, true);
  });
});
