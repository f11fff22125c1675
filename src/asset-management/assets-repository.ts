import { and, asc, eq, gt, sql } from 'drizzle-orm';
import type { Executor } from '../db/database.js';
import { inNetwork } from '../db/in-network.js';
import type { NetworkScope } from '../network-scope.js';
import { assetPasswordChanges, assets } from './asset-management-tables.js';

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

export async function updateAssetPassword(
  db: Executor,
  change: { id: string; network: string; passwordHash: string },
): Promise<{ passwordChangedAt: Date } | undefined> {
  // Strictly after the previous change even when timestamps tie: concurrent changes queue on the
  // row lock and this expression is evaluated against the row the previous one committed, so the
  // order of passwordChangedAt is the order in which the hashes were written. Database time, like
  // createdAt, so replicas with drifting clocks agree.
  const changedAt = sql`greatest(now(), ${assets.passwordChangedAt} + interval '1 millisecond')`;
  const [row] = await db
    .update(assets)
    .set({ passwordHash: change.passwordHash, passwordChangedAt: changedAt, updatedAt: changedAt })
    .where(and(eq(assets.id, change.id), eq(assets.network, change.network)))
    .returning({ passwordChangedAt: assets.passwordChangedAt });
  return row?.passwordChangedAt ? { passwordChangedAt: row.passwordChangedAt } : undefined;
}

export async function insertPasswordChange(
  db: Executor,
  audit: { id: string; assetId: string; network: string; actorClientId: string; generated: boolean; changedAt: Date },
): Promise<void> {
  await db.insert(assetPasswordChanges).values(audit);
}
