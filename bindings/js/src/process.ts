// Process: a running command the caller talks to (Sandbox.spawn,
// Sandbox.pty): streamed stdin, output as it comes, a pty's size, signals
// (docs/protocol.md, "Terminals and streamed stdin").

import { Inbox } from "./inbox.js";
import type { OutputChunk } from "./types.js";

type Message = Record<string, unknown>;
type Request = (op: string, fields: Record<string, unknown>) => Promise<Message>;

/** The signals the protocol's `signal` op sends. */
export type SignalName = "INT" | "TERM" | "KILL" | "HUP" | "QUIT" | "USR1" | "USR2" | "WINCH" | "CONT" | "STOP";

/**
 * A command started with a streamed stdin or a pty. `write` resolves once
 * the command has taken the data (one write at a time: the server holds no
 * more); `read` and async iteration give its output as it comes (a pty's
 * is one stream); `result` resolves with its result.
 */
export class Process {
  readonly result: Promise<Record<string, unknown>>;
  #id: number | null = null;
  #request: Request;
  #chunks = new Inbox<Buffer>();
  #writing: Promise<void> = Promise.resolve();

  /** @internal made by Sandbox.spawn */
  constructor(request: Request, start: (onOutput: (c: OutputChunk) => void, onId: (id: number) => void) => Promise<Message>) {
    this.#request = request;
    const done = start(
      (c) => {
        this.#chunks.push(Buffer.from(c.data, c.encoding === "base64" ? "base64" : "utf8"));
      },
      (id) => (this.#id = id),
    );
    this.result = done.finally(() => this.#chunks.end());
    this.result.catch(() => {}); // read through wait() or result; never unhandled
  }

  /** The exec request's id in the protocol. */
  get id(): number {
    return this.#id!;
  }

  get running(): boolean {
    return !this.#chunks.ended;
  }

  /** data on its stdin (a pty: typed into its terminal); with eof, then its end (a pty: Ctrl-D). */
  write(data: string | Uint8Array, eof = false): Promise<void> {
    const bytes = typeof data === "string" ? Buffer.from(data) : Buffer.from(data);
    const fields: Record<string, unknown> = { target: this.id };
    if (bytes.length) Object.assign(fields, { data: bytes.toString("base64"), encoding: "base64" });
    if (eof) fields.eof = true;
    // one at a time, in order: the server takes no second one meanwhile
    const next = this.#writing.then(async () => {
      await this.#request("stdin", fields);
    });
    this.#writing = next.catch(() => {});
    return next;
  }

  closeStdin(): Promise<void> {
    return this.write("", true);
  }

  async resize(rows: number, cols: number): Promise<void> {
    await this.#request("resize", { target: this.id, rows, cols });
  }

  async signal(name: SignalName): Promise<void> {
    await this.#request("signal", { target: this.id, signal: name });
  }

  kill(): Promise<void> {
    return this.signal("KILL");
  }

  /** The next chunk of output, or null at its end. */
  read(): Promise<Buffer | null> {
    return this.#chunks.next();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Buffer> {
    for (;;) {
      const chunk = await this.read();
      if (chunk === null) return;
      yield chunk;
    }
  }

  /** Output up to and including text; what came after it stays for the next read. Rejects when the command ends first. */
  async readUntil(text: string): Promise<string> {
    let got = Buffer.alloc(0);
    const want = Buffer.from(text);
    while (got.indexOf(want) < 0) {
      const chunk = await this.read();
      if (chunk === null) throw new Error(`the command ended before ${JSON.stringify(text)}; got ${JSON.stringify(got.toString())}`);
      got = Buffer.concat([got, chunk]);
    }
    const end = got.indexOf(want) + want.length;
    if (end < got.length) this.#chunks.items.unshift(got.subarray(end));
    return got.subarray(0, end).toString();
  }

  /** Its result, once it has ended. */
  wait(): Promise<Record<string, unknown>> {
    return this.result;
  }
}
