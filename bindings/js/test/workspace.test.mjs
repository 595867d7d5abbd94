// The overlay workspace (docs/workspace.md) through the JS client against
// the real server (AGENTBOX_BIN): the host's files change only on commit.
import assert from "node:assert/strict";
import { chownSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { CommitConflict, ProtocolError, Sandbox, serveArgs } from "../dist/index.js";
import { base, removeTree, sandbox, tempTree, UID } from "./helpers.mjs";

function fill(ws) {
  mkdirSync(join(ws, "src"));
  writeFileSync(join(ws, "README"), "read me\n");
  writeFileSync(join(ws, "src/main.c"), "int main(void) { return 0; }\n");
}

/** An overlay sandbox on a workspace filled before it starts. */
async function overlay(t, options = {}, filled = false) {
  const ws = tempTree();
  if (filled) fill(ws);
  if (process.getuid() === 0) chownTree(ws);
  const sb = await Sandbox.create(base({ workspaceMode: "overlay", ...options, workspace: ws }));
  t.after(async () => {
    await sb.close();
    removeTree(ws);
  });
  return { sb, ws };
}

function chownTree(dir) {
  for (const e of readdirSync(dir, { recursive: true })) chownSync(join(dir, e), UID, UID);
}

describe("overlay workspace", () => {
  it("maps its options to agentbox serve's", () => {
    const args = serveArgs({ workspace: "/w", workspaceMode: "overlay", keepChanges: "/k" });
    assert.deepEqual(args.slice(-4), ["--workspace-mode", "overlay", "--keep-changes", "/k"]);
  });

  it("keeps the host untouched until commit: run, changes, diff, commit", async (t) => {
    const { sb, ws } = await overlay(t, {}, true);
    assert.equal(sb.hello.workspace_mode, "overlay");
    const r = await sb.exec("rm -rf src && echo new > README && echo n > added");
    assert.equal(r.exit_code, 0);
    assert.equal(readFileSync(join(ws, "README"), "utf8"), "read me\n");
    assert.ok(existsSync(join(ws, "src/main.c")));
    const changes = await sb.changes({ diff: true });
    assert.deepEqual(
      changes.map((c) => [c.path, c.status]),
      [["README", "modified"], ["added", "added"], ["src", "deleted"]],
    );
    assert.match(changes[0].diff, /-read me\n\+new\n/);
    const res = await sb.commit(["README", "added"]);
    assert.deepEqual(res.committed, ["README", "added"]);
    assert.equal(readFileSync(join(ws, "README"), "utf8"), "new\n");
    assert.ok(existsSync(join(ws, "src/main.c")), "src was not in the partial commit");
    assert.deepEqual((await sb.changes()).map((c) => c.path), ["src"]);
  });

  it("checkpoints and restores: undo a bad step, the host untouched", async (t) => {
    const { sb, ws } = await overlay(t, {}, true);
    assert.equal((await sb.exec("echo v2 > README")).exit_code, 0);
    assert.equal(await sb.checkpoint(), "c1");
    assert.equal((await sb.exec("rm -rf src; echo bad > README")).exit_code, 0);
    assert.deepEqual(
      (await sb.changesSince("c1")).map((c) => [c.path, c.status]).sort(),
      [["README", "written"], ["src", "deleted"]],
    );
    await sb.restore("c1");
    assert.equal((await sb.exec("cat README; ls src")).stdout, "v2\nmain.c\n");
    assert.deepEqual((await sb.checkpoints()).map((c) => c.name), ["c1"]);
    await assert.rejects(sb.restore("nope"), ProtocolError);
    assert.equal(readFileSync(join(ws, "README"), "utf8"), "read me\n");
  });

  it("leaves out what .gitignore ignores unless includeIgnored", async (t) => {
    const { sb } = await overlay(t);
    await sb.exec("printf 'build/\\n*.pyc\\n' > .gitignore && mkdir build && echo x > build/o && echo y > a.pyc && echo z > a.c");
    assert.deepEqual((await sb.changes()).map((c) => c.path), [".gitignore", "a.c"]);
    const every = await sb.changes({ includeIgnored: true });
    assert.deepEqual(
      every.map((c) => [c.path, c.ignored]),
      [[".gitignore", false], ["a.c", false], ["a.pyc", true], ["build", true], ["build/o", true]],
    );
  });

  it("refuses a commit over a host change unless forced", async (t) => {
    const { sb, ws } = await overlay(t);
    await sb.exec("echo agent > f");
    await new Promise((r) => setTimeout(r, 10));
    writeFileSync(join(ws, "f"), "user\n");
    await assert.rejects(sb.commit(), (e) => e instanceof CommitConflict && e.paths[0] === "f");
    assert.equal(readFileSync(join(ws, "f"), "utf8"), "user\n");
    await sb.commit(undefined, { force: true });
    assert.equal(readFileSync(join(ws, "f"), "utf8"), "agent\n");
  });

  it("discards: the session ends and its layer is gone", async (t) => {
    const dir = tempTree("agentbox-js-layer-");
    t.after(() => removeTree(dir));
    const keep = join(dir, "layer");
    const { sb, ws } = await overlay(t, { keepChanges: keep });
    await sb.exec("echo x > new");
    assert.ok(existsSync(join(keep, "upper", "new")));
    await sb.discard();
    assert.equal(sb.closed, true);
    assert.equal(existsSync(keep), false);
    assert.deepEqual(readdirSync(ws), []);
  });

  it("says a direct workspace has no layer", async (t) => {
    const { sb } = await sandbox(t);
    await assert.rejects(sb.changes(), (e) => e instanceof ProtocolError && e.code === "invalid_request");
  });
});
