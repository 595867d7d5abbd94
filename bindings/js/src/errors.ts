/** agentbox could not do what was asked. */
export class SandboxError extends Error {
  override name = "SandboxError";
}

/**
 * The server refused a request: `code` is the protocol's error code
 * (`invalid_request`, `busy`, `too_large`, `cancelled`, `shutdown`, ...).
 */
export class ProtocolError extends SandboxError {
  override name = "ProtocolError";
  constructor(
    readonly code: string,
    /** The server's message, without the code. */
    readonly detail: string,
  ) {
    super(`${code}: ${detail}`);
  }
}

/**
 * What was wrong with a file (`file_not_found`, `permission_denied`,
 * `is_directory`, `not_directory`, `invalid_path`, `read_only`, `too_large`,
 * `exists`, `not_found`, `not_unique`, `no_space`, `io_error`, ...), with the
 * path in the sandbox when the server gave one.
 */
export class FileError extends ProtocolError {
  override name = "FileError";
  constructor(
    code: string,
    message: string,
    readonly path: string | null,
  ) {
    super(code, message);
  }
}

/**
 * `commit` refused: the host changed these workspace paths since the session
 * started (nothing was written; `{ force: true }` overwrites them).
 */
export class CommitConflict extends SandboxError {
  override name = "CommitConflict";
  constructor(readonly paths: string[]) {
    super(`changed on the host since the session started: ${paths.join(", ")}`);
  }
}

/** The sandbox is gone: closed, or its server died or was killed. */
export class SandboxClosed extends SandboxError {
  override name = "SandboxClosed";
}

/** The error codes of docs/protocol.md that say what was wrong with a file. */
export const FILE_ERROR_CODES: ReadonlySet<string> = new Set([
  "file_not_found",
  "permission_denied",
  "is_directory",
  "not_directory",
  "invalid_path",
  "read_only",
  "too_large",
  "exists",
  "not_found",
  "not_unique",
  "no_space",
  "io_error",
  "timeout",
]);
