// A station's login, decided before the WebSocket upgrade, once the address throttle has let it
// in: the asset's security profile, its credential (asset management checks it), and the claim that makes this
// replica the station's holder until the TCP connection closes.
import type { TLSSocket } from 'node:tls';
import type { FastifyBaseLogger } from 'fastify';
import { checkStationCredential } from '../asset-management/station-credentials-service.js';
import type { Db } from '../db/database.js';
import { subprotocolOf, type SecurityProfile } from '../kernel/ocpp-vocabulary.js';
import type { ConnectionHealing } from './connection-healing.js';
import type { LoginGate } from './login-gate.js';
import { loginAddress } from './login-throttle.js';
import type { UpgradeDecision, UpgradeRequest } from './ocpp/ocpp-adapter.js';
import type { SocketRegistry, StationSession } from './socket-registry.js';
import { forwardedOverTls, profileProblem } from './station-rules.js';
import type { StationStatements } from './station-statements.js';

export interface StationLoginOptions {
  db: Db;
  log: FastifyBaseLogger;
  replicaId: string;
  minSecurityProfile: SecurityProfile;
  trustProxy: boolean;
  gate: LoginGate;
  statements: StationStatements;
  registry: SocketRegistry;
  healing: ConnectionHealing;
  // The replica is shutting down: no new login, and no release of its own (its end releases all).
  closing(): boolean;
  // A station tried the password its latest rotation replaced (counted in /metrics).
  onReplacedLogin?: (() => void) | undefined;
}

type Decision = UpgradeDecision<StationSession>;

export function createStationLogin(options: StationLoginOptions): (upgrade: UpgradeRequest) => Promise<Decision> {
  const { db, log, gate, statements, registry, healing, replicaId } = options;

  function refuse(identity: string, status: 401 | 404 | 503, reason: string, retryAfterSeconds?: number): Decision {
    // The station learns the status only; the log says why, never with the password.
    log.info({ station: identity, status, reason }, 'station login refused');
    return { accept: false, status, ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }) };
  }

  // Whatever ends the claim's TCP connection, before or after its socket opened.
  function released(identity: string, epoch: number, claimedAt: number): void {
    const lastSeenAt = registry.release(identity, epoch) ?? claimedAt;
    // Shutting down: one statement releases every station of the replica.
    if (options.closing()) return;
    healing.release({ assetId: identity, epoch, lastSeenAt: new Date(lastSeenAt) });
  }

  return async function authenticate(upgrade) {
    const { identity, request, credentials } = upgrade;
    if (options.closing()) return refuse(identity, 503, 'shutting down');
    // The address throttle has let it in already (station-connections.ts, before the handshake).
    const address = loginAddress(request, options.trustProxy);
    const refused = (status: 401 | 404, reason: string) => {
      gate.refused(address);
      return refuse(identity, status, reason);
    };
    // Before any hash: an unknown identity costs one indexed read and nothing else.
    const asset = await statements.readLogin(identity);
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
    if (matched === 'abandoned') return refuse(identity, 401, 'hung up before its password was checked');
    // A wrong password counts even when the station hung up while it was checked: otherwise an
    // address that hangs up once its hash has started gets hashes without end, never throttled.
    if (matched === 'replaced') return refused(401, 'password replaced by the latest rotation');
    if (matched === null) return refused(401, 'wrong password');
    if (hungUp()) return refuse(identity, 401, 'hung up before the login completed');
    if (matched !== 'active' && matched !== 'pending') {
      const answer = gate.deferred(matched, address);
      return refuse(identity, answer.status, answer.reason, answer.retryAfterSeconds);
    }
    const protocol = subprotocolOf(asset.ocppVersion);
    if (!upgrade.offeredProtocols.has(protocol)) {
      log.info({ station: identity, protocol }, 'station did not offer its subprotocol; closing');
      return { accept: true, protocol, session: { epoch: null } };
    }
    if (options.closing()) return refuse(identity, 503, 'shutting down');
    const epoch = await statements.claim({ assetId: identity, replicaId, network: asset.network, protocol });
    const claimedAt = Date.now();
    // Released once whatever ends the connection; the epoch keeps it from releasing a newer
    // connection's claim.
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
  };
}
