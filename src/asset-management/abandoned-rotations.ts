import type { FastifyBaseLogger } from 'fastify';
import type { Db } from '../db/database.js';
import { loggableError } from '../db/failures.js';
import { inBatches, startPeriodicSweep, type PeriodicSweep } from '../kernel/periodic-sweep.js';
import { settleAbandonedRotations } from './password-rotation-service.js';

// Every replica records, every `intervalMs`, the password changes whose waiting replica died: an
// IN_FLIGHT change well past its deadline becomes UNCONFIRMED in its audit row, with its
// `asset.password.changed` event (docs/rotation.md, "A change whose replica died"), so that
// operators learn of it without a login of the station.
export const ABANDONED_SWEEP_INTERVAL_MS = 5_000;
// A batch is one transaction holding its rows' locks (a login that resolves one of them waits for
// it) and, on PGlite, the process's one connection and its thread: about 3.5 ms a change on the
// 2-core machine, so a batch of 20 holds them some 70 ms.
const SWEEP_BATCH = 20;

// Every abandoned change there is, SWEEP_BATCH (or `batch`) a transaction; `onRecorded` hears of
// each batch once committed (a later batch may fail). Returns how many were recorded.
export function recordAbandonedRotations(
  db: Db,
  options: { batch?: number; stopping?: () => boolean; onRecorded?: (count: number) => void } = {},
): Promise<number> {
  return inBatches(
    options.batch ?? SWEEP_BATCH,
    async (limit) => {
      const recorded = await settleAbandonedRotations(db, limit);
      if (recorded > 0) options.onRecorded?.(recorded);
      return recorded;
    },
    options.stopping,
  );
}

export function startAbandonedRotationsSweep(options: { db: Db; log: FastifyBaseLogger; intervalMs?: number }): PeriodicSweep {
  const { db, log, intervalMs = ABANDONED_SWEEP_INTERVAL_MS } = options;
  return startPeriodicSweep({
    intervalMs,
    async run(stopping) {
      await recordAbandonedRotations(db, { stopping, onRecorded: (recorded) => log.warn({ recorded }, 'password changes whose waiting replica died recorded as UNCONFIRMED') });
    },
    // The next sweep finds them again: their rows say IN_FLIGHT until one is recorded.
    onError: (error) => log.warn({ err: loggableError(error) }, 'could not record abandoned password changes; the sweep tries again every interval'),
    onRecovered: () => log.info('password changes whose waiting replica died are looked for again'),
  });
}
