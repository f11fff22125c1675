import type { FastifyBaseLogger } from 'fastify';
import type { Db } from '../db/database.js';
import { loggableError } from '../db/failures.js';
import { ATTEMPT_LEASE_MS, RETRY_DELAYS_MS, isDelivered, retryDelayMs } from './delivery-schedule.js';
import { fanOutEvents, settleAndClaim, type AttemptResult, type ClaimedDelivery } from './delivery-repository.js';
import { onNewEvents } from './new-event-signal.js';
import { eventBody, signMessage } from './webhook-signing.js';
import type { WebhookClient } from './webhook-client.js';

// The delivery worker of one replica (docs/events.md, "Delivery and retries"): it fans new outbox
// events out to their subscriptions (taking at once those it has room for), claims due deliveries (row locks, so replicas never take the
// same one; a lease, so one cut short by a crash is made again), sends each signed, and records
// the outcome with the next attempt's time. Each subscription has a share of the slots, so a
// receiver that hangs holds its share and no more. Every replica runs one; on PGlite the one
// process's worker is the only one, and its loop never runs two rounds at once.

export type Outcome = 'succeeded' | 'retrying' | 'failed';

export interface DeliveryWorkerOptions {
  db: Db;
  client: WebhookClient;
  log: FastifyBaseLogger;
  retryDelaysMs?: readonly number[] | undefined;
  // How often it looks for work when nothing woke it.
  pollIntervalMs?: number | undefined;
  // Attempts in flight at once, and of those at most `perSubscription` to one subscription and
  // `perNetwork` to one network's.
  concurrency?: number | undefined;
  perSubscription?: number | undefined;
  perNetwork?: number | undefined;
  onOutcome?: (outcome: Outcome) => void;
}

export interface DeliveryWorker {
  start(): void;
  // Stops claiming, waits a little for attempts in flight (those still running are made again
  // once their lease ends), writes what finished.
  stop(): Promise<void>;
}

// Enough that one subscription's share keeps a backlog's drain above its target while the API
// keeps the event loop busy, each attempt's round trip then taking 100 ms or more
// (docs/events.md, "A receiver that hangs").
export const CONCURRENCY = 512;
// A quarter of the slots: three subscriptions whose receivers hang leave the others a quarter of
// them.
export const SUBSCRIPTION_SHARE = CONCURRENCY / 4;
// And half to the subscriptions of one network together, so that one network's receivers, however
// many, leave the other networks half the slots. Not a quarter: a network's two subscriptions (a
// finance system and an operations one) would then share one subscription's slots, and recording
// payments with both active cost measurably more (docs/performance.md, "Webhooks").
export const NETWORK_SHARE = CONCURRENCY / 2;
const FAN_OUT_BATCH = 500;
const STOP_WAIT_MS = 2_000;
// A signal may come before its transaction commits: look a moment later. The same wait gathers
// the events appended meanwhile into one fan-out (docs/events.md, "Rounds are gathered").
const SIGNAL_DELAY_MS = 15;
// A finished attempt's result waits this long for others to share its round's statement.
export const GATHER_MS = 10;

export function createDeliveryWorker(options: DeliveryWorkerOptions): DeliveryWorker {
  const { db, client, log } = options;
  const delays = options.retryDelaysMs ?? RETRY_DELAYS_MS;
  const pollMs = options.pollIntervalMs ?? 500;
  const concurrency = options.concurrency ?? CONCURRENCY;
  const perSubscription = options.perSubscription ?? SUBSCRIPTION_SHARE;
  const perNetwork = options.perNetwork ?? NETWORK_SHARE;
  let running = false;
  let inFlight = 0;
  // Attempts in flight by subscription id (none: not in the map).
  const held = new Map<string, number>();
  // When the fan-out last ran; whether the last batch was full (more at once); whether this
  // replica appended events since (a fan-out once the signal's delay has passed).
  let fannedOutAt = -Infinity;
  let fanOutNow = true;
  let signalled = false;
  let signalledAgain = false;
  const sends = new Set<Promise<void>>();
  let finished: AttemptResult[] = [];
  let wake: (() => void) | null = null;
  // A retry due soon, a signal's delay, results gathering: each its own timer, so none delays
  // another.
  const wakeTimers: Record<'retry' | 'signal' | 'gather', NodeJS.Timeout | null> = { retry: null, signal: null, gather: null };
  let loop: Promise<void> | null = null;
  let unsubscribe: (() => void) | null = null;
  let failing = false;

  // A wake while a round runs is kept for when it ends.
  let wokenDuringRound = false;
  function wakeUp(): void {
    if (wake) wake();
    else wokenDuringRound = true;
  }

  // New events of this replica are fanned out once the signal's delay has passed, not by a round
  // that happens to start sooner (their transaction may not have committed yet); signals that
  // come during the delay get one more delay after it.
  function signalSoon(): void {
    wakeTimers.signal = setTimeout(() => {
      wakeTimers.signal = null;
      signalled = true;
      if (signalledAgain) {
        signalledAgain = false;
        signalSoon();
      }
      wakeUp();
    }, SIGNAL_DELAY_MS);
  }

  // A wake `ms` from now on the given timer, unless that timer is already set.
  function wakeIn(ms: number, timer: 'retry' | 'gather'): void {
    if (wakeTimers[timer]) return;
    wakeTimers[timer] = setTimeout(() => {
      wakeTimers[timer] = null;
      wakeUp();
    }, ms);
  }

  function attempt(delivery: ClaimedDelivery): void {
    inFlight++;
    held.set(delivery.subscriptionId, (held.get(delivery.subscriptionId) ?? 0) + 1);
    const attemptedAt = new Date();
    const message = signMessage(delivery.secret, delivery.eventId, eventBody(delivery), attemptedAt);
    const sent = client
      .send({ url: delivery.url, network: delivery.network, headers: message.headers, body: message.body })
      .catch((error: unknown) => ({ ok: false, status: undefined, error: error instanceof Error ? error.message : String(error), durationMs: 0 }))
      .then((result) => {
        const delivered = result.ok && isDelivered(result.status);
        const retryInMs = delivered ? null : retryDelayMs(delivery.attempts, delays);
        const state = delivered ? 'SUCCEEDED' : retryInMs === null ? 'FAILED' : 'PENDING';
        options.onOutcome?.(delivered ? 'succeeded' : state === 'FAILED' ? 'failed' : 'retrying');
        finished.push({
          eventId: delivery.eventId,
          subscriptionId: delivery.subscriptionId,
          attempts: delivery.attempts,
          state,
          retryInMs,
          attemptedAt,
          status: result.status ?? null,
          // The client's reason when it has one (a redirect not followed, a body cut at the time
          // limit); a plain non-2xx answer's status speaks for itself.
          error: delivered ? null : (result.error ?? (result.status === undefined ? 'no answer' : null)),
          durationMs: Math.round(result.durationMs),
        });
      })
      .finally(() => {
        inFlight--;
        const left = held.get(delivery.subscriptionId)! - 1;
        if (left === 0) held.delete(delivery.subscriptionId);
        else held.set(delivery.subscriptionId, left);
        sends.delete(sent);
        wakeIn(GATHER_MS, 'gather');
      });
    sends.add(sent);
  }

  // Writes what finished and, with `claim`, takes what the free slots and the subscriptions'
  // shares allow, in one statement.
  async function settle(claim: boolean): Promise<ClaimedDelivery[]> {
    const free = claim ? concurrency - inFlight : 0;
    if (finished.length === 0 && free <= 0) return [];
    const results = finished;
    finished = [];
    try {
      const claimed = await settleAndClaim(db, { results, limit: Math.max(0, free), perSubscription, perNetwork, held, leaseMs: ATTEMPT_LEASE_MS });
      // A retry due before the next poll: its time counts from this write, not from the attempt.
      let soonest = Infinity;
      for (const result of results) if (result.retryInMs !== null) soonest = Math.min(soonest, result.retryInMs);
      if (running && soonest < pollMs) wakeIn(soonest, 'retry');
      return claimed;
    } catch (error) {
      // Unrecorded attempts are made again when their lease ends: at least once, never lost.
      if (results.length > 0) log.warn({ err: loggableError(error), results: results.length }, 'webhook attempts could not be recorded; they will be made again');
      throw error;
    }
  }

  // One round: record what finished and claim what is due, oldest first; then fan out new events
  // (when some may wait: this replica appended some, the last batch was full, or a poll interval
  // has passed), taking at once the deliveries the slots left have room for. True when there may
  // be more to do at once; events this replica appends meanwhile wait for the signal's delay, so
  // that a stream of them is fanned out in batches rather than a round each.
  async function round(): Promise<boolean> {
    const free = concurrency - inFlight;
    const claimed = await settle(true);
    for (const delivery of claimed) attempt(delivery);
    if (fanOutNow || signalled || performance.now() - fannedOutAt >= pollMs) {
      fanOutNow = false;
      signalled = false;
      fannedOutAt = performance.now();
      const fanned = await fanOutEvents(db, FAN_OUT_BATCH, { limit: Math.max(0, concurrency - inFlight), perSubscription, perNetwork, held, leaseMs: ATTEMPT_LEASE_MS });
      for (const delivery of fanned.taken) attempt(delivery);
      if (fanned.events === FAN_OUT_BATCH) fanOutNow = true;
      // Made but not taken (no room): due now, for the next claim.
      if (fanned.deliveries > fanned.taken.length) return true;
    }
    return fanOutNow || (free > 0 && claimed.length === free);
  }

  async function run(): Promise<void> {
    while (running) {
      let more = false;
      wokenDuringRound = false;
      try {
        more = await round();
        if (failing) log.info('webhook delivery resumed');
        failing = false;
      } catch (error) {
        // The database cannot answer now: say so once, and keep looking at the poll's pace.
        if (!failing) log.warn({ err: loggableError(error) }, 'webhook delivery paused: the database did not answer');
        failing = true;
      }
      if (!running) break;
      // Results that finished meanwhile are written by the round their gathering wake starts. The
      // next round comes once the event loop has turned: on PGlite a round's statements run on
      // this thread, and a backlog of events is hundreds of rounds.
      if ((more || wokenDuringRound) && !failing) {
        await new Promise((resolve) => setImmediate(resolve));
        continue;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, pollMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = null;
    }
  }

  return {
    start() {
      if (running) return;
      running = true;
      unsubscribe = onNewEvents(() => {
        if (wakeTimers.signal) signalledAgain = true;
        else signalSoon();
      });
      loop = run();
    },
    async stop() {
      if (!running) return;
      running = false;
      unsubscribe?.();
      for (const key of ['retry', 'signal', 'gather'] as const) {
        if (wakeTimers[key]) clearTimeout(wakeTimers[key]);
        wakeTimers[key] = null;
      }
      signalled = signalledAgain = false;
      wakeUp();
      await loop;
      if (sends.size > 0) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([Promise.allSettled([...sends]), new Promise((resolve) => (timer = setTimeout(resolve, STOP_WAIT_MS)))]);
        clearTimeout(timer);
      }
      // A failure is logged by settle.
      await settle(false).catch(() => undefined);
    },
  };
}
