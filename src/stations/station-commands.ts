// The password command, wherever the station is connected: on a socket this replica holds, or
// through the command bus to the replica the connection table names (command-bus.ts). With the
// connection views, this is the station side asset management asks for (its StationLink).
import type { FastifyBaseLogger } from 'fastify';
import type { PasswordCommand, StationAnswer, StationLink } from '../asset-management/station-credentials-service.js';
import { sql, type Db } from '../db/database.js';
import { loggableError } from '../db/failures.js';
import { createInProcessBus, createPgCommandBus, type CommandBus } from './command-bus.js';
import { OcppCallError } from './ocpp/ocpp-adapter.js';
import { codecOf } from './ocpp/ocpp-codec.js';
import type { ReplicaKeys } from './sealed-box.js';
import type { SocketRegistry } from './socket-registry.js';
import { stationConnected } from './station-presence.js';
import { findStationHolder } from './replicas-repository.js';

export interface StationCommandsOptions {
  db: Db;
  log: FastifyBaseLogger;
  replicaId: string;
  keys: ReplicaKeys;
  registry: SocketRegistry;
  // PostgreSQL: commands for stations on other replicas go through LISTEN/NOTIFY on a connection
  // of its own. Unset (PGlite): one process, commands are function calls.
  connectionString?: string | undefined;
}

export interface StationCommands extends Omit<StationLink, 'views'> {
  readonly bus: CommandBus;
}

export function createStationCommands(options: StationCommandsOptions): StationCommands {
  const { db, log, replicaId, registry } = options;
  const holdsHere = (assetId: string) => registry.has(assetId);

  // The password command on a socket this replica holds. Never sent past its deadline.
  async function executeLocally(command: PasswordCommand): Promise<StationAnswer> {
    const entry = registry.get(command.assetId);
    const codec = codecOf(entry?.socket.protocol);
    const ms = command.deadline - Date.now();
    if (!entry || !codec || ms <= 0) return { kind: 'notSent' };
    const call = codec.passwordCall(command.password);
    try {
      return { kind: 'status', status: codec.readPasswordAnswer(await entry.socket.call(call.method, call.params, ms)) };
    } catch (error) {
      if (error instanceof OcppCallError && error.code === 'Timeout') return { kind: 'timeout' };
      if (error instanceof OcppCallError && error.code !== 'Disconnected') return { kind: 'callError', code: error.code };
      return { kind: 'dropped' };
    }
  }

  const bus: CommandBus = options.connectionString
    ? createPgCommandBus({
        connectionString: options.connectionString,
        replicaId,
        keys: options.keys,
        execute: executeLocally,
        holds: holdsHere,
        notify: async (channel, payload) => {
          await db.execute(sql`select pg_notify(${channel}, ${payload})`);
        },
        log,
      })
    : createInProcessBus(replicaId, executeLocally, holdsHere);

  return {
    bus,
    async sendPasswordChange(command) {
      if (holdsHere(command.assetId)) return executeLocally(command);
      const holder = await findStationHolder(db, command.assetId).catch((error: unknown) => {
        log.warn({ station: command.assetId, err: loggableError(error) }, 'could not find the replica holding a station');
        return undefined;
      });
      if (!holder || holder.replicaId === replicaId) return { kind: 'notSent' };
      return bus.send(holder, command);
    },
    isConnected: (assetId, deadline) => stationConnected({ db, replicaId, bus, holdsHere }, assetId, deadline),
  };
}
