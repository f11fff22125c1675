// A waiting line served round-robin across lanes, without I/O. Station logins that need a slow
// password hash wait here, one lane per address: whatever one address sends, a login from another
// address waits behind at most one item of it. An owner (a station identity) has at most one item
// waiting or running, so many addresses trying one identity also take a single place in a round.

export interface Queued {
  readonly lane: string;
  readonly owner: string;
}

export interface FairQueueLimits {
  // Items waiting in one lane at most.
  perLane: number;
  // Items waiting in all lanes at most.
  total: number;
}

export type Offer<T> =
  | { kind: 'queued' }
  // The owner already has an item waiting or running (`holder`).
  | { kind: 'ownerBusy'; holder: T }
  | { kind: 'laneFull' }
  | { kind: 'full' };

export class FairQueue<T extends Queued> {
  // The lanes with items waiting, in the order they are served: a Map iterates in insertion order,
  // and a lane that was served is moved to the back (deleted and set again).
  private readonly lanes = new Map<string, T[]>();
  // Each owner's item, from offer until finish (or remove): waiting or running.
  private readonly owners = new Map<string, T>();
  private waitingCount = 0;

  constructor(private readonly limits: FairQueueLimits) {}

  // Items waiting for their turn (not those taken and running).
  get size(): number {
    return this.waitingCount;
  }

  offer(item: T): Offer<T> {
    const holder = this.owners.get(item.owner);
    if (holder) return { kind: 'ownerBusy', holder };
    if (this.waitingCount >= this.limits.total) return { kind: 'full' };
    const lane = this.lanes.get(item.lane);
    if (lane && lane.length >= this.limits.perLane) return { kind: 'laneFull' };
    if (lane) lane.push(item);
    else this.lanes.set(item.lane, [item]);
    this.owners.set(item.owner, item);
    this.waitingCount += 1;
    return { kind: 'queued' };
  }

  // The head of the lane whose turn it is. Its owner keeps the item until finish().
  take(): T | undefined {
    const next = this.lanes.entries().next();
    if (next.done) return undefined;
    const [lane, items] = next.value;
    const item = items.shift()!;
    this.lanes.delete(lane);
    if (items.length > 0) this.lanes.set(lane, items);
    this.waitingCount -= 1;
    return item;
  }

  // A waiting item that will not run (its time is up, its station hung up): out of its lane, which
  // keeps its place, and its owner is free. False when it is not waiting (taken, or never queued).
  remove(item: T): boolean {
    const items = this.lanes.get(item.lane);
    const at = items ? items.indexOf(item) : -1;
    if (!items || at < 0) return false;
    items.splice(at, 1);
    if (items.length === 0) this.lanes.delete(item.lane);
    this.waitingCount -= 1;
    this.finish(item);
    return true;
  }

  // A taken item is done: its owner may queue again.
  finish(item: T): void {
    if (this.owners.get(item.owner) === item) this.owners.delete(item.owner);
  }
}
