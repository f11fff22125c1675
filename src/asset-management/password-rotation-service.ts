// Changing an asset's password: stored at once while the station has never
// logged in, or by force; otherwise delivered to the station and switched only on its answer.
// Every change of the credential slots is a short row-locked transaction that decides with
// rotation.ts; none is open while the station is waited for.
import type { Principal } from '../auth/principal.js';
import type { Db } from '../db/database.js';
import { BadRequestError, ConflictError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { NetworkScope } from '../kernel/network-scope.js';
import { profileUsesClientCertificates } from '../kernel/ocpp-vocabulary.js';
import { claimRotation, dropPending, findAsset, lockAbandonedRotations, lockRotation, markUnconfirmed, promotePending, updateAssetPassword } from './assets-repository.js';
import { assetNotFound } from './assets-service.js';
import { isAbandoned, recordAbandoned, recordOutcome, recordPasswordChange, recordResolution } from './password-audit-service.js';
import { hashAssetPassword, type Argon2Params } from './password-hashing.js';
import { generatePassword, passwordProblem } from './password-rules.js';
import { answerOutcome, decideRequest, describeAnswer, effectiveState, stateAfterAnswer, type RotationState, type StationAnswer, type StationReach } from './rotation.js';
import { noPasswordOnProfile3 } from './security-profiles.js';
import type { PasswordCommand, StationLink } from './station-link.js';

export const STATION_OFFLINE = 'STATION_OFFLINE';
export const STATION_REJECTED = 'STATION_REJECTED';
export const PASSWORD_CHANGE_IN_PROGRESS = 'PASSWORD_CHANGE_IN_PROGRESS';

type Actor = NetworkScope & Pick<Principal, 'clientId'>;

export interface RotationDeps {
  passwordHashParams?: Argon2Params | undefined;
  stations: StationLink;
  // OCPP_CALL_TIMEOUT_SECONDS in milliseconds.
  callTimeoutMs?: number | undefined;
}

const DEFAULT_CALL_TIMEOUT_MS = 30_000;
// An IN_FLIGHT rotation reads as UNCONFIRMED this long after its caller stopped waiting, so that
// only a replica that died leaves it to the deadline.
const DEADLINE_GRACE_MS = 5_000;

export type PasswordChangeAnswer =
  | { status: 200; data: { id: string; passwordChangedAt: string; password?: string } }
  | { status: 202; data: { id: string; status: 'UNCONFIRMED'; password?: string } };

function inProgress(id: string): ConflictError {
  return new ConflictError(
    `A password change of asset ${id} is waiting for its station; it ends when the station answers or logs in again (force: true replaces it while the station is offline)`,
    PASSWORD_CHANGE_IN_PROGRESS,
  );
}

function offline(id: string): ConflictError {
  return new ConflictError(
    `The station of asset ${id} is not connected, so it cannot take the new password; nothing changed. Send force: true to store it anyway and configure the station by hand`,
    STATION_OFFLINE,
  );
}

// Where the station is, as the connection table says; when `ask` is given, a row saying connected
// is checked with the station side. A row can be stale (a release whose write was lost, a replica
// that died with its lease still running), and a forced change must go through for every station
// without an open socket, whatever its row says.
async function stationReach(stations: StationLink, assetId: string, ask?: () => Promise<boolean>): Promise<StationReach> {
  const station = (await stations.views([assetId])).get(assetId);
  if (!station) return 'never';
  if (!station.connected) return 'offline';
  return ask && !(await ask()) ? 'offline' : 'connected';
}

export async function changeAssetPassword(
  db: Db,
  deps: RotationDeps,
  actor: Actor,
  input: { id: string; password?: string | undefined; force?: boolean | undefined },
): Promise<PasswordChangeAnswer> {
  const asset = await findAsset(db, actor, input.id);
  if (!asset) throw assetNotFound(input.id);
  if (profileUsesClientCertificates(asset.securityProfile)) throw noPasswordOnProfile3(asset.id);
  const generated = input.password === undefined;
  let password: string;
  if (input.password === undefined) {
    password = generatePassword(asset.ocppVersion);
  } else {
    // The message states the rule and never echoes the password.
    const problem = passwordProblem(asset.ocppVersion, input.password);
    if (problem) throw new BadRequestError(problem, [{ code: 'custom', message: problem, path: ['password'] }]);
    password = input.password;
  }
  // A supplied password costs ~100 ms of scrypt (plus its turn in the hashing queue), done before
  // any transaction so no connection is held while it waits or runs.
  const passwordHash = await hashAssetPassword(asset.ocppVersion, password, { generated, passwordHashParams: deps.passwordHashParams });
  const force = input.force === true;
  const callTimeoutMs = deps.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  const reach = await stationReach(deps.stations, asset.id, force ? () => connectedBefore(deps.stations, asset.id, Date.now() + callTimeoutMs) : undefined);
  const rotationId = newId('apc');
  const shown = generated ? { password } : {};

  const claimed = await db.transaction(async (tx) => {
    const row = await lockRotation(tx, actor, asset.id);
    if (!row) throw assetNotFound(input.id);
    const decision = decideRequest({ reach, force, state: row.rotationState, deadlinePassed: row.deadlinePassed });
    if (decision.kind === 'refuse') throw decision.code === STATION_OFFLINE ? offline(asset.id) : inProgress(asset.id);
    const audit = { rotationId, assetId: asset.id, network: asset.network, actorClientId: actor.clientId, generated };
    if (decision.kind === 'store') {
      const replaced = row.rotationId ? { rotationId: row.rotationId, assetId: asset.id, network: asset.network } : null;
      if (replaced && isAbandoned(row)) await recordAbandoned(tx, replaced);
      const updated = await updateAssetPassword(tx, { id: asset.id, network: asset.network, passwordHash, rotationId, state: decision.outcome });
      if (!updated) throw assetNotFound(input.id);
      // A forced change ends the unconfirmed rotation it replaces.
      if (replaced && row.rotationState && effectiveState(row.rotationState, row.deadlinePassed) === 'UNCONFIRMED') {
        await recordResolution(tx, replaced, 'FORCED');
      }
      await recordPasswordChange(tx, { ...audit, changedAt: updated.passwordChangedAt, outcome: decision.outcome });
      return { stored: updated.passwordChangedAt };
    }
    const requestedAt = await claimRotation(tx, { id: asset.id, pendingPasswordHash: passwordHash, rotationId, deadlineMs: callTimeoutMs + DEADLINE_GRACE_MS });
    await recordPasswordChange(tx, { ...audit, changedAt: requestedAt, outcome: null });
    return { stored: null };
  });
  if (claimed.stored) return { status: 200, data: { id: asset.id, passwordChangedAt: claimed.stored.toISOString(), ...shown } };

  // Committed: a second change is refused from here on, and no connection waits for the station.
  const deadline = Date.now() + callTimeoutMs;
  const answer = await sendBefore(deps.stations, { assetId: asset.id, password, deadline });
  const outcome = answerOutcome(answer);
  const settled = await settle(db, asset.id, rotationId, stateAfterAnswer(outcome, force));
  if (settled.state === 'ACCEPTED' || settled.state === 'CONFIRMED' || settled.state === 'FORCED') {
    return { status: 200, data: { id: asset.id, passwordChangedAt: settled.passwordChangedAt!.toISOString(), ...shown } };
  }
  if (settled.state === 'REJECTED' || settled.state === 'DISCARDED') {
    // Only a login with the old password discards a change, and only after its deadline, so this
    // answer came too late to count (docs/rotation.md, "A change whose replica died"): the station
    // logged in with the password it had, whatever it answers now.
    if (settled.state === 'DISCARDED') throw new ConflictError(`The station of asset ${asset.id} logged in with its old password before its answer reached the service: the new password was discarded; nothing changed`, STATION_REJECTED);
    if (outcome === 'NOT_SENT') throw offline(asset.id);
    throw new ConflictError(`The station of asset ${asset.id} refused the new password: ${describeAnswer(answer)}; nothing changed`, STATION_REJECTED);
  }
  return { status: 202, data: { id: asset.id, status: 'UNCONFIRMED', ...shown } };
}

// The answer, or a timeout at the deadline whatever the station side does.
async function sendBefore(port: StationLink, command: PasswordCommand): Promise<StationAnswer> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<StationAnswer>((resolve) => {
    timer = setTimeout(() => resolve({ kind: 'timeout' }), Math.max(0, command.deadline - Date.now()));
  });
  try {
    return await Promise.race([port.sendPasswordChange(command).catch((): StationAnswer => ({ kind: 'timeout' })), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// Whether the station side finds an open socket of the station by the deadline.
async function connectedBefore(port: StationLink, assetId: string, deadline: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), Math.max(0, deadline - Date.now()));
  });
  try {
    // A failure says nothing: taken as connected, the command's own answer decides.
    return await Promise.race([port.isConnected(assetId, deadline).catch(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// The sweep waits this long past a change's deadline, so that a replica that is alive but slow (a
// connection waited for, a statement near its timeout) records its own answer first.
export const ABANDONED_MARGIN_MS = 30_000;

// IN_FLIGHT changes whose deadline passed over ABANDONED_MARGIN_MS ago, up to `limit`, in one
// transaction: each recorded UNCONFIRMED with its event, as the replica that waited for the answer
// would have done had it not died. Changes another replica is recording are skipped; the rows
// taken stay locked, and PostgreSQL has checked them against the WHERE again once locked, so each
// is still such a change. Returns how many were recorded.
export async function settleAbandonedRotations(db: Db, limit: number): Promise<number> {
  return db.transaction(async (tx) => {
    const found = await lockAbandonedRotations(tx, limit, ABANDONED_MARGIN_MS);
    for (const { id, network, rotationId } of found) await recordAbandoned(tx, { rotationId, assetId: id, network });
    return found.length;
  });
}

// Applies the answer to the rotation if it is still IN_FLIGHT; otherwise (the sweep, a login or a
// forced change past the deadline moved it on first) reports where it stands.
async function settle(
  db: Db,
  assetId: string,
  rotationId: string,
  state: 'ACCEPTED' | 'REJECTED' | 'UNCONFIRMED' | 'FORCED',
): Promise<{ state: RotationState | null; passwordChangedAt: Date | null }> {
  return db.transaction(async (tx) => {
    const row = await lockRotation(tx, { network: null }, assetId);
    if (!row || row.rotationId !== rotationId) return { state: null, passwordChangedAt: null };
    const change = { rotationId, assetId, network: row.network };
    if (row.rotationState !== 'IN_FLIGHT') {
      // Moved on past the deadline: UNCONFIRMED, unless whoever moved it recorded that already
      // (recordAbandoned; an outcome is recorded once).
      await recordOutcome(tx, change, 'UNCONFIRMED');
      return { state: row.rotationState, passwordChangedAt: row.passwordChangedAt };
    }
    let passwordChangedAt: Date | null = null;
    if (state === 'ACCEPTED' || state === 'FORCED') passwordChangedAt = (await promotePending(tx, { id: assetId, rotationId, state })) ?? null;
    else if (state === 'REJECTED') await dropPending(tx, { id: assetId, rotationId, state });
    else await markUnconfirmed(tx, { id: assetId, rotationId });
    await recordOutcome(tx, change, state, passwordChangedAt ?? undefined);
    return { state, passwordChangedAt };
  });
}
