// A payment's JSON is one text (docs/api.md, "Session payments"): the database renders it when the row is written
// (trigger session_payments_render) and every answer (record, read, collect, list) sends that
// text. These tests hold the answers byte-identical to one another, and the text equal to an
// independent account built in TypeScript from the stored row (test/helpers/session-payment-oracle.ts),
// with every number parsing back to the very double the client sent.
import fc from 'fast-check';
import { eq, sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { seedDemoData } from '../../src/main/cli/demo-data.js';
import { listPaymentsJson } from '../../src/payments/payments-repository.js';
import { PAYMENT_TYPES, sessionPayments } from '../../src/payments/payments-tables.js';
import { recordBodySchema, type SessionPayment } from '../../src/payments/payments-schemas.js';
import { recordSessionPayment } from '../../src/payments/payments-service.js';
import { useTestApp } from '../helpers/test-app.js';
import { RECORD_URL, collectUrl, listPayments, oneUrl, paymentBody, reader, writer, type RecordPaymentBody } from '../helpers/payments-factory.js';
import { toSessionPayment } from '../helpers/session-payment-oracle.js';

const t = useTestApp();

async function oracle(id: string): Promise<SessionPayment> {
  const [row] = await t.database.db.select().from(sessionPayments).where(eq(sessionPayments.id, id));
  expect(row, id).toBeDefined();
  return toSessionPayment(row!);
}

// The list's element, taken from the raw text: a list of one session is `[` + its text + `]`.
async function listText(session: string): Promise<string> {
  const res = await listPayments(t, `sessionIds=${encodeURIComponent(session)}`);
  expect(res.statusCode, res.body).toBe(200);
  expect(res.body.startsWith('[') && res.body.endsWith(']'), res.body).toBe(true);
  return res.body.slice(1, -1);
}

async function getText(id: string): Promise<string> {
  const res = await t.app.inject({ method: 'GET', url: oneUrl(id), headers: { authorization: reader(t) } });
  expect(res.statusCode, res.body).toBe(200);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  return res.body;
}

// The answer's text is the list's and the read's, byte for byte, and it says what the row says.
async function expectOneRendering(text: string): Promise<SessionPayment> {
  const parsed = JSON.parse(text) as SessionPayment;
  expect(await getText(parsed.id)).toBe(text);
  expect(await listText(parsed.session)).toBe(text);
  const expected = await oracle(parsed.id);
  expect(parsed).toEqual(expected);
  // Serialising both the same way compares key order at every depth too.
  expect(JSON.stringify(parsed)).toBe(JSON.stringify(expected));
  return parsed;
}

// Records, checks, optionally collects and checks again; the numbers must come back as sent.
async function recordAndCheck(body: RecordPaymentBody, collect: boolean): Promise<void> {
  const recorded = await t.app.inject({ method: 'POST', url: RECORD_URL, headers: { authorization: writer(t) }, payload: body });
  expect(recorded.statusCode, recorded.body).toBe(201);
  expect(recorded.headers['content-type']).toMatch(/^application\/json/);
  const payment = await expectOneRendering(recorded.body);
  expect(payment.usages).toEqual(body.usages);
  expect(payment.taxConfig).toEqual(body.taxConfig);
  expect(payment.priceAdjustment === null ? null : { id: payment.priceAdjustment.id, amount: payment.priceAdjustment.amount, maxAdjustment: payment.priceAdjustment.maxAdjustment }).toEqual(
    body.priceAdjustment,
  );
  if (!collect) return;
  const collected = await t.app.inject({ method: 'POST', url: collectUrl(payment.id), headers: { authorization: writer(t) } });
  expect(collected.statusCode, collected.body).toBe(200);
  expect(collected.headers['content-type']).toMatch(/^application\/json/);
  const after = await expectOneRendering(collected.body);
  expect(after.status).toBe('COLLECTED');
  expect(after.usages).toEqual(body.usages);
}

// Numbers the record schema accepts, with the awkward ones (subnormal, tiny, huge, the
// shortest-form edges where exponent notation starts) weighted in.
const awkward = [0, 1e-7, 1e-6, 5e-324, 2.2250738585072014e-308, 0.1 + 0.2, 0.0725, 1e21, 1e20, 123456789012345680000];
const upTo = (max: number) => fc.oneof(fc.double({ min: 0, max, noNaN: true }), fc.constantFrom(...awkward.filter((v) => v <= max), max));
const rate = upTo(1);
const huge = upTo(1e308);
const taxConfig = fc.option(
  fc.record({ totalPercentSalesTax: fc.option(rate, { nil: null }), energyPerKwhExciseTax: fc.option(huge, { nil: null }) }, { requiredKeys: [] }),
  { nil: null },
);
const priceAdjustment = fc.option(fc.record({ id: fc.constant('padj_prop'), amount: upTo(100), maxAdjustment: fc.option(huge, { nil: null }) }), { nil: null });
const usages = fc.record({ energy: huge, time: huge, idle: huge });

describe('one rendering of a payment', () => {
  it('for every accepted number: record, read, collect and list answer the same text, equal to the stored row', async () => {
    await fc.assert(
      fc.asyncProperty(taxConfig, priceAdjustment, usages, fc.option(fc.integer({ min: 0, max: 5000 }), { nil: undefined }), fc.boolean(), async (tc, pa, us, fee, collect) => {
        await recordAndCheck(paymentBody({ taxConfig: tc, priceAdjustment: pa, usages: us, ...(fee === undefined ? {} : { additionalFee: fee }) }), collect);
      }),
      { numRuns: 40 },
    );
  });

  it('for edge cases: fees, discounts, null and partial tax configs, odd strings, currencies and dates', async () => {
    const cases: Partial<RecordPaymentBody>[] = [
      { taxConfig: null, priceAdjustment: null },
      { taxConfig: {}, sitePartners: [] },
      { taxConfig: { totalPercentSalesTax: null } },
      { taxConfig: { energyPerKwhExciseTax: 0.013 } },
      { taxConfig: { energyPerKwhExciseTax: null, totalPercentSalesTax: 0.0725 } },
      { taxConfig: { totalPercentSalesTax: 1e-7, energyPerKwhExciseTax: 1e308 } },
      { taxConfig: { totalPercentSalesTax: 5e-324, energyPerKwhExciseTax: Number.MAX_VALUE } },
      { additionalFee: 1, priceAdjustment: { id: 'padj_cap0', amount: 50, maxAdjustment: 0 } },
      { additionalFee: 2147483647 - 3004, priceAdjustment: { id: 'padj_frac', amount: 12.5, maxAdjustment: 250.9 } },
      { priceAdjustment: { id: 'padj_tiny', amount: 1e-7, maxAdjustment: 1e308 } },
      { priceAdjustment: { id: 'padj_extreme', amount: 5e-324, maxAdjustment: Number.MAX_VALUE } },
      { usages: { energy: 1e-7, time: 1e308, idle: Number.MAX_VALUE } },
      { usages: { energy: 5e-324, time: 0.1, idle: 2.5e-8 } },
      { usages: { energy: 0, time: 0, idle: 0.30000000000000004 } },
      { network: 'net "quoted" \\ back', location: 'loc </script> \u2028 \u2029 é 😀', sitePartners: ['sp "a"', 'sp\\b', '日本'] },
      { currency: 'JPY', paymentType: 'ROAMING', recordedAt: '2001-02-03T04:05:06.999Z' },
      { currency: 'KWD', paymentType: 'UNKNOWN', recordedAt: '1970-01-01T00:00:00Z' },
      { currency: 'CLF', paymentType: 'PAYMENT_TERMINAL', recordedAt: '2024-02-29T23:59:59.5-05:00' },
      { paymentType: 'FREE', costs: { energy: 0, idle: 0, flat: 0, time: 0 } },
    ];
    for (const [i, overrides] of cases.entries()) await recordAndCheck(paymentBody(overrides), i % 2 === 0);
  });

  it('negative zero, which the schema accepts, is stored and answered as 0', async () => {
    const body = paymentBody({ usages: { energy: 0, time: 0, idle: 0 }, taxConfig: { totalPercentSalesTax: 0, energyPerKwhExciseTax: 0 }, priceAdjustment: { id: 'padj_z', amount: 0, maxAdjustment: 0 } });
    // JSON.stringify writes -0 as 0, so the raw text carries the minus signs.
    const raw = JSON.stringify(body).replace(/":0([,}])/g, '":-0$1');
    expect(raw.match(/-0\b/g)?.length).toBe(7);
    const recorded = await t.app.inject({ method: 'POST', url: RECORD_URL, headers: { authorization: writer(t), 'content-type': 'application/json' }, payload: raw });
    expect(recorded.statusCode, recorded.body).toBe(201);
    expect(recorded.body).not.toContain('-0');
    const payment = await expectOneRendering(recorded.body);
    expect(payment.usages).toEqual(body.usages);
    expect(payment.taxConfig).toEqual(body.taxConfig);
  });

  it('is the same whatever float output setting the writing session has', async () => {
    const body = paymentBody({ usages: { energy: 0.30000000000000004, time: 1 / 3, idle: 5e-324 }, taxConfig: { totalPercentSalesTax: 0.1 + 0.7 } });
    const input = recordBodySchema.parse(body);
    // A session may lower extra_float_digits (older clients and tools do); the stored text must
    // not depend on it.
    const text = await t.database.db.transaction(async (tx) => {
      await tx.execute(sql`SET LOCAL extra_float_digits = 0`);
      return (await recordSessionPayment(tx, { network: null }, input)).json;
    });
    const payment = await expectOneRendering(text);
    expect(payment.usages).toEqual(body.usages);
    expect(payment.taxConfig).toEqual(body.taxConfig);
  });

  it('the list of several payments is their texts joined, passed through unchanged', async () => {
    const a = await t.app.inject({ method: 'POST', url: RECORD_URL, headers: { authorization: writer(t) }, payload: paymentBody({ additionalFee: 10 }) });
    const b = await t.app.inject({ method: 'POST', url: RECORD_URL, headers: { authorization: writer(t) }, payload: paymentBody({ usages: { energy: 1e-7, time: 1, idle: 0 } }) });
    const texts = [a.body, b.body];
    const sessions = texts.map((text) => (JSON.parse(text) as SessionPayment).session);
    const res = await listPayments(t, `sessionIds=${sessions.join(',')}`);
    expect(res.statusCode).toBe(200);
    // The order is unspecified; either way the body is the two texts and nothing else.
    expect([`[${texts.join(',')}]`, `[${[...texts].reverse().join(',')}]`]).toContain(res.body);
  });
});

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
    expect(printed).toContain("curl -s -H \"Authorization: Bearer $TOKEN\" 'http://127.0.0.1:3000/payments/v1/session-payments?sessionIds=ses_demo_");

    const shown = /sessionIds=([^']+)'/.exec(printed)?.[1]?.split(',') ?? [];
    const shownPayments = JSON.parse(await listPaymentsJson(t.database.db, { network: null }, shown)) as SessionPayment[];
    expect(shownPayments).toHaveLength(shown.length);
    expect(new Set(shownPayments.map((p) => p.status))).toEqual(new Set(['PENDING', 'COLLECTED']));

    const second = await seedDemoData(t.database.db, () => {});
    expect(second).toEqual({ recorded: 0, collected: 0, skipped: first.recorded, sessions: first.sessions });

    const payments = JSON.parse(await listPaymentsJson(t.database.db, { network: null }, first.sessions.slice(0, 100))) as SessionPayment[];
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

  it('every demo payment reads as the text the list holds, equal to its row', async () => {
    const { sessions } = await seedDemoData(t.database.db, () => {});
    expect(sessions.length).toBeGreaterThan(0);
    for (const session of sessions) await expectOneRendering(await listText(session));
  });
});
