import { desc, isNull } from 'drizzle-orm';
import type { Executor } from '../db/database.js';
import { signingKeys } from './auth-tables.js';

export type SigningKeyRow = typeof signingKeys.$inferSelect;

export async function listVerificationKeys(db: Executor): Promise<SigningKeyRow[]> {
  return db.select().from(signingKeys).where(isNull(signingKeys.retiredAt)).orderBy(desc(signingKeys.createdAt));
}

export async function insertSigningKey(db: Executor, row: typeof signingKeys.$inferInsert): Promise<SigningKeyRow> {
  const [inserted] = await db.insert(signingKeys).values(row).returning();
  if (!inserted) throw new Error('insert into signing_keys returned no row');
  return inserted;
}
