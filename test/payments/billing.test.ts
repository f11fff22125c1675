import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { Decimal } from 'decimal.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  MAX_AMOUNT,
  computeBilling,
  currencyMinorDigits,
  isActiveCurrency,
  isFreeConsistent,
  type BillingInput,
  type BillingResult,
} from '../../src/payments/billing.js';
import { committedCopyText, loadVectors, sharedVectorsPath } from '../helpers/billing-vectors.js';

interface Vector { name: string; input: BillingInput; expected: Record<string, unknown> }

const vectors = loadVectors<Vector>();

function pick(result: BillingResult, keys: string[]): Record<string, unknown> {
  const all = result as unknown as Record<string, unknown>;
  return Object.fromEntries(keys.filter((k) => k in all).map((k) => [k, all[k]]));
}

describe('billing vectors (shared/design/billing-vectors.json)', () => {
  it('keeps the committed copy of the vectors identical to the design document', () => {
    const shared = sharedVectorsPath();
    // A lone clone has only the copy; CI and the team's machines have both and must agree.
    if (shared) expect(committedCopyText()).toBe(fs.readFileSync(shared, 'utf8'));
    expect(JSON.parse(committedCopyText())).toEqual(vectors);
  });

  it('found enough vectors to be meaningful', () => {
    expect(vectors.length).toBeGreaterThan(20);
  });

  it.each(vectors.map((v) => [v.name, v] as const))('%s', (_name, v) => {
    const result = computeBilling(v.input);
    expect(pick(result, Object.keys(v.expected))).toEqual(v.expected);
    if (!('additionalFee' in v.expected)) {
      expect(result).not.toHaveProperty('additionalFee');
      expect(result).not.toHaveProperty('preTaxAdditionalFee');
    }
  });
});

describe('cases binary floating point gets wrong', () => {
  it('excise: 1005 Wh at 1 USD/kWh is exactly 100.5 cents, rounds up to 101', () => {
    // 1005 / 1000 * 1 * 100 is 100.49999999999999 in doubles (1.005 is stored just below),
    // so Math.round would give 100. Exactly it is 100.5 -> 101 (half away from zero).
    // E = min(101, round(200 / 1)) = 101; preTaxCosts.energy = 200 - 101 = 99; P = 200 - 101 = 99;
    // S_session = 200 - 99 - 101 = 0; billed = 99 + 0 + 101 = 200 = T.
    const r = computeBilling({
      currency: 'USD',
      costs: { energy: 200, idle: 0, flat: 0, time: 0 },
      usages: { energy: 1005, time: 600, idle: 0 },
      taxConfig: { totalPercentSalesTax: null, energyPerKwhExciseTax: 1 },
      priceAdjustment: null,
    });
    expect(r).toEqual({
      preTaxCosts: { energy: 99, idle: 0, flat: 0, time: 0 },
      preTaxChargingSessionCost: 99,
      priceAdjustment: null,
      taxes: { totalPercentSalesTax: 0, energyPerKwhExciseTax: 101 },
      totalTaxAmount: 101,
      billedAmount: 200,
    });
  });

  it('sales tax given back: 200 * 0.0725 is exactly 14.5, rounds up to 15', () => {
    // T = 1073, s = 0.0725: P = round(1073 / 1.0725) = round(1000.466...) = 1000; S_session = 73.
    // adj = round(1000 * 20 / 100) = 200. S_adj = min(round(200 * 0.0725), 73) = round(14.5) = 15,
    // but in doubles 200 * 0.0725 = 14.499999999999998 -> 14, a one-cent error.
    // taxes.totalPercentSalesTax = 73 - 15 = 58; billed = 1000 - 200 + 58 = 858 = T - adj - S_adj.
    const r = computeBilling({
      currency: 'USD',
      costs: { energy: 1073, idle: 0, flat: 0, time: 0 },
      usages: { energy: 12000, time: 3600, idle: 0 },
      taxConfig: { totalPercentSalesTax: 0.0725, energyPerKwhExciseTax: null },
      priceAdjustment: { id: 'padj_hand', amount: 20, maxAdjustment: null },
    });
    expect(r).toEqual({
      preTaxCosts: { energy: 1000, idle: 0, flat: 0, time: 0 },
      preTaxChargingSessionCost: 1000,
      priceAdjustment: { id: 'padj_hand', amount: 20, maxAdjustment: null, calculatedAdjustment: 200 },
      taxes: { totalPercentSalesTax: 58, energyPerKwhExciseTax: 0 },
      totalTaxAmount: 58,
      billedAmount: 858,
    });
    expect(Math.round(200 * 0.0725)).toBe(14); // documents why exact arithmetic is required
  });
});

describe('currency table', () => {
  it('uses ISO 4217 minor digits', () => {
    expect(currencyMinorDigits('USD')).toBe(2);
    expect(currencyMinorDigits('EUR')).toBe(2);
    expect(currencyMinorDigits('JPY')).toBe(0);
    expect(currencyMinorDigits('KWD')).toBe(3);
    expect(currencyMinorDigits('CLF')).toBe(4);
  });

  it('rejects lower case, unknown and minor-unit-less codes', () => {
    for (const code of ['usd', 'Usd', 'XXX', 'ABC', 'XAU', 'XTS', 'XDR', '', 'US', 'USDD', ' USD']) {
      expect(isActiveCurrency(code), code).toBe(false);
      expect(currencyMinorDigits(code), code).toBeUndefined();
    }
    for (const code of ['USD', 'JPY', 'KWD', 'CLF', 'EUR', 'XAF', 'XOF', 'XPF']) {
      expect(isActiveCurrency(code), code).toBe(true);
    }
  });

  it('agrees with the ISO XML shipped in currency-codes (catches a package update)', () => {
    const require = createRequire(import.meta.url);
    const dir = path.dirname(require.resolve('currency-codes/package.json'));
    const xml = fs.readFileSync(path.join(dir, 'iso-4217-list-one.xml'), 'utf8');
    const iso = new Map<string, string>();
    for (const entry of xml.matchAll(/<CcyNtry>([\s\S]*?)<\/CcyNtry>/g)) {
      const body = entry[1] ?? '';
      const code = /<Ccy>([A-Z]{3})<\/Ccy>/.exec(body)?.[1];
      const minor = /<CcyMnrUnts>([^<]*)<\/CcyMnrUnts>/.exec(body)?.[1];
      if (code !== undefined && minor !== undefined) iso.set(code, minor.trim());
    }
    expect(iso.size).toBeGreaterThan(150);
    for (const [code, minor] of iso) {
      const expected = /^[0-4]$/.test(minor) ? Number(minor) : undefined;
      expect(currencyMinorDigits(code), code).toBe(expected);
    }
  });

  it('computeBilling refuses an unknown currency', () => {
    const input: BillingInput = {
      currency: 'ABC',
      costs: { energy: 1, idle: 0, flat: 0, time: 0 },
      usages: { energy: 0, time: 0, idle: 0 },
      taxConfig: null,
      priceAdjustment: null,
    };
    expect(() => computeBilling(input)).toThrow(Error);
  });
});

describe('FREE payments', () => {
  it('a FREE payment must bill nothing', () => {
    expect(isFreeConsistent('FREE', 0)).toBe(true);
    expect(isFreeConsistent('FREE', 1)).toBe(false);
    expect(isFreeConsistent('GUEST', 1)).toBe(true);
    expect(isFreeConsistent('UNKNOWN', 0)).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------
// Properties. The reference below is written with BigInt rationals rather than decimal.js so
// that it is an independent implementation of docs/billing.md, not a copy of the code under test.

interface Rat { n: bigint; d: bigint } // d > 0

function rat(v: number): Rat {
  // Shortest decimal spelling of the JSON number, e.g. "0.0725", "1e-7", "123.45".
  const m = /^(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?$/.exec(String(v));
  if (!m) throw new Error(`rat: unexpected ${v}`);
  const frac = m[2] ?? '';
  const exp = Number(m[3] ?? '0') - frac.length;
  const digits = BigInt((m[1] ?? '0') + frac);
  return exp >= 0 ? { n: digits * 10n ** BigInt(exp), d: 1n } : { n: digits, d: 10n ** BigInt(-exp) };
}
const mul = (a: Rat, b: Rat): Rat => ({ n: a.n * b.n, d: a.d * b.d });
const div = (a: Rat, b: Rat): Rat => ({ n: a.n * b.d, d: a.d * b.n });
const add = (a: Rat, b: Rat): Rat => ({ n: a.n * b.d + b.n * a.d, d: a.d * b.d });
const int = (k: bigint): Rat => ({ n: k, d: 1n });
// Half away from zero; every value rounded here is >= 0.
const roundR = (a: Rat): bigint => (2n * a.n + a.d) / (2n * a.d);
const floorR = (a: Rat): bigint => a.n / a.d;
const minB = (...xs: bigint[]): bigint => xs.reduce((a, b) => (b < a ? b : a));

function reference(input: BillingInput, digits: number) {
  const c = input.costs;
  const T = BigInt(c.energy) + BigInt(c.idle) + BigInt(c.flat) + BigInt(c.time);
  const s = rat(input.taxConfig?.totalPercentSalesTax ?? 0);
  const x = rat(input.taxConfig?.energyPerKwhExciseTax ?? 0);
  const onePlusS = add(int(1n), s);
  const pre = (k: number | bigint): bigint => roundR(div(int(BigInt(k)), onePlusS));
  const E = minB(roundR(mul(mul(div(rat(input.usages.energy), int(1000n)), x), int(10n ** BigInt(digits)))), pre(c.energy));
  const P = pre(T) - E;
  const S_session = T - P - E;
  const fee = BigInt(input.additionalFee ?? 0);
  const F = fee > 0n ? pre(fee) : 0n;
  let adj = 0n;
  if (input.priceAdjustment) {
    adj = roundR(div(mul(int(P), rat(input.priceAdjustment.amount)), int(100n)));
    const m = input.priceAdjustment.maxAdjustment;
    if (m !== null && m > 0) adj = minB(adj, floorR(rat(m)));
    adj = minB(adj, P);
  }
  return {
    preTaxCosts: { energy: pre(c.energy) - E, idle: pre(c.idle), flat: pre(c.flat), time: pre(c.time) },
    T, E, P, F, fee, adj, S_session,
  };
}

const amount = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 10_000 }) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: MAX_AMOUNT }) },
  { weight: 1, arbitrary: fc.constantFrom(0, 1, MAX_AMOUNT) },
);
const wattHours = fc.oneof(
  fc.integer({ min: 0, max: 1_000_000_000 }),
  fc.double({ min: 0, max: 1e9, noNaN: true, noDefaultInfinity: true }),
  fc.integer({ min: 0, max: 100_000_000 }).map((n) => n / 1000),
);
const salesTax = fc.oneof(fc.constant(null), fc.integer({ min: 0, max: 100_000 }).map((n) => n / 100_000));
const exciseTax = fc.oneof(fc.constant(null), fc.integer({ min: 0, max: 100_000 }).map((n) => n / 10_000));
const percent = fc.oneof(
  fc.integer({ min: 0, max: 100 }),
  fc.integer({ min: 0, max: 10_000 }).map((n) => n / 100),
  fc.double({ min: 0, max: 100, noNaN: true }),
);
const cap = fc.oneof(
  fc.constant(null),
  fc.constant(0),
  fc.integer({ min: 1, max: 1_000_000 }),
  fc.integer({ min: 1, max: 100_000_000 }).map((n) => n / 100),
);

const billingInput: fc.Arbitrary<BillingInput> = fc.record({
  currency: fc.constantFrom('USD', 'JPY', 'KWD', 'CLF', 'EUR'),
  costs: fc.record({ energy: amount, idle: amount, flat: amount, time: amount }),
  usages: fc.record({
    energy: wattHours,
    time: fc.integer({ min: 0, max: 86_400 * 7 }),
    idle: fc.integer({ min: 0, max: 86_400 }),
  }),
  taxConfig: fc.oneof(
    fc.constant(null),
    fc.record({ totalPercentSalesTax: salesTax, energyPerKwhExciseTax: exciseTax }),
    fc.record({ totalPercentSalesTax: salesTax }),
  ),
  priceAdjustment: fc.oneof(
    fc.constant(null),
    fc.record({ id: fc.constant('padj_p'), amount: percent, maxAdjustment: cap }),
  ),
  additionalFee: fc.oneof(fc.constant(undefined), fc.constant(0), amount),
});

const RUNS = { numRuns: 1000 };

function totalCost(i: BillingInput): number {
  return i.costs.energy + i.costs.idle + i.costs.flat + i.costs.time;
}

describe('billing properties (docs/billing.md)', () => {
  it('invariant: billed = P + F - adj + totalTaxAmount', () => {
    fc.assert(
      fc.property(billingInput, (i) => {
        const r = computeBilling(i);
        const adj = r.priceAdjustment?.calculatedAdjustment ?? 0;
        expect(r.billedAmount).toBe(r.preTaxChargingSessionCost + (r.preTaxAdditionalFee ?? 0) - adj + r.totalTaxAmount);
      }),
      RUNS,
    );
  });

  it('without a discount the driver pays exactly T + fee', () => {
    fc.assert(
      fc.property(billingInput, (raw) => {
        const i = { ...raw, priceAdjustment: null };
        const r = computeBilling(i);
        expect(r.priceAdjustment).toBeNull();
        expect(r.billedAmount).toBe(totalCost(i) + (i.additionalFee ?? 0));
      }),
      RUNS,
    );
  });

  it('with a discount billed = T + fee - adj - S_adj, S_adj = min(round(adj * s), S_session)', () => {
    const pa = fc.record({ id: fc.constant('padj_p'), amount: percent, maxAdjustment: cap });
    fc.assert(
      fc.property(billingInput, pa, (raw, priceAdjustment) => {
        const i = { ...raw, priceAdjustment };
        const r = computeBilling(i);
        expect(r.priceAdjustment).not.toBeNull();
        const adj = r.priceAdjustment?.calculatedAdjustment ?? NaN;
        const T = totalCost(i);
        const fee = i.additionalFee ?? 0;
        const sSession = T - r.preTaxChargingSessionCost - r.taxes.energyPerKwhExciseTax;
        const s = new Decimal(String(i.taxConfig?.totalPercentSalesTax ?? 0));
        const sAdj = Decimal.min(new Decimal(adj).times(s).toDecimalPlaces(0, Decimal.ROUND_HALF_UP), sSession).toNumber();
        expect(r.billedAmount).toBe(T + fee - adj - sAdj);
      }),
      RUNS,
    );
  });

  it('every derived amount is a safe integer >= 0, billed <= T + fee, totalTax = sum of taxes', () => {
    fc.assert(
      fc.property(billingInput, (i) => {
        const r = computeBilling(i);
        const amounts = [
          ...Object.values(r.preTaxCosts),
          r.preTaxChargingSessionCost,
          r.taxes.totalPercentSalesTax,
          r.taxes.energyPerKwhExciseTax,
          r.totalTaxAmount,
          r.billedAmount,
          ...(r.preTaxAdditionalFee === undefined ? [] : [r.preTaxAdditionalFee]),
          ...(r.priceAdjustment === null ? [] : [r.priceAdjustment.calculatedAdjustment]),
        ];
        for (const a of amounts) {
          expect(Number.isSafeInteger(a), String(a)).toBe(true);
          expect(a).toBeGreaterThanOrEqual(0);
        }
        expect(r.billedAmount).toBeLessThanOrEqual(totalCost(i) + (i.additionalFee ?? 0));
        expect(r.totalTaxAmount).toBe(r.taxes.totalPercentSalesTax + r.taxes.energyPerKwhExciseTax);
      }),
      RUNS,
    );
  });

  it('fee fields are present iff fee > 0', () => {
    fc.assert(
      fc.property(billingInput, (i) => {
        const r = computeBilling(i);
        const fee = i.additionalFee ?? 0;
        if (fee > 0) {
          expect(r.additionalFee).toBe(fee);
          expect(typeof r.preTaxAdditionalFee).toBe('number');
        } else {
          expect(r).not.toHaveProperty('additionalFee');
          expect(r).not.toHaveProperty('preTaxAdditionalFee');
        }
      }),
      RUNS,
    );
  });

  it('pre-tax components normally sum to P (off by at most 2 from per-component rounding)', () => {
    fc.assert(
      fc.property(billingInput, (i) => {
        const r = computeBilling(i);
        const sum = r.preTaxCosts.energy + r.preTaxCosts.idle + r.preTaxCosts.flat + r.preTaxCosts.time;
        expect(Math.abs(sum - r.preTaxChargingSessionCost)).toBeLessThanOrEqual(2);
      }),
      RUNS,
    );
  });

  it('matches an independent exact-rational (BigInt) reference of steps 1-11', () => {
    fc.assert(
      fc.property(billingInput, (i) => {
        const r = computeBilling(i);
        const ref = reference(i, currencyMinorDigits(i.currency) ?? NaN);
        const s = rat(i.taxConfig?.totalPercentSalesTax ?? 0);
        const sAdj = minB(roundR(mul(int(ref.adj), s)), ref.S_session);
        const sFee = ref.fee > 0n ? ref.fee - ref.F : 0n;
        const sales = ref.S_session - sAdj + sFee;
        const billed = ref.P + ref.F - ref.adj + sales + ref.E;
        expect(r.preTaxCosts).toEqual({
          energy: Number(ref.preTaxCosts.energy),
          idle: Number(ref.preTaxCosts.idle),
          flat: Number(ref.preTaxCosts.flat),
          time: Number(ref.preTaxCosts.time),
        });
        expect(r.preTaxChargingSessionCost).toBe(Number(ref.P));
        expect(r.taxes).toEqual({ totalPercentSalesTax: Number(sales), energyPerKwhExciseTax: Number(ref.E) });
        expect(r.priceAdjustment?.calculatedAdjustment ?? 0).toBe(Number(ref.adj));
        expect(r.billedAmount).toBe(Number(billed));
        if (ref.fee > 0n) expect(r.preTaxAdditionalFee).toBe(Number(ref.F));
      }),
      RUNS,
    );
  });
});
