import type { ResolveHost, ResolvedAddress } from './target-rules.js';

// The host name lookups of one replica: those of the API's subscription checks and those of the
// deliveries' connections alike (docs/events.md, "Lookups"). A system lookup holds one of the
// threads of libuv's pool, which station logins' password hashes share, for as long as the name's
// servers take to answer, or the system resolver's own limit (often 10-20 s) when they never do.
// So lookups take turns for LOOKUP_SLOTS threads, one network at most LOOKUP_SLOTS_PER_NETWORK of
// them, the networks served in turn: a network whose names never answer holds its own slot and
// leaves the other to the rest, and the pool keeps threads for the hashes whatever names are
// looked up. Lookups of one name at once share one, whichever networks asked for it.
export const LOOKUP_SLOTS = 2;
export const LOOKUP_SLOTS_PER_NETWORK = 1;

export class LookupTimedOut extends Error {}

// Slots taken by key, at most `perKey` a key, the keys served in turn: a free slot goes to the
// waiting key that started a task least recently (one that has started none first, in the order
// they came). Tasks of one key start in the order they came.
export class FairSlots {
  private running = 0;
  private readonly runningByKey = new Map<string, number>();
  // The keys with tasks waiting, in the order they came.
  private readonly waiting = new Map<string, Array<() => void>>();
  // When each key with a task running or waiting last started one (a count of starts), so that
  // turns go round; forgotten once the key has neither.
  private readonly lastStart = new Map<string, number>();
  private starts = 0;

  constructor(
    readonly slots: number,
    readonly perKey: number,
  ) {}

  // `task` once a slot is free for `key`. `withdraw` takes a task that has not started out of the
  // queue (true), so it never starts; one that has started runs on (false).
  schedule<T>(key: string, task: () => Promise<T>): { result: Promise<T>; withdraw(): boolean } {
    let start!: () => void;
    const result = new Promise<T>((resolve, reject) => {
      start = () => {
        this.running++;
        this.runningByKey.set(key, (this.runningByKey.get(key) ?? 0) + 1);
        this.lastStart.set(key, ++this.starts);
        const done = () => {
          this.running--;
          const left = this.runningByKey.get(key)! - 1;
          if (left === 0) this.runningByKey.delete(key);
          else this.runningByKey.set(key, left);
          this.forgetIfIdle(key);
          this.pump();
        };
        let running: Promise<T>;
        try {
          running = task();
        } catch (error) {
          running = Promise.reject(error as Error);
        }
        running.then(resolve, reject).finally(done);
      };
    });
    const queue = this.waiting.get(key);
    if (queue) queue.push(start);
    else this.waiting.set(key, [start]);
    this.pump();
    return {
      result,
      withdraw: () => {
        const tasks = this.waiting.get(key);
        const at = tasks?.indexOf(start) ?? -1;
        if (!tasks || at < 0) return false;
        tasks.splice(at, 1);
        if (tasks.length === 0) this.waiting.delete(key);
        this.forgetIfIdle(key);
        return true;
      },
    };
  }

  // How many run and wait now, for tests and figures.
  counts(): { running: number; waiting: number; runningByKey: ReadonlyMap<string, number> } {
    let waiting = 0;
    for (const tasks of this.waiting.values()) waiting += tasks.length;
    return { running: this.running, waiting, runningByKey: this.runningByKey };
  }

  private forgetIfIdle(key: string): void {
    if (!this.runningByKey.has(key) && !this.waiting.has(key)) this.lastStart.delete(key);
  }

  private pump(): void {
    while (this.running < this.slots) {
      let next: string | undefined;
      let nextStarted = Infinity;
      for (const key of this.waiting.keys()) {
        const started = this.lastStart.get(key) ?? 0;
        if (started < nextStarted && (this.runningByKey.get(key) ?? 0) < this.perKey) {
          next = key;
          nextStarted = started;
        }
      }
      if (next === undefined) return;
      const tasks = this.waiting.get(next)!;
      const start = tasks.shift()!;
      if (tasks.length === 0) this.waiting.delete(next);
      start();
    }
  }
}

export interface TargetLookups {
  // A resolver for the lookups made for `network` (null: subscriptions without a network, which
  // count as one network), each of which waits at most `timeoutMs` for its answer and then fails
  // with LookupTimedOut; a lookup all of whose callers gave up before its turn is not started.
  forNetwork(network: string | null, timeoutMs: number): ResolveHost;
  counts(): ReturnType<FairSlots['counts']>;
}

const NO_NETWORK_KEY = '\u0000none';

export function targetLookups(resolve: ResolveHost, options: { slots?: number; perNetwork?: number } = {}): TargetLookups {
  const slots = new FairSlots(options.slots ?? LOOKUP_SLOTS, options.perNetwork ?? LOOKUP_SLOTS_PER_NETWORK);
  // The lookup of each name under way or waiting for its turn, and how many callers still wait for it.
  const shared = new Map<string, { result: Promise<ResolvedAddress[]>; waiting: { n: number }; withdraw(): boolean }>();

  function share(key: string, hostname: string) {
    const waiting = { n: 1 };
    const scheduled = slots.schedule(key, () => resolve(hostname));
    const entry = { ...scheduled, waiting };
    const forget = () => {
      if (shared.get(hostname) === entry) shared.delete(hostname);
    };
    scheduled.result.then(forget, forget);
    shared.set(hostname, entry);
    return entry;
  }

  return {
    forNetwork(network, timeoutMs) {
      const key = network ?? NO_NETWORK_KEY;
      return (hostname) => {
        const joined = shared.get(hostname);
        if (joined) joined.waiting.n++;
        const entry = joined ?? share(key, hostname);
        let timer: NodeJS.Timeout | undefined;
        const timedOut = new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            entry.waiting.n--;
            // Nobody waits for it any more: it gives its turn up (a started one runs on).
            if (entry.waiting.n === 0 && entry.withdraw()) {
              if (shared.get(hostname) === entry) shared.delete(hostname);
            }
            reject(new LookupTimedOut());
          }, timeoutMs);
        });
        return Promise.race([entry.result, timedOut]).finally(() => clearTimeout(timer));
      };
    },
    counts: () => slots.counts(),
  };
}
