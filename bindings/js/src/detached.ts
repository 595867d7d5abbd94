// The agentbox commands behind detached sandboxes (docs/detached.md):
// create, ls --json, pause, resume, rm, each run once to its end.

import { spawn } from "node:child_process";
import { accessSync, constants as fsConstants } from "node:fs";
import { delimiter, join } from "node:path";

import { SandboxError } from "./errors.js";

/** How long one of these commands may take before it is killed (create waits for the sandbox to be ready). */
const CLI_TIMEOUT_MS = 120_000;
/** Output kept of one of these commands (`ls --json` of many sandboxes stays well below). */
const CLI_MAX_OUTPUT = 16 << 20;

function findInPath(name: string): string | null {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

/**
 * The agentbox binary: the one asked for, `$AGENTBOX_BIN`, or `agentbox`
 * in PATH; behind a `via` transport, the name on the other side.
 */
export function agentboxBinary(binary: string | undefined, remote = false): string {
  if (remote) return binary ?? "agentbox";
  const found = binary ?? process.env.AGENTBOX_BIN ?? findInPath("agentbox");
  if (!found) {
    throw new SandboxError(
      "agentbox is not installed: no agentbox in PATH, and neither the binary option nor $AGENTBOX_BIN names one",
    );
  }
  return found;
}

/**
 * Run an agentbox command that answers at once (stdin /dev/null) and
 * resolve with its stdout; a failure rejects with a SandboxError carrying
 * the command's own message (its stderr).
 */
export function runAgentbox(argv: string[]): Promise<string> {
  const what = argv.slice(0, 3).join(" ");
  return new Promise((resolve, reject) => {
    const proc = spawn(argv[0]!, argv.slice(1), { stdio: ["ignore", "pipe", "pipe"] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let size = 0;
    const keep = (into: Buffer[]) => (chunk: Buffer) => {
      size += chunk.length;
      if (size <= CLI_MAX_OUTPUT) into.push(chunk);
      else proc.kill("SIGKILL");
    };
    proc.stdout.on("data", keep(out));
    proc.stderr.on("data", keep(err));
    let failure: string | null = null;
    const timer = setTimeout(() => {
      failure = `${what}: no answer within ${CLI_TIMEOUT_MS / 1000} s, killed`;
      proc.kill("SIGKILL");
    }, CLI_TIMEOUT_MS);
    proc.on("error", (e) => {
      failure ??= `cannot start ${argv[0]}: ${e.message}`;
    });
    proc.on("close", (code, signal) => {
      clearTimeout(timer);
      if (size > CLI_MAX_OUTPUT) failure ??= `${what}: more than ${CLI_MAX_OUTPUT} bytes of output, killed`;
      if (failure === null && code === 0) {
        resolve(Buffer.concat(out).toString("utf8"));
        return;
      }
      const message = Buffer.concat(err).toString("utf8").trim();
      const status = signal ? `killed by ${signal}` : `exit status ${code}`;
      reject(new SandboxError(failure ?? (message || `${what} failed (${status})`)));
    });
  });
}
