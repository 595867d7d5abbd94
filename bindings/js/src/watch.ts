// Watch: a directory's file events as they happen (Sandbox.watch;
// docs/protocol.md, "watch").

import { Inbox } from "./inbox.js";

type Message = Record<string, unknown>;
type Request = (op: string, fields: Record<string, unknown>) => Promise<Message>;

/** One file event: `event` is created, written, removed, renamed, attributes or overflow. */
export interface WatchEvent {
  event: "ready" | "created" | "written" | "removed" | "renamed" | "attributes" | "overflow";
  /** Its path in the view (absent for overflow). */
  path?: string;
  /** renamed: the old path. */
  from?: string;
  dir?: boolean;
}

/**
 * A running watch: async iteration gives its events until `cancel()` (or
 * the sandbox's end); `ready` resolves once every change from then on is
 * reported (rejects when the path is not a directory of the view);
 * `result` resolves with its end ({events, cancelled, timed_out}).
 */
export class Watch {
  readonly result: Promise<Message>;
  readonly ready: Promise<string>;
  #id: number | null = null;
  #request: Request;
  #events = new Inbox<WatchEvent>();

  /** @internal made by Sandbox.watch */
  constructor(request: Request, start: (onEvent: (m: Message) => void, onId: (id: number) => void) => Promise<Message>) {
    this.#request = request;
    let readyFn: (p: string) => void = () => {};
    let failFn: (e: unknown) => void = () => {};
    const ready = new Promise<string>((res, rej) => {
      readyFn = res;
      failFn = rej;
    });
    const done = start(
      (m) => {
        const ev: WatchEvent = { event: m.event as WatchEvent["event"] };
        if (typeof m.path === "string") ev.path = m.path;
        if (typeof m.from === "string") ev.from = m.from;
        if (typeof m.dir === "boolean") ev.dir = m.dir;
        if (ev.event === "ready") readyFn(ev.path ?? "");
        else this.#events.push(ev);
      },
      (id) => (this.#id = id),
    );
    this.result = done.finally(() => this.#events.end());
    this.result.catch(() => {}); // read through ready or result; never unhandled
    // settled already when it was ready; else why it never will be
    done.then(() => failFn(new Error("the watch ended before it was ready")), failFn);
    this.ready = ready;
    this.ready.catch(() => {});
  }

  /** The watch request's id in the protocol. */
  get id(): number {
    return this.#id!;
  }

  get running(): boolean {
    return !this.#events.ended;
  }

  /** The next event, or null at the watch's end. */
  next(): Promise<WatchEvent | null> {
    return this.#events.next();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<WatchEvent> {
    for (;;) {
      const ev = await this.next();
      if (ev === null) return;
      yield ev;
    }
  }

  /** End the watch; resolves with its result. Events not read yet stay readable. */
  async cancel(): Promise<Message> {
    if (!this.#events.ended) {
      await this.#request("cancel", { target: this.id }).catch(() => {
        // it ended meanwhile: its result says how
      });
    }
    return this.result;
  }
}
