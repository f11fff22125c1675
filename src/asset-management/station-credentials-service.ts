// The station credential as the stations area uses it, and the one module of asset management that
// area imports (eslint.config.js): what a login reads of its asset, which credential slot its
// password matches at the cost of at most one slow hash (every fast HMAC check first, then one
// slow check chosen by credential-choice.ts, run through the queue the caller gives), and what a
// login does to the rotation. With it, the few rules and types of asset management a station's
// login and password command need, and the port asset management states for the station side.
import { createHash } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Db, Executor } from '../db/database.js';
import { loggableError } from '../db/failures.js';
import { dropPending, findStationLogins, lockRotation, promotePending, type StationLoginRow } from './assets-repository.js';
import { isAbandoned, recordAbandoned, recordReplacedLogin, recordResolution } from './password-audit-service.js';
import { chooseSlowCheck, type LoginMemory, type SlowCandidate } from './credential-choice.js';
import { isSlowHash, verifyPassword, type HashRunner } from './password-hashing.js';
import { afterLogin, loginSlots, reportsReplacedLogin, type Slot } from './rotation.js';
import { stationPasswordTexts } from './station-passwords.js';

export { ID_PATTERN } from './asset-management-schemas.js';
export { LOGIN_MEMORY_LIMITS, createLoginMemory, type LoginMemory } from './credential-choice.js';
export { HASH_CONCURRENCY, passwordHashQueue } from './password-hash-queue.js';
export { RUN_NOW, type HashRunner } from './password-hashing.js';
export { passwordProblem } from './password-rules.js';
export type { StationAnswer } from './rotation.js';
export type { PasswordCommand, StationLink, StationView } from './station-link.js';
export type { StationLoginRow };

// The login read of many stations at once, in the order of ids (undefined for an unknown one).
export function readStationLogins(db: Executor, ids: string[]): Promise<Array<StationLoginRow | undefined>> {
  return findStationLogins(db, ids);
}

// A slow password check waiting for its turn to hash, as the caller's queue runs it.
export interface SlowCheck {
  // The login's address (its lane) and identity (at most one slow check each waiting or running).
  address: string;
  identity: string;
  // The station hung up: its check is dropped without hashing.
  abandoned(): boolean;
  // The hash itself, run with the runner given (the turn is already held when the queue runs it).
  verify(run: HashRunner): Promise<boolean>;
}

export type SlowCheckOutcome =
  | { kind: 'checked'; matched: boolean }
  // No turn within the queue's wait bound.
  | { kind: 'timeout' }
  | { kind: 'abandoned' }
  // Another login of the identity is waiting or being checked; `sameAddress` when it came from
  // the same address (a station racing itself), otherwise from elsewhere.
  | { kind: 'busy'; sameAddress: boolean }
  | { kind: 'full' };

export interface SlowCheckQueue {
  check(work: SlowCheck): Promise<SlowCheckOutcome>;
}

interface Check extends SlowCandidate {
  encoded: string;
  text: string;
  slow: boolean;
}

// What a login's password can match, slot by slot in loginSlots order, then the retired credential
// when the latest switch is one that reports it.
function credentialChecks(asset: StationLoginRow, password: Buffer): Check[] {
  const hashes: Array<[Check['slot'], string | null]> = loginSlots(asset.rotationState).map((slot) => [slot, slot === 'active' ? asset.passwordHash : asset.pendingPasswordHash]);
  if (reportsReplacedLogin(asset.rotationState)) hashes.push(['replaced', asset.replacedPasswordHash]);
  const checks: Check[] = [];
  for (const [slot, encoded] of hashes) {
    if (encoded === null) continue;
    const slow = isSlowHash(encoded);
    // Only slow checks are remembered, so only they need an id.
    const stored = slow ? createHash('sha256').update(encoded).digest('base64url').slice(0, 16) : '';
    stationPasswordTexts(asset.ocppVersion, password, encoded).forEach((text, i) => checks.push({ slot, encoded, text, slow, id: `${stored}:${i}` }));
  }
  return checks;
}

// Why a login got no answer from its password check: no turn in time, the station hung up, the
// identity's other login holds its place (`identityBusy`, or `duplicate` from the same address),
// or the queue is full.
export type CheckDeferred = 'hashWaitTimeout' | 'abandoned' | 'identityBusy' | 'duplicate' | 'queueFull';

function deferred(outcome: Exclude<SlowCheckOutcome, { kind: 'checked' }>): CheckDeferred {
  switch (outcome.kind) {
    case 'timeout':
      return 'hashWaitTimeout';
    case 'abandoned':
      return 'abandoned';
    case 'busy':
      return outcome.sameAddress ? 'duplicate' : 'identityBusy';
    case 'full':
      return 'queueFull';
  }
}

export interface CredentialContext {
  log: FastifyBaseLogger;
  // A station tried the password its latest rotation replaced.
  onReplacedLogin?: (() => void) | undefined;
  abandoned?: (() => boolean) | undefined;
  // The login's address (loginAddress): its lane in the queue, and what is remembered is per it.
  address?: string;
  // Without a queue the slow check runs through the hashing queue directly; without a memory the
  // choice among slow checks is the random one of a first attempt.
  hashQueue?: SlowCheckQueue;
  memory?: LoginMemory;
}

// Which credential slot a station's password matches, with what a login does to the rotation: an
// unconfirmed one ends with the credential used (rotation.ts). 'replaced' is the credential the
// latest switch retired: refused (A01.FR.03), and reported. null: refused.
export async function checkStationCredential(db: Db, asset: StationLoginRow, password: Buffer, context: CredentialContext): Promise<Slot | 'replaced' | null | CheckDeferred> {
  if (asset.passwordHash === null) return null;
  const { memory, address = 'unknown' } = context;
  const checks = credentialChecks(asset, password);
  // The fast checks, accepting ones before the retired credential: microseconds each, no queue.
  let matched: Check | undefined;
  for (const check of [...checks.filter((c) => c.slot !== 'replaced'), ...checks.filter((c) => c.slot === 'replaced')]) {
    if (!check.slow && (await verifyPassword(check.text, check.encoded))) {
      matched = check;
      break;
    }
  }
  if (!matched) {
    const slow = checks.filter((c) => c.slow);
    const choice = chooseSlowCheck(slow, memory?.tried(asset.id, address), memory?.replacedCheckAllowed(asset.id) ?? true, Math.random);
    if (!choice) return null;
    if (choice.check.slot === 'replaced') memory?.takeReplacedCheck(asset.id);
    const { text, encoded } = choice.check;
    const work = { address, identity: asset.id, abandoned: context.abandoned ?? (() => false), verify: (run: HashRunner) => verifyPassword(text, encoded, run) };
    const outcome: SlowCheckOutcome = context.hashQueue ? await context.hashQueue.check(work) : { kind: 'checked', matched: await verifyPassword(text, encoded) };
    if (outcome.kind !== 'checked') return deferred(outcome);
    if (!outcome.matched || choice.check.slot === 'replaced') memory?.failed(asset.id, address, choice.check.id, choice.restart);
    if (!outcome.matched) return null;
    matched = choice.check;
  }
  if (matched.slot === 'replaced') {
    // The station most likely acknowledged the change and kept the old password: loud, so an
    // operator can configure the station or force a change.
    context.log.warn({ station: asset.id, rotation: asset.rotationId }, 'station keeps using the password its latest rotation replaced; refused');
    context.onReplacedLogin?.();
    // With the first such login of the rotation, its asset.password.ignored event.
    const rotationId = asset.rotationId;
    if (rotationId) await db.transaction((tx) => recordReplacedLogin(tx, asset.id, rotationId)).catch((error: unknown) => context.log.warn({ err: loggableError(error) }, 'could not record a replaced-password login'));
    return 'replaced';
  }
  memory?.succeeded(asset.id, address);
  if (afterLogin(asset.rotationState, asset.deadlinePassed, matched.slot) !== null) await recordStationLogin(db, asset.id, matched.slot);
  return matched.slot;
}

// A station logged in with the credential of `slot`: an unconfirmed rotation ends here.
async function recordStationLogin(db: Db, assetId: string, slot: Slot): Promise<void> {
  await db.transaction(async (tx) => {
    const row = await lockRotation(tx, { network: null }, assetId);
    if (!row?.rotationId) return;
    const next = afterLogin(row.rotationState, row.deadlinePassed, slot);
    if (next === null) return;
    const change = { rotationId: row.rotationId, assetId, network: row.network };
    if (isAbandoned(row)) await recordAbandoned(tx, change);
    let switchedAt: Date | undefined;
    if (next === 'CONFIRMED') switchedAt = await promotePending(tx, { id: assetId, rotationId: row.rotationId, state: next });
    else await dropPending(tx, { id: assetId, rotationId: row.rotationId, state: next });
    await recordResolution(tx, change, next === 'CONFIRMED' ? 'NEW_USED' : 'OLD_USED', switchedAt);
  });
}
