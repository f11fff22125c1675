// The connection table says which replica holds which station; a write that fails must not leave
// it saying so for good (the replica's lease keeps being renewed, so the lease never settles it).
// Two mechanisms, for two kinds of loss:
// - A disconnect whose release failed is tried again (releaseRetryDelayMs: 0.5 s, doubling, at
//   most 5 s) until it lands or a newer claim of the station makes it moot. This is what keeps
//   `connected` false within 5 s of a disconnect: with the default lease (30 s) the renewal below
//   comes only every 10 s.
// - Each lease renewal reconciles: rows naming this replica that no open claim of it stands
//   behind are released in one statement. The backstop for what no retry knows of, such as a
//   claim that committed but whose answer was lost (the station was refused and never opened a
//   socket, so no disconnect follows).
import type { FastifyBaseLogger } from 'fastify';
import type { Db } from '../db/database.js';
import { loggableError } from '../db/failures.js';
import { stationEvents } from './station-events.js';
import { releaseRetryDelayMs } from './station-rules.js';
import { reattachStations } from './replicas-repository.js';
import { releaseUnheldStations, type StationRelease } from './stations-repository.js';

export interface ConnectionHealingOptions {
  db: Db;
  log: FastifyBaseLogger;
  replicaId: string;
  // The batched release statement.
  release(item: StationRelease): Promise<void>;
  // The stations' share of the database pool.
  schedule<T>(task: () => Promise<T>): Promise<T>;
}

export interface ConnectionHealing {
  // Runs a claim statement for `ids`: what it claimed is this replica's until released.
  claim(ids: string[], run: () => Promise<number[]>): Promise<number[]>;
  // The TCP connection of a claim closed: its row is released, retried until it lands.
  release(item: StationRelease): void;
  // `before`: the database's time of a statement that completed before this call.
  reconcile(before: string): Promise<void>;
  // The lease had run out: the rows another replica released meanwhile, at the epochs still held
  // here, are this replica's again.
  reattach(): Promise<void>;
  close(): void;
}

interface Retry {
  item: StationRelease;
  failures: number;
  timer?: NodeJS.Timeout;
}

// Stale rows named in one log line, at most.
const LOGGED_IDS = 20;

export function createConnectionHealing(options: ConnectionHealingOptions): ConnectionHealing {
  const { log } = options;
  // Claims of this replica whose TCP connections are still open (the socket may not be open
  // yet), at the latest epoch claimed: a row at that epoch is not stale.
  const open = new Map<string, number>();
  // Stations whose claim statement is running: its epoch is not known yet.
  const claiming = new Map<string, number>();
  // The latest release of each station not yet written: one per station at most.
  const retries = new Map<string, Retry>();
  let closed = false;

  function newerClaimed(item: StationRelease): boolean {
    return (open.get(item.assetId) ?? 0) > item.epoch;
  }

  function attempt(retry: Retry): void {
    const { item } = retry;
    options.release(item).then(
      () => {
        if (retries.get(item.assetId) === retry) retries.delete(item.assetId);
        if (retry.failures > 0) log.debug({ station: item.assetId, failures: retry.failures }, 'station disconnect recorded after a retry');
      },
      (error: unknown) => {
        // Replaced by a newer release of the station, or moot: a newer claim raised the epoch.
        if (closed || retries.get(item.assetId) !== retry) return;
        if (newerClaimed(item)) {
          retries.delete(item.assetId);
          return;
        }
        retry.failures++;
        const fields = { station: item.assetId, failures: retry.failures, err: loggableError(error) };
        if (retry.failures === 1) log.warn(fields, 'could not record a station disconnect; retrying');
        else log.debug(fields, 'could not record a station disconnect; retrying');
        retry.timer = setTimeout(() => attempt(retry), releaseRetryDelayMs(retry.failures));
        retry.timer.unref();
      },
    );
  }

  return {
    async claim(ids, run) {
      for (const id of ids) claiming.set(id, (claiming.get(id) ?? 0) + 1);
      try {
        const epochs = await run();
        // The batcher refuses a short answer: none of these logins goes on, so none is recorded.
        if (epochs.length !== ids.length) return epochs;
        ids.forEach((id, i) => {
          const epoch = epochs[i]!;
          if ((open.get(id) ?? 0) < epoch) open.set(id, epoch);
          const retry = retries.get(id);
          if (retry && retry.item.epoch < epoch) {
            // The claim moved the row past the release's epoch: it could match nothing now.
            clearTimeout(retry.timer);
            retries.delete(id);
          }
        });
        return epochs;
      } finally {
        for (const id of ids) {
          const n = claiming.get(id)! - 1;
          if (n === 0) claiming.delete(id);
          else claiming.set(id, n);
        }
      }
    },

    release(item) {
      if (closed) return;
      if (open.get(item.assetId) === item.epoch) open.delete(item.assetId);
      // The row is already past this epoch (epochs only grow): nothing to write.
      if (newerClaimed(item)) return;
      const queued = retries.get(item.assetId);
      if (queued && queued.item.epoch > item.epoch) return;
      if (queued) clearTimeout(queued.timer);
      const retry: Retry = { item, failures: 0 };
      retries.set(item.assetId, retry);
      attempt(retry);
    },

    async reconcile(before) {
      if (closed) return;
      // Both read together, after `before` was given: a claim in neither was sent after this read,
      // so it commits after `before` and the statement leaves its row alone.
      const held = [...open].map(([assetId, epoch]) => ({ assetId, epoch }));
      const running = [...claiming.keys()];
      const stale = await options.schedule(() => releaseUnheldStations(options.db, options.replicaId, before, held, running, stationEvents));
      if (stale.length > 0) {
        log.warn({ count: stale.length, stations: stale.slice(0, LOGGED_IDS) }, 'released stations recorded connected here without a connection');
      }
    },

    async reattach() {
      if (closed || open.size === 0) return;
      const held = [...open].map(([assetId, epoch]) => ({ assetId, epoch }));
      const back = await options.schedule(() => reattachStations(options.db, options.replicaId, held, stationEvents));
      if (back > 0) log.warn({ count: back }, 'this replica’s lease had run out; its stations are recorded connected here again');
    },

    close() {
      closed = true;
      for (const retry of retries.values()) clearTimeout(retry.timer);
      retries.clear();
      open.clear();
      claiming.clear();
    },
  };
}
