import { and, asc, eq, gt, inArray, isNotNull, isNull, lt, sql } from 'drizzle-orm';
import type { Executor } from '../db/database.js';
import { inNetwork } from '../db/in-network.js';
import type { NetworkScope } from '../kernel/network-scope.js';
import type { OcppVersion } from '../kernel/ocpp-vocabulary.js';
import { assetPasswordChanges, assets } from './asset-management-tables.js';
import { REPORTING_STATES, type RotationOutcome, type RotationResolution, type RotationState } from './rotation.js';

export type AssetRow = typeof assets.$inferSelect;
export type NewAssetRow = typeof assets.$inferInsert;

export const ASSETS_PKEY = 'assets_pkey';

export async function insertAsset(db: Executor, row: NewAssetRow): Promise<AssetRow> {
  const [inserted] = await db.insert(assets).values(row).returning();
  return inserted!;
}

export async function findAsset(db: Executor, scope: NetworkScope, id: string): Promise<AssetRow | undefined> {
  const [row] = await db.select().from(assets).where(inNetwork(assets.network, scope, eq(assets.id, id))).limit(1);
  return row;
}

export async function listAssets(
  db: Executor,
  scope: NetworkScope,
  options: { limit: number; startingAfter?: string | undefined },
): Promise<AssetRow[]> {
  return db
    .select()
    .from(assets)
    .where(inNetwork(assets.network, scope, options.startingAfter !== undefined ? gt(assets.id, options.startingAfter) : undefined))
    .orderBy(asc(assets.id))
    .limit(options.limit);
}

// What a station's login reads of its asset: its version, profile and credential slots.
export interface StationLoginRow {
  id: string;
  network: string;
  ocppVersion: OcppVersion;
  securityProfile: number;
  passwordHash: string | null;
  pendingPasswordHash: string | null;
  replacedPasswordHash: string | null;
  rotationId: string | null;
  rotationState: RotationState | null;
  deadlinePassed: boolean;
}

const loginColumns = {
  id: assets.id,
  network: assets.network,
  ocppVersion: assets.ocppVersion,
  securityProfile: assets.securityProfile,
  passwordHash: assets.passwordHash,
  pendingPasswordHash: assets.pendingPasswordHash,
  replacedPasswordHash: assets.replacedPasswordHash,
  rotationId: assets.rotationId,
  rotationState: assets.rotationState,
  deadlinePassed: sql<boolean>`coalesce(${assets.rotationDeadline} < now(), false)`,
};

// Not network-scoped: a connecting station presents only its identity. Many logins at once (the
// stations area batches them: one statement of constant text with an array for a parameter). One
// row per id found, in the order of ids; undefined for an unknown one.
export async function findStationLogins(db: Executor, ids: string[]): Promise<Array<StationLoginRow | undefined>> {
  const rows = await db
    .select(loginColumns)
    .from(assets)
    .where(sql`${assets.id} = any(${sql.param(ids)}::text[])`);
  const byId = new Map(rows.map((r) => [r.id, r]));
  return ids.map((id) => byId.get(id));
}

// Strictly after the previous change even when timestamps tie: concurrent changes queue on the
// row lock and this expression is evaluated against the row the previous one committed, so the
// order of passwordChangedAt is the order in which the hashes were written. Database time, like
// createdAt, so replicas with drifting clocks agree.
const CHANGED_AT = sql`greatest(now(), ${assets.passwordChangedAt} + interval '1 millisecond')`;

export interface RotationRow {
  id: string;
  network: string;
  securityProfile: number;
  passwordHash: string | null;
  // When the current credential became the only one: the answer's passwordChangedAt.
  passwordChangedAt: Date | null;
  pendingPasswordHash: string | null;
  replacedPasswordHash: string | null;
  rotationId: string | null;
  rotationState: RotationState | null;
  deadlinePassed: boolean;
}

// The asset's credential slots, locked until the transaction ends: every change of a rotation
// reads, decides (rotation.ts) and writes under this lock, and never waits for a station in it.
export async function lockRotation(db: Executor, scope: NetworkScope, id: string): Promise<RotationRow | undefined> {
  const [row] = await db
    .select({
      id: assets.id,
      network: assets.network,
      securityProfile: assets.securityProfile,
      passwordHash: assets.passwordHash,
      passwordChangedAt: assets.passwordChangedAt,
      pendingPasswordHash: assets.pendingPasswordHash,
      replacedPasswordHash: assets.replacedPasswordHash,
      rotationId: assets.rotationId,
      rotationState: assets.rotationState,
      deadlinePassed: sql<boolean>`coalesce(${assets.rotationDeadline} < now(), false)`,
    })
    .from(assets)
    .where(inNetwork(assets.network, scope, eq(assets.id, id)))
    .for('update');
  return row;
}

// The new credential becomes the only one at once (provisioning, a forced change).
export async function updateAssetPassword(
  db: Executor,
  change: { id: string; network: string; passwordHash: string; rotationId: string; state: 'PROVISIONED' | 'FORCED' },
): Promise<{ passwordChangedAt: Date } | undefined> {
  const [row] = await db
    .update(assets)
    .set({
      passwordHash: change.passwordHash,
      replacedPasswordHash: sql`${assets.passwordHash}`,
      pendingPasswordHash: null,
      rotationId: change.rotationId,
      rotationState: change.state,
      rotationRequestedAt: sql`now()`,
      rotationResolvedAt: sql`now()`,
      rotationDeadline: null,
      staleLoginAt: null,
      passwordChangedAt: CHANGED_AT,
      updatedAt: CHANGED_AT,
    })
    .where(and(eq(assets.id, change.id), eq(assets.network, change.network)))
    .returning({ passwordChangedAt: assets.passwordChangedAt });
  return row?.passwordChangedAt ? { passwordChangedAt: row.passwordChangedAt } : undefined;
}

// The new credential goes into the pending slot, and the rotation is IN_FLIGHT until its deadline.
export async function claimRotation(db: Executor, claim: { id: string; pendingPasswordHash: string; rotationId: string; deadlineMs: number }): Promise<Date> {
  const [row] = await db
    .update(assets)
    .set({
      pendingPasswordHash: claim.pendingPasswordHash,
      rotationId: claim.rotationId,
      rotationState: 'IN_FLIGHT',
      rotationRequestedAt: sql`now()`,
      rotationDeadline: sql`now() + make_interval(secs => ${claim.deadlineMs / 1000})`,
      rotationResolvedAt: null,
      staleLoginAt: null,
    })
    .where(eq(assets.id, claim.id))
    .returning({ requestedAt: assets.rotationRequestedAt });
  return row!.requestedAt!;
}

function ofRotation(id: string, rotationId: string) {
  return and(eq(assets.id, id), eq(assets.rotationId, rotationId));
}

// The station has the new credential (or, forced, the operator gives it to the station by hand): it
// becomes the only one, the old one is retired.
export async function promotePending(db: Executor, change: { id: string; rotationId: string; state: 'ACCEPTED' | 'CONFIRMED' | 'FORCED' }): Promise<Date | undefined> {
  const [row] = await db
    .update(assets)
    .set({
      passwordHash: sql`${assets.pendingPasswordHash}`,
      replacedPasswordHash: sql`${assets.passwordHash}`,
      pendingPasswordHash: null,
      rotationState: change.state,
      rotationResolvedAt: sql`now()`,
      rotationDeadline: null,
      passwordChangedAt: CHANGED_AT,
      updatedAt: CHANGED_AT,
    })
    .where(and(ofRotation(change.id, change.rotationId), isNotNull(assets.pendingPasswordHash)))
    .returning({ passwordChangedAt: assets.passwordChangedAt });
  return row?.passwordChangedAt ?? undefined;
}

// The station keeps the old credential: the new one is forgotten.
export async function dropPending(db: Executor, change: { id: string; rotationId: string; state: 'REJECTED' | 'DISCARDED' }): Promise<void> {
  await db
    .update(assets)
    .set({ pendingPasswordHash: null, rotationState: change.state, rotationResolvedAt: sql`now()`, rotationDeadline: null })
    .where(ofRotation(change.id, change.rotationId));
}

// IN_FLIGHT rotations whose deadline passed more than `marginMs` ago, oldest first, locked for
// the caller's transaction; rows another transaction holds are skipped, not waited for. Every
// network's: the sweep that records them works for the whole service (password-rotation-service.ts).
// The state is written out, not a parameter, so that even a generic plan can read the partial
// index of changes in flight.
export async function lockAbandonedRotations(db: Executor, limit: number, marginMs: number): Promise<{ id: string; network: string; rotationId: string }[]> {
  return db
    .select({ id: assets.id, network: assets.network, rotationId: sql<string>`${assets.rotationId}` })
    .from(assets)
    .where(and(sql`${assets.rotationState} = 'IN_FLIGHT'`, lt(assets.rotationDeadline, sql`now() - make_interval(secs => ${marginMs / 1000})`)))
    .orderBy(asc(assets.rotationDeadline))
    .limit(limit)
    .for('update', { skipLocked: true });
}

export async function markUnconfirmed(db: Executor, change: { id: string; rotationId: string }): Promise<void> {
  await db.update(assets).set({ rotationState: 'UNCONFIRMED', rotationDeadline: null }).where(ofRotation(change.id, change.rotationId));
}

// The credential the latest switch replaced becomes the only one again, as a change of its own
// (`rotationId`, ROLLED_BACK); the one it replaced is forgotten.
export async function restoreReplaced(db: Executor, change: { id: string; network: string; rotationId: string }): Promise<Date | undefined> {
  const [row] = await db
    .update(assets)
    .set({
      passwordHash: sql`${assets.replacedPasswordHash}`,
      replacedPasswordHash: null,
      pendingPasswordHash: null,
      rotationId: change.rotationId,
      rotationState: 'ROLLED_BACK',
      rotationRequestedAt: sql`now()`,
      rotationResolvedAt: sql`now()`,
      rotationDeadline: null,
      staleLoginAt: null,
      passwordChangedAt: CHANGED_AT,
      updatedAt: CHANGED_AT,
    })
    .where(and(eq(assets.id, change.id), eq(assets.network, change.network), isNotNull(assets.replacedPasswordHash)))
    .returning({ passwordChangedAt: assets.passwordChangedAt });
  return row?.passwordChangedAt ?? undefined;
}

// One statement, no lock beyond the row's own: a station retrying in a loop must not queue on the
// row. Only while the switch that retired the credential, `rotationId` (the rotation the login was
// checked against), still stands: a login checked just before a rollback or a new change (a forced
// one is a switch too) committed must not mark the rotation that followed. Answers the rotation it
// marked, and whether this was its first report (`first`: the row, locked before it is read, had
// none yet, so of two reports at once exactly one is the first).
export async function markStaleLogin(
  db: Executor,
  id: string,
  rotationId: string,
): Promise<{ network: string; rotationId: string; staleLoginAt: Date; first: boolean } | undefined> {
  const prior = db.$with('prior').as(
    db
      .select({ id: assets.id, reportedBefore: sql<boolean>`${assets.staleLoginAt} IS NOT NULL`.as('reported_before') })
      .from(assets)
      .where(and(eq(assets.id, id), eq(assets.rotationId, rotationId), inArray(assets.rotationState, [...REPORTING_STATES])))
      .for('update'),
  );
  const [row] = await db
    .with(prior)
    .update(assets)
    .set({ staleLoginAt: sql`now()` })
    .from(prior)
    .where(eq(assets.id, prior.id))
    .returning({ network: assets.network, rotationId: assets.rotationId, staleLoginAt: assets.staleLoginAt, reportedBefore: prior.reportedBefore });
  if (!row?.rotationId || !row.staleLoginAt) return undefined;
  return { network: row.network, rotationId: row.rotationId, staleLoginAt: row.staleLoginAt, first: !row.reportedBefore };
}

export async function insertPasswordChange(
  db: Executor,
  audit: { id: string; assetId: string; network: string; actorClientId: string; generated: boolean | null; changedAt: Date; outcome: RotationOutcome | null },
): Promise<void> {
  await db.insert(assetPasswordChanges).values(audit);
}

// The audit row of a change: its outcome once known, and how an UNCONFIRMED one was resolved.
// Answers the database's time of the update, to the millisecond as the tables keep times.
export async function updatePasswordChange(
  db: Executor,
  id: string,
  update: { outcome: RotationOutcome } | { resolution: RotationResolution },
): Promise<Date | undefined> {
  const [row] = await db
    .update(assetPasswordChanges)
    .set({ ...update, ...('resolution' in update ? { resolvedAt: sql`now()` } : {}) })
    // An outcome is written once: whoever records it second (a replica that only stalled, one of
    // an older version) changes nothing.
    .where(and(eq(assetPasswordChanges.id, id), 'outcome' in update ? isNull(assetPasswordChanges.outcome) : undefined))
    .returning({ at: sql<Date>`now()::timestamptz(3)`.mapWith(assetPasswordChanges.changedAt) });
  return row?.at;
}
