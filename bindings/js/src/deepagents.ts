// AgentboxSandbox: a deepagents (JS) sandbox backend whose commands and
// file operations all run inside one agentbox sandbox.

import { posix } from "node:path";

import { BaseSandbox, SandboxError as DeepAgentsSandboxError } from "deepagents";
import type {
  BackendFactory,
  DeleteResult,
  EditResult,
  ExecuteResponse,
  FileDownloadResponse,
  FileOperationError,
  FileUploadResponse,
  GlobResult,
  GrepResult,
  LsResult,
  ReadRawResult,
  ReadResult,
  WriteResult,
} from "deepagents";

import { ProtocolError } from "./errors.js";
import { Sandbox } from "./sandbox.js";
import type { ConnectOptions, DetachedSandboxInfo, SandboxOptions } from "./types.js";

export interface AgentboxSandboxOptions extends SandboxOptions {
  /**
   * Directories outside the workspace that deepagents writes through the
   * backend: offloaded tool results and conversation history. Each is a
   * tmpfs of the view (`--tmpfs`), writable by the sandbox's user, seen by
   * the file operations and by commands alike, gone with the session.
   * Default `DEEPAGENTS_DIRS`; `[]` leaves them out.
   */
  writableDirs?: string[];
  /** Files written when the sandbox starts: path (relative = under /workspace) to text. */
  initialFiles?: Record<string, string>;
}

/** Where deepagents' middleware writes: offloaded tool results, summarised history. */
export const DEEPAGENTS_DIRS: readonly string[] = ["/large_tool_results", "/conversation_history"];
const EMPTY_FILE = "System reminder: File exists but has empty contents";
const WORKSPACE = "/workspace";
const GREP_MAX = 100000; // the server's largest max_count

// Extensions deepagents treats as binary (read as bytes, written from base64).
const BINARY_TYPES: Record<string, string> = {
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".heic": "image/heic",
  ".heif": "image/heif",
  ".mp3": "audio/mpeg",
  ".wav": "audio/wav",
  ".aiff": "audio/aiff",
  ".aac": "audio/aac",
  ".ogg": "audio/ogg",
  ".flac": "audio/flac",
  ".mp4": "video/mp4",
  ".webm": "video/webm",
  ".mpeg": "video/mpeg",
  ".mpg": "video/mpeg",
  ".mov": "video/quicktime",
  ".avi": "video/x-msvideo",
  ".flv": "video/x-flv",
  ".wmv": "video/x-ms-wmv",
  ".3gpp": "video/3gpp",
  ".pdf": "application/pdf",
  ".ppt": "application/vnd.ms-powerpoint",
  ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
};

/** The MIME type deepagents gives a path, and whether it is binary for deepagents. */
function mimeOf(path: string): { mimeType: string; binary: boolean } {
  const type = BINARY_TYPES[posix.extname(path).toLowerCase()];
  return type ? { mimeType: type, binary: true } : { mimeType: "text/plain", binary: false };
}

/** A file error as deepagents' upload/download codes. */
function operationError(code: string): FileOperationError {
  switch (code) {
    case "file_not_found":
    case "is_directory":
    case "permission_denied":
      return code;
    case "read_only":
      return "permission_denied";
    default:
      return "invalid_path";
  }
}

/** What a failed operation reports as a value; a dead or closed sandbox still throws. */
function failure(e: unknown): ProtocolError {
  if (e instanceof ProtocolError) return e;
  throw e;
}

/**
 * A deepagents sandbox backend (`SandboxBackendProtocolV2`, a `BaseSandbox`
 * whose every method is done natively by agentbox, none through a shell):
 * `createDeepAgent({ model, backend: await AgentboxSandbox.create({ workspace }) })`.
 *
 * Paths are paths in the sandbox: `/workspace/...` (the host workspace),
 * `/skills/...` (read-only), relative ones are under /workspace.
 *
 * With `detach: true` the sandbox outlives this process (docs/detached.md):
 * `close()` disconnects, `AgentboxSandbox.fromId(id)` attaches again,
 * `stop()`/`start()` pause and resume it, `destroy()` removes it.
 */
export class AgentboxSandbox extends BaseSandbox {
  #options: AgentboxSandboxOptions;
  #sandbox: Sandbox | null = null;
  #starting = false;

  constructor(options: AgentboxSandboxOptions = {}) {
    super();
    this.#options = options;
  }

  /** Start the sandbox (`agentbox serve`) and write the initial files. */
  static async create(options: AgentboxSandboxOptions = {}): Promise<AgentboxSandbox> {
    const backend = new AgentboxSandbox(options);
    await backend.initialize();
    return backend;
  }

  async initialize(): Promise<void> {
    if (this.#sandbox !== null || this.#starting) {
      throw new DeepAgentsSandboxError("the agentbox sandbox is already initialized", "ALREADY_INITIALIZED");
    }
    this.#starting = true;
    try {
      const { writableDirs, initialFiles, ...options } = this.#options;
      const tmpfs = [...(options.tmpfs ?? []), ...(writableDirs ?? DEEPAGENTS_DIRS)];
      const sandbox = await Sandbox.create({ ...options, tmpfs });
      try {
        for (const [path, text] of Object.entries(initialFiles ?? {})) {
          await sandbox.upload(path, new TextEncoder().encode(text));
        }
      } catch (e) {
        await sandbox.destroy(); // a detached one too: nothing half made stays
        throw e;
      }
      this.#sandbox = sandbox;
    } finally {
      this.#starting = false;
    }
  }

  /**
   * Attach to the detached sandbox `sandboxId` (`agentbox connect`), here
   * or through `options.via` (`["ssh", "host"]`). A sandbox that does not
   * exist rejects with deepagents' SandboxError `SANDBOX_NOT_FOUND`; one
   * with another client attached with agentbox's SandboxError `busy: ...`.
   */
  static async fromId(sandboxId: string, options: ConnectOptions = {}): Promise<AgentboxSandbox> {
    let sandbox: Sandbox;
    try {
      sandbox = await Sandbox.connect(sandboxId, options);
    } catch (e) {
      if (e instanceof Error && /: no sandbox /.test(e.message)) {
        throw new DeepAgentsSandboxError(`Sandbox not found: ${sandboxId} (${e.message})`, "SANDBOX_NOT_FOUND", e);
      }
      throw e;
    }
    const backend = new AgentboxSandbox({ binary: options.binary });
    backend.#sandbox = sandbox;
    return backend;
  }

  /**
   * Attach to the detached sandbox created with `name` (a named sandbox's
   * id is its name, so this is `fromId(name)`).
   */
  static async fromName(name: string, options: ConnectOptions = {}): Promise<AgentboxSandbox> {
    return AgentboxSandbox.fromId(name, options);
  }

  /** Your detached sandboxes (`agentbox ls --json`): id, name, state, created, idle time, commands, memory. */
  static async list(options: ConnectOptions = {}): Promise<DetachedSandboxInfo[]> {
    return Sandbox.list(options);
  }

  /** The client of the session, for what deepagents' interface does not say (streaming, cancel, stats). */
  get sandbox(): Sandbox {
    if (this.#sandbox === null) {
      throw new DeepAgentsSandboxError("the agentbox sandbox is not initialized: call initialize()", "NOT_INITIALIZED");
    }
    return this.#sandbox;
  }

  /** The sandbox's id (empty before `initialize`). */
  get id(): string {
    return this.#sandbox?.id ?? "";
  }

  get isRunning(): boolean {
    return this.#sandbox !== null && !this.#sandbox.closed;
  }

  /** Whether the sandbox is detached (outlives this client). */
  get detached(): boolean {
    return this.#sandbox?.detached ?? this.#options.detach ?? false;
  }

  /**
   * End the session: commands still running are killed and the sandbox is
   * removed. A detached sandbox stays (with what runs in it): this only
   * disconnects; `destroy()` removes it.
   */
  async close(): Promise<void> {
    await this.#sandbox?.close();
  }

  /** Remove the sandbox, detached or not, whatever runs in it (`agentbox rm -f`), leaving nothing. */
  async destroy(): Promise<void> {
    await this.#sandbox?.destroy();
  }

  /**
   * Pause a detached sandbox: every process in it frozen (`agentbox pause`,
   * the cgroup freezer), requests wait until `start()`. Rejects with
   * agentbox's reason where it has no cgroup to freeze.
   */
  async stop(): Promise<void> {
    await this.sandbox.pause();
  }

  /** Resume a paused detached sandbox (`agentbox resume`). */
  async start(): Promise<void> {
    await this.sandbox.resume();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /** An absolute, normalised view path for a directory argument. */
  #absolute(path: string): string {
    const abs = path.startsWith("/") ? path : `${WORKSPACE}/${path}`;
    return posix.normalize(abs).replace(/(.)\/$/, "$1");
  }

  async execute(command: string, options: { timeout?: number } = {}): Promise<ExecuteResponse> {
    return this.sandbox.execute(command, options);
  }

  override async ls(path: string = "/"): Promise<LsResult> {
    try {
      const r = await this.sandbox.ls(path);
      return {
        files: r.entries.map((e) => ({
          path: e.path + (e.is_dir ? "/" : ""),
          is_dir: e.is_dir,
          size: e.size,
          modified_at: e.modified_at,
        })),
      };
    } catch (e) {
      const f = failure(e);
      if (f.code === "file_not_found") return { files: [] };
      return { error: f.detail };
    }
  }

  override async read(filePath: string, offset = 0, limit = 500): Promise<ReadResult> {
    const { mimeType, binary } = mimeOf(filePath);
    if (binary) {
      try {
        return { content: await this.sandbox.download(filePath), mimeType };
      } catch (e) {
        return { error: this.#readError(filePath, failure(e)) };
      }
    }
    const start = Number.isFinite(offset) ? Math.max(0, Math.floor(offset)) : 0;
    const count = Number.isFinite(limit) ? Math.max(0, Math.floor(limit)) : 0;
    try {
      // limit 0 still asks, so that a missing file is an error
      const r = await this.sandbox.read(filePath, { offset: start, limit: Math.max(1, count) });
      if (r.encoding === "base64") {
        return { content: new Uint8Array(Buffer.from(r.content, "base64")), mimeType: "application/octet-stream" };
      }
      if (r.total_lines === 0) return { content: EMPTY_FILE, mimeType };
      if (count === 0) return { content: "", mimeType };
      if (r.start_line === 0) {
        return { error: `Line offset ${start} exceeds file length (${r.total_lines} lines)` };
      }
      return {
        content: r.content.endsWith("\n") ? r.content.slice(0, -1) : r.content,
        mimeType,
        totalLines: r.total_lines ?? undefined,
        startLine: r.start_line ?? undefined,
        endLine: r.end_line ?? undefined,
        nextOffset: r.next_offset ?? undefined,
      };
    } catch (e) {
      return { error: this.#readError(filePath, failure(e)) };
    }
  }

  #readError(filePath: string, f: ProtocolError): string {
    return f.code === "file_not_found" ? `File '${filePath}' not found` : f.detail;
  }

  override async readRaw(filePath: string): Promise<ReadRawResult> {
    const { mimeType, binary } = mimeOf(filePath);
    let bytes: Uint8Array;
    try {
      bytes = await this.sandbox.download(filePath);
    } catch (e) {
      return { error: this.#readError(filePath, failure(e)) };
    }
    const now = new Date().toISOString();
    const content = binary ? bytes : new TextDecoder().decode(bytes);
    return { data: { content, mimeType, created_at: now, modified_at: now } };
  }

  /** Create or replace a file (binary types: `content` is base64, as deepagents gives it). */
  override async write(filePath: string, content: string): Promise<WriteResult> {
    try {
      const data = mimeOf(filePath).binary ? Buffer.from(content, "base64") : Buffer.from(content, "utf8");
      await this.sandbox.upload(filePath, data);
      return { path: filePath, filesUpdate: null };
    } catch (e) {
      return { error: failure(e).detail };
    }
  }

  override async edit(filePath: string, oldString: string, newString: string, replaceAll = false): Promise<EditResult> {
    try {
      if (oldString === "") return await this.#editEmpty(filePath, newString);
      const r = await this.sandbox.edit(filePath, oldString, newString, { replaceAll });
      return { path: filePath, filesUpdate: null, occurrences: r.occurrences };
    } catch (e) {
      const f = failure(e);
      switch (f.code) {
        case "file_not_found":
          return { error: `Error: File '${filePath}' not found` };
        case "not_found":
          return { error: `Error: String not found in file '${filePath}': ${f.detail}` };
        case "not_unique":
          return { error: `Error: Multiple occurrences found in '${filePath}' (${f.detail}); use replace_all to replace every one` };
        default:
          return { error: `Error editing '${filePath}': ${f.detail}` };
      }
    }
  }

  /** An empty old string fills an empty file, as deepagents' own backends do. */
  async #editEmpty(filePath: string, newString: string): Promise<EditResult> {
    const r = await this.sandbox.read(filePath, { limit: 1 });
    if (r.size !== 0) return { error: `Error: old_string must not be empty unless '${filePath}' is empty` };
    if (newString === "") return { path: filePath, filesUpdate: null, occurrences: 0 };
    await this.sandbox.upload(filePath, Buffer.from(newString, "utf8"));
    return { path: filePath, filesUpdate: null, occurrences: 1 };
  }

  /** Matches of `pattern` below `path`, as paths relative to it (deepagents' glob). */
  override async glob(pattern: string, path: string = "/"): Promise<GlobResult> {
    const base = this.#absolute(path);
    // the pattern's leading directories without wildcards narrow the walk:
    // "workspace/src/**/*.py" from "/" walks /workspace/src, not the whole view
    const parts = pattern.replace(/^\/+/, "").split("/");
    let lead = 0;
    while (lead < parts.length - 1 && parts[lead] !== "" && !/[*?[\]{}]/.test(parts[lead]!) && parts[lead] !== "..") lead++;
    const literal = parts.slice(0, lead).join("/");
    const start = lead > 0 ? posix.join(base, literal) : base;
    try {
      const r = await this.sandbox.glob(parts.slice(lead).join("/"), { path: start });
      const prefix = base === "/" ? "/" : `${base}/`;
      return {
        files: r.matches.map((m) => ({
          path: m.path.startsWith(prefix) ? m.path.slice(prefix.length) : m.path,
          is_dir: m.is_dir,
          size: m.size,
          modified_at: m.modified_at,
        })),
        truncated: r.truncated,
      };
    } catch (e) {
      const f = failure(e);
      if (f.code === "file_not_found" || f.code === "not_directory") return { files: [] };
      return { error: f.detail };
    }
  }

  /** Lines containing the literal `pattern` (deepagents' grep: not a regex, no cap unless `maxCount`). */
  override async grep(pattern: string, path: string = "/", glob: string | null = null, maxCount: number | null = null): Promise<GrepResult> {
    const cap = maxCount == null ? GREP_MAX : Math.max(1, Math.min(Math.floor(maxCount), GREP_MAX));
    try {
      const r = await this.sandbox.grep(pattern, {
        path,
        glob: glob ?? undefined,
        maxCount: cap,
      });
      const matches = r.matches.filter((m) => !mimeOf(m.path).binary).map(({ path, line, text }) => ({ path, line, text }));
      return r.truncated ? { matches, truncated: true } : { matches };
    } catch (e) {
      const f = failure(e);
      if (f.code === "file_not_found") return { matches: [] };
      return { error: f.detail };
    }
  }

  /** Delete a file, or a directory with everything in it. */
  override async delete(filePath: string): Promise<DeleteResult> {
    try {
      await this.sandbox.delete(filePath, { recursive: true });
      return { path: filePath, filesUpdate: null };
    } catch (e) {
      const f = failure(e);
      if (f.code === "file_not_found") return { error: `Error: '${filePath}' not found` };
      return { error: `Error deleting '${filePath}': ${f.detail}` };
    }
  }

  /**
   * Write each file (partial success, answers in input order). Files are
   * sent together while the bytes in flight fit in one chunk; a larger one
   * goes alone, in chunks: beyond the caller's bytes, at most about one
   * chunk's encoding is held at a time.
   */
  async uploadFiles(files: Array<[string, Uint8Array]>): Promise<FileUploadResponse[]> {
    const sandbox = this.sandbox;
    const budget = sandbox.maxFileBytesPerRequest;
    const out: FileUploadResponse[] = new Array(files.length);
    const inFlight = new Set<Promise<void>>();
    let bytes = 0;
    const failed: unknown[] = []; // a closed or dead sandbox: thrown once all settle
    for (const [i, [path, data]] of files.entries()) {
      while (inFlight.size > 0 && bytes + data.length > budget) await Promise.race(inFlight);
      if (failed.length > 0) break;
      bytes += data.length;
      const done: Promise<void> = sandbox
        .upload(path, data)
        .then(
          () => void (out[i] = { path, error: null }),
          (e) => void (out[i] = { path, error: operationError(failure(e).code) }),
        )
        .catch((error) => void failed.push(error))
        .finally(() => {
          bytes -= data.length;
          inFlight.delete(done);
        });
      inFlight.add(done);
    }
    await Promise.all(inFlight);
    if (failed.length > 0) throw failed[0];
    return out;
  }

  async downloadFiles(paths: string[]): Promise<FileDownloadResponse[]> {
    const sandbox = this.sandbox;
    return Promise.all(
      paths.map(async (path): Promise<FileDownloadResponse> => {
        try {
          return { path, content: await sandbox.download(path), error: null };
        } catch (e) {
          return { path, content: null, error: operationError(failure(e).code) };
        }
      }),
    );
  }
}

/** What `createAgentboxSandboxFactory` returns: each call makes a new sandbox. */
export type AsyncAgentboxSandboxFactory = () => Promise<AgentboxSandbox>;

/**
 * An async factory that creates and initializes a new sandbox on each call
 * (`AgentboxSandbox.create(options)`), as `createDaytonaSandboxFactory` and
 * `createModalSandboxFactory` do; the caller closes (or destroys) each.
 */
export function createAgentboxSandboxFactory(options?: AgentboxSandboxOptions): AsyncAgentboxSandboxFactory {
  return async () => AgentboxSandbox.create(options);
}

/**
 * A deepagents `BackendFactory` that always gives this sandbox, for
 * middleware that takes a synchronous factory
 * (`createFilesystemMiddleware({ backend })`); the caller closes it.
 */
export function createAgentboxSandboxFactoryFromSandbox(sandbox: AgentboxSandbox): BackendFactory {
  return () => sandbox;
}
