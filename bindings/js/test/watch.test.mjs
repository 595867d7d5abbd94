// Sandbox.watch against the real server (AGENTBOX_BIN): a directory's file
// events as an async iterator, ended by cancel; a path that is not a
// directory of the view rejects ready.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { ProtocolError } from "../dist/index.js";
import { sandbox } from "./helpers.mjs";

describe("watch", () => {
  it("sees a command's files, then ends on cancel", async (t) => {
    const { sb } = await sandbox(t);
    const w = sb.watch("/workspace");
    assert.equal(await w.ready, "/workspace");
    await sb.exec("mkdir sub && echo x > sub/f && mv sub/f sub/g");
    const seen = [];
    for await (const ev of w) {
      seen.push(`${ev.event} ${ev.path}`);
      if (ev.event === "renamed") {
        assert.equal(ev.from, "/workspace/sub/f");
        break;
      }
    }
    assert.ok(seen.includes("created /workspace/sub"), seen.join("\n"));
    assert.ok(seen.includes("written /workspace/sub/f"), seen.join("\n"));
    const r = await w.cancel();
    assert.equal(r.cancelled, true);
    assert.equal(w.running, false);
  });

  it("rejects a path that is not a directory of the view", async (t) => {
    const { sb } = await sandbox(t);
    await assert.rejects(sb.watch("/no/such/dir").ready, (e) => e instanceof ProtocolError && e.code === "file_not_found");
    await assert.rejects(sb.watch("../up").ready, (e) => e instanceof ProtocolError && e.code === "invalid_path");
  });
});
