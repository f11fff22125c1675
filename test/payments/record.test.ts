// POST /payments/v1/session-payments (docs/api.md, "Session payments"; docs/billing.md) and GET one.
import { describe, expect, it } from 'vitest';
import { findPgError } from '../../src/db/failures.js';
import type { BillingInput } from '../../src/payments/billing.js';
import { insertPayment } from '../../src/payments/payments-repository.js';
import type { SessionPayment } from '../../src/payments/payments-schemas.js';
import { newId } from '../../src/kernel/ids.js';
import { useTestApp } from '../helpers/test-app.js';
import {
  RECORD_URL,
  expectPaymentsShape,
  oneUrl,
  paymentBody,
  reader,
  recordPayment,
  uniqueId,
  validationError,
  writer,
  type RecordPaymentBody,
} from '../helpers/payments-factory.js';
import { loadVectors } from '../helpers/billing-vectors.js';

const t = useTestApp();

function post(payload: unknown, authorization = writer(t)) {
  return t.app.inject({ method: 'POST', url: RECORD_URL, headers: { authorization }, payload: payload as Record<string, unknown> });
}

const SPEC_KEYS = [
  'id', 'network', 'session', 'sitePartners', 'location', 'currency', 'status', 'paymentType', 'costs', 'usages', 'taxConfig',
  'preTaxChargingSessionCost', 'preTaxCosts', 'additionalFee', 'preTaxAdditionalFee', 'priceAdjustment', 'taxes', 'totalTaxAmount',
  'billedAmount', 'recordedAt', 'collectedAt', 'createdAt', 'updatedAt',
];
const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describe('record', () => {
  it('answers 201 with the full SessionPayment, derived figures computed', async () => {
    const body = paymentBody({ sitePartners: ['sp_1', 'sp_2', 'sp_1'], recordedAt: '2025-03-04T05:06:07.089+01:00' });
    const res = await post(body);
    expect(res.statusCode).toBe(201);
    const payment = res.json() as SessionPayment;
    expect(payment).toEqual({
      id: expect.stringMatching(/^pmt_[0-9A-HJKMNP-TV-Z]{26}$/),
      network: 'net_a',
      session: body.session,
      sitePartners: ['sp_1', 'sp_2'],
      location: 'loc_1',
      currency: 'USD',
      status: 'PENDING',
      paymentType: 'DRIVER_ACCOUNT',
      costs: { energy: 2700, idle: 150, flat: 100, time: 54 },
      usages: { energy: 20000, time: 3600, idle: 300 },
      taxConfig: { totalPercentSalesTax: 0.08, energyPerKwhExciseTax: 0.02 },
      preTaxChargingSessionCost: 2741,
      preTaxCosts: { energy: 2460, idle: 139, flat: 93, time: 50 },
      priceAdjustment: null,
      taxes: { totalPercentSalesTax: 223, energyPerKwhExciseTax: 40 },
      totalTaxAmount: 263,
      billedAmount: 3004,
      recordedAt: '2025-03-04T04:06:07.089Z',
      collectedAt: null,
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: expect.stringMatching(ISO_MS),
    });
    expect(Object.keys(payment)).toEqual(SPEC_KEYS.filter((k) => !k.includes('dditionalFee')));
    expect(Object.keys(payment.costs)).toEqual(['energy', 'idle', 'flat', 'time']);
    expect(Object.keys(payment.usages)).toEqual(['energy', 'time', 'idle']);
    expect(Object.keys(payment.preTaxCosts)).toEqual(['energy', 'idle', 'flat', 'time']);
  });

  it('recordedAt defaults to now (the database clock, the one that stamps createdAt)', async () => {
    const before = Date.now();
    const payment = await recordPayment(t);
    expect(payment.recordedAt).toBe(payment.createdAt);
    // The database runs on this machine here, so its clock is ours give or take a second.
    expect(Date.parse(payment.recordedAt)).toBeGreaterThanOrEqual(before - 1000);
    expect(Date.parse(payment.recordedAt)).toBeLessThanOrEqual(Date.now() + 1000);
  });

  it('a fee adds both fee fields in the published order; no fee or a zero fee omits both', async () => {
    const withFee = await recordPayment(t, { additionalFee: 108, priceAdjustment: { id: 'padj_9', amount: 10, maxAdjustment: 50.5 } });
    expect(Object.keys(withFee)).toEqual(SPEC_KEYS);
    expect(withFee.additionalFee).toBe(108);
    expect(withFee.preTaxAdditionalFee).toBe(100);
    expect(Object.keys(withFee.priceAdjustment ?? {})).toEqual(['id', 'amount', 'maxAdjustment', 'calculatedAdjustment']);
    for (const fee of [undefined, 0]) {
      const payment = await recordPayment(t, fee === undefined ? {} : { additionalFee: fee });
      expect(payment).not.toHaveProperty('additionalFee');
      expect(payment).not.toHaveProperty('preTaxAdditionalFee');
    }
  });

  it('keeps taxConfig as sent: null, members absent or null', async () => {
    for (const taxConfig of [null, {}, { totalPercentSalesTax: null }, { energyPerKwhExciseTax: 0.013, totalPercentSalesTax: null }]) {
      const payment = await recordPayment(t, { taxConfig });
      expect(payment.taxConfig).toEqual(taxConfig);
      if (taxConfig) expect(Object.keys(payment.taxConfig ?? {})).toEqual(['totalPercentSalesTax', 'energyPerKwhExciseTax'].filter((k) => k in taxConfig));
    }
  });

  it('GET one answers the same payment', async () => {
    const payment = await recordPayment(t, { additionalFee: 54 });
    const res = await t.app.inject({ url: oneUrl(payment.id), headers: { authorization: reader(t) } });
    expect(res.statusCode).toBe(200);
    expect(JSON.stringify(res.json())).toBe(JSON.stringify(payment));
  });

  it('GET one of an unknown ID is 404 NOT_FOUND', async () => {
    const res = await t.app.inject({ url: oneUrl('pmt_nope'), headers: { authorization: reader(t) } });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ code: 'NOT_FOUND', message: 'No session payment pmt_nope', status: 404 });
  });

  it('a second payment for a session is 409 CONFLICT', async () => {
    const first = await recordPayment(t);
    const res = await post(paymentBody({ session: first.session, paymentType: 'GUEST' }));
    expect(res.statusCode).toBe(409);
    expect(res.json()).toEqual({ code: 'CONFLICT', message: `Session ${first.session} already has a payment`, status: 409 });
  });

  it('concurrent records of one session: exactly one 201, the others 409', async () => {
    const body = paymentBody();
    const answers = await Promise.all(Array.from({ length: 10 }, () => post(body)));
    const codes = answers.map((r) => r.statusCode).sort();
    expect(codes).toEqual([201, ...Array<number>(9).fill(409)]);
    for (const r of answers) expectPaymentsShape(r);
  });
});

describe('network scope', () => {
  it('a network-scoped token records for its own network only (403 otherwise)', async () => {
    const own = await post(paymentBody({ network: 'net_rec_a' }), writer(t, 'net_rec_a'));
    expect(own.statusCode).toBe(201);
    const other = await post(paymentBody({ network: 'net_rec_b' }), writer(t, 'net_rec_a'));
    expect(other.statusCode).toBe(403);
    expect(other.json()).toEqual({ code: 'FORBIDDEN', message: 'The access token may record payments for network net_rec_a only', status: 403 });
  });

  it('GET one of another network is 404, as if it did not exist; no claim sees it', async () => {
    const payment = await recordPayment(t, { network: 'net_rec_b' });
    const hidden = await t.app.inject({ url: oneUrl(payment.id), headers: { authorization: reader(t, 'net_rec_a') } });
    expect(hidden.statusCode).toBe(404);
    expect(hidden.json()).toEqual({ code: 'NOT_FOUND', message: `No session payment ${payment.id}`, status: 404 });
    const own = await t.app.inject({ url: oneUrl(payment.id), headers: { authorization: reader(t, 'net_rec_b') } });
    expect(own.json()).toEqual(payment);
    const all = await t.app.inject({ url: oneUrl(payment.id), headers: { authorization: writer(t) } });
    expect(all.json()).toEqual(payment);
  });
});

// ---------------------------------------------------------------------------------------------

interface Vector { name: string; input: BillingInput; expected: Record<string, unknown> }
const vectors = loadVectors<Vector>();

describe('billing through HTTP (billing-vectors.json)', () => {
  it.each(vectors.map((v) => [v.name, v] as const))('%s', async (_name, v) => {
    const body = paymentBody({
      ...(v.input as unknown as Partial<RecordPaymentBody>),
      paymentType: v.expected['billedAmount'] === 0 ? 'FREE' : 'GUEST',
    });
    const res = await post(body);
    expect(res.statusCode, res.body).toBe(201);
    const payment = res.json() as Record<string, unknown>;
    for (const [key, value] of Object.entries(v.expected)) expect(payment[key], key).toEqual(value);
    if (!('additionalFee' in v.expected)) expect(payment).not.toHaveProperty('additionalFee');
  });
});

describe('FREE', () => {
  it('a FREE payment that bills something is 400 at ["paymentType"]', async () => {
    const res = await post(paymentBody({ paymentType: 'FREE' }));
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual(
      validationError([
        { code: 'custom', path: ['paymentType'], message: 'paymentType FREE requires a billed amount of 0, but this session bills 3004' },
      ]),
    );
  });

  it('a FREE payment billing 0 (a full discount without excise) is recorded', async () => {
    const payment = await recordPayment(t, {
      paymentType: 'FREE',
      costs: { energy: 1000, idle: 0, flat: 0, time: 0 },
      taxConfig: { totalPercentSalesTax: 0.1 },
      priceAdjustment: { id: 'padj_all', amount: 100, maxAdjustment: null },
    });
    expect(payment.billedAmount).toBe(0);
    expect(payment.priceAdjustment?.calculatedAdjustment).toBe(909);
  });
});

// ---------------------------------------------------------------------------------------------

type Case = [name: string, overrides: Record<string, unknown>, issues: { code: string; path: (string | number)[] }[]];

const CASES: Case[] = [
  ['unknown top-level field', { extra: 1 }, [{ code: 'unrecognized_keys', path: [] }]],
  ['unknown field in costs', { costs: { energy: 1, idle: 0, flat: 0, time: 0, tax: 1 } }, [{ code: 'unrecognized_keys', path: ['costs'] }]],
  ['unknown field in usages', { usages: { energy: 1, time: 0, idle: 0, x: 0 } }, [{ code: 'unrecognized_keys', path: ['usages'] }]],
  ['unknown field in taxConfig', { taxConfig: { vat: 0.2 } }, [{ code: 'unrecognized_keys', path: ['taxConfig'] }]],
  ['unknown field in priceAdjustment', { priceAdjustment: { id: 'p', amount: 1, maxAdjustment: null, calculatedAdjustment: 5 } }, [{ code: 'unrecognized_keys', path: ['priceAdjustment'] }]],
  ['negative cost', { costs: { energy: -1, idle: 0, flat: 0, time: 0 } }, [{ code: 'too_small', path: ['costs', 'energy'] }]],
  ['fractional cost', { costs: { energy: 1.5, idle: 0, flat: 0, time: 0 } }, [{ code: 'invalid_type', path: ['costs', 'energy'] }]],
  ['cost over 2^31-1', { costs: { energy: 0, idle: 2147483648, flat: 0, time: 0 } }, [{ code: 'too_big', path: ['costs', 'idle'] }]],
  ['cost as a string', { costs: { energy: '100', idle: 0, flat: 0, time: 0 } }, [{ code: 'invalid_type', path: ['costs', 'energy'] }]],
  ['missing cost member', { costs: { energy: 1, idle: 0, flat: 0 } }, [{ code: 'invalid_type', path: ['costs', 'time'] }]],
  ['costs plus fee over 2^31-1', { costs: { energy: 2147483647, idle: 1, flat: 0, time: 0 } }, [{ code: 'too_big', path: ['costs'] }]],
  ['negative usage', { usages: { energy: 1, time: -1, idle: 0 } }, [{ code: 'too_small', path: ['usages', 'time'] }]],
  ['sales tax above 1', { taxConfig: { totalPercentSalesTax: 1.01 } }, [{ code: 'too_big', path: ['taxConfig', 'totalPercentSalesTax'] }]],
  ['negative sales tax', { taxConfig: { totalPercentSalesTax: -0.01 } }, [{ code: 'too_small', path: ['taxConfig', 'totalPercentSalesTax'] }]],
  ['negative excise', { taxConfig: { energyPerKwhExciseTax: -1 } }, [{ code: 'too_small', path: ['taxConfig', 'energyPerKwhExciseTax'] }]],
  ['discount above 100', { priceAdjustment: { id: 'p', amount: 100.5, maxAdjustment: null } }, [{ code: 'too_big', path: ['priceAdjustment', 'amount'] }]],
  ['negative cap', { priceAdjustment: { id: 'p', amount: 10, maxAdjustment: -1 } }, [{ code: 'too_small', path: ['priceAdjustment', 'maxAdjustment'] }]],
  ['missing cap', { priceAdjustment: { id: 'p', amount: 10 } }, [{ code: 'invalid_type', path: ['priceAdjustment', 'maxAdjustment'] }]],
  ['empty adjustment id', { priceAdjustment: { id: '', amount: 10, maxAdjustment: null } }, [{ code: 'too_small', path: ['priceAdjustment', 'id'] }]],
  ['lower-case currency', { currency: 'usd' }, [{ code: 'custom', path: ['currency'] }]],
  ['unknown currency', { currency: 'ABC' }, [{ code: 'custom', path: ['currency'] }]],
  ['currency without minor unit', { currency: 'XAU' }, [{ code: 'custom', path: ['currency'] }]],
  ['unknown paymentType', { paymentType: 'CASH' }, [{ code: 'invalid_value', path: ['paymentType'] }]],
  ['empty network', { network: '' }, [{ code: 'too_small', path: ['network'] }]],
  ['network of 129 characters', { network: 'n'.repeat(129) }, [{ code: 'too_big', path: ['network'] }]],
  ['control character in session', { session: 'ses\n1' }, [{ code: 'invalid_format', path: ['session'] }]],
  ['NUL in location', { location: 'loc\u0000' }, [{ code: 'invalid_format', path: ['location'] }]],
  ['unpaired surrogate in network', { network: 'net_\ud800' }, [{ code: 'invalid_format', path: ['network'] }]],
  ['control character in a site partner', { sitePartners: ['ok', 'bad\u0085'] }, [{ code: 'invalid_format', path: ['sitePartners', 1] }]],
  ['51 distinct site partners', { sitePartners: Array.from({ length: 51 }, (_, i) => `sp_${i}`) }, [{ code: 'too_big', path: ['sitePartners'] }]],
  ['site partners not an array', { sitePartners: 'sp_1' }, [{ code: 'invalid_type', path: ['sitePartners'] }]],
  ['negative fee', { additionalFee: -5 }, [{ code: 'too_small', path: ['additionalFee'] }]],
  ['null fee', { additionalFee: null }, [{ code: 'invalid_type', path: ['additionalFee'] }]],
  ['recordedAt not a date-time', { recordedAt: 'yesterday' }, [{ code: 'invalid_format', path: ['recordedAt'] }]],
  ['recordedAt without zone', { recordedAt: '2025-01-01T00:00:00' }, [{ code: 'invalid_format', path: ['recordedAt'] }]],
  ['recordedAt before 1970', { recordedAt: '1969-12-31T23:59:59Z' }, [{ code: 'too_small', path: ['recordedAt'] }]],
  ['recordedAt in the future', { recordedAt: '2999-01-01T00:00:00Z' }, [{ code: 'too_big', path: ['recordedAt'] }]],
  ['taxConfig missing', { taxConfig: undefined }, [{ code: 'invalid_type', path: ['taxConfig'] }]],
  ['several problems at once', { currency: 'EURO', usages: { energy: -1, time: 0, idle: 0 }, costs: { energy: 1, idle: 0, flat: 0, time: 0.5 } },
    [{ code: 'custom', path: ['currency'] }, { code: 'invalid_type', path: ['costs', 'time'] }, { code: 'too_small', path: ['usages', 'energy'] }]],
];

describe('validation (400, exact issue codes and paths)', () => {
  it.each(CASES)('%s', async (_name, overrides, issues) => {
    const res = await post(paymentBody(overrides as Partial<RecordPaymentBody>));
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual(validationError(issues));
  });

  it('accepts IDs of 128 characters and 50 distinct site partners among duplicates', async () => {
    const partners = Array.from({ length: 60 }, (_, i) => `sp_${i % 50}`);
    const payment = await recordPayment(t, { network: 'n'.repeat(128), location: '📍'.repeat(128), sitePartners: partners });
    expect(payment.sitePartners).toEqual(partners.slice(0, 50));
  });

  it('a body that is not an object is 400 at []', async () => {
    for (const payload of [[], 'text', 42, null]) {
      const res = await t.app.inject({
        method: 'POST',
        url: RECORD_URL,
        headers: { authorization: writer(t), 'content-type': 'application/json' },
        payload: JSON.stringify(payload),
      });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual(validationError([{ code: 'invalid_type', path: [] }]));
    }
  });

  it('malformed JSON, a wrong content type, an empty or oversized body: 400 in the ZodError shape', async () => {
    const authorization = writer(t);
    const answers = [
      await t.app.inject({ method: 'POST', url: RECORD_URL, headers: { authorization, 'content-type': 'application/json' }, payload: '{"network":' }),
      await t.app.inject({ method: 'POST', url: RECORD_URL, headers: { authorization, 'content-type': 'application/json' }, payload: '' }),
      await t.app.inject({ method: 'POST', url: RECORD_URL, headers: { authorization, 'content-type': 'text/plain' }, payload: JSON.stringify(paymentBody()) }),
      await t.app.inject({ method: 'POST', url: RECORD_URL, headers: { authorization, 'content-type': 'application/xml' }, payload: '<payment/>' }),
      await t.app.inject({
        method: 'POST',
        url: RECORD_URL,
        headers: { authorization, 'content-type': 'application/json' },
        payload: JSON.stringify(paymentBody({ sitePartners: Array.from({ length: 700 }, () => 'p'.repeat(100)) })),
      }),
      await t.app.inject({ method: 'POST', url: RECORD_URL, headers: { authorization, 'content-type': 'application/json' }, payload: '{"__proto__":{"x":1}}' }),
    ];
    for (const res of answers) {
      expect(res.statusCode, res.body).toBe(400);
      expectPaymentsShape(res);
    }
    expect(answers[0]?.json()).toEqual(validationError([{ code: 'custom', path: [], message: 'Request body is not valid JSON' }]));
    expect(answers[3]?.json()).toEqual(validationError([{ code: 'custom', path: [], message: 'Content-Type must be application/json' }]));
    expect(answers[4]?.json()).toEqual(validationError([{ code: 'custom', path: [], message: 'Request body is larger than 64 KiB' }]));
  });
});

describe('database constraints', () => {
  it('a CHECK constraint refuses a row whose figures break the billing invariant', async () => {
    const row = {
      id: newId('pmt'),
      network: 'net_a',
      session: uniqueId('ses'),
      sitePartners: [],
      location: 'loc_1',
      currency: 'USD',
      status: 'PENDING' as const,
      paymentType: 'GUEST' as const,
      costEnergy: 1000, costIdle: 0, costFlat: 0, costTime: 0,
      usageEnergyWh: 1000, usageTimeSeconds: 60, usageIdleSeconds: 0,
      taxConfig: null,
      preTaxChargingSessionCost: 1000, preTaxEnergy: 1000, preTaxIdle: 0, preTaxFlat: 0, preTaxTime: 0,
      taxSales: 0, taxExcise: 0, totalTaxAmount: 0,
      billedAmount: 999,
      recordedAt: new Date(),
    };
    const error = await insertPayment(t.database.db, row).then(() => null, (e: unknown) => e);
    expect(findPgError(error)).toMatchObject({ code: '23514', constraint: 'session_payments_billed_invariant' });
    // The same row with the right billed amount goes in: the constraint, not something else, refused it.
    await expect(insertPayment(t.database.db, { ...row, billedAmount: 1000 }).then((json) => JSON.parse(json) as SessionPayment)).resolves.toMatchObject({ billedAmount: 1000 });
    const collectedWhilePending = await insertPayment(t.database.db, { ...row, id: newId('pmt'), session: uniqueId('ses'), billedAmount: 1000, collectedAt: new Date() }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(findPgError(collectedWhilePending)).toMatchObject({ code: '23514', constraint: 'session_payments_collected_state' });
  });
});
