import type { FastifyBaseLogger } from 'fastify';
import type { Db } from '../db/database.js';
import { loggableError } from '../db/failures.js';
import { inBatches, startPeriodicSweep, type PeriodicSweep } from '../kernel/periodic-sweep.js';
import { deleteSettledEvents } from './events-repository.js';

// The outbox keeps an event, with its deliveries, for `retentionDays` (docs/events.md, "Retention"),
// then deletes it once none of its deliveries is pending: a sweep every `intervalMs` (when:
// kernel/periodic-sweep.ts), in batches of `batch`, the next batch as soon as the event loop has
// turned while one comes back full, so the deletion keeps up with any rate of events without one
// long statement, nor a row of them that holds PGlite's thread (a batch of 1,000 takes 50-70 ms
// there). Every replica sweeps; a row another replica is deleting is skipped, not waited for.
export interface OutboxRetentionOptions {
  db: Db;
  log: FastifyBaseLogger;
  retentionDays: number;
  intervalMs?: number;
  batch?: number;
}

const SWEEP_INTERVAL_MS = 5 * 60 * 1000;
const SWEEP_BATCH = 1000;

export function startOutboxRetention(options: OutboxRetentionOptions): PeriodicSweep {
  const { db, log, retentionDays, intervalMs = SWEEP_INTERVAL_MS, batch = SWEEP_BATCH } = options;
  return startPeriodicSweep({
    intervalMs,
    async run(stopping) {
      const deleted = await inBatches(batch, (limit) => deleteSettledEvents(db, retentionDays, limit), stopping);
      if (deleted > 0) log.info({ deleted, retentionDays }, 'outbox events past their retention deleted');
    },
    // Nothing is lost by a sweep that fails: the next one deletes what this one did not.
    onError: (error) => log.warn({ err: loggableError(error) }, 'outbox retention sweep failed; the next ones try again'),
    onRecovered: () => log.info('outbox retention sweep succeeded again'),
  });
}
