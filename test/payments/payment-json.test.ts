// The SessionPayment JSON is built twice: by PostgreSQL for the list and in TypeScript from a row
// for single answers. They must agree exactly (values and key order) for every kind of record.
// The demo data (every payment type, taxed and untaxed, discounts, fees, several currencies,
// collected and pending) supplies most of the variety, so its command is tested here as well.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inArray } from 'drizzle-orm';
import { seedDemoData } from '../../src/payments/demo-data.js';
import { listPaymentsJson, toSessionPayment } from '../../src/payments/payments-repository.js';
import { sessionPayments } from '../../src/payments/payments-schema.js';
import { PAYMENT_TYPES, type RecordPaymentBody, type SessionPayment } from '../../src/payments/payments-schemas.js';
import { createTestApp, type TestApp } from '../helpers/test-app.js';
import { collectUrl, listPayments, recordPayment, writer } from '../helpers/payments-factory.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => {
  await t.close();
});

async function sqlAndTsJson(sessions: string[]) {
  const rows = await t.database.db.select().from(sessionPayments).where(inArray(sessionPayments.session, sessions));
  const fromTs = new Map(rows.map((row) => [row.id, toSessionPayment(row)]));
  const fromSql = new Map<string, SessionPayment>();
  for (let i = 0; i < sessions.length; i += 100) {
    for (const p of JSON.parse(await listPaymentsJson(t.database.db, sessions.slice(i, i + 100), null)) as SessionPayment[]) fromSql.set(p.id, p);
  }
  return { fromTs, fromSql };
}

function expectSameJson(fromSql: Map<string, SessionPayment>, fromTs: Map<string, SessionPayment>) {
  expect([...fromSql.keys()].sort()).toEqual([...fromTs.keys()].sort());
  for (const [id, ts] of fromTs) {
    const sql = fromSql.get(id);
    expect(sql, id).toEqual(ts);
    // Serialising both the same way compares key order at every depth too.
    expect(JSON.stringify(sql), id).toBe(JSON.stringify(ts));
  }
}

describe('demo-data command', () => {
  it('records a realistic spread through the service, and a second run records nothing', async () => {
    let printed = '';
    const first = await seedDemoData(t.database.db, (text) => (printed += text));
    expect(first.recorded).toBe(first.sessions.length);
    expect(first.recorded).toBeGreaterThanOrEqual(60);
    expect(first.collected).toBeGreaterThan(0);
    expect(first.collected).toBeLessThan(first.recorded);
    expect(first.skipped).toBe(0);
    expect(printed).toMatch(/^demo-data: recorded \d+ session payments/);
    expect(printed).toContain("curl -s -H \"Authorization: Bearer $ACCESS_TOKEN\" 'http://127.0.0.1:3000/payments/v1/session-payments?sessionIds=ses_demo_");

    const shown = /sessionIds=([^']+)'/.exec(printed)?.[1]?.split(',') ?? [];
    const shownPayments = JSON.parse(await listPaymentsJson(t.database.db, shown, null)) as SessionPayment[];
    expect(shownPayments).toHaveLength(shown.length);
    expect(new Set(shownPayments.map((p) => p.status))).toEqual(new Set(['PENDING', 'COLLECTED']));

    const second = await seedDemoData(t.database.db, () => {});
    expect(second).toEqual({ recorded: 0, collected: 0, skipped: first.recorded, sessions: first.sessions });

    const payments = JSON.parse(await listPaymentsJson(t.database.db, first.sessions.slice(0, 100), null)) as SessionPayment[];
    expect(payments).toHaveLength(Math.min(100, first.sessions.length));
    expect(new Set(payments.map((p) => p.paymentType))).toEqual(new Set(PAYMENT_TYPES));
    expect(new Set(payments.map((p) => p.network)).size).toBeGreaterThanOrEqual(3);
    expect(new Set(payments.map((p) => p.currency)).size).toBeGreaterThanOrEqual(3);
    expect(new Set(payments.map((p) => p.status))).toEqual(new Set(['PENDING', 'COLLECTED']));
    expect(payments.some((p) => p.taxConfig === null)).toBe(true);
    expect(payments.some((p) => p.taxes.energyPerKwhExciseTax > 0)).toBe(true);
    expect(payments.some((p) => p.priceAdjustment !== null && p.priceAdjustment.calculatedAdjustment > 0)).toBe(true);
    expect(payments.some((p) => p.additionalFee !== undefined)).toBe(true);
    for (const p of payments) {
      if (p.paymentType === 'FREE') expect(p.billedAmount).toBe(0);
    }
  });
});

describe('SQL-built JSON equals TypeScript-built JSON', () => {
  it('for the demo data', async () => {
    const { sessions } = await seedDemoData(t.database.db, () => {});
    const { fromSql, fromTs } = await sqlAndTsJson(sessions);
    expect(fromTs.size).toBe(sessions.length);
    expectSameJson(fromSql, fromTs);
  });

  it('for edge cases: fees, discounts, null and partial tax configs, odd numbers and strings, collected and pending', async () => {
    const cases: Partial<RecordPaymentBody>[] = [
      { taxConfig: null, priceAdjustment: null },
      { taxConfig: {}, sitePartners: [] },
      { taxConfig: { totalPercentSalesTax: null } },
      { taxConfig: { energyPerKwhExciseTax: 0.013 } },
      { taxConfig: { energyPerKwhExciseTax: null, totalPercentSalesTax: 0.0725 } },
      { additionalFee: 1, priceAdjustment: { id: 'padj_cap0', amount: 50, maxAdjustment: 0 } },
      { additionalFee: 2147483647 - 3004, priceAdjustment: { id: 'padj_frac', amount: 12.5, maxAdjustment: 250.9 } },
      { priceAdjustment: { id: 'padj_tiny', amount: 1e-7, maxAdjustment: 1e21 } },
      { priceAdjustment: { id: 'padj_extreme', amount: 5e-324, maxAdjustment: Number.MAX_VALUE } },
      { usages: { energy: 5e-324, time: 1e308, idle: Number.MAX_VALUE } },
      { usages: { energy: 1e21, time: 0.1, idle: 2.5e-8 } },
      { taxConfig: { totalPercentSalesTax: 1e-7, energyPerKwhExciseTax: 1e21 } },
      { taxConfig: { totalPercentSalesTax: 1, energyPerKwhExciseTax: 0 } },
      { network: 'net "quoted" \\ back', location: 'loc </script> \u2028 \u2029 é 😀', sitePartners: ['sp "a"', 'sp\\b', '日本'] },
      { currency: 'JPY', paymentType: 'ROAMING', recordedAt: '2001-02-03T04:05:06.999Z' },
      { currency: 'KWD', paymentType: 'UNKNOWN', recordedAt: '1970-01-01T00:00:00Z' },
      { currency: 'CLF', paymentType: 'PAYMENT_TERMINAL', recordedAt: '2024-02-29T23:59:59.5-05:00' },
      { paymentType: 'FREE', costs: { energy: 0, idle: 0, flat: 0, time: 0 } },
    ];
    const recorded: SessionPayment[] = [];
    for (const [i, overrides] of cases.entries()) {
      const payment = await recordPayment(t, overrides);
      if (i % 2 === 0) {
        const res = await t.app.inject({ method: 'POST', url: collectUrl(payment.id), headers: { authorization: writer(t) } });
        expect(res.statusCode).toBe(200);
        recorded.push(res.json() as SessionPayment);
      } else {
        recorded.push(payment);
      }
    }
    const { fromSql, fromTs } = await sqlAndTsJson(recorded.map((p) => p.session));
    expectSameJson(fromSql, fromTs);
    // And both equal what the API answered when it recorded or collected them.
    for (const p of recorded) expect(JSON.stringify(fromSql.get(p.id))).toBe(JSON.stringify(p));
  });

  it('the list answer is that same text, passed through unchanged', async () => {
    const a = await recordPayment(t, { additionalFee: 10, taxConfig: null });
    const b = await recordPayment(t, { priceAdjustment: { id: 'padj_1', amount: 20, maxAdjustment: null }, taxConfig: null });
    const sessions = [a.session, b.session];
    const res = await listPayments(t, `sessionIds=${sessions.join(',')}`);
    const direct = await listPaymentsJson(t.database.db, sessions, null);
    expect(JSON.parse(res.body)).toEqual(JSON.parse(direct));
    // Without a taxConfig object the SQL text is byte for byte what JSON.stringify writes.
    const body = JSON.parse(res.body) as SessionPayment[];
    expect(res.body).toBe(JSON.stringify(body));
  });
});
