import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import type { Db } from '../../src/db/database.js';

// A subscription written straight into the table, for tests of the outbox and the delivery
// statements that run without an app (the API's own tests subscribe through the API).
export async function insertSubscription(db: Db, network: string): Promise<string> {
  const id = `whk_${randomBytes(8).toString('hex').toUpperCase()}`;
  await db.execute(sql`INSERT INTO webhook_subscriptions (id, network, url, events, secret)
    VALUES (${id}, ${network}, 'https://hooks.example.com/a', ARRAY['payment.recorded'], 'whsec_x')`);
  return id;
}
