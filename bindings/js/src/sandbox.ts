// Sandbox: one `agentbox serve` process, spoken to in agentbox/1
// (docs/protocol.md) with any number of calls in flight.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { access, constants, mkdtemp, open, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";

import { agentboxBinary, runAgentbox } from "./detached.js";
import { Watch } from "./watch.js";
import { Process } from "./process.js";
import { CommitConflict, FILE_ERROR_CODES, FileError, ProtocolError, SandboxClosed, SandboxError } from "./errors.js";
import type {
  CallOptions,
  Change,
  CommitResult,
  ConnectOptions,
  DetachedSandboxInfo,
  ExecOptions,
  ExecResult,
  ExecuteResponse,
  FileEntry,
  GrepMatch,
  GrepOptions,
  Hello,
  OutputChunk,
  PublishedPort,
  TokenPort,
  ReadResult,
  SandboxOptions,
} from "./types.js";

export const PROTOCOL = "agentbox/1";

/** File data one request carries without chunks (docs/protocol.md, "Limits"). */
export const SINGLE_REQUEST_FILE_BYTES = 6 * 1024 * 1024;

/**
 * Bytes in memory above which `upload` and `download` go through a private
 * temporary file and the server's `host_files` path where they can (as the
 * Python client: faster than base64 chunks from about 2 MiB).
 */
const BULK_MIN = 1024 * 1024;

/**
 * Run fn with a new 0700 directory, removed after: in memory (/dev/shm)
 * where there is one, so bytes already in memory do not go through the disk.
 */
async function withPrivateDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  let where = tmpdir();
  try {
    await access("/dev/shm", constants.W_OK | constants.X_OK);
    where = "/dev/shm";
  } catch {
    // no /dev/shm: the temporary directory
  }
  const dir = await mkdtemp(join(where, "agentbox-"));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

type Message = Record<string, unknown> & { type?: string; id?: unknown };

interface Pending {
  op: string;
  resolve(msg: Message): void;
  reject(err: Error): void;
  onOutput?: (chunk: OutputChunk) => void;
  onEvent?: (msg: Message) => void;
  /** where each stream stands, to go on from after a lost connection (#resume) */
  offsets?: Record<string, number>;
  /** an output op's: the call it resumes */
  resumes?: Pending;
  id?: number;
}

interface CallParams {
  signal?: AbortSignal;
  timeout?: number;
  onOutput?: (chunk: OutputChunk) => void;
  onEvent?: (msg: Message) => void;
  onId?: (id: number) => void;
  /** a detached sandbox's lost connection is resumed for this call (#resume) */
  resumable?: boolean;
}

const FILE_OPS = new Set(["read", "write", "edit", "ls", "glob", "grep", "delete", "upload", "download"]);

function seconds(value: number | null | undefined): string {
  if (value === null) return "none";
  return `${Math.max(1, Math.round((value ?? 120) * 1000))}ms`;
}

/** The command line of `agentbox serve` for these options. */
export function serveArgs(options: SandboxOptions): string[] {
  const args = ["serve", "--workspace", options.workspace ?? process.cwd()];
  args.push("--net", options.network ?? "none", "--seccomp", options.seccomp ?? "default");
  args.push("--timeout", seconds(options.timeout));
  // containers: "full" refuses a weaker sandbox; "best" accepts one, named in hello.isolation
  args.push("--isolation", options.isolation ?? "full");
  if (options.profile !== undefined) args.push("--profile", options.profile);
  if (options.skills !== undefined) args.push("--skills", options.skills);
  if (options.rootfs !== undefined) args.push("--rootfs", options.rootfs);
  if (options.image !== undefined) args.push("--image", options.image);
  for (const [name, value] of Object.entries(options.env ?? {})) args.push("--env", `${name}=${value}`);
  if (options.memory !== undefined) args.push("--memory", String(options.memory));
  if (options.cpus !== undefined) args.push("--cpus", String(options.cpus));
  if (options.pids !== undefined) args.push("--pids", String(options.pids));
  // "full" (agentbox's default) refuses a limit that cannot hold as asked; "best" drops it
  if (options.limits !== undefined) args.push("--limits", options.limits);
  if (options.maxOutput !== undefined) args.push("--max-output", String(options.maxOutput));
  for (const [name, hosts] of Object.entries(options.secrets ?? {}))
    args.push("--net", `secret=${name}@${([] as string[]).concat(hosts).join(",")}`);
  if (options.netCa !== undefined) args.push("--net", `ca=${options.netCa}`);
  for (const dir of options.tmpfs ?? []) args.push("--tmpfs", dir);
  if (options.hostUid !== undefined) args.push("--host-uid", String(options.hostUid));
  if (options.workspaceMode !== undefined) args.push("--workspace-mode", options.workspaceMode);
  if (options.keepChanges !== undefined) args.push("--keep-changes", options.keepChanges);
  args.push(...(options.extraArgs ?? []));
  return args;
}

/** The command line of `agentbox create` (without the binary) for these options. */
export function createArgs(options: SandboxOptions): string[] {
  const args = serveArgs(options);
  args[0] = "create";
  if (options.name !== undefined) args.push("--name", options.name);
  if (options.idleTimeout !== undefined) args.push("--idle-timeout", seconds(options.idleTimeout));
  if (options.ttl !== undefined) args.push("--ttl", seconds(options.ttl));
  return args;
}

/**
 * Request ids of a detached sandbox's client: from a random base, so that
 * they are not those of an earlier client whose results the sandbox
 * replays after the hello (as the Python client).
 */
const DETACHED_ID_MIN = 2 ** 40;
const DETACHED_ID_SPAN = 2 ** 52 - 2 ** 40;
const DETACHED_IDS = 2 ** 32; // ids one client may use

/** Where a detached sandbox is: its id, how it was reached, for pause, resume and rm. */
interface Detached {
  via: string[];
  binary: string;
}

/**
 * A sandbox for one conversation: commands and file operations in the same
 * isolated view of the workspace (read-write at /workspace). Every method
 * may be called while others are pending; replies are matched by id.
 */
export class Sandbox {
  #proc!: ChildProcessWithoutNullStreams;
  #hello: Hello | null = null;
  #pending = new Map<number, Pending>();
  #nextId = 1;
  #closed: string | null = null;
  #stderr: string[] = [];
  #exited: Promise<void>;
  #started: Promise<Hello>;
  #detached: Detached | null;
  #firstId = 1;
  #replayed: Record<string, unknown>[] = [];

  #argv: string[] = [];
  #resolveExited!: () => void;

  private constructor(proc: ChildProcessWithoutNullStreams, binary: string, detached: Detached | null = null) {
    this.#detached = detached;
    if (detached !== null) this.#firstId = DETACHED_ID_MIN + Math.floor(Math.random() * DETACHED_ID_SPAN);
    this.#nextId = this.#firstId;
    this.#exited = new Promise((res) => (this.#resolveExited = res));
    this.#started = new Promise((res, rej) => this.#wire(proc, binary, res, rej));
  }

  /** proc's pipes read: its hello to helloResolve (or why not to helloReject), then its replies. */
  #wire(
    proc: ChildProcessWithoutNullStreams,
    binary: string,
    helloResolve: (h: Hello) => void,
    helloReject: (e: Error) => boolean | void,
  ): void {
    this.#proc = proc;
    let greeted = false; // its hello came
    const command = this.#detached ? "agentbox connect" : "agentbox serve";
    let openStreams = 2; // stdout and stderr, read to their end before calls fail
    let exitStatus: string | null = null;
    const resolveExited = () => this.#resolveExited();
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      // the server is gone: fail whatever still waits, and every later call
      const why = `the agentbox server ended (${exitStatus})${this.#stderrText() ? ": " + this.#stderrText() : ""}`;
      // true: a reconnection that tries again (#resume)
      if (!greeted && helloReject(new SandboxError(`${command} did not start (${exitStatus}): ${this.#stderrText() || "no message"}`)) === true) return;
      if (greeted && this.#resume()) return;
      this.#failAll(why);
      resolveExited();
    };
    proc.on("error", (err) => {
      if (exitStatus !== null) return;
      exitStatus = `cannot start ${binary}: ${err.message}`;
      this.#closed ??= exitStatus;
      helloReject(new SandboxError(exitStatus));
      this.#failAll(exitStatus);
      resolveExited();
    });
    proc.on("exit", (code, signal) => {
      exitStatus = signal ? `killed by ${signal}` : `exit status ${code}`;
      if (openStreams === 0) finish();
      // replies and messages already in the pipes are read first; a pipe
      // some other process still holds open must not keep the calls waiting
      else setTimeout(() => openStreams === 0 || finish(), 1000).unref();
    });
    const streamEnded = () => {
      openStreams -= 1;
      if (openStreams === 0 && exitStatus !== null) finish();
    };
    proc.stdin.on("error", () => {
      // EPIPE: the server is gone; its exit fails the calls
    });
    const errLines = createInterface({ input: proc.stderr, crlfDelay: Infinity });
    errLines.on("line", (line) => {
      this.#stderr.push(line);
      if (this.#stderr.length > 20) this.#stderr.shift();
    });
    errLines.on("close", streamEnded);
    // a detached sandbox's bridge killed mid-line: the cut line readline
    // gives at the end is not a reply (registered first: runs before its)
    let cut = false;
    proc.stdout.once("end", () => (cut = this.#detached !== null));
    const lines = createInterface({ input: proc.stdout, crlfDelay: Infinity });
    let refused = false; // the first line was not a hello: nothing after it is read
    lines.on("line", (line) => {
      if (refused || cut) return;
      if (!greeted) {
        let hello: Message | null = null;
        try {
          hello = JSON.parse(line) as Message;
        } catch {
          hello = null;
        }
        if (hello?.type === "error") {
          // refused: busy (another client is attached), permission_denied
          refused = true;
          proc.kill("SIGKILL");
          helloReject(new SandboxError(`${String(hello.code)}: ${String(hello.message ?? "")}`));
          return;
        }
        if (hello?.type !== "hello") {
          refused = true;
          proc.kill("SIGKILL");
          helloReject(new SandboxError(`${command} did not say hello: ${line.slice(0, 200)}`));
          return;
        }
        greeted = true;
        this.#hello = hello as unknown as Hello;
        helloResolve(this.#hello);
        return;
      }
      this.#dispatch(line);
    });
    lines.on("close", streamEnded);
  }

  /**
   * Start `agentbox serve` and wait for its hello; with `detach: true`,
   * make a detached sandbox (`agentbox create`, which returns once it is
   * ready) and connect to it.
   */
  static async create(options: SandboxOptions = {}): Promise<Sandbox> {
    if (!options.detach) {
      for (const key of ["name", "idleTimeout", "ttl"] as const) {
        if (options[key] !== undefined) throw new SandboxError(`${key} is an option of a detached sandbox: add detach: true`);
      }
    }
    const binary = agentboxBinary(options.binary);
    if (options.detach) {
      const id = (await runAgentbox([binary, ...createArgs(options)])).trim();
      try {
        return await Sandbox.connect(id, { binary });
      } catch (e) {
        // made but not reachable: nothing of it is left behind
        await runAgentbox([binary, "rm", "-f", id]).catch(() => undefined);
        throw e;
      }
    }
    return Sandbox.#start(spawn(binary, serveArgs(options), { stdio: ["pipe", "pipe", "pipe"] }), binary, null);
  }

  static async #start(proc: ChildProcessWithoutNullStreams, binary: string, detached: Detached | null): Promise<Sandbox> {
    const sandbox = new Sandbox(proc, binary, detached);
    const hello = await sandbox.#started;
    if (hello.protocol !== PROTOCOL) {
      proc.kill("SIGKILL");
      await sandbox.#exited;
      throw new SandboxError(`agentbox speaks ${JSON.stringify(hello.protocol)}, this client ${PROTOCOL}`);
    }
    return sandbox;
  }

  /**
   * Attach to the detached sandbox `idOrName` (`agentbox connect`), here
   * or through `via` (`["ssh", "host"]`). One client at a time: while
   * another is attached, this rejects with a SandboxError `busy: ...`.
   * Results of requests whose client went away are replayed to this one
   * right after the hello: `replayed` holds them.
   */
  static async connect(idOrName: string, options: ConnectOptions = {}): Promise<Sandbox> {
    const via = options.via ?? [];
    const binary = agentboxBinary(options.binary, via.length > 0);
    const argv = [...via, binary, "connect", idOrName];
    const proc = spawn(argv[0]!, argv.slice(1), { stdio: ["pipe", "pipe", "pipe"] });
    const sandbox = await Sandbox.#start(proc, argv[0]!, { via, binary });
    sandbox.#argv = argv;
    return sandbox;
  }

  /**
   * The bridge to a detached sandbox ended with no close() asked (killed,
   * its network dropped) while streaming calls wait: connect again. The
   * sandbox replays after the hello what it kept of their output (and the
   * results of those that ended); each call asks for its output from where
   * it got to (op output) and places what comes by offset: nothing lost or
   * doubled (docs/detached.md). Calls that do not stream fail: whether
   * their request reached the sandbox cannot be told. False: nothing to
   * resume.
   */
  #resume(): boolean {
    if (this.#detached === null || this.#closed !== null || this.#argv.length === 0) return false;
    if (!(this.#hello?.features ?? []).includes("output_offsets")) return false;
    const going = [...this.#pending.entries()].filter(([, c]) => c.offsets !== undefined);
    if (going.length === 0) return false;
    const lost = `the connection to the sandbox was lost; a request sent before may or may not have run`;
    const end = Date.now() + 10_000;
    const attempt = () => {
      const argv = this.#argv;
      let retried = false;
      const proc = spawn(argv[0]!, argv.slice(1), { stdio: ["pipe", "pipe", "pipe"] });
      this.#wire(
        proc,
        argv[0]!,
        () => {
          for (const [id, call] of [...this.#pending.entries()]) {
            if (call.offsets !== undefined) continue;
            this.#pending.delete(id);
            call.reject(new SandboxClosed(lost));
          }
          for (const [id, call] of going) {
            if (!this.#pending.has(id)) continue; // its result came with the replay
            this.request("output", { target: id, offsets: { ...call.offsets } }).catch((e: Error) => {
              if (!this.#pending.has(id)) return;
              this.#pending.delete(id);
              call.reject(new SandboxClosed(`the connection to the sandbox was lost and it does not know request ${id}: ${e.message}`));
            });
          }
        },
        (e) => {
          // the sandbox may not have seen the old client go yet: busy
          if (!e.message.startsWith("busy") && !retried) return false;
          if (!retried && Date.now() < end && this.#closed === null) {
            retried = true;
            setTimeout(attempt, 50);
          }
          return retried;
        },
      );
    };
    attempt();
    return true;
  }

  /**
   * Your detached sandboxes (`agentbox ls --json`), here or through `via`:
   * id, name, state (`running`, `paused`, `dead`), created, idle time,
   * commands running and queued, whether a client is attached, memory.
   */
  static async list(options: ConnectOptions = {}): Promise<DetachedSandboxInfo[]> {
    const via = options.via ?? [];
    const out = await runAgentbox([...via, agentboxBinary(options.binary, via.length > 0), "ls", "--json"]);
    return JSON.parse(out) as DetachedSandboxInfo[];
  }

  /** Whether this is a detached sandbox (`create` with `detach`, `connect`). */
  get detached(): boolean {
    return this.#detached !== null;
  }

  /**
   * What the sandbox kept for this client: the results (and errors) of
   * requests an earlier client sent and did not see answered, with their
   * original ids, in order. They come right after the hello: all of them
   * are here once this client's first reply has come.
   */
  get replayed(): Record<string, unknown>[] {
    return this.#replayed;
  }

  async #control(command: "pause" | "resume"): Promise<void> {
    if (this.#detached === null) {
      throw new SandboxError(`${command}: only a detached sandbox (create with detach: true, connect) can be paused and resumed`);
    }
    const { via, binary } = this.#detached;
    await runAgentbox([...via, binary, command, this.id]);
  }

  /**
   * Freeze every process of this detached sandbox (`agentbox pause`, the
   * cgroup freezer, v1 or v2); requests wait until `resume`. Where the
   * sandbox has no freezer cgroup, this rejects with agentbox's reason, and
   * nothing is paused.
   */
  async pause(): Promise<void> {
    await this.#control("pause");
  }

  /** Thaw a paused sandbox (`agentbox resume`). */
  async resume(): Promise<void> {
    await this.#control("resume");
  }

  /**
   * End the sandbox, detached or not, leaving nothing: for a detached one
   * `agentbox rm -f` (whatever runs in it), after disconnecting.
   */
  async destroy(): Promise<void> {
    await this.close();
    if (this.#detached !== null && this.#hello !== null) {
      const { via, binary } = this.#detached;
      await runAgentbox([...via, binary, "rm", "-f", this.id]);
    }
  }

  /** The server's hello. */
  get hello(): Hello {
    return this.#hello!;
  }

  /** The sandbox's id, as the hello gave it. */
  get id(): string {
    return this.#hello!.sandbox_id;
  }

  /** Whether the session has ended (closed, or its server died). */
  get closed(): boolean {
    return this.#closed !== null;
  }

  /** The pid of the `agentbox serve` process. */
  get pid(): number | undefined {
    return this.#proc.pid;
  }

  /** Whether the server moves files of any size in chunks (`file_chunks`). */
  get chunked(): boolean {
    return (this.#hello?.features ?? []).includes("file_chunks") && typeof this.#hello?.max_chunk === "number";
  }

  /**
   * Whether `uploadFile`/`downloadFile` hand the server the host path
   * (`host_files`: the bytes go through a pipe at disk speed, no encoding):
   * it says so and runs on this host (started by this client, or connected
   * to without `via`).
   */
  get hostFiles(): boolean {
    return (this.#hello?.features ?? []).includes("host_files") && !(this.#detached !== null && this.#detached.via.length > 0);
  }

  /** The most file bytes one upload or download request carries. */
  get maxFileBytesPerRequest(): number {
    return this.chunked ? Math.min(this.#hello!.max_chunk!, SINGLE_REQUEST_FILE_BYTES) : SINGLE_REQUEST_FILE_BYTES;
  }

  #stderrText(): string {
    return this.#stderr.join(" / ");
  }

  #failAll(why: string): void {
    this.#closed ??= why;
    const calls = [...this.#pending.values()];
    this.#pending.clear();
    for (const call of calls) call.reject(new SandboxClosed(this.#closed));
  }

  #dispatch(line: string): void {
    let msg: Message;
    try {
      msg = JSON.parse(line) as Message;
    } catch {
      this.#outOfStep(`the server wrote a line that is not JSON: ${line.slice(0, 200)}`);
      return;
    }
    if (msg.id === null || msg.id === undefined) {
      if (msg.type === "error" && msg.code === "internal") {
        // the sandbox died: the server exits next, and says why here
        this.#stderr.push(String(msg.message ?? ""));
        return;
      }
      this.#outOfStep(`the server answered a request it could not name (${msg.code}: ${msg.message})`);
      return;
    }
    if (typeof msg.id !== "number" || !this.#pending.has(msg.id)) {
      // not ours ("close"), a call failed already, or, in a detached
      // sandbox, a reply kept for whichever client came next
      const ours = typeof msg.id === "number" && msg.id >= this.#firstId && msg.id < this.#firstId + DETACHED_IDS;
      if (this.#detached !== null && !ours && msg.type !== "output") this.#replayed.push(msg);
      return;
    }
    const call = this.#pending.get(msg.id)!;
    if (msg.type === "output_dropped") return; // said for a chunk's gap; the offsets show it
    if (msg.type === "output") {
      const chunk = { stream: String(msg.stream), data: String(msg.data), encoding: String(msg.encoding) };
      if (call.offsets !== undefined && typeof msg.offset === "number") {
        // a chunk a detached sandbox sends again after a lost connection: what is new of it
        const bytes = Buffer.from(chunk.data, chunk.encoding === "base64" ? "base64" : "utf8");
        const have = call.offsets[chunk.stream] ?? 0;
        if (msg.offset + bytes.length <= have) return;
        const fresh = msg.offset < have ? bytes.subarray(have - msg.offset) : bytes;
        call.offsets[chunk.stream] = Math.max(have, msg.offset) + fresh.length;
        chunk.data = fresh.toString("base64");
        chunk.encoding = "base64";
      }
      call.onOutput?.(chunk);
      return;
    }
    if (msg.type === "event") {
      call.onEvent?.(msg); // a watch's file event
      return;
    }
    this.#pending.delete(msg.id);
    if (msg.type !== "error") {
      call.resolve(msg);
      return;
    }
    const code = String(msg.code);
    const message = String(msg.message ?? "");
    if (FILE_OPS.has(call.op) && FILE_ERROR_CODES.has(code)) {
      call.reject(new FileError(code, message, typeof msg.path === "string" ? msg.path : null));
    } else {
      call.reject(new ProtocolError(code, message));
    }
  }

  /** An error no pending call can be told from: none of them may wait for it. */
  #outOfStep(what: string): void {
    const calls = [...this.#pending.values()];
    this.#pending.clear();
    for (const call of calls) {
      call.reject(new ProtocolError("out_of_step", `${what}; every pending call fails, as its reply may never come`));
    }
  }

  /**
   * Send one request of agentbox/1 and resolve with its reply (`result`,
   * `ok`, `pong`, `stats`); an `error` reply rejects with a FileError or a
   * ProtocolError. Lines over the hello's `max_line` are refused before
   * anything is sent.
   */
  request(op: string, fields: Record<string, unknown> = {}, params: CallParams = {}): Promise<Message> {
    if (this.#closed !== null) return Promise.reject(new SandboxClosed(this.#closed));
    if (params.signal?.aborted) return Promise.reject(new ProtocolError("cancelled", `${op}: aborted before it was sent`));
    const id = this.#nextId++;
    params.onId?.(id);
    const req: Record<string, unknown> = { op, id, ...fields };
    if (params.timeout !== undefined) req.timeout = params.timeout;
    if (params.onOutput) req.stream = true;
    const line = JSON.stringify(req);
    const bytes = Buffer.byteLength(line);
    const max = this.#hello!.max_line;
    if (bytes > max) {
      return Promise.reject(
        new ProtocolError("too_large", `${op}: the request is ${bytes} bytes, over the server's max_line of ${max}`),
      );
    }
    return new Promise<Message>((resolve, reject) => {
      const signal = params.signal;
      const onAbort = () => {
        this.request("cancel", { target: id }).catch(() => {
          // already finished, or the session ended: the reply settles the call
        });
      };
      const settle = () => signal?.removeEventListener("abort", onAbort);
      const resumable = params.resumable && this.#detached !== null && (this.#hello!.features ?? []).includes("output_offsets");
      this.#pending.set(id, {
        op,
        resolve: (m) => (settle(), resolve(m)),
        reject: (e) => (settle(), reject(e)),
        onOutput: params.onOutput,
        onEvent: params.onEvent,
        offsets: resumable ? {} : undefined,
      });
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#proc.stdin.write(line + "\n");
    });
  }

  async ping(): Promise<void> {
    await this.request("ping");
  }

  async stats(): Promise<Record<string, unknown>> {
    return this.request("stats");
  }

  /**
   * Publish TCP port `port` of the sandbox on this host and resolve to its URL
   * ("http://127.0.0.1:41234"): a listener on the host's loopback (`host`,
   * "ADDR:PORT", to choose it) relayed to 127.0.0.1:port inside, also under
   * `net: "none"`. Only this user can connect unless `public`. Asked again,
   * the same URL (docs/network.md, "Published ports").
   *
   * `token` (a string of 16 to 128 printable bytes, or `true` for a new random
   * one) makes each connection send it and a newline first, and lets `host` be
   * an address that is not loopback's; then it resolves to a {@link TokenPort}
   * (`url` "tcp://ADDR:PORT", `token`: the one given or made, told only this
   * once).
   */
  async port(port: number, options?: CallOptions & { host?: string; public?: boolean; token?: undefined }): Promise<string>;
  async port(port: number, options: CallOptions & { host?: string; public?: boolean; token: string | true }): Promise<TokenPort>;
  async port(
    port: number,
    options: CallOptions & { host?: string; public?: boolean; token?: string | true } = {},
  ): Promise<string | TokenPort> {
    const fields: Record<string, unknown> = { port };
    if (options.host !== undefined) fields.host = options.host;
    if (options.public !== undefined) fields.public = options.public;
    if (options.token !== undefined) {
      if (options.token !== true && typeof options.token !== "string")
        throw new TypeError("token: a string, or true for a new one");
      fields.token = options.token;
    }
    const r = await this.request("port", fields, options);
    if (options.token === undefined) return r.url as string;
    return { url: r.url as string, token: options.token === true ? (r.token as string) : options.token };
  }

  /** The ports published: each { port, address, host_port, url, public, token }. */
  async ports(): Promise<PublishedPort[]> {
    const r = await this.request("port");
    return (r.ports ?? []) as PublishedPort[];
  }

  /** Stop publishing `port`. */
  async closePort(port: number): Promise<void> {
    await this.request("port", { port, close: true });
  }

  /**
   * What the session's commands changed in the workspace, against the host's
   * files as they are now (`workspaceMode: "overlay"` only); with `diff`, a
   * unified diff of each text file, at most `maxDiffBytes`. What the
   * workspace's .gitignore files ignore is left out unless `includeIgnored`
   * (then those changes have `ignored: true`).
   */
  async changes(
    options: CallOptions & { diff?: boolean; maxDiffBytes?: number; includeIgnored?: boolean } = {},
  ): Promise<Change[]> {
    const fields: Record<string, unknown> = { diff: options.diff ?? false };
    if (options.maxDiffBytes !== undefined) fields.max_diff_bytes = options.maxDiffBytes;
    if (options.includeIgnored) fields.include_ignored = true;
    const r = await this.request("changes", fields, options);
    return (r.changes ?? []) as Change[];
  }

  /**
   * Apply the changes (all, or those at `paths` and beneath them) to the host
   * workspace, each file atomically. When the host changed one of them since
   * the session started, nothing is written and the call rejects with a
   * CommitConflict, unless `force`.
   */
  async commit(paths?: string[], options: CallOptions & { force?: boolean } = {}): Promise<CommitResult> {
    const fields: Record<string, unknown> = { force: options.force ?? false };
    if (paths !== undefined) fields.paths = paths;
    const r = await this.request("commit", fields, options);
    const res: CommitResult = { committed: (r.committed ?? []) as string[], conflicts: (r.conflicts ?? []) as string[] };
    if (res.conflicts.length > 0 && !options.force) throw new CommitConflict(res.conflicts);
    return res;
  }

  /**
   * Make what /workspace holds now a read-only layer and go on in a fresh
   * one (`workspaceMode: "overlay"` only; no file is copied); resolves to the
   * checkpoint's name (`name`, or c1, c2...). Rejects with `busy` while a
   * command runs. /tmp and home are part of it; processes left in the
   * background keep the tree they had (docs/checkpoints.md).
   */
  async checkpoint(name?: string, options: CallOptions = {}): Promise<string> {
    const fields: Record<string, unknown> = {};
    if (name !== undefined) fields.name = name;
    const r = await this.request("checkpoint", fields, options);
    return r.checkpoint as string;
  }

  /** Bring /workspace, /tmp and home back to `checkpoint` (later checkpoints stay). */
  async restore(checkpoint: string, options: CallOptions = {}): Promise<void> {
    await this.request("restore", { checkpoint }, options);
  }

  /**
   * The checkpoints: name, layers, bytes of its own layer of /workspace,
   * own_bytes of its own layers of /tmp and home.
   */
  async checkpoints(
    options: CallOptions = {},
  ): Promise<{ name: string; layers: number; bytes: number; own_bytes?: number }[]> {
    const r = await this.request("checkpoints", {}, options);
    return (r.checkpoints ?? []) as { name: string; layers: number; bytes: number; own_bytes?: number }[];
  }

  /**
   * New detached sandboxes (`count`, 1 to 100) whose /workspace starts at
   * checkpoint `from` (none: as it is now, checkpointed first; rejects with
   * `busy` while a command runs), with this one's options, standing on its
   * layers (no file copied); resolves to their ids, for `Sandbox.connect`.
   * `name`: NAME, or NAME-1 ... NAME-count. Only a detached sandbox can be
   * forked; what each writes is its own (docs/checkpoints.md).
   */
  async fork(options: CallOptions & { count?: number; from?: string; name?: string } = {}): Promise<string[]> {
    const fields: Record<string, unknown> = { count: options.count ?? 1 };
    if (options.from !== undefined) fields.from = options.from;
    if (options.name !== undefined) fields.name = options.name;
    const r = await this.request("fork", fields, { signal: options.signal });
    return (r.ids ?? []) as string[];
  }

  /** What was written or deleted after `checkpoint`: path, status (written|deleted), type, size. */
  async changesSince(
    checkpoint: string,
    options: CallOptions = {},
  ): Promise<{ path: string; status: string; type?: string; size?: number }[]> {
    const r = await this.request("changes", { since: checkpoint }, options);
    return (r.changes ?? []) as { path: string; status: string; type?: string; size?: number }[];
  }

  /**
   * Throw the changes away: the session ends (its processes are killed) and
   * its layer is removed; the host workspace was never touched. Create a new
   * Sandbox to go on.
   */
  async discard(options: CallOptions = {}): Promise<void> {
    try {
      await this.request("discard", {}, options);
    } finally {
      await this.close();
    }
  }

  /**
   * End the session: running commands are killed (their calls reject with
   * `shutdown`), the sandbox and everything agentbox made are removed.
   * Idempotent. For a detached sandbox: disconnect only; the sandbox and
   * what runs in it stay, calls still pending reject with SandboxClosed and
   * their results are kept for the next client (`destroy` ends it).
   */
  async close(): Promise<void> {
    if (this.#detached !== null) {
      this.#closed ??= "the client disconnected from the sandbox";
      this.#proc.kill("SIGTERM"); // agentbox connect: the bridge ends, never the sandbox
      const killer = setTimeout(() => this.#proc.kill("SIGKILL"), 15000);
      await this.#exited;
      clearTimeout(killer);
      return;
    }
    if (this.#closed === null) {
      this.#closed = "the sandbox was closed";
      this.#proc.stdin.write('{"op":"shutdown","id":"close"}\n');
    }
    this.#proc.stdin.end();
    const killer = setTimeout(() => this.#proc.kill("SIGKILL"), 15000);
    await this.#exited;
    clearTimeout(killer);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  // ---- commands ----

  /**
   * Run a command: a shell string (`/bin/sh -c`) or an argv array (no
   * shell). Resolves with the whole result; `onOutput` sees the output as
   * it comes. A command cancelled through `signal` while running resolves
   * with `cancelled: true`; one cancelled while queued rejects with
   * ProtocolError `cancelled`.
   */
  async exec(command: string | string[], options: ExecOptions = {}): Promise<ExecResult> {
    const fields: Record<string, unknown> = typeof command === "string" ? { command } : { argv: command };
    if (options.cwd !== undefined) fields.cwd = options.cwd;
    if (options.env !== undefined) fields.env = options.env;
    if (options.stdin !== undefined) fields.stdin = options.stdin;
    if (options.mergeOutput) fields.merge_output = true;
    if (options.maxOutput !== undefined) fields.max_output = options.maxOutput;
    if (options.keepBackground) fields.keep_background = true;
    if (options.encoding !== undefined) fields.encoding = options.encoding;
    const r = await this.request("exec", fields, options);
    return r as unknown as ExecResult;
  }

  /**
   * Start a command and return it running (a Process): its stdin stays
   * open for `write`, its output comes as it is written. With `pty`
   * (`{ rows, cols }`), a new terminal inside the sandbox is its
   * controlling terminal and stdio (one output stream).
   */
  spawn(
    command: string | string[],
    options: { cwd?: string; env?: Record<string, string>; timeout?: number; pty?: { rows: number; cols: number } } = {},
  ): Process {
    const fields: Record<string, unknown> = typeof command === "string" ? { command } : { argv: command };
    if (options.cwd !== undefined) fields.cwd = options.cwd;
    if (options.env !== undefined) fields.env = options.env;
    if (options.pty !== undefined) fields.pty = { rows: options.pty.rows, cols: options.pty.cols };
    else fields.stdin = { stream: true };
    // a detached sandbox's lost connection is resumed by offsets: base64 counts the bytes exactly
    if (this.#detached !== null) fields.encoding = "base64";
    const request = (op: string, f: Record<string, unknown>) => this.request(op, f);
    return new Process(request, (onOutput, onId) =>
      this.request("exec", fields, { timeout: options.timeout, onOutput, onId, resumable: true }),
    );
  }

  /**
   * The file events of directory `path` (in the view; relative: to
   * /workspace) and, with `recursive` (default true), of every directory
   * under it, as they happen: iterate the Watch (`for await`) until its
   * `cancel()` or the sandbox's end; await its `ready` before the changes
   * it must see. It takes one of the session's concurrent commands while it runs.
   */
  watch(path = "/workspace", options: { recursive?: boolean } = {}): Watch {
    const fields = { path, recursive: options.recursive ?? true };
    const request = (op: string, f: Record<string, unknown>) => this.request(op, f);
    return new Watch(request, (onEvent, onId) => this.request("watch", fields, { onEvent, onId }));
  }

  /** spawn with a terminal of rows x cols: a REPL, an editor, a prompt. */
  pty(command: string | string[], rows = 24, cols = 80, options: { cwd?: string; env?: Record<string, string>; timeout?: number } = {}): Process {
    return this.spawn(command, { ...options, pty: { rows, cols } });
  }

  /** deepagents' `execute`: stdout and stderr interleaved, the exit code (124 on timeout), whether output was cut. */
  async execute(command: string, options: { timeout?: number; signal?: AbortSignal } = {}): Promise<ExecuteResponse> {
    const r = await this.exec(command, { ...options, mergeOutput: true });
    return { output: r.output ?? r.stdout ?? "", exitCode: r.exit_code, truncated: r.truncated };
  }

  // ---- files (paths in the view; relative means under /workspace) ----

  async read(path: string, options: CallOptions & { offset?: number; limit?: number } = {}): Promise<ReadResult> {
    const fields: Record<string, unknown> = { path };
    if (options.offset !== undefined) fields.offset = options.offset;
    if (options.limit !== undefined) fields.limit = options.limit;
    return (await this.request("read", fields, options)) as unknown as ReadResult;
  }

  async write(
    path: string,
    content: string,
    options: CallOptions & { overwrite?: boolean; encoding?: "utf-8" | "base64" } = {},
  ): Promise<{ path: string; bytes: number; created: boolean }> {
    const fields: Record<string, unknown> = { path, content };
    if (options.overwrite) fields.overwrite = true;
    if (options.encoding !== undefined) fields.encoding = options.encoding;
    return (await this.request("write", fields, options)) as never;
  }

  async edit(
    path: string,
    oldString: string,
    newString: string,
    options: CallOptions & { replaceAll?: boolean } = {},
  ): Promise<{ path: string; occurrences: number }> {
    const fields = { path, old_string: oldString, new_string: newString, replace_all: options.replaceAll ?? false };
    return (await this.request("edit", fields, options)) as never;
  }

  async ls(path = "/workspace", options: CallOptions = {}): Promise<{ path: string; entries: FileEntry[]; truncated: boolean }> {
    return (await this.request("ls", { path }, options)) as never;
  }

  async glob(pattern: string, options: CallOptions & { path?: string } = {}): Promise<{ matches: FileEntry[]; truncated: boolean }> {
    const fields: Record<string, unknown> = { pattern };
    if (options.path !== undefined) fields.path = options.path;
    return (await this.request("glob", fields, options)) as never;
  }

  async grep(pattern: string, options: CallOptions & GrepOptions = {}): Promise<{ matches: GrepMatch[]; truncated: boolean }> {
    const fields: Record<string, unknown> = { pattern };
    if (options.path !== undefined) fields.path = options.path;
    if (options.glob !== undefined) fields.glob = options.glob;
    if (options.regex) fields.regex = true;
    if (options.ignoreCase) fields.ignore_case = true;
    if (options.maxCount !== undefined) fields.max_count = options.maxCount;
    return (await this.request("grep", fields, options)) as never;
  }

  async delete(path: string, options: CallOptions & { recursive?: boolean } = {}): Promise<{ path: string; deleted: number }> {
    return (await this.request("delete", { path, recursive: options.recursive ?? false }, options)) as never;
  }

  /**
   * Write bytes to a file (created with its directories; replaced unless
   * `overwrite: false`). Data larger than one request carries goes in
   * chunks when the server has `file_chunks`, one chunk's encoding at a time.
   */
  async upload(path: string, data: Uint8Array, options: CallOptions & { overwrite?: boolean } = {}): Promise<{ path: string; size: number }> {
    if (this.hostFiles && data.length > BULK_MIN) {
      return withPrivateDir(async (dir) => {
        await writeFile(join(dir, "upload"), data, { mode: 0o600 });
        return this.uploadFile(path, join(dir, "upload"), options);
      });
    }
    const per = this.maxFileBytesPerRequest;
    if (data.length <= per) {
      const fields: Record<string, unknown> = { path, data: Buffer.from(data.buffer, data.byteOffset, data.length).toString("base64") };
      if (options.overwrite === false) fields.overwrite = false;
      const r = await this.request("upload", fields, options);
      return { path: String(r.path), size: data.length };
    }
    this.#needChunks("upload", path, data.length);
    let offset = 0;
    let last: Message | null = null;
    while (offset < data.length) {
      const chunk = data.subarray(offset, Math.min(offset + per, data.length));
      last = await this.#uploadChunk(path, offset, chunk, options);
      offset += chunk.length;
    }
    return { path: String(last!.path), size: Number(last!.size) };
  }

  /**
   * Upload a host file: through the server's `host_files` path where it has
   * one (`hostFiles`), else in chunks with bounded memory, one in memory at
   * a time. Whole or not at all either way.
   */
  async uploadFile(path: string, hostPath: string, options: CallOptions & { overwrite?: boolean } = {}): Promise<{ path: string; size: number }> {
    if (this.hostFiles) {
      const fields: Record<string, unknown> = { path, from: resolve(hostPath) };
      if (options.overwrite === false) fields.overwrite = false;
      const r = await this.request("upload", fields, options);
      return { path: String(r.path), size: Number(r.size) };
    }
    const file = await open(hostPath, "r");
    try {
      const size = (await file.stat()).size;
      const per = this.maxFileBytesPerRequest;
      if (size > per) this.#needChunks("upload", path, size);
      const buffer = Buffer.alloc(Math.min(per, Math.max(size, 1)));
      let offset = 0;
      let last: Message | null = null;
      do {
        const { bytesRead } = await file.read(buffer, 0, buffer.length, offset);
        if (size <= per) return await this.upload(path, buffer.subarray(0, bytesRead), options);
        if (bytesRead === 0) break;
        last = await this.#uploadChunk(path, offset, buffer.subarray(0, bytesRead), options);
        offset += bytesRead;
      } while (offset < size);
      return { path: String(last!.path), size: Number(last!.size) };
    } finally {
      await file.close();
    }
  }

  #needChunks(op: string, path: string, size: number): void {
    if (!this.chunked) {
      throw new FileError(
        "too_large",
        `${op}: ${size} bytes is more than one request carries (${SINGLE_REQUEST_FILE_BYTES} bytes), and this agentbox has no file_chunks`,
        path,
      );
    }
  }

  #uploadChunk(path: string, offset: number, chunk: Uint8Array, options: CallOptions & { overwrite?: boolean }): Promise<Message> {
    const fields: Record<string, unknown> = { path, offset, data: Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length).toString("base64") };
    if (offset === 0 && options.overwrite === false) fields.overwrite = false;
    return this.request("upload", fields, options);
  }

  /** A file's bytes; in chunks when the server has `file_chunks` (any size), else at most 6 MiB. */
  async download(path: string, options: CallOptions = {}): Promise<Uint8Array> {
    if (!this.chunked) {
      const r = await this.request("download", { path }, options);
      return new Uint8Array(Buffer.from(String(r.data), "base64"));
    }
    if (this.hostFiles) {
      // a small file in one request, a larger one through a private file
      const r = await this.request("download", { path, offset: 0, length: BULK_MIN }, options);
      if (r.eof === true) return new Uint8Array(Buffer.from(String(r.data), "base64"));
      return withPrivateDir(async (dir) => {
        await this.downloadFile(path, join(dir, "download"), options);
        return new Uint8Array(await readFile(join(dir, "download")));
      });
    }
    const parts: Buffer[] = [];
    for await (const part of this.#downloadChunks(path, options)) parts.push(part);
    return new Uint8Array(parts.length === 1 ? parts[0]! : Buffer.concat(parts));
  }

  /**
   * Download to a host file; resolves with the size. Through `host_files`
   * where the server has it (`hostFiles`: `hostPath` is replaced only once
   * every byte arrived, and left as it was otherwise), else in chunks with
   * bounded memory.
   */
  async downloadFile(path: string, hostPath: string, options: CallOptions = {}): Promise<number> {
    if (this.hostFiles) {
      const r = await this.request("download", { path, to: resolve(hostPath) }, options);
      return Number(r.bytes);
    }
    const file = await open(hostPath, "w");
    try {
      if (!this.chunked) {
        const data = await this.download(path, options);
        await file.write(data);
        return data.length;
      }
      let size = 0;
      for await (const part of this.#downloadChunks(path, options)) {
        await file.write(part);
        size += part.length;
      }
      return size;
    } finally {
      await file.close();
    }
  }

  async *#downloadChunks(path: string, options: CallOptions): AsyncGenerator<Buffer> {
    const length = this.#hello!.max_chunk!;
    let offset = 0;
    for (;;) {
      const r = await this.request("download", { path, offset, length }, options);
      const part = Buffer.from(String(r.data), "base64");
      yield part;
      offset += part.length;
      if (r.eof === true || part.length === 0) return;
    }
  }
}
