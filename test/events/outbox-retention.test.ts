import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rowsOf, type Database } from '../../src/db/database.js';
import { deleteSettledEvents } from '../../src/events/events-repository.js';
import { startOutboxRetention } from '../../src/events/outbox-retention.js';
import { uniqueNetwork } from '../helpers/asset-factory.js';
import { createTestDatabase } from '../helpers/test-database.js';
import { insertSubscription } from '../helpers/webhook-factory.js';

// The outbox's retention (docs/events.md, "Retention"): events older than the retention whose
// deliveries are all settled go, with their deliveries; anything pending, not yet fanned out or
// younger stays.

const DAY_MS = 86_400_000;
let database: Database;

beforeAll(async () => {
  database = await createTestDatabase();
  await database.migrate();
});
afterAll(() => database.close());

// An event id of `daysAgo` days ago, spelled as the database makes them (time-ordered).
function eventIdOf(daysAgo: number): string {
  return `evt_${Math.floor(Date.now() - daysAgo * DAY_MS).toString(16).padStart(12, '0')}${randomBytes(10).toString('hex')}`;
}

const subscription = (network: string) => insertSubscription(database.db, network);

// An event of `daysAgo` days, fanned out unless `dispatched` is false, with one delivery per
// state given.
async function event(network: string, subscriptionId: string, daysAgo: number, states: string[], dispatched = true): Promise<string> {
  const id = eventIdOf(daysAgo);
  await database.db.execute(sql`INSERT INTO events (id, network, type, data, dispatched_at)
    VALUES (${id}, ${network}, 'payment.recorded', '{}', ${dispatched ? sql`now()` : sql`NULL`})`);
  for (const [i, state] of states.entries()) {
    const target = i === 0 ? subscriptionId : await subscription(network);
    await database.db.execute(sql`INSERT INTO webhook_deliveries (event_id, subscription_id, state, next_attempt_at)
      VALUES (${id}, ${target}, ${state}, ${state === 'PENDING' ? sql`now()` : sql`NULL`})`);
  }
  return id;
}

async function remaining(network: string): Promise<{ events: string[]; deliveries: string[] }> {
  const events = await rowsOf<{ id: string }>(database.db, sql`SELECT id FROM events WHERE network = ${network} ORDER BY id`);
  const deliveries = await rowsOf<{ event_id: string }>(
    database.db,
    sql`SELECT d.event_id FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id WHERE s.network = ${network} ORDER BY d.event_id`,
  );
  return { events: events.map((r) => r.id), deliveries: [...new Set(deliveries.map((r) => r.event_id))] };
}

describe('outbox retention', () => {
  it('deletes events past the retention whose deliveries are settled, with their deliveries, and keeps the rest', async () => {
    const network = uniqueNetwork();
    const sub = await subscription(network);
    const succeeded = await event(network, sub, 40, ['SUCCEEDED']);
    const failedAndSucceeded = await event(network, sub, 35, ['FAILED', 'SUCCEEDED']);
    const noSubscriber = await event(network, sub, 31, []);
    const stillPending = await event(network, sub, 40, ['SUCCEEDED', 'PENDING']);
    const notFannedOut = await event(network, sub, 40, [], false);
    const young = await event(network, sub, 29, ['SUCCEEDED']);

    const deleted = await deleteSettledEvents(database.db, 30, 1000);

    expect(deleted).toBeGreaterThanOrEqual(3);
    const left = await remaining(network);
    expect(left.events).toEqual([stillPending, notFannedOut, young].sort());
    expect(left.deliveries).toEqual([stillPending, young].sort());
    for (const gone of [succeeded, failedAndSucceeded, noSubscriber]) expect(left.events).not.toContain(gone);
  });

  it('a sweep deletes batch after batch until one comes back short', async () => {
    const network = uniqueNetwork();
    const sub = await subscription(network);
    for (let i = 0; i < 7; i++) await event(network, sub, 60 + i, ['SUCCEEDED']);
    const kept = await event(network, sub, 1, ['SUCCEEDED']);

    const retention = startOutboxRetention({ db: database.db, log: pino({ level: 'silent' }), retentionDays: 30, batch: 2, intervalMs: 200 });
    // The first sweep, within the first interval. The deadline is a guard only.
    let left = await remaining(network);
    for (const until = Date.now() + 20_000; left.events.length > 1 && Date.now() < until; left = await remaining(network)) await sleep(50);
    await retention.stop();

    expect(left.events).toEqual([kept]);
  });
});
