import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rowsOf } from '../../src/db/database.js';
import { uniqueNetwork } from '../helpers/asset-factory.js';
import { collectUrl, paymentBody, recordPayment, RECORD_URL, writer } from '../helpers/payments-factory.js';
import { createTestApp, type TestApp } from '../helpers/test-app.js';

// A payment's events are appended by the statement that writes it (docs/events.md, "Delivery and
// retries"): a write that is refused writes no event, and each accepted one exactly one, whose
// data is the payment as the API answers it.

let t: TestApp;

beforeAll(async () => {
  t = await createTestApp();
});
afterAll(() => t.close());

async function eventsOf(network: string): Promise<{ type: string; data: string }[]> {
  return rowsOf(t.database.db, sql`SELECT type, data FROM events WHERE network = ${network} ORDER BY created_at, id`);
}

const collect = (id: string, network: string | null = null, payload?: Record<string, unknown>) =>
  t.app.inject({ method: 'POST', url: collectUrl(id), headers: { authorization: writer(t, network) }, ...(payload ? { payload } : {}) });

describe('payment events', () => {
  it('one event per accepted record or collect, none for a refused one', async () => {
    const network = uniqueNetwork();
    const payment = await recordPayment(t, { network });

    // The same session again: 409, no second payment.recorded.
    const again = await t.app.inject({ method: 'POST', url: RECORD_URL, headers: { authorization: writer(t) }, payload: paymentBody({ network, session: payment.session }) });
    expect(again.statusCode).toBe(409);
    // Another network's token: 404; a collect time before the record: 400.
    expect((await collect(payment.id, uniqueNetwork())).statusCode).toBe(404);
    expect((await collect(payment.id, null, { collectedAt: '2000-01-01T00:00:00Z' })).statusCode).toBe(400);
    expect((await eventsOf(network)).map((e) => e.type)).toEqual(['payment.recorded']);

    const collected = await collect(payment.id);
    expect(collected.statusCode, collected.body).toBe(200);
    // Collected already: 409, no second payment.collected.
    expect((await collect(payment.id)).statusCode).toBe(409);

    const events = await eventsOf(network);
    expect(events.map((e) => e.type)).toEqual(['payment.recorded', 'payment.collected']);
    expect(JSON.parse(events[0]!.data)).toEqual(payment);
    expect(events[1]!.data).toBe(collected.body);
  });
});
