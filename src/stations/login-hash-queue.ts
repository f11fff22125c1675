// Where station logins wait for their slow password hash: a fair queue (fair-queue.ts) in front of
// the process's hashing queue, with a bound on the wait. A login never waits longer than `waitMs`
// for its hash to start: past it, it is answered (503) instead of holding its socket open.
import {
  HASH_CONCURRENCY,
  RUN_NOW,
  passwordHashQueue,
  type HashRunner,
  type SlowCheck,
  type SlowCheckOutcome,
  type SlowCheckQueue,
} from '../asset-management/station-credentials-service.js';
import { FairQueue, type Queued } from './fair-queue.js';

export interface LoginQueueLimits {
  // How long a login waits for its slow hash to start, at most.
  hashWaitMs: number;
  // Logins waiting from one address at most (beyond: 503 at once).
  queuedPerAddress: number;
  // Logins waiting in all at most (beyond: 503 at once).
  queuedTotal: number;
}

// 5 s: stations time their handshake out after 10 to 30 s, so an answer comes before they give up,
// and a correct login waits behind one hash per address in a round, which 5 s covers for a few
// dozen busy addresses even on 2 cores. 16 per address: the stations of a site behind one NAT
// that reconnect together. 1000 in all: more than 5 s of hashing on any machine.
export const LOGIN_QUEUE_LIMITS: LoginQueueLimits = Object.freeze({ hashWaitMs: 5000, queuedPerAddress: 16, queuedTotal: 1000 });

export interface LoginHashQueue extends SlowCheckQueue {
  // Checks waiting for a turn, and checks hashing now.
  readonly waiting: number;
  readonly running: number;
}

interface Item extends Queued {
  work: SlowCheck;
  deadline: number;
  timer?: NodeJS.Timeout;
  settle(outcome: SlowCheckOutcome): void;
  fail(error: unknown): void;
}

export function createLoginHashQueue(
  limits: LoginQueueLimits,
  options: { concurrency?: number; turn?: HashRunner; now?: () => number } = {},
): LoginHashQueue {
  const { concurrency = HASH_CONCURRENCY, now = Date.now } = options;
  const turn: HashRunner = options.turn ?? ((task) => passwordHashQueue(task));
  const queue = new FairQueue<Item>({ perLane: limits.queuedPerAddress, total: limits.queuedTotal });
  // Turns asked of the hashing queue and not over yet: at most `concurrency`, and never more than
  // logins waiting, so an API password change finds at most one round of logins ahead of it. The
  // login a turn runs is chosen when the turn comes, not when it was asked for.
  let turns = 0;
  let running = 0;

  function askTurns(): void {
    while (turns < concurrency && turns < queue.size) {
      turns += 1;
      void turn(runNext);
    }
  }

  function drop(item: Item, outcome: SlowCheckOutcome): void {
    clearTimeout(item.timer);
    queue.finish(item);
    item.settle(outcome);
  }

  async function runNext(): Promise<void> {
    try {
      for (let item = queue.take(); item; item = queue.take()) {
        if (item.work.abandoned()) {
          drop(item, { kind: 'abandoned' });
          continue;
        }
        if (now() >= item.deadline) {
          drop(item, { kind: 'timeout' });
          continue;
        }
        clearTimeout(item.timer);
        running += 1;
        try {
          item.settle({ kind: 'checked', matched: await item.work.verify(RUN_NOW) });
        } catch (error) {
          item.fail(error);
        } finally {
          running -= 1;
          queue.finish(item);
        }
        return;
      }
    } finally {
      turns -= 1;
      askTurns();
    }
  }

  return {
    check(work) {
      return new Promise<SlowCheckOutcome>((resolve, reject) => {
        const item: Item = { lane: work.address, owner: work.identity, work, deadline: now() + limits.hashWaitMs, settle: resolve, fail: reject };
        let offer = queue.offer(item);
        // The identity's waiting login whose station has hung up gives its place to this one.
        if (offer.kind === 'ownerBusy' && offer.holder.work.abandoned() && queue.remove(offer.holder)) {
          clearTimeout(offer.holder.timer);
          offer.holder.settle({ kind: 'abandoned' });
          offer = queue.offer(item);
        }
        if (offer.kind === 'ownerBusy') return resolve({ kind: 'busy', sameAddress: offer.holder.lane === item.lane });
        if (offer.kind !== 'queued') return resolve({ kind: 'full' });
        item.timer = setTimeout(() => {
          if (queue.remove(item)) resolve({ kind: 'timeout' });
        }, limits.hashWaitMs);
        item.timer.unref();
        askTurns();
      });
    },
    get waiting() {
      return queue.size;
    },
    get running() {
      return running;
    },
  };
}
