import { and, asc, eq, gt, sql, type SQL } from 'drizzle-orm';
import type { Executor } from '../db/database.js';
import { assetPasswordChanges, assets } from './asset-management-tables.js';

export type AssetRow = typeof assets.$inferSelect;
export type NewAssetRow = typeof assets.$inferInsert;

export const ASSETS_PKEY = 'assets_pkey';

// Every lookup on behalf of a caller takes its network: null means the caller may see every network.
function scoped(id: string, network: string | null): SQL {
  return network === null ? eq(assets.id, id) : and(eq(assets.id, id), eq(assets.network, network))!;
}

export async function insertAsset(db: Executor, row: NewAssetRow): Promise<AssetRow> {
  const [inserted] = await db.insert(assets).values(row).returning();
  return inserted!;
}

export async function findAsset(db: Executor, id: string, network: string | null): Promise<AssetRow | undefined> {
  const [row] = await db.select().from(assets).where(scoped(id, network)).limit(1);
  return row;
}

export async function listAssets(
  db: Executor,
  options: { limit: number; startingAfter?: string | undefined; network: string | null },
): Promise<AssetRow[]> {
  const conditions: SQL[] = [];
  if (options.network !== null) conditions.push(eq(assets.network, options.network));
  if (options.startingAfter !== undefined) conditions.push(gt(assets.id, options.startingAfter));
  return db
    .select()
    .from(assets)
    .where(conditions.length > 0 ? and(...conditions) : undefined)
    .orderBy(asc(assets.id))
    .limit(options.limit);
}

// Not network-scoped: a connecting station presents only its identity, not a network.
export async function findPasswordHash(db: Executor, id: string): Promise<string | null | undefined> {
  const [row] = await db.select({ passwordHash: assets.passwordHash }).from(assets).where(eq(assets.id, id)).limit(1);
  return row?.passwordHash;
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
