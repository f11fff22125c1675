import { and, asc, eq, gt, sql, type SQL } from 'drizzle-orm';
import type { Executor } from '../db/database.js';
import { chargingStationModels } from './asset-management-tables.js';

export type ChargingStationModelRow = typeof chargingStationModels.$inferSelect;
export type NewChargingStationModelRow = typeof chargingStationModels.$inferInsert;

export const VENDOR_MODEL_UNIQUE = 'charging_station_models_vendor_model_key';

// Throws the driver's unique violation on a duplicate vendor+model; the service maps it.
export async function insertChargingStationModel(db: Executor, row: NewChargingStationModelRow): Promise<ChargingStationModelRow> {
  const [inserted] = await db.insert(chargingStationModels).values(row).returning();
  return inserted!;
}

export async function findChargingStationModel(db: Executor, id: string): Promise<ChargingStationModelRow | undefined> {
  const [row] = await db.select().from(chargingStationModels).where(eq(chargingStationModels.id, id)).limit(1);
  return row;
}

export async function listChargingStationModels(
  db: Executor,
  options: { limit: number; startingAfter?: string | undefined; includeArchived: boolean },
): Promise<ChargingStationModelRow[]> {
  const conditions: SQL[] = [];
  if (!options.includeArchived) conditions.push(eq(chargingStationModels.isArchived, false));
  if (options.startingAfter !== undefined) conditions.push(gt(chargingStationModels.id, options.startingAfter));
  return db
    .select()
    .from(chargingStationModels)
    .where(conditions.length > 0 ? and(...conditions) : undefined)
    .orderBy(asc(chargingStationModels.id))
    .limit(options.limit);
}

// One statement, so repeating it is harmless and updatedAt keeps the moment of the first archive.
export async function archiveChargingStationModel(db: Executor, id: string): Promise<ChargingStationModelRow | undefined> {
  const [row] = await db
    .update(chargingStationModels)
    .set({
      isArchived: true,
      updatedAt: sql`case when ${chargingStationModels.isArchived} then ${chargingStationModels.updatedAt} else now() end`,
    })
    .where(eq(chargingStationModels.id, id))
    .returning();
  return row;
}
