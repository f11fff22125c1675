import { and, asc, eq, isNotNull, isNull, sql } from 'drizzle-orm';
import type { Executor } from '../db/database.js';
import { oauthClients } from './auth-tables.js';

export type ClientRow = typeof oauthClients.$inferSelect;

export async function insertClient(db: Executor, row: typeof oauthClients.$inferInsert): Promise<void> {
  await db.insert(oauthClients).values(row);
}

export async function findActiveClient(db: Executor, id: string): Promise<ClientRow | undefined> {
  const rows = await db
    .select()
    .from(oauthClients)
    .where(and(eq(oauthClients.id, id), isNull(oauthClients.revokedAt)))
    .limit(1);
  return rows[0];
}

export async function listClients(db: Executor): Promise<ClientRow[]> {
  return db.select().from(oauthClients).orderBy(asc(oauthClients.createdAt));
}

export async function countClients(db: Executor): Promise<number> {
  const rows = await db.select({ n: sql<number>`count(*)::int` }).from(oauthClients);
  return rows[0]?.n ?? 0;
}

export async function revokeClient(db: Executor, id: string, at: Date): Promise<boolean> {
  const rows = await db
    .update(oauthClients)
    .set({ revokedAt: at })
    .where(and(eq(oauthClients.id, id), isNull(oauthClients.revokedAt)))
    .returning({ id: oauthClients.id });
  return rows.length > 0;
}

export async function listRevokedClientIds(db: Executor): Promise<string[]> {
  const rows = await db.select({ id: oauthClients.id }).from(oauthClients).where(isNotNull(oauthClients.revokedAt));
  return rows.map((r) => r.id);
}
