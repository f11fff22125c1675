import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { sql } from 'drizzle-orm';
import { rowsOf } from '../../src/db/database.js';
import { appendEvents } from '../../src/events/events-service.js';
import { createTestApp, type TestApp } from '../helpers/test-app.js';
import { uniqueNetwork } from '../helpers/asset-factory.js';
import { paymentBody, uniqueId, writer } from '../helpers/payments-factory.js';

// A change and its event commit together or not at all: whatever mix of payments is recorded,
// refused (a session recorded twice: the second statement fails, its event with it) and collected, the outbox
// holds exactly one payment.recorded per recorded payment and one payment.collected per collect.

let t: TestApp;

async function countsOf(network: string): Promise<Record<string, number>> {
  const rows = await rowsOf<{ type: string; n: number }>(t.database.db, sql`SELECT type, count(*)::int AS n FROM events WHERE network = ${network} GROUP BY type`);
  return Object.fromEntries(rows.map((r) => [r.type, r.n]));
}

beforeAll(async () => {
  // No subscription in this app: the events stay in the outbox for the count.
  t = await createTestApp();
});
afterAll(() => t.close());

type Step = { kind: 'record'; session: number } | { kind: 'collect'; session: number };

const steps = fc.array(
  fc.oneof(
    fc.record({ kind: fc.constant('record' as const), session: fc.integer({ min: 0, max: 3 }) }),
    fc.record({ kind: fc.constant('collect' as const), session: fc.integer({ min: 0, max: 3 }) }),
  ),
  { minLength: 1, maxLength: 12 },
);

describe('the outbox and the transaction of the change', () => {
  it('a committed change always yields its event, a rolled-back one never does', async () => {
    await fc.assert(
      fc.asyncProperty(steps, async (plan: Step[]) => {
        const network = uniqueNetwork();
        const sessions = [0, 1, 2, 3].map(() => uniqueId('ses'));
        const ids = new Map<number, string>();
        let recorded = 0;
        let collected = 0;
        for (const step of plan) {
          if (step.kind === 'record') {
            const res = await t.app.inject({ method: 'POST', url: '/payments/v1/session-payments', headers: { authorization: writer(t) }, payload: paymentBody({ network, session: sessions[step.session]! }) });
            if (res.statusCode === 201) {
              recorded++;
              ids.set(step.session, res.json().id as string);
            } else expect(res.statusCode).toBe(409);
          } else {
            const id = ids.get(step.session) ?? 'pmt_none';
            const res = await t.app.inject({ method: 'POST', url: `/payments/v1/session-payments/${id}/collect`, headers: { authorization: writer(t) } });
            if (res.statusCode === 200) collected++;
            else expect([404, 409]).toContain(res.statusCode);
          }
        }
        const counted = await countsOf(network);
        expect(counted['payment.recorded'] ?? 0).toBe(recorded);
        expect(counted['payment.collected'] ?? 0).toBe(collected);
      }),
      { numRuns: 25 },
    );
  });

  it('events appended in a transaction that fails after them are never written', async () => {
    const transactions = fc.array(fc.record({ events: fc.integer({ min: 1, max: 4 }), commits: fc.boolean() }), { minLength: 1, maxLength: 8 });
    await fc.assert(
      fc.asyncProperty(transactions, async (plan) => {
        const network = uniqueNetwork();
        for (const step of plan) {
          const batch = Array.from({ length: step.events }, (_, i) => ({ type: 'asset.password.ignored' as const, network, data: { assetId: `CP-${i}`, network, rotationId: 'apc_1', at: '2026-11-26T10:00:00.000Z' } }));
          const done = t.database.db.transaction(async (tx) => {
            await appendEvents(tx, batch);
            if (!step.commits) throw new Error('the change failed after its events');
          });
          if (step.commits) await done;
          else await expect(done).rejects.toThrow('the change failed');
        }
        const expected = plan.filter((step) => step.commits).reduce((sum, step) => sum + step.events, 0);
        expect((await countsOf(network))['asset.password.ignored'] ?? 0).toBe(expected);
      }),
      { numRuns: 40 },
    );
  });
});
