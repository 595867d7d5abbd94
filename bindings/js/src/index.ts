export { Sandbox, PROTOCOL, SINGLE_REQUEST_FILE_BYTES, serveArgs, createArgs } from "./sandbox.js";
export { Process, type SignalName } from "./process.js";
export { Watch, type WatchEvent } from "./watch.js";
export { SandboxError, ProtocolError, FileError, SandboxClosed, CommitConflict, FILE_ERROR_CODES } from "./errors.js";
export type * from "./types.js";
