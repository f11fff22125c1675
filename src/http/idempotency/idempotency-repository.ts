import { and, eq, inArray, lte, sql } from 'drizzle-orm';
import type { Executor } from '../../db/database.js';
import type { StoredKey, StoredResponse } from './idempotency-rules.js';
import { idempotencyKeys } from './idempotency-tables.js';

const k = idempotencyKeys;

// Whose key it is: the token's client and network ('' for every network).
export interface KeyScope {
  clientId: string;
  network: string;
  key: string;
}

export interface NewClaim {
  fingerprint: string;
  claimId: string;
  now: Date;
  lockedUntil: Date;
  expiresAt: Date;
}

export interface KeyRow {
  claimId: string;
  stored: StoredKey;
}

const thisKey = (scope: KeyScope) => and(eq(k.clientId, scope.clientId), eq(k.network, scope.network), eq(k.key, scope.key));

const claimColumns = (claim: NewClaim) => ({
  fingerprint: claim.fingerprint,
  state: 'IN_FLIGHT' as const,
  claimId: claim.claimId,
  lockedUntil: claim.lockedUntil,
  responseStatus: null,
  responseHeaders: null,
  responseBody: null,
  createdAt: claim.now,
  expiresAt: claim.expiresAt,
});

// The primary key decides: of concurrent inserts of one key exactly one returns true.
export async function insertClaim(db: Executor, scope: KeyScope, claim: NewClaim): Promise<boolean> {
  const rows = await db
    .insert(k)
    .values({ ...scope, ...claimColumns(claim) })
    .onConflictDoNothing()
    .returning({ claimId: k.claimId });
  return rows.length === 1;
}

// Replaces a row that no longer holds the key (expired, or an abandoned claim), guarded by the
// claim that was read, so of two requests that read the same row only one takes it over.
export async function takeOverClaim(db: Executor, scope: KeyScope, previousClaimId: string, claim: NewClaim): Promise<boolean> {
  const rows = await db
    .update(k)
    .set(claimColumns(claim))
    .where(and(thisKey(scope), eq(k.claimId, previousClaimId)))
    .returning({ claimId: k.claimId });
  return rows.length === 1;
}

export async function findKey(db: Executor, scope: KeyScope): Promise<KeyRow | undefined> {
  const [row] = await db.select().from(k).where(thisKey(scope)).limit(1);
  if (!row) return undefined;
  const stored: StoredKey =
    row.state === 'IN_FLIGHT'
      ? { state: 'IN_FLIGHT', fingerprint: row.fingerprint, expiresAt: row.expiresAt, lockedUntil: row.lockedUntil! }
      : {
          state: 'COMPLETED',
          fingerprint: row.fingerprint,
          expiresAt: row.expiresAt,
          response: { status: row.responseStatus!, headers: row.responseHeaders!, body: row.responseBody! },
        };
  return { claimId: row.claimId, stored };
}

// Stores the answer of the claim's request; false when the claim no longer holds the key.
export async function completeClaim(db: Executor, scope: KeyScope, claimId: string, response: StoredResponse): Promise<boolean> {
  const rows = await db
    .update(k)
    .set({ state: 'COMPLETED', lockedUntil: null, responseStatus: response.status, responseHeaders: response.headers, responseBody: response.body })
    .where(and(thisKey(scope), eq(k.claimId, claimId), eq(k.state, 'IN_FLIGHT')))
    .returning({ claimId: k.claimId });
  return rows.length === 1;
}

export async function releaseClaim(db: Executor, scope: KeyScope, claimId: string): Promise<void> {
  await db.delete(k).where(and(thisKey(scope), eq(k.claimId, claimId), eq(k.state, 'IN_FLIGHT')));
}

// Deletes at most `limit` expired rows; rows another replica is deleting are skipped, not waited
// for. Returns how many went.
export async function deleteExpired(db: Executor, now: Date, limit: number): Promise<number> {
  const expired = db
    .select({ clientId: k.clientId, network: k.network, key: k.key })
    .from(k)
    .where(lte(k.expiresAt, now))
    .limit(limit)
    .for('update', { skipLocked: true });
  const rows = await db
    .delete(k)
    .where(inArray(sql`(${k.clientId}, ${k.network}, ${k.key})`, expired))
    .returning({ key: k.key });
  return rows.length;
}
