// Pure billing calculator for session payments: the arithmetic of docs/billing.md ("Steps",
// 1-11); keep this file free of I/O so it can be tested alone.
import cc from 'currency-codes';
import { Decimal } from 'decimal.js';

export interface Costs { energy: number; idle: number; flat: number; time: number }
export interface Usages { energy: number; time: number; idle: number }
export interface TaxConfig { totalPercentSalesTax?: number | null; energyPerKwhExciseTax?: number | null }
export interface PriceAdjustmentInput { id: string; amount: number; maxAdjustment: number | null }
export interface BillingInput {
  currency: string;
  costs: Costs;
  usages: Usages;
  taxConfig: TaxConfig | null;
  priceAdjustment: PriceAdjustmentInput | null;
  additionalFee?: number | undefined;
}
export interface BillingResult {
  preTaxCosts: Costs;
  preTaxChargingSessionCost: number;
  additionalFee?: number;
  preTaxAdditionalFee?: number;
  priceAdjustment: (PriceAdjustmentInput & { calculatedAdjustment: number }) | null;
  taxes: { totalPercentSalesTax: number; energyPerKwhExciseTax: number };
  totalTaxAmount: number;
  billedAmount: number;
}

export const MAX_AMOUNT = 2_147_483_647;

// A private constructor so the global Decimal configuration (shared with any other code in the
// process) is never touched. The precision is chosen so that every operation here is exact or,
// for the divisions by (1 + s), accurate far beyond what rounding to an integer can notice: a
// JSON double spelled in shortest form has at most 17 significant digits and an exponent no lower
// than -324, so 1 + s needs at most ~341 digits to be exact, and the quotient then needs about
// that many again to be told apart from a true half-way value. 400 covers every finite double.
const D = Decimal.clone({ precision: 400, rounding: Decimal.ROUND_HALF_UP });
type Dec = Decimal;

// ISO 4217 lists these codes with minor unit "N.A." (precious metals, bond-market units, SDR,
// SUCRE, ADB unit, the testing code and "no currency"). currency-codes 2.2.0 ingests "N.A." as
// `parseInt('N.A.') || 0`, so in its table they look exactly like genuine zero-digit currencies
// such as JPY. An amount "in minor units" is meaningless for them, so they are not billable.
// The test suite checks this set against the ISO XML shipped inside the package, so a package
// update that changes the list is caught there rather than silently here.
const NO_MINOR_UNIT: ReadonlySet<string> = new Set([
  'XAG', 'XAU', 'XBA', 'XBB', 'XBC', 'XBD', 'XDR', 'XPD', 'XPT', 'XSU', 'XTS', 'XUA', 'XXX',
]);

export function currencyMinorDigits(code: string): number | undefined {
  // cc.code() upper-cases its argument, so 'usd' would otherwise be accepted.
  if (typeof code !== 'string' || !/^[A-Z]{3}$/.test(code)) return undefined;
  if (NO_MINOR_UNIT.has(code)) return undefined;
  const record = cc.code(code);
  if (record === undefined) return undefined;
  const digits: unknown = record.digits;
  if (typeof digits !== 'number' || !Number.isInteger(digits) || digits < 0 || digits > 4) return undefined;
  return digits;
}

export function isActiveCurrency(code: string): boolean {
  return currencyMinorDigits(code) !== undefined;
}

export function isFreeConsistent(paymentType: string, billedAmount: number): boolean {
  return !(paymentType === 'FREE' && billedAmount > 0);
}

// String(n) is the shortest spelling that round-trips, so 0.0725 becomes exactly 725/10000
// instead of the binary value 0.07249999999999999500399638918679556809365749359130859375.
// Non-finite numbers are refused here because they are the only way to reach NaN below.
function dec(n: number, what: string): Dec {
  if (typeof n !== 'number' || !Number.isFinite(n)) {
    throw new Error(`billing: ${what} must be a finite number`);
  }
  return new D(String(n));
}

function round(v: Dec): Dec {
  return v.toDecimalPlaces(0, D.ROUND_HALF_UP);
}

function toInt(v: Dec, what: string): number {
  const n = v.toNumber();
  // Unreachable for inputs within the documented limits; guards against out-of-range inputs
  // producing a silently wrong or non-integer figure.
  if (!Number.isSafeInteger(n)) throw new Error(`billing: ${what} is not a safe integer`);
  return n;
}

export function computeBilling(input: BillingInput): BillingResult {
  const d = currencyMinorDigits(input.currency);
  if (d === undefined) throw new Error(`billing: unknown currency ${String(input.currency)}`);

  const ce = dec(input.costs.energy, 'costs.energy');
  const ci = dec(input.costs.idle, 'costs.idle');
  const cf = dec(input.costs.flat, 'costs.flat');
  const ct = dec(input.costs.time, 'costs.time');
  const wh = dec(input.usages.energy, 'usages.energy');
  const s = dec(input.taxConfig?.totalPercentSalesTax ?? 0, 'taxConfig.totalPercentSalesTax');
  const x = dec(input.taxConfig?.energyPerKwhExciseTax ?? 0, 'taxConfig.energyPerKwhExciseTax');
  const fee = dec(input.additionalFee ?? 0, 'additionalFee');
  const onePlusS = s.plus(1);
  const preTax = (v: Dec): Dec => round(v.div(onePlusS));

  // 1
  const T = ce.plus(ci).plus(cf).plus(ct);
  // 2: the excise is carved out of the energy charge, so it can never exceed it.
  const preTaxEnergyWithExcise = preTax(ce);
  const E = D.min(round(wh.div(1000).times(x).times(new D(10).pow(d))), preTaxEnergyWithExcise);
  // 3
  const preTaxCosts = {
    energy: preTaxEnergyWithExcise.minus(E),
    idle: preTax(ci),
    flat: preTax(cf),
    time: preTax(ct),
  };
  // 4: rounded on the total, deliberately not the sum of the rounded components.
  const P = preTax(T).minus(E);
  // 5
  const S_session = T.minus(P).minus(E);
  // 6
  const hasFee = fee.gt(0);
  const F = hasFee ? preTax(fee) : new D(0);
  const S_fee = hasFee ? fee.minus(F) : new D(0);
  // 7: the discount only ever reduces the pre-tax session cost, never the fee or the excise.
  let adj = new D(0);
  const pa = input.priceAdjustment;
  if (pa !== null && pa !== undefined) {
    adj = round(P.times(dec(pa.amount, 'priceAdjustment.amount')).div(100));
    if (pa.maxAdjustment !== null && pa.maxAdjustment !== undefined) {
      const m = dec(pa.maxAdjustment, 'priceAdjustment.maxAdjustment');
      if (m.gt(0)) adj = D.min(adj, m.floor());
    }
    adj = D.min(adj, P);
  }
  // 8: never hand back more sales tax than the session carried.
  const S_adj = D.min(round(adj.times(s)), S_session);
  // 9
  const salesTax = S_session.minus(S_adj).plus(S_fee);
  // 10
  const totalTax = salesTax.plus(E);
  // 11
  const billed = P.plus(F).minus(adj).plus(totalTax);

  const result: BillingResult = {
    preTaxCosts: {
      energy: toInt(preTaxCosts.energy, 'preTaxCosts.energy'),
      idle: toInt(preTaxCosts.idle, 'preTaxCosts.idle'),
      flat: toInt(preTaxCosts.flat, 'preTaxCosts.flat'),
      time: toInt(preTaxCosts.time, 'preTaxCosts.time'),
    },
    preTaxChargingSessionCost: toInt(P, 'preTaxChargingSessionCost'),
    priceAdjustment:
      pa === null || pa === undefined
        ? null
        : { id: pa.id, amount: pa.amount, maxAdjustment: pa.maxAdjustment, calculatedAdjustment: toInt(adj, 'calculatedAdjustment') },
    taxes: {
      totalPercentSalesTax: toInt(salesTax, 'taxes.totalPercentSalesTax'),
      energyPerKwhExciseTax: toInt(E, 'taxes.energyPerKwhExciseTax'),
    },
    totalTaxAmount: toInt(totalTax, 'totalTaxAmount'),
    billedAmount: toInt(billed, 'billedAmount'),
  };
  if (hasFee) {
    result.additionalFee = input.additionalFee as number;
    result.preTaxAdditionalFee = toInt(F, 'preTaxAdditionalFee');
  }
  return result;
}
