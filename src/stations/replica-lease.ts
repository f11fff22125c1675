// This replica's lease on its stations and the loops that keep the connection table true: the
// renewal (every third of a lease), which also reads the takeover notices other replicas left
// and reconciles the rows naming this replica; and the write of what the held stations were last
// seen at (about once a second, each station at most once per seenWriteMs).
import type { FastifyBaseLogger } from 'fastify';
import type { Db } from '../db/database.js';
import { loggableError } from '../db/failures.js';
import type { ConnectionHealing } from './connection-healing.js';
import type { SocketRegistry } from './socket-registry.js';
import { stationTimings } from './station-rules.js';
import type { StationStatements } from './station-statements.js';
import { deleteStaleReplicas, deleteStationTakeovers, endReplica, findStationTakeovers, releaseLapsedReplicas, renewReplicaLease } from './replicas-repository.js';
import { stationEvents } from './station-events.js';

export interface ReplicaLeaseOptions {
  db: Db;
  log: FastifyBaseLogger;
  replicaId: string;
  leaseSeconds: number;
  // Other replicas seal the passwords of their commands to this key (command-bus.ts).
  publicKey: string;
  registry: SocketRegistry;
  statements: StationStatements;
  healing: ConnectionHealing;
  closing(): boolean;
}

export interface ReplicaLease {
  // The first lease, before anyone can be told this replica holds a station.
  renew(): Promise<void>;
  // Deletes what replicas long gone left behind, and starts the loops.
  startLoops(): Promise<void>;
  // Stops the loops, waiting for a turn under way: a renewal after end() would bring the replica back.
  stopLoops(): Promise<void>;
  // Writes what every held station was last seen at.
  writeAllSeen(): Promise<void>;
  // Every station of the replica reads disconnected at once, not when the lease runs out.
  end(): Promise<void>;
}

// Each loop waits for its previous turn to finish, and a failure waits for the next turn.
interface Loop {
  timer?: NodeJS.Timeout;
  running: Promise<void>;
}

export function createReplicaLease(options: ReplicaLeaseOptions): ReplicaLease {
  const { db, log, replicaId, registry, statements, healing } = options;
  const { renewMs, seenFlushMs } = stationTimings(options.leaseSeconds);
  const loops: Loop[] = [];
  let reattachDue = false;

  const renewLease = () => renewReplicaLease(db, replicaId, options.leaseSeconds, options.publicKey, stationEvents);

  // The rows of replicas whose lease ran out (killed, or cut off from the database) read
  // disconnected already: released, each with its event, by whichever replica comes first.
  const releaseLapsed = () =>
    releaseLapsedReplicas(db, stationEvents).catch((error: unknown) => log.warn({ err: loggableError(error) }, 'could not release the stations of lapsed replicas; retrying'));

  async function renewAndReconcile(): Promise<void> {
    // A lease that had run out: the renewal released the rows still naming this replica (or
    // another replica did), and the stations still held here are taken back.
    const { now: renewedAt, lapsed } = await renewLease();
    // Until it lands: the next renewal will not find the lease lapsed.
    if (lapsed) reattachDue = true;
    if (reattachDue) {
      await healing.reattach();
      reattachDue = false;
    }
    // A newer connection on another replica took the station: the older socket goes. Deleted only
    // once acted on, so a notice whose answer was lost on the way is read again.
    const notices = await findStationTakeovers(db, replicaId);
    registry.takenOver(notices);
    await deleteStationTakeovers(db, replicaId, notices);
    await releaseLapsed();
    await healing.reconcile(renewedAt).catch((error: unknown) => log.warn({ err: loggableError(error) }, 'could not reconcile the stations recorded here; retrying'));
  }

  // The stations whose write is due (every one, with `all`), on the stations' share of the pool.
  async function writeSeen(all: boolean): Promise<void> {
    const now = Date.now();
    await statements.writeSeen(registry.seenDue(now, all), (batch) => registry.seenWritten(batch, now));
  }

  function every(everyMs: number, run: () => Promise<void>, failure: string): void {
    const loop: Loop = { running: Promise.resolve() };
    loops.push(loop);
    const next = () => {
      if (options.closing()) return;
      loop.timer = setTimeout(() => {
        loop.running = run()
          .catch((error: unknown) => log.warn({ err: loggableError(error) }, failure))
          .finally(next);
      }, everyMs);
      loop.timer.unref();
    };
    next();
  }

  return {
    async renew() {
      await renewLease();
    },
    async startLoops() {
      await releaseLapsed();
      await deleteStaleReplicas(db).catch((error: unknown) => log.warn({ err: loggableError(error) }, 'could not delete stale replicas'));
      every(renewMs, renewAndReconcile, 'station lease renewal failed; retrying');
      every(seenFlushMs, () => writeSeen(false), 'could not record stations’ lastSeenAt; retrying');
    },
    async stopLoops() {
      for (const loop of loops) clearTimeout(loop.timer);
      await Promise.all(loops.map((loop) => loop.running));
    },
    writeAllSeen: () => writeSeen(true),
    end: () => endReplica(db, replicaId, stationEvents),
  };
}
