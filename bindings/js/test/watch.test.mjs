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
    const seen = [];
    const events = w[Symbol.asyncIterator]();
    // bounded: a missed event fails the test, never hangs it
    const until = async (last) => {
      for (;;) {
        let timer;
        const timeout = new Promise((_, no) => {
          timer = setTimeout(() => no(new Error(`no ${last} event; saw ${seen.join(", ")}`)), 30000);
        });
        const { value: ev, done } = await Promise.race([events.next(), timeout]).finally(() => clearTimeout(timer));
        assert.ok(!done, `the watch ended before a ${last} event; saw ${seen.join(", ")}`);
        seen.push(`${ev.event} ${ev.path}`);
        if (ev.event === last) return ev;
      }
    };
    // a new directory's "created" comes once it is watched too: what is
    // made in it after the event is seen
    await sb.exec("mkdir sub");
    assert.equal((await until("created")).path, "/workspace/sub");
    await sb.exec("echo x > sub/f && mv sub/f sub/g");
    assert.equal((await until("renamed")).from, "/workspace/sub/f");
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
