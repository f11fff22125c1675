import type { FastifyBaseLogger } from 'fastify';
import type { Db } from '../db/database.js';
import { loggableError } from '../db/failures.js';
import { startPeriodicSweep, type PeriodicSweep } from '../kernel/periodic-sweep.js';
import { settleAbandonedRotations } from './password-rotation-service.js';

// Every replica records, every `intervalMs`, the password changes whose waiting replica died: an
// IN_FLIGHT change well past its deadline becomes UNCONFIRMED in its audit row, with its
// `asset.password.changed` event (docs/rotation.md, "A change whose replica died"), so that
// operators learn of it without a login of the station. Batches of `batch`, each one transaction,
// the next at once while one is full.
export const ABANDONED_SWEEP_INTERVAL_MS = 5_000;
const SWEEP_BATCH = 100;

export function startAbandonedRotationsSweep(options: { db: Db; log: FastifyBaseLogger; intervalMs?: number; batch?: number }): PeriodicSweep {
  const { db, log, intervalMs = ABANDONED_SWEEP_INTERVAL_MS, batch = SWEEP_BATCH } = options;
  return startPeriodicSweep({
    intervalMs,
    async run(stopping) {
      for (let full = true; full && !stopping(); ) {
        const recorded = await settleAbandonedRotations(db, batch);
        if (recorded > 0) log.warn({ recorded }, 'password changes whose waiting replica died recorded as UNCONFIRMED');
        full = recorded === batch;
      }
    },
    // The next sweep finds them again: their rows say IN_FLIGHT until one is recorded.
    onError: (error) => log.warn({ err: loggableError(error) }, 'could not record abandoned password changes; the sweep tries again every interval'),
    onRecovered: () => log.info('password changes whose waiting replica died are looked for again'),
  });
}
