import { count, desc, eq, gt, isNull, sql } from 'drizzle-orm';
import type { Executor } from '../db/database.js';
import { inNetwork } from '../db/in-network.js';
import type { NetworkScope } from '../kernel/network-scope.js';
import { events, webhookDeliveries, webhookSubscriptions } from './events-tables.js';

export type SubscriptionRow = typeof webhookSubscriptions.$inferSelect;
export type NewSubscriptionRow = typeof webhookSubscriptions.$inferInsert;
export type SubscriptionChanges = Partial<Pick<SubscriptionRow, 'url' | 'events' | 'description' | 'status' | 'secret'>>;

const s = webhookSubscriptions;

export async function insertSubscription(db: Executor, row: NewSubscriptionRow): Promise<SubscriptionRow> {
  const [inserted] = await db.insert(s).values(row).returning();
  return inserted!;
}

// A subscription made only while its network has fewer than `max`; undefined when it has them
// already. A network's subscriptions are made one at a time (a lock on the network for the
// transaction's length), so two made at once cannot both find room for one.
export async function insertSubscriptionWithin(tx: Executor, row: NewSubscriptionRow & { network: string | null }, max: number): Promise<SubscriptionRow | undefined> {
  await tx.execute(sql`SELECT pg_advisory_xact_lock(hashtextextended(${`webhook_subscriptions:${row.network ?? ''}`}, 0))`);
  const [held] = await tx
    .select({ n: count() })
    .from(s)
    .where(row.network === null ? isNull(s.network) : eq(s.network, row.network));
  if ((held?.n ?? 0) >= max) return undefined;
  return insertSubscription(tx, row);
}

// `keep`: the row is held against a delete until the caller's transaction ends (FOR KEY SHARE: an
// update of its other columns goes on), so that what the caller inserts for it still has it to
// refer to.
export async function findSubscription(db: Executor, scope: NetworkScope, id: string, options: { keep?: boolean } = {}): Promise<SubscriptionRow | undefined> {
  const query = db.select().from(s).where(inNetwork(s.network, scope, eq(s.id, id))).limit(1);
  const [row] = options.keep ? await query.for('key share') : await query;
  return row;
}

export async function listSubscriptions(db: Executor, scope: NetworkScope, options: { limit: number; startingAfter?: string | undefined }): Promise<SubscriptionRow[]> {
  return db
    .select()
    .from(s)
    .where(inNetwork(s.network, scope, options.startingAfter !== undefined ? gt(s.id, options.startingAfter) : undefined))
    .orderBy(s.id)
    .limit(options.limit);
}

export async function updateSubscription(db: Executor, scope: NetworkScope, id: string, changes: SubscriptionChanges): Promise<SubscriptionRow | undefined> {
  const [row] = await db
    .update(s)
    .set({ ...changes, updatedAt: sql`now()` })
    .where(inNetwork(s.network, scope, eq(s.id, id)))
    .returning();
  return row;
}

// Its deliveries go with it (ON DELETE CASCADE).
export async function deleteSubscription(db: Executor, scope: NetworkScope, id: string): Promise<boolean> {
  const deleted = await db.delete(s).where(inNetwork(s.network, scope, eq(s.id, id))).returning({ id: s.id });
  return deleted.length > 0;
}

// The webhook.test event and its one delivery, due now: dispatched already, so the fan-out never
// sends it to another subscription.
export async function insertTestEvent(db: Executor, subscription: SubscriptionRow, data: string): Promise<string> {
  const [event] = await db
    .insert(events)
    .values({ network: subscription.network, type: 'webhook.test', data, dispatchedAt: sql`now()` })
    .returning({ id: events.id });
  await db.insert(webhookDeliveries).values({ eventId: event!.id, subscriptionId: subscription.id, nextAttemptAt: sql`now()` });
  return event!.id;
}

export interface DeliveryView {
  eventId: string;
  eventType: string;
  state: (typeof webhookDeliveries.$inferSelect)['state'];
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  lastDurationMs: number | null;
  lastAttemptAt: Date | null;
  nextAttemptAt: Date | null;
  createdAt: Date;
}

// A subscription's deliveries, the latest attempted first, then those not attempted yet; none of a
// subscription outside the caller's network.
export async function listDeliveries(db: Executor, scope: NetworkScope, subscriptionId: string, limit: number): Promise<DeliveryView[]> {
  const d = webhookDeliveries;
  return db
    .select({
      eventId: d.eventId,
      eventType: events.type,
      state: d.state,
      attempts: d.attempts,
      lastStatus: d.lastStatus,
      lastError: d.lastError,
      lastDurationMs: d.lastDurationMs,
      lastAttemptAt: d.lastAttemptAt,
      nextAttemptAt: d.nextAttemptAt,
      createdAt: d.createdAt,
    })
    .from(d)
    .innerJoin(events, eq(events.id, d.eventId))
    .innerJoin(s, eq(s.id, d.subscriptionId))
    .where(inNetwork(s.network, scope, eq(d.subscriptionId, subscriptionId)))
    .orderBy(sql`${d.lastAttemptAt} DESC NULLS LAST`, desc(d.createdAt))
    .limit(limit);
}
