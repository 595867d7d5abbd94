/** The server's first line (docs/protocol.md, "The hello"). */
export interface Hello {
  type: "hello";
  protocol: string;
  version: string;
  sandbox_id: string;
  max_line: number;
  max_concurrent: number;
  max_queue: number;
  workspace: string;
  cwd: string;
  /** Additions the server supports, e.g. `"file_chunks"`; absent on older servers. */
  features?: string[];
  /** With `file_chunks`: the most file bytes one chunked request or reply carries. */
  max_chunk?: number;
  /** `"full"`, or what `isolation: "best"` had to do without (docs/containers.md). */
  isolation?: "full" | { level: "partial"; missing: string[] };
  [field: string]: unknown;
}

/** Options of `Sandbox.create`: each maps to an option of `agentbox serve`. */
export interface SandboxOptions {
  /** Host directory seen read-write at /workspace (default: the current directory). */
  workspace?: string;
  /** Host directory seen read-only at /skills. */
  skills?: string;
  /** Host root tree (read-only) that is the view's system instead of the host's `/usr`, `/etc`, `/lib*` (`--rootfs`, docs/rootfs.md). */
  rootfs?: string;
  /** OCI image layout, `oci:DIR[:TAG]`, whose layers are the view's system (`--image`, docs/images.md). */
  image?: string;
  /** The agentbox binary (default: `$AGENTBOX_BIN`, then `agentbox` in PATH). */
  binary?: string;
  /** Variables every command gets (`--env NAME=VALUE`). */
  env?: Record<string, string>;
  /** Each command's default timeout in seconds (`--timeout`); `null`: none. Default 120. */
  timeout?: number | null;
  /** Memory limit of the sandbox (`--memory`, e.g. `"2G"` or bytes). */
  memory?: string | number;
  /** CPU limit in cores (`--cpus`). */
  cpus?: number;
  /** Process limit (`--pids`). */
  pids?: number;
  /**
   * `--limits`: `"full"` (agentbox's default) refuses to start where a limit
   * asked for cannot hold as asked (no cgroup for `memory` or `cpus`);
   * `"best"` starts without it, and `hello.limits` says what holds.
   */
  limits?: "full" | "best";
  /** `--net`: `"none"` (default) or `"host"`. */
  network?: string;
  /**
   * `--net secret=NAME@HOST,...` for each entry: the variable `NAME` of this
   * process's environment stays outside the sandbox, which gets a
   * placeholder the proxy replaces with the value toward those hosts only
   * (docs/network.md).
   */
  secrets?: Record<string, string | string[]>;
  /** `--net ca=FILE`: more CAs (PEM) the proxy verifies those hosts with. */
  netCa?: string;
  /** `--seccomp` profile (default `"default"`). */
  seccomp?: string;
  /**
   * `--isolation`: `"full"` (default) refuses to start where a layer of the
   * sandbox cannot be built (a container's masked /proc, a refused
   * sethostname); `"best"` starts without it and names it in
   * `hello.isolation` (docs/containers.md).
   */
  isolation?: "full" | "best";
  /** `--profile`: a sandbox profile by name or path. */
  profile?: string;
  /** Output kept per stream and command (`--max-output`), in bytes. */
  maxOutput?: number;
  /** Fresh tmpfs directories in the view, writable by the sandbox's user (`--tmpfs DIR`). */
  tmpfs?: string[];
  /** Host uid of the sandbox user when started as root (`--host-uid`). */
  hostUid?: number;
  /**
   * `--workspace-mode`: `"direct"` (default), the workspace itself; `"overlay"`,
   * an overlay whose writes land in a layer until `commit` (docs/workspace.md).
   */
  workspaceMode?: "direct" | "overlay";
  /** Overlay: keep the layer in this host directory after the session (`--keep-changes`). */
  keepChanges?: string;
  /** Any other options of `agentbox serve --help`. */
  extraArgs?: string[];
  /**
   * A detached sandbox (`agentbox create`, docs/detached.md): it outlives
   * this client, `close()` only disconnects, and `Sandbox.connect` reaches
   * it again by id. Default false (`agentbox serve`, gone with the client).
   */
  detach?: boolean;
  /** Detached: its name, which is then its id (`--name`; unique among your sandboxes). */
  name?: string;
  /** Detached: end it after so many seconds with no client and no command (`--idle-timeout`). */
  idleTimeout?: number;
  /** Detached: end it so many seconds after it was made, whatever runs (`--ttl`). */
  ttl?: number;
}

/** How to reach detached sandboxes: `Sandbox.connect`, `Sandbox.list`. */
export interface ConnectOptions {
  /**
   * A command that runs agentbox elsewhere, put in front of its command
   * line: `["ssh", "host"]`, `["kubectl", "exec", "-i", "pod", "--"]`.
   * Default none (this machine).
   */
  via?: string[];
  /** The agentbox binary (default: `$AGENTBOX_BIN`, then `agentbox` in PATH; `agentbox` with `via`). */
  binary?: string;
}

/** One detached sandbox of `agentbox ls --json` (`Sandbox.list`). */
export interface DetachedSandboxInfo {
  id: string;
  name: string | null;
  /** `"running"`, `"paused"`, or `"dead"` (its launcher is gone: `rm` cleans it up). */
  state: string;
  /** When it was made, in seconds since the epoch. */
  created: number;
  /** The launcher's pid. */
  pid: number;
  /** The host workspace. */
  workspace: string;
  idle_ms: number;
  /** Commands running, and queued. */
  running: number;
  queued: number;
  /** Whether a client is attached (one at a time). */
  attached: boolean;
  /** Its cgroup's memory in bytes, null where it has none. */
  memory: number | null;
  [field: string]: unknown;
}

/** A published port (sandbox.port, docs/network.md "Published ports"). */
export interface PublishedPort {
  /** Inside the sandbox. */
  port: number;
  /** The host's loopback address it listens on, and its port there. */
  address: string;
  host_port: number;
  url: string;
  /** Any local user may connect (else only this user). */
  public: boolean;
  /** Each connection must send a token first (then `url` is tcp://). */
  token: boolean;
}

/** A port published with a token (sandbox.port(n, { token })), docs/network.md "Beyond loopback". */
export interface TokenPort {
  /** "tcp://ADDR:PORT": each connection sends the token and a newline first. */
  url: string;
  /** The token given, or the new one (told once: the launcher keeps no copy). */
  token: string;
}

/** One path the overlay's layer changes (docs/workspace.md). */
export interface Change {
  /** Relative to the workspace. */
  path: string;
  status: "added" | "modified" | "deleted" | "renamed";
  /** `"file"`, `"directory"`, `"symlink"` or `"other"`. */
  type: string;
  /** Size in the layer (absent for a deletion). */
  size?: number;
  /** Size on the host (absent for an addition). */
  old_size?: number;
  /** A rename's old path. */
  from?: string;
  /** The host file changed since the session started: commit refuses it unless forced. */
  conflict: boolean;
  /** With `diff`: a unified diff of a text file, or null (binary, too big). */
  diff?: string | null;
  diff_truncated?: boolean;
  /** The workspace's .gitignore files ignore it (listed only with `includeIgnored`). */
  ignored?: boolean;
}

/** What `commit` wrote to the host workspace. */
export interface CommitResult {
  committed: string[];
  conflicts: string[];
}

/** One streamed piece of a command's output. */
export interface OutputChunk {
  /** `"stdout"`, `"stderr"`, or `"output"` with `mergeOutput`. */
  stream: string;
  /** The bytes as text (UTF-8) or base64, as `encoding` says. */
  data: string;
  encoding: string;
}

export interface ExecOptions {
  /** Seconds; 0 means the session's default (clamped to `--max-timeout`). */
  timeout?: number;
  /** Working directory in the view; relative means under /workspace. */
  cwd?: string;
  /** Variables added for this command. */
  env?: Record<string, string>;
  /** Data on the command's stdin (otherwise /dev/null). */
  stdin?: string;
  /** One interleaved `output` instead of `stdout` and `stderr`. */
  mergeOutput?: boolean;
  /** Bytes kept per stream in the result (at least 1024). */
  maxOutput?: number;
  /** Leave processes the command put in the background running. */
  keepBackground?: boolean;
  /** `"base64"` to get output bytes exactly. */
  encoding?: "utf-8" | "base64";
  /** Called with each output chunk as it comes (asks the server to stream). */
  onOutput?: (chunk: OutputChunk) => void;
  /** Aborting it cancels the command (`cancel`): a running one resolves with `cancelled: true`. */
  signal?: AbortSignal;
}

/** A command's result: the fields of docs/result.md and docs/protocol.md. */
export interface ExecResult {
  exit_code: number | null;
  signal: string | null;
  timed_out: boolean;
  cancelled: boolean;
  oom_killed: boolean;
  duration_ms: number;
  cpu_user_ms: number;
  cpu_system_ms: number;
  max_rss_kb: number;
  stdout?: string;
  stderr?: string;
  output?: string;
  encoding: string;
  stdout_bytes?: number;
  stderr_bytes?: number;
  output_bytes?: number;
  truncated: boolean;
  denied_syscalls: Array<{ syscall: string; count: number }>;
  background: Array<{ pid: number; command: string }>;
  background_log: string | null;
  error: unknown;
  [field: string]: unknown;
}

/** What deepagents' `execute` returns. */
export interface ExecuteResponse {
  output: string;
  exitCode: number | null;
  truncated: boolean;
}

export interface FileEntry {
  path: string;
  is_dir: boolean;
  size: number;
  modified_at: string;
}

export interface ReadResult {
  path: string;
  /** `"utf-8"`: `content` is text; `"base64"`: a binary file, `content` is base64 of all of it. */
  encoding: "utf-8" | "base64";
  content: string;
  total_lines: number | null;
  start_line: number | null;
  end_line: number | null;
  next_offset: number | null;
  size: number;
  truncated?: boolean;
}

export interface GrepMatch {
  path: string;
  line: number;
  text: string;
}

export interface GrepOptions {
  path?: string;
  glob?: string;
  regex?: boolean;
  ignoreCase?: boolean;
  maxCount?: number;
}

/** Options every request takes. */
export interface CallOptions {
  /** Aborting it sends `cancel` for the request. */
  signal?: AbortSignal;
  /** The operation's timeout in seconds (file operations and exec). */
  timeout?: number;
}
