// Inbox: what a streaming call's messages bring (a Process's output, a
// Watch's events), read in order as it comes until the call ends.

export class Inbox<T> {
  readonly items: T[] = [];
  #ended = false;
  #wake: (() => void) | null = null;

  push(item: T): void {
    this.items.push(item);
    this.#notify();
  }

  /** The call has ended: what is in it stays readable, then next() gives null. */
  end(): void {
    this.#ended = true;
    this.#notify();
  }

  get ended(): boolean {
    return this.#ended;
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  }

  /** The next item, or null once the call has ended and none is left. */
  async next(): Promise<T | null> {
    while (this.items.length === 0 && !this.#ended) {
      await new Promise<void>((res) => (this.#wake = res));
    }
    return this.items.shift() ?? null;
  }
}
