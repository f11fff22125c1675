// A station's password against the asset's credential slots, at the cost of at most one slow hash
// per login: every fast (HMAC) check first, then one slow check chosen by credential-choice.ts,
// waiting for its hash in the fair login queue (login-hash-queue.ts).
import { createHash } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Db } from '../db/database.js';
import { loggableError } from '../db/failures.js';
import { isSlowHash, stationPasswordTexts, verifyPassword, type HashRunner } from '../asset-management/passwords.js';
import { recordReplacedLogin, recordStationLogin } from '../asset-management/password-rotation-service.js';
import { afterLogin, loginSlots, reportsReplacedLogin, type Slot } from '../asset-management/rotation.js';
import { chooseSlowCheck, type LoginMemory, type SlowCandidate } from './credential-choice.js';
import type { LoginHashQueue, SlowCheckOutcome } from './login-hash-queue.js';
import type { StationLoginRow } from './stations-repository.js';

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
  hashQueue?: LoginHashQueue;
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
    await recordReplacedLogin(db, asset.id).catch((error: unknown) => context.log.warn({ err: loggableError(error) }, 'could not record a replaced-password login'));
    return 'replaced';
  }
  memory?.succeeded(asset.id, address);
  if (afterLogin(asset.rotationState, asset.deadlinePassed, matched.slot) !== null) await recordStationLogin(db, asset.id, matched.slot);
  return matched.slot;
}
