// The stations connected to this replica, put together from their parts: the login before the
// upgrade (station-login.ts), the sockets held (socket-registry.ts), the handled actions
// (station-messages.ts, read by each version's codec), the password command (station-commands.ts)
// and the lease on the connection table with its loops (replica-lease.ts). This is the station
// side asset management asks for (its StationLink).
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import { ID_PATTERN, type StationLink } from '../asset-management/station-credentials-service.js';
import type { Db } from '../db/database.js';
import { loggableError } from '../db/failures.js';
import { newId } from '../kernel/ids.js';
import type { SecurityProfile } from '../kernel/ocpp-vocabulary.js';
import { createConnectionHealing } from './connection-healing.js';
import { createLoginGate, type LoginLimits } from './login-gate.js';
import { loginAddress } from './login-throttle.js';
import { createOcppEndpoint } from './ocpp/ocpp-adapter.js';
import { codecOf } from './ocpp/ocpp-codec.js';
import { createReplicaLease } from './replica-lease.js';
import { makeReplicaKeys } from './sealed-box.js';
import { createSocketRegistry, type StationSession } from './socket-registry.js';
import { createStationCommands } from './station-commands.js';
import { askToReconnect } from './station-drain.js';
import { createStationLogin } from './station-login.js';
import { handleStationMessages } from './station-messages.js';
import { ocppIdentity, stationTimings } from './station-rules.js';
import { createStationStatements } from './station-statements.js';
import { stationViews } from './stations-service.js';

export interface StationConnectionsOptions {
  db: Db;
  log: FastifyBaseLogger;
  heartbeatIntervalSeconds: number;
  pingIntervalSeconds: number;
  leaseSeconds: number;
  minSecurityProfile: SecurityProfile;
  trustProxy: boolean;
  // The database pool's size: station statements may hold at most half of it (stationStatementLimit).
  databasePoolMax: number;
  // PostgreSQL: the command bus between replicas listens on a connection of its own (command-bus.ts).
  connectionString?: string | undefined;
  // A station tried the password its latest rotation replaced (counted in /metrics).
  onReplacedLogin?: () => void;
  // A login refused with 429 by the address throttle, and one refused with 503 because no slow
  // hash was free within the wait bound (counted in /metrics).
  onLoginThrottled?: () => void;
  onLoginHashTimeout?: () => void;
  // The login throttle's and queue's numbers (login-gate.ts); tests change them.
  loginLimits?: Partial<LoginLimits> | undefined;
  // The clock the throttle refills by (milliseconds); tests hold it still.
  loginClock?: (() => number) | undefined;
}

export class StationNotConnectedError extends Error {}

export interface StationConnections extends StationLink {
  readonly replicaId: string;
  start(): Promise<void>;
  handleUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void;
  // Sends a command to a station connected to this replica.
  call(identity: string, method: string, params: unknown, timeoutMs: number): Promise<unknown>;
  // Whether the station's socket is in this replica's registry.
  isConnectedHere(identity: string): boolean;
  // Logins waiting for a slow password hash, and those hashing now.
  readonly loginQueue: { readonly waiting: number; readonly running: number };
  // Asks every station connected here to reconnect (a stop after the drain); resolves once their
  // sockets closed, or after waitMs. How many were asked.
  moveStations(waitMs: number): Promise<number>;
  close(): Promise<void>;
}

export function createStationConnections(options: StationConnectionsOptions): StationConnections {
  const { db, log } = options;
  // Made at start, in memory only: replicas sharing a DATA_DIR must not share it.
  const replicaId = newId('rep');
  // The private half never leaves this process: a password sealed to it is readable here only.
  const keys = makeReplicaKeys();
  let closing = false;
  const isClosing = () => closing;
  const statements = createStationStatements(db, options.databasePoolMax, (ids, run) => healing.claim(ids, run));
  const healing = createConnectionHealing({ db, log, replicaId, release: statements.release, schedule: statements.inTurn });
  const registry = createSocketRegistry(log, stationTimings(options.leaseSeconds).seenWriteMs);
  const gate = createLoginGate(options.loginLimits, { onThrottled: options.onLoginThrottled, onHashTimeout: options.onLoginHashTimeout }, options.loginClock);
  const commands = createStationCommands({ db, log, replicaId, keys, registry, connectionString: options.connectionString });
  const lease = createReplicaLease({ db, log, replicaId, leaseSeconds: options.leaseSeconds, publicKey: keys.publicKey, registry, statements, healing, closing: isClosing });
  const messages = { log, statements, heartbeatIntervalSeconds: options.heartbeatIntervalSeconds };

  const endpoint = createOcppEndpoint<StationSession>({
    pingIntervalMs: options.pingIntervalSeconds * 1000,
    // Before the library reads the handshake, the database or any hash: an address with too many
    // refused logins waits.
    admit(identity, request) {
      const throttled = gate.admit(loginAddress(request, options.trustProxy));
      if (throttled) log.info({ station: identity, status: throttled.status, reason: throttled.reason }, 'station login refused');
      return throttled;
    },
    authenticate: createStationLogin({
      db,
      log,
      replicaId,
      minSecurityProfile: options.minSecurityProfile,
      trustProxy: options.trustProxy,
      onReplacedLogin: options.onReplacedLogin,
      gate,
      statements,
      registry,
      healing,
      closing: isClosing,
    }),
    onConnection(socket) {
      const { epoch } = socket.session;
      const codec = codecOf(socket.protocol);
      if (epoch === null || codec === undefined) {
        socket.close(1002, 'No acceptable subprotocol');
        return;
      }
      if (!registry.hold(socket, epoch)) return;
      handleStationMessages(socket, epoch, codec, messages);
      log.info({ station: socket.identity, protocol: socket.protocol }, 'station connected');
    },
    onProtocolProblem: (identity, problem) => log.debug({ station: identity, problem }, 'station protocol problem'),
    onBoundCrossed: (identity, reason) => log.warn({ station: identity, reason }, 'station closed: it crossed a per-station bound'),
    onUpgradeRefused: (identity, status, reason) => log.info({ station: identity, status, reason }, 'station login refused'),
    onError: (error) => log.warn({ err: loggableError(error) }, 'station endpoint error'),
  });

  return {
    replicaId,
    async start() {
      await lease.renew();
      await commands.bus.start();
      await lease.startLoops();
    },
    handleUpgrade(request, socket, head) {
      socket.on('error', () => undefined);
      const identity = ocppIdentity(request.url, ID_PATTERN);
      if (identity === null) {
        socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        socket.destroy();
        return;
      }
      endpoint.handleUpgrade(request, socket, head);
    },
    async call(identity, method, params, timeoutMs) {
      const entry = registry.get(identity);
      if (!entry) throw new StationNotConnectedError(`station ${identity} is not connected to this replica`);
      return entry.socket.call(method, params, timeoutMs);
    },
    views: (assetIds) => stationViews(db, assetIds),
    sendPasswordChange: (command) => commands.sendPasswordChange(command),
    isConnected: (assetId, deadline) => commands.isConnected(assetId, deadline),
    isConnectedHere: (identity) => registry.has(identity),
    loginQueue: gate.hashQueue,
    moveStations: (waitMs) => askToReconnect(registry.sockets(), waitMs),
    async close() {
      if (closing) return;
      closing = true;
      // lease.end() below releases every row of the replica at once.
      healing.close();
      await lease.stopLoops();
      await commands.bus.close();
      // What the last flush period heard, while the sockets still say which stations they are.
      await lease.writeAllSeen().catch((error: unknown) => log.warn({ err: loggableError(error) }, 'could not record stations’ lastSeenAt'));
      await endpoint.close().catch((error: unknown) => log.warn({ err: loggableError(error) }, 'closing station sockets failed'));
      registry.clear();
      await lease.end().catch((error: unknown) => log.warn({ err: loggableError(error) }, 'could not mark this replica’s stations disconnected; its lease will expire'));
    },
  };
}
