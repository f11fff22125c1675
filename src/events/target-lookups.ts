import { LRUCache } from 'lru-cache';
import type { ResolveHost, ResolvedAddress } from './target-rules.js';

// The host name lookups of one replica: those of the API's subscription checks and those of the
// deliveries' connections alike (docs/events.md, "Lookups"). A system lookup holds one of the
// threads of libuv's pool, which station logins' password hashes share, for as long as the name's
// servers take to answer, or the system resolver's own limit (often 10-20 s) when they never do.
// So lookups take turns for LOOKUP_SLOTS threads, one network at most LOOKUP_SLOTS_PER_NETWORK of
// them, the networks served in turn: a network whose names never answer holds its own slot and
// leaves the other to the rest, and lookups never hold more than LOOKUP_SLOTS threads of the pool.
export const LOOKUP_SLOTS = 2;
export const LOOKUP_SLOTS_PER_NETWORK = 1;
// How long a request that names a target waits for its lookup, its turn included (then a 400).
export const CHECK_LOOKUP_TIMEOUT_MS = 5_000;
// A delivery's connection takes an answer its network had for the name this recently, so that a
// burst of new connections, or receivers on many names, does not queue a lookup for each. The
// rules are applied to a kept answer each time it is used, and the connection checks its peer
// again.
export const DELIVERY_ANSWER_KEPT_MS = 10_000;
// A network's answers kept: its subscriptions' names (at most 16 subscriptions a network) with room.
const ANSWERS_KEPT_PER_NETWORK = 32;

export class LookupTimedOut extends Error {}

// Slots taken by key, at most `perKey` a key, the keys served in turn: a key that starts a task
// goes behind every key that waits, and a key that comes back joins the end. A key's tasks
// scheduled `first` start ahead of its others; each kind in the order it came.
export class FairSlots {
  private running = 0;
  private readonly runningByKey = new Map<string, number>();
  // The keys with tasks waiting, in the order they are to be served, and their tasks: those
  // scheduled `first`, then the others.
  private readonly waiting = new Map<string, { first: Array<() => void>; rest: Array<() => void> }>();

  constructor(
    readonly slots: number,
    readonly perKey: number,
  ) {}

  // `task` once a slot is free for `key`. `withdraw` takes a task that has not started out of the
  // queue (true), so it never starts; one that has started runs on (false).
  schedule<T>(key: string, task: () => Promise<T>, options: { first?: boolean } = {}): { result: Promise<T>; withdraw(): boolean } {
    let start!: () => void;
    const result = new Promise<T>((resolve, reject) => {
      start = () => {
        this.running++;
        this.runningByKey.set(key, (this.runningByKey.get(key) ?? 0) + 1);
        const done = () => {
          this.running--;
          const left = this.runningByKey.get(key)! - 1;
          if (left === 0) this.runningByKey.delete(key);
          else this.runningByKey.set(key, left);
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
    let queue = this.waiting.get(key);
    if (!queue) {
      queue = { first: [], rest: [] };
      this.waiting.set(key, queue);
    }
    (options.first ? queue.first : queue.rest).push(start);
    this.pump();
    return {
      result,
      withdraw: () => {
        const tasks = this.waiting.get(key);
        const list = options.first ? tasks?.first : tasks?.rest;
        const at = list?.indexOf(start) ?? -1;
        if (!tasks || !list || at < 0) return false;
        list.splice(at, 1);
        if (tasks.first.length + tasks.rest.length === 0) this.waiting.delete(key);
        return true;
      },
    };
  }

  // How many run and wait now, for tests and figures.
  counts(): { running: number; waiting: number } {
    let waiting = 0;
    for (const tasks of this.waiting.values()) waiting += tasks.first.length + tasks.rest.length;
    return { running: this.running, waiting };
  }

  private pump(): void {
    while (this.running < this.slots) {
      let next: string | undefined;
      for (const key of this.waiting.keys()) {
        if ((this.runningByKey.get(key) ?? 0) < this.perKey) {
          next = key;
          break;
        }
      }
      if (next === undefined) return;
      const tasks = this.waiting.get(next)!;
      const start = (tasks.first.length > 0 ? tasks.first : tasks.rest).shift()!;
      // Behind every key that waits.
      this.waiting.delete(next);
      if (tasks.first.length + tasks.rest.length > 0) this.waiting.set(next, tasks);
      start();
    }
  }
}

export interface TargetLookups {
  // The resolver of a subscription check made for `network` (null: subscriptions without a
  // network, which count as one network): no kept answer, and ahead of the network's deliveries'
  // lookups. It waits at most `timeoutMs`, its turn included, then fails with LookupTimedOut.
  forCheck(network: string | null, timeoutMs: number): ResolveHost;
  // A resolver for the connections of `network`'s deliveries, which keeps its answers of the last
  // DELIVERY_ANSWER_KEPT_MS (at most ANSWERS_KEPT_PER_NETWORK, its own: another network's names
  // never push them out) and otherwise looks up in its turn, waiting at most `timeoutMs`. Made
  // once per network's connections (webhook-client.ts), so the answers go with them.
  forDeliveries(network: string | null, timeoutMs: number): ResolveHost;
  counts(): ReturnType<FairSlots['counts']>;
}

// The key of a network's turns and answers; subscriptions without a network are one more network.
export const networkKey = (network: string | null): string => network ?? '\u0000none';

export function targetLookups(resolve: ResolveHost, options: { slots?: number; perNetwork?: number } = {}): TargetLookups {
  const slots = new FairSlots(options.slots ?? LOOKUP_SLOTS, options.perNetwork ?? LOOKUP_SLOTS_PER_NETWORK);
  // The lookup of each name under way or waiting for its turn, by kind, network and name (a
  // network never waits in another's queue, nor a check in its deliveries' place), and how many
  // callers still wait for it.
  const shared = new Map<string, { result: Promise<ResolvedAddress[]>; waiting: { n: number }; withdraw(): boolean }>();

  function lookUp(key: string, hostname: string, timeoutMs: number, first: boolean): Promise<ResolvedAddress[]> {
    const id = `${first ? 'check' : 'delivery'}\u0000${key}\u0000${hostname}`;
    let entry = shared.get(id);
    if (entry) {
      entry.waiting.n++;
    } else {
      const scheduled = slots.schedule(key, () => resolve(hostname), { first });
      const made = { ...scheduled, waiting: { n: 1 } };
      const forget = () => {
        if (shared.get(id) === made) shared.delete(id);
      };
      scheduled.result.then(forget, forget);
      shared.set(id, made);
      entry = made;
    }
    const joined = entry;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        joined.waiting.n--;
        // Nobody waits for it any more: it gives its turn up (a started one runs on).
        if (joined.waiting.n === 0 && joined.withdraw() && shared.get(id) === joined) shared.delete(id);
        reject(new LookupTimedOut());
      }, timeoutMs);
      timer.unref();
    });
    return Promise.race([joined.result, timedOut]).finally(() => clearTimeout(timer));
  }

  return {
    forCheck: (network, timeoutMs) => (hostname) => lookUp(networkKey(network), hostname, timeoutMs, true),
    forDeliveries(network, timeoutMs) {
      const key = networkKey(network);
      const answers = new LRUCache<string, ResolvedAddress[]>({ max: ANSWERS_KEPT_PER_NETWORK, ttl: DELIVERY_ANSWER_KEPT_MS });
      return async (hostname) => {
        const kept = answers.get(hostname);
        if (kept) return kept;
        const answer = await lookUp(key, hostname, timeoutMs, false);
        answers.set(hostname, answer);
        return answer;
      };
    },
    counts: () => slots.counts(),
  };
}
