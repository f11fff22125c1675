// The stations connected to this replica: login before the upgrade, the handled OCPP actions, and
// the connection table kept in PostgreSQL (which replica holds which station, with a lease).
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { FastifyBaseLogger } from 'fastify';
import pLimit from 'p-limit';
import { loggableError, sql, type Db } from '../db/database.js';
import { newId } from '../ids.js';
import { ID_PATTERN } from '../asset-management/asset-management-schemas.js';
import type { StationCommandPort } from '../asset-management/password-rotation-service.js';
import type { StationAnswer } from '../asset-management/rotation.js';
import { createInProcessBus, createPgCommandBus, type CommandBus, type PasswordCommand } from './command-bus.js';
import { makeReplicaKeys } from './sealed-box.js';
import { OcppCallError, createOcppEndpoint, type OcppProtocol, type StationSocket, type UpgradeDecision, type UpgradeRequest } from './ocpp-adapter.js';
import { forwardedOverTls, ocppIdentity, passwordCommandStatus, profileProblem, stationTimings, storableText as text, type SecurityProfile } from './station-rules.js';
import { checkStationCredential } from './station-credential.js';
import { createLoginGate, type LoginLimits } from './login-gate.js';
import { loginAddress } from './login-throttle.js';
import { createBatcher } from '../batching.js';
import { MAX_CONNECTOR_STATUSES } from './station-bounds.js';
import { createConnectionHealing } from './connection-healing.js';
import { stationConnected } from './station-presence.js';
import { askToReconnect } from './station-drain.js';
import {
  claimStations,
  deleteStaleReplicas,
  endReplica,
  findStationHolder,
  findStationLogins,
  recordBoots,
  recordConnectorStatuses,
  releaseStations,
  renewReplicaLease,
  deleteStationTakeovers,
  findStationTakeovers,
  touchStations,
  type StationBoot,
  type StationClaim,
  type StationConnectorStatus,
  type StationRelease,
} from './stations-repository.js';

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
  // PostgreSQL: commands for stations on other replicas go through LISTEN/NOTIFY on a connection
  // of its own. Unset (PGlite): one process, commands are function calls.
  connectionString?: string | undefined;
  // A station tried the password its latest rotation replaced (counted in /metrics).
  onReplacedLogin?: () => void;
  // A login refused with 429 by the address throttle, and one refused with 503 because no slow
  // hash was free within the wait bound (counted in /metrics).
  onLoginThrottled?: () => void;
  onLoginHashTimeout?: () => void;
  // The login throttle's and queue's numbers (login-gate.ts); tests change them.
  loginLimits?: Partial<LoginLimits> | undefined;
}

interface Session {
  // null: the station did not offer its version's subprotocol, so it was never claimed.
  epoch: number | null;
}

// Kept small: thousands of these are held per process.
interface Held {
  socket: StationSocket<Session>;
  epoch: number;
  lastSeenAt: number;
  // The lastSeenAt last written, and when this station's next write may go (writeSeen).
  flushedAt: number;
  flushDueAt: number;
}

const PROTOCOL: Record<'1.6' | '2.0.1', OcppProtocol> = { '1.6': 'ocpp1.6', '2.0.1': 'ocpp2.0.1' };

export class StationNotConnectedError extends Error {}

export interface StationConnections extends StationCommandPort {
  readonly replicaId: string;
  start(): Promise<void>;
  handleUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void;
  // Sends a command to a station connected to this replica.
  call(identity: string, method: string, params: unknown, timeoutMs: number): Promise<unknown>;
  isHeld(identity: string): boolean;
  // Logins waiting for a slow password hash, and those hashing now.
  readonly loginQueue: { readonly waiting: number; readonly running: number };
  // Asks every station connected here to reconnect (a stop after the drain); resolves once their
  // sockets closed, or after waitMs. How many were asked.
  moveStations(waitMs: number): Promise<number>;
  close(): Promise<void>;
}

// How many of the stations' statements (login, claim, boot, connector status, release) may be in
// the database pool at once: half of it. The pool hands out connections in arrival order, so in a
// reconnect storm the API's queries waited behind thousands of the stations': the 100-ID list's
// p99 went to 5x its figure without a storm. Bounded, the stations queue here and the API always
// has the other half of the pool.
export function stationStatementLimit(poolMax: number): number {
  return Math.max(1, Math.floor(poolMax / 2));
}

// Most stations one statement takes: its arrays stay well under PostgreSQL's limits and a batch
// runs in milliseconds.
const STATION_BATCH_MAX = 500;

export function createStationConnections(options: StationConnectionsOptions): StationConnections {
  const { db, log } = options;
  const statementTurn = pLimit(stationStatementLimit(options.databasePoolMax));
  const batched = <I, O>(run: (items: I[]) => Promise<O[]>, key?: (item: I) => string) =>
    createBatcher<I, O>({ maxSize: STATION_BATCH_MAX, run, key, schedule: statementTurn });
  const forEach = <I>(write: (items: I[]) => Promise<void>) => async (items: I[]) => {
    await write(items);
    return items.map(() => undefined);
  };
  const byAsset = (item: { assetId: string }) => item.assetId;
  const logins = batched((ids: string[]) => findStationLogins(db, ids));
  const claims = batched((items: StationClaim[]) => healing.claim(items.map(byAsset), () => claimStations(db, items)), byAsset);
  const boots = batched(forEach((items: StationBoot[]) => recordBoots(db, items)), byAsset);
  const statuses = batched((items: StationConnectorStatus[]) => recordConnectorStatuses(db, items, MAX_CONNECTOR_STATUSES), byAsset);
  const releases = batched(forEach((items: StationRelease[]) => releaseStations(db, items)), byAsset);
  // Made at start, in memory only: replicas sharing a DATA_DIR must not share it.
  const replicaId = newId('rep');
  const healing = createConnectionHealing({ db, log, replicaId, release: (item) => releases.push(item), schedule: statementTurn });
  // The private half never leaves this process: a password sealed to it is readable here only.
  const keys = makeReplicaKeys();
  const bus: CommandBus = options.connectionString
    ? createPgCommandBus({
        connectionString: options.connectionString,
        replicaId,
        keys,
        execute: executeLocally,
        holds: (assetId) => held.has(assetId),
        notify: async (channel, payload) => {
          await db.execute(sql`select pg_notify(${channel}, ${payload})`);
        },
        log,
      })
    : createInProcessBus(replicaId, executeLocally, (assetId) => held.has(assetId));
  const held = new Map<string, Held>();
  // Takeover notices (tick) for stations claimed here whose sockets had not opened yet, kept until
  // the next tick: the socket opens milliseconds after its claim.
  const superseded = new Map<string, number>();
  let closing = false;
  const { renewMs, seenWriteMs, seenFlushMs } = stationTimings(options.leaseSeconds);

  const gate = createLoginGate(options.loginLimits, { onThrottled: options.onLoginThrottled, onHashTimeout: options.onLoginHashTimeout });

  function refuse(identity: string, status: 401 | 404 | 429 | 503, reason: string, retryAfterSeconds?: number): UpgradeDecision<Session> {
    // The station learns the status only; the log says why, never with the password.
    log.info({ station: identity, status, reason }, 'station login refused');
    return { accept: false, status, ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }) };
  }

  async function authenticate(upgrade: UpgradeRequest): Promise<UpgradeDecision<Session>> {
    const { identity, request, credentials } = upgrade;
    if (closing) return refuse(identity, 503, 'shutting down');
    // Before the database and any hash: an address with too many refused logins waits.
    const address = loginAddress(request, options.trustProxy);
    const throttled = gate.admit(address);
    if (throttled) return refuse(identity, throttled.status, throttled.reason, throttled.retryAfterSeconds);
    const refused = (status: 401 | 404, reason: string) => {
      gate.refused(address);
      return refuse(identity, status, reason);
    };
    // Before any hash: an unknown identity costs one indexed read and nothing else.
    const asset = await logins.push(identity);
    if (!asset) return refused(404, 'unknown identity');
    const overTls = (request.socket as TLSSocket).encrypted === true || (options.trustProxy && forwardedOverTls(request.headers));
    const problem = profileProblem(asset.securityProfile, options.minSecurityProfile, overTls);
    if (problem) return refused(401, problem);
    if (credentials.kind === 'none') return refused(401, 'no credentials');
    if (credentials.kind === 'malformed') return refused(401, 'malformed Authorization header');
    if (credentials.kind === 'other-user') return refused(401, 'username is not the identity');
    if (asset.passwordHash === null) return refused(401, 'asset has no password');
    // At most one slow hash, waiting its turn in the fair queue for a bounded time;
    // none for a station that hung up before its turn.
    const hungUp = () => request.socket.destroyed;
    const context = { log, onReplacedLogin: options.onReplacedLogin, abandoned: hungUp, address, hashQueue: gate.hashQueue, memory: gate.memory };
    const matched = await checkStationCredential(db, asset, credentials.password, context);
    if (hungUp() || matched === 'abandoned') return refuse(identity, 401, 'hung up before the login completed');
    if (matched === 'replaced') return refused(401, 'password replaced by the latest rotation');
    if (matched === null) return refused(401, 'wrong password');
    if (matched !== 'active' && matched !== 'pending') {
      const answer = gate.deferred(matched, address);
      return refuse(identity, answer.status, answer.reason, answer.retryAfterSeconds);
    }
    const protocol = PROTOCOL[asset.ocppVersion];
    if (!upgrade.offeredProtocols.has(protocol)) {
      log.info({ station: identity, protocol }, 'station did not offer its subprotocol; closing');
      return { accept: true, protocol, session: { epoch: null } };
    }
    if (closing) return refuse(identity, 503, 'shutting down');
    const epoch = await claims.push({ assetId: identity, replicaId, protocol });
    const claimedAt = Date.now();
    // Whatever ends this TCP connection, before or after the WebSocket opened, releases the claim
    // once; the epoch keeps it from releasing a newer connection's.
    let done = false;
    const release = () => {
      if (done) return;
      done = true;
      released(identity, epoch, claimedAt);
    };
    request.socket.once('close', release);
    // The station may have hung up while its password was checked or the claim written.
    if (request.socket.destroyed) release();
    return { accept: true, protocol, session: { epoch } };
  }

  function released(identity: string, epoch: number, claimedAt: number): void {
    const entry = held.get(identity);
    const lastSeenAt = entry?.epoch === epoch ? entry.lastSeenAt : claimedAt;
    if (entry?.epoch === epoch) held.delete(identity);
    if (entry && entry.epoch < epoch) {
      // A newer login of the station claimed it here and hung up before its socket opened: the
      // row no longer names the older socket, and no other replica will send a notice for it.
      replaceHeld(identity, entry);
    }
    // Shutting down: one statement releases every station of the replica (close()).
    if (closing) return;
    healing.release({ assetId: identity, epoch, lastSeenAt: new Date(lastSeenAt) });
  }

  function onConnection(socket: StationSocket<Session>): void {
    const { identity } = socket;
    const epoch = socket.session.epoch;
    if (epoch === null || socket.protocol === undefined) {
      socket.close(1002, 'No acceptable subprotocol');
      return;
    }
    const previous = held.get(identity);
    if ((previous && previous.epoch > epoch) || (superseded.get(identity) ?? 0) > epoch) {
      // Two logins raced and this one claimed first: the other, here or elsewhere, is the newest.
      socket.close(1000, 'Replaced by a newer connection');
      return;
    }
    if (previous) {
      log.info({ station: identity }, 'station reconnected; closing its older socket');
      previous.socket.close(1000, 'Replaced by a newer connection');
    }
    const now = Date.now();
    // The first write falls anywhere in the interval: stations that connected together (a storm)
    // do not all come due in the same second ever after.
    const entry: Held = { socket, epoch, lastSeenAt: now, flushedAt: now, flushDueAt: now + Math.random() * seenWriteMs };
    held.set(identity, entry);
    socket.onActivity(() => {
      entry.lastSeenAt = Date.now();
    });
    registerHandlers(socket, epoch);
    log.info({ station: identity, protocol: socket.protocol }, 'station connected');
  }

  function registerHandlers(socket: StationSocket<Session>, epoch: number): void {
    const assetId = socket.identity;
    const v16 = socket.protocol === 'ocpp1.6';
    socket.handle('BootNotification', async (params) => {
      const p = params as Record<string, unknown>;
      const station = (v16 ? p : (p.chargingStation ?? {})) as Record<string, unknown>;
      // Stored before the answer goes out, so a read right after the answer shows it.
      await boots.push({
        assetId,
        epoch,
        vendor: text(v16 ? station.chargePointVendor : station.vendorName),
        model: text(v16 ? station.chargePointModel : station.model),
        serialNumber: text(v16 ? (station.chargePointSerialNumber ?? station.chargeBoxSerialNumber) : station.serialNumber),
        firmwareVersion: text(station.firmwareVersion),
      });
      return { status: 'Accepted', currentTime: new Date().toISOString(), interval: options.heartbeatIntervalSeconds };
    });
    socket.handle('Heartbeat', () => ({ currentTime: new Date().toISOString() }));
    socket.handle('StatusNotification', async (params) => {
      const p = params as Record<string, unknown>;
      const receivedAt = new Date().toISOString();
      const status = v16
        ? { status: String(text(p.status)), errorCode: String(text(p.errorCode)), ...(typeof p.timestamp === 'string' ? { timestamp: text(p.timestamp)! } : {}), receivedAt }
        : { status: String(text(p.connectorStatus)), timestamp: String(text(p.timestamp)), receivedAt };
      const key = v16 ? String(p.connectorId) : `${String(p.evseId)}/${String(p.connectorId)}`;
      if ((await statuses.push({ assetId, epoch, key, status })) === 'full') {
        // The station is answered as usual: it cannot do anything about it, an operator can.
        log.warn({ station: assetId, connector: key }, `connector status not stored: the station has ${MAX_CONNECTOR_STATUSES} connectors stored already`);
      }
      return {};
    });
  }

  const endpoint = createOcppEndpoint<Session>({
    pingIntervalMs: options.pingIntervalSeconds * 1000,
    authenticate,
    onConnection,
    onProtocolProblem: (identity, problem) => log.debug({ station: identity, problem }, 'station protocol problem'),
    onBoundCrossed: (identity, reason) => log.warn({ station: identity, reason }, 'station closed: it crossed a per-station bound'),
    onUpgradeRefused: (identity, status, reason) => log.info({ station: identity, status, reason }, 'station login refused'),
    onError: (error) => log.warn({ err: loggableError(error) }, 'station endpoint error'),
  });

  // The password command on a socket this replica holds. Never sent past its deadline.
  async function executeLocally(command: PasswordCommand): Promise<StationAnswer> {
    const entry = held.get(command.assetId);
    const ms = command.deadline - Date.now();
    if (!entry || ms <= 0) return { kind: 'notSent' };
    const v16 = entry.socket.protocol === 'ocpp1.6';
    try {
      const result = await (v16
        ? entry.socket.call('ChangeConfiguration', { key: 'AuthorizationKey', value: command.password.toLowerCase() }, ms)
        : entry.socket.call(
            'SetVariables',
            { setVariableData: [{ component: { name: 'SecurityCtrlr' }, variable: { name: 'BasicAuthPassword' }, attributeValue: command.password }] },
            ms,
          ));
      return { kind: 'status', status: passwordCommandStatus(v16 ? 'ocpp1.6' : 'ocpp2.0.1', result) };
    } catch (error) {
      if (error instanceof OcppCallError && error.code === 'Timeout') return { kind: 'timeout' };
      if (error instanceof OcppCallError && error.code !== 'Disconnected') return { kind: 'callError', code: error.code };
      return { kind: 'dropped' };
    }
  }

  // Writes the lastSeenAt of the stations whose write is due (every one, when shutting down), a
  // statement per STATION_BATCH_MAX of them, on the stations' share of the pool.
  async function writeSeen(all: boolean): Promise<void> {
    const now = Date.now();
    const due: Array<{ assetId: string; epoch: number; lastSeenAt: Date; entry: Held }> = [];
    for (const [assetId, entry] of held) {
      if (entry.lastSeenAt > entry.flushedAt && (all || now >= entry.flushDueAt)) {
        due.push({ assetId, epoch: entry.epoch, lastSeenAt: new Date(entry.lastSeenAt), entry });
      }
    }
    for (let from = 0; from < due.length; from += STATION_BATCH_MAX) {
      const batch = due.slice(from, from + STATION_BATCH_MAX);
      await statementTurn(() => touchStations(db, batch));
      for (const { entry, lastSeenAt } of batch) {
        entry.flushedAt = lastSeenAt.getTime();
        entry.flushDueAt = now + seenWriteMs;
      }
    }
  }

  async function tick(): Promise<void> {
    const renewedAt = await renewReplicaLease(db, replicaId, options.leaseSeconds, keys.publicKey);
    // A newer connection on another replica took the station: the older socket goes. Deleted only
    // once acted on, so a notice whose answer was lost on the way is read again.
    const notices = await findStationTakeovers(db, replicaId);
    superseded.clear();
    for (const { assetId, epoch } of notices) {
      // Also for a station held here: a newer login of it may be between its claim and its open.
      superseded.set(assetId, epoch);
      const entry = held.get(assetId);
      if (entry && entry.epoch < epoch) {
        log.info({ station: assetId }, 'station connected elsewhere; closing its socket here');
        replaceHeld(assetId, entry);
      }
    }
    await deleteStationTakeovers(db, replicaId, notices);
    await healing.reconcile(renewedAt).catch((error: unknown) => log.warn({ err: loggableError(error) }, 'could not reconcile the stations recorded here; retrying'));
  }

  function replaceHeld(identity: string, entry: Held): void {
    held.delete(identity);
    entry.socket.close(1000, 'Replaced by a newer connection');
  }

  // Each loop waits for its previous turn to finish, and a failure waits for the next turn.
  // close() waits for a turn under way: a renewal after endReplica would bring the replica back.
  interface Loop {
    timer?: NodeJS.Timeout;
    running: Promise<void>;
  }
  const loops: Loop[] = [];
  function every(everyMs: number, run: () => Promise<void>, failure: string): void {
    const state: Loop = { running: Promise.resolve() };
    loops.push(state);
    const next = () => {
      if (closing) return;
      state.timer = setTimeout(() => {
        state.running = run()
          .catch((error: unknown) => log.warn({ err: loggableError(error) }, failure))
          .finally(next);
      }, everyMs);
      state.timer.unref();
    };
    next();
  }

  return {
    replicaId,
    async start() {
      await renewReplicaLease(db, replicaId, options.leaseSeconds, keys.publicKey);
      await bus.start();
      await deleteStaleReplicas(db).catch((error: unknown) => log.warn({ err: loggableError(error) }, 'could not delete stale replicas'));
      every(renewMs, tick, 'station lease renewal failed; retrying');
      every(seenFlushMs, () => writeSeen(false), 'could not record stations’ lastSeenAt; retrying');
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
      const entry = held.get(identity);
      if (!entry) throw new StationNotConnectedError(`station ${identity} is not connected to this replica`);
      return entry.socket.call(method, params, timeoutMs);
    },
    async sendPasswordChange(command) {
      if (held.has(command.assetId)) return executeLocally(command);
      const holder = await findStationHolder(db, command.assetId).catch((error: unknown) => {
        log.warn({ station: command.assetId, err: loggableError(error) }, 'could not find the replica holding a station');
        return undefined;
      });
      if (!holder || holder.replicaId === replicaId) return { kind: 'notSent' };
      return bus.send(holder, command);
    },
    isConnected: (assetId, deadline) => stationConnected({ db, replicaId, bus, holdsHere: (id) => held.has(id) }, assetId, deadline),
    isHeld: (identity) => held.has(identity),
    loginQueue: gate.hashQueue,
    moveStations: (waitMs) => askToReconnect([...held.values()].map((entry) => entry.socket), waitMs),
    async close() {
      if (closing) return;
      closing = true;
      // endReplica below releases every row of the replica at once.
      healing.close();
      for (const loop of loops) clearTimeout(loop.timer);
      await Promise.all(loops.map((loop) => loop.running));
      await bus.close();
      // What the last flush period heard, while the sockets still say which stations they are.
      await writeSeen(true).catch((error: unknown) => log.warn({ err: loggableError(error) }, 'could not record stations’ lastSeenAt'));
      await endpoint.close().catch((error: unknown) => log.warn({ err: loggableError(error) }, 'closing station sockets failed'));
      held.clear();
      // The other replicas read these stations disconnected at once, not when the lease runs out.
      await endReplica(db, replicaId).catch((error: unknown) =>
        log.warn({ err: loggableError(error) }, 'could not mark this replica’s stations disconnected; its lease will expire'),
      );
    },
  };
}

