// Shared by the tests: a workspace the sandbox user owns, and a sandbox on it.
import { chownSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { Sandbox } from "../dist/index.js";

export const ROOT = process.getuid() === 0;
/** agentbox never runs a sandbox as host root: root names uid 65534 for it. */
export const UID = ROOT ? 65534 : process.getuid();

if (!process.env.AGENTBOX_BIN) throw new Error("set AGENTBOX_BIN to the agentbox binary to test against");

/** A temporary directory owned by the sandbox user (remove it with removeTree). */
export function tempTree(prefix = "agentbox-js-") {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  if (ROOT) chownSync(dir, UID, UID);
  return dir;
}

export function removeTree(dir) {
  rmSync(dir, { recursive: true, force: true });
}

/** Options every sandbox of the tests needs (the host uid when root). */
export function base(options = {}) {
  return ROOT ? { hostUid: UID, ...options } : options;
}

/** A sandbox on a fresh workspace, closed when the test ends. */
export async function sandbox(t, options = {}) {
  const ws = tempTree();
  let sb;
  try {
    sb = await Sandbox.create(base({ ...options, workspace: ws }));
  } catch (e) {
    removeTree(ws);
    throw e;
  }
  t.after(async () => {
    await sb.close();
    removeTree(ws);
  });
  return { sb, ws };
}
