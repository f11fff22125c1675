import { randomUUID } from 'node:crypto';
import type { Executor } from '../../db/database.js';
import { ConflictError, IdempotencyKeyReusedError } from '../../kernel/errors.js';
import * as keys from './idempotency-repository.js';
import type { KeyScope } from './idempotency-repository.js';
import { IDEMPOTENCY_KEY_IN_USE, IDEMPOTENCY_KEY_TTL_MS, decide, type StoredResponse } from './idempotency-rules.js';

export type { KeyScope };

// The request holds its key until it completes it or gives it back.
export interface Claim {
  scope: KeyScope;
  claimId: string;
}

type Outcome = { kind: 'claimed'; claim: Claim } | { kind: 'replay'; response: StoredResponse };

// The family renders it as its 409: the asset-management code names the reason.

function inFlight(): ConflictError {
  return new ConflictError('A request with this Idempotency-Key is still being processed; retry it once that one has finished', IDEMPOTENCY_KEY_IN_USE);
}

// Each round either takes the key or learns that another request changed the row since it was
// read; three rounds lost to other requests with the same key count as "in flight".
const MAX_ROUNDS = 3;

// Takes the key for this request, or says what the request gets instead: the stored answer to
// replay, a 409 while the key's first request runs, a 422 for a key used by another request.
export async function claimKey(
  db: Executor,
  scope: KeyScope,
  fingerprint: string,
  options: { now: Date; leaseMs: number },
): Promise<Outcome> {
  const { now } = options;
  const claim = {
    fingerprint,
    claimId: randomUUID(),
    now,
    lockedUntil: new Date(now.getTime() + options.leaseMs),
    expiresAt: new Date(now.getTime() + IDEMPOTENCY_KEY_TTL_MS),
  };
  const claimed: Outcome = { kind: 'claimed', claim: { scope, claimId: claim.claimId } };
  for (let round = 0; round < MAX_ROUNDS; round++) {
    if (await keys.insertClaim(db, scope, claim)) return claimed;
    const row = await keys.findKey(db, scope);
    // Given back between the insert and the read: try the insert again.
    if (!row) continue;
    const decision = decide(row.stored, fingerprint, now);
    switch (decision.kind) {
      case 'replay':
        return { kind: 'replay', response: decision.response };
      case 'mismatch':
        throw new IdempotencyKeyReusedError(
          'This Idempotency-Key was already used for a different request (method, path or body); use a new key for a new request',
        );
      case 'in_flight':
        throw inFlight();
      case 'run':
        if (await keys.takeOverClaim(db, scope, row.claimId, claim)) return claimed;
    }
  }
  throw inFlight();
}

// Stores the answer; false when the claim had lost the key (its lease ran out and another request
// took it over), in which case that request's answer is the key's.
export async function completeKey(db: Executor, claim: Claim, response: StoredResponse): Promise<boolean> {
  return keys.completeClaim(db, claim.scope, claim.claimId, response);
}

// Gives the key back: the request did not complete, so a retry with it runs again.
export async function releaseKey(db: Executor, claim: Claim): Promise<void> {
  await keys.releaseClaim(db, claim.scope, claim.claimId);
}

// Removes up to `limit` keys past their lifetime; returns how many it removed.
export async function purgeExpiredKeys(db: Executor, now: Date, limit: number): Promise<number> {
  return keys.deleteExpired(db, now, limit);
}
