// Zod schemas of the payments API: they validate requests (through the app's validator compiler)
// and generate the OpenAPI description. Response schemas document only; a payment is answered as
// the JSON text PostgreSQL rendered when its row was written, errors with JSON.stringify.
import { z } from 'zod';
import { MAX_ISSUES } from '../kernel/errors.js';
import { identifierSchema } from '../kernel/identifier-schemas.js';
import { LISTED_ID, MAX_ID_LENGTH, UNLISTED_ID, exceedsIdLength, splitList } from '../kernel/identifiers.js';
import { MAX_AMOUNT, isActiveCurrency } from './billing.js';
import { PAYMENT_STATUSES, PAYMENT_TYPES } from './payments-tables.js';

export const MAX_SESSION_IDS = 100;
export const MAX_SITE_PARTNERS = 50;
// Clocks of callers drift; a time a little ahead of ours is still "now" to them.
export const FUTURE_TOLERANCE_MS = 5 * 60 * 1000;

// A request that succeeds as it stands (once per session: the session then has its payment).
const RECORD_EXAMPLE = {
  network: 'net_1',
  session: 'ses_1042',
  sitePartners: ['sp_1'],
  location: 'loc_1',
  currency: 'USD',
  paymentType: 'DRIVER_ACCOUNT',
  costs: { energy: 2700, idle: 150, flat: 100, time: 54 },
  usages: { energy: 20000, time: 3600, idle: 300 },
  taxConfig: { totalPercentSalesTax: 0.08, energyPerKwhExciseTax: 0.02 },
  priceAdjustment: { id: 'adj_spring', amount: 20, maxAdjustment: 500 },
  additionalFee: 100,
  recordedAt: '2025-01-31T18:04:05.123Z',
};

const tooLong = (input: string) =>
  ({ code: 'too_big', origin: 'string', maximum: MAX_ID_LENGTH, inclusive: true, input, message: `must be at most ${MAX_ID_LENGTH} characters` }) as const;

// ---------------------------------------------------------------------------------------------
// GET /payments/v1/session-payments?sessionIds=…

function parseSessionIds(raw: string, ctx: z.RefinementCtx<string>): string[] {
  if (raw.trim() === '') {
    ctx.addIssue({ code: 'too_small', origin: 'string', minimum: 1, inclusive: true, input: raw, message: 'sessionIds must list at least one session ID' });
    return z.NEVER;
  }
  const entries = splitList(raw);
  // One pass, on the list's hot path: the issues, and the distinct IDs in their first order.
  const seen = new Set<string>();
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i]!;
    // Only the first MAX_ISSUES issues are ever rendered; building more only costs time.
    const reporting = ctx.issues.length < MAX_ISSUES;
    if (entry === '') {
      if (reporting) ctx.addIssue({ code: 'too_small', origin: 'string', minimum: 1, inclusive: true, input: entry, path: [i], message: 'session ID must not be blank' });
      // A blank entry has its own issue; it is not one more ID.
      continue;
    }
    if (reporting && exceedsIdLength(entry)) {
      ctx.addIssue({ ...tooLong(entry), path: [i], message: `session ID must be at most ${MAX_ID_LENGTH} characters` });
    }
    seen.add(entry);
  }
  const distinct = [...seen];
  if (distinct.length > MAX_SESSION_IDS) {
    ctx.addIssue({
      code: 'too_big',
      origin: 'array',
      maximum: MAX_SESSION_IDS,
      inclusive: true,
      input: distinct,
      message: `sessionIds lists ${distinct.length} distinct session IDs; at most ${MAX_SESSION_IDS} are allowed`,
    });
  }
  return distinct;
}

export const listQuerySchema = z.object({
  sessionIds: z
    // A repeated parameter (?sessionIds=a&sessionIds=b,c) counts as one comma-joined list, so the
    // indices in issue paths are positions in that joined list.
    .preprocess(
      (v) => (Array.isArray(v) ? v.join(',') : v),
      z.string({ error: (issue) => (issue.input === undefined ? 'sessionIds is required' : 'sessionIds must be a string') }).transform(parseSessionIds),
    )
    .meta({
      type: 'string',
      description: `Comma-separated session IDs (the parameter may be repeated); at most ${MAX_SESSION_IDS} after duplicates are removed, each at most ${MAX_ID_LENGTH} characters.`,
      example: `${RECORD_EXAMPLE.session},ses_1043`,
    }),
});

// ---------------------------------------------------------------------------------------------
// Request bodies

// IDs the list must find again (session, network, location, site partners) hold no comma; the
// others may, since nothing splits them.
const listedId = identifierSchema(LISTED_ID);
const unlistedId = identifierSchema(UNLISTED_ID);

const amount = z.number().int().min(0).max(MAX_AMOUNT);
// z.number() already refuses NaN and ±Infinity (JSON's 1e400 parses to Infinity).
const measure = z.number().min(0);

const EARLIEST = new Date('1970-01-01T00:00:00.000Z');

// An ISO 8601 date-time with Z or an offset, read as an instant. The lower bound keeps dates in
// the range both JavaScript and PostgreSQL represent the same way (no year 0, no BC).
const instant = z.iso
  .datetime({ offset: true, error: 'must be an ISO 8601 date-time with Z or an offset' })
  .transform((s) => new Date(s))
  .superRefine((d, ctx) => {
    if (d.getTime() < EARLIEST.getTime()) {
      ctx.addIssue({ code: 'too_small', origin: 'date', minimum: EARLIEST.getTime(), inclusive: true, input: d, message: 'must not be before 1970-01-01T00:00:00Z' });
    } else if (d.getTime() > Date.now() + FUTURE_TOLERANCE_MS) {
      ctx.addIssue({ code: 'too_big', origin: 'date', maximum: Date.now() + FUTURE_TOLERANCE_MS, inclusive: true, input: d, message: 'must not be in the future' });
    }
  })
  .meta({ type: 'string', format: 'date-time' });

const componentAmounts = z
  .object({ energy: amount, idle: amount, flat: amount, time: amount })
  .strict();

const usagesInput = z
  .object({
    energy: measure.meta({ description: 'Watt-hours delivered' }),
    time: measure.meta({ description: 'Seconds connected' }),
    idle: measure.meta({ description: 'Seconds idle after charging finished' }),
  })
  .strict();

const taxConfigInput = z
  .object({
    totalPercentSalesTax: z.number().min(0).max(1).nullable().optional().meta({ description: 'Sales tax as a fraction (0.08 = 8 %)' }),
    energyPerKwhExciseTax: z.number().min(0).nullable().optional().meta({ description: 'Excise tax per kWh in major currency units' }),
  })
  .strict()
  .nullable();

const priceAdjustmentInput = z
  .object({
    id: unlistedId,
    amount: z.number().min(0).max(100).meta({ description: 'Discount percentage (20 = 20 % off)' }),
    maxAdjustment: z.number().min(0).nullable().meta({ description: 'Cap in minor units; null or 0 = no cap' }),
  })
  .strict()
  .nullable();

const sitePartnersInput = z
  .array(listedId)
  .transform((ids) => [...new Set(ids)])
  .superRefine((ids, ctx) => {
    if (ids.length > MAX_SITE_PARTNERS) {
      ctx.addIssue({
        code: 'too_big',
        origin: 'array',
        maximum: MAX_SITE_PARTNERS,
        inclusive: true,
        input: ids,
        message: `sitePartners holds ${ids.length} distinct entries; at most ${MAX_SITE_PARTNERS} are allowed`,
      });
    }
  })
  .meta({ type: 'array', items: { type: 'string', minLength: 1, maxLength: MAX_ID_LENGTH }, maxItems: MAX_SITE_PARTNERS });

export const recordBodySchema = z
  .object({
    network: listedId,
    session: listedId,
    sitePartners: sitePartnersInput,
    location: listedId,
    currency: z.string().refine(isActiveCurrency, 'must be an active ISO 4217 currency code with minor units').meta({ example: 'USD' }),
    paymentType: z.enum(PAYMENT_TYPES),
    costs: componentAmounts.meta({ description: 'Tax-inclusive charges per component, before any discount, in minor units' }),
    usages: usagesInput,
    taxConfig: taxConfigInput,
    priceAdjustment: priceAdjustmentInput,
    additionalFee: amount.optional().meta({ description: 'Tax-inclusive fee on top of the session; absent or 0 = no fee' }),
    recordedAt: instant.optional().meta({ description: 'Defaults to now' }),
  })
  .strict()
  .superRefine((body, ctx) => {
    // Every derived figure is at most T + fee, so bounding that sum keeps all of them within the
    // integer columns the record is stored in. A member out of range has its own issue already.
    const { energy, idle, flat, time } = body.costs;
    const parts = [energy, idle, flat, time, body.additionalFee ?? 0];
    if (parts.some((v) => !(v >= 0 && v <= MAX_AMOUNT))) return;
    const total = parts.reduce((a, b) => a + b, 0);
    if (total > MAX_AMOUNT) {
      ctx.addIssue({
        code: 'too_big',
        origin: 'number',
        maximum: MAX_AMOUNT,
        inclusive: true,
        input: total,
        path: ['costs'],
        message: `the costs plus additionalFee add up to ${total}; at most ${MAX_AMOUNT} is allowed`,
      });
    }
  })
  .meta({ examples: [RECORD_EXAMPLE] });

export type RecordPaymentInput = z.output<typeof recordBodySchema>;

// Fastify hands the validator null when a request has no body at all.
export const collectBodySchema = z
  .object({ collectedAt: instant.optional().meta({ description: 'Defaults to now; must not precede recordedAt' }) })
  .strict()
  .nullable()
  .optional()
  .meta({ examples: [{ collectedAt: '2025-01-31T18:30:00.000Z' }] });

export const paymentIdParamsSchema = z.object({ id: unlistedId.meta({ example: 'pmt_01JJZK6C2B8X5Q4W7R9T3V1N2M' }) });

// ---------------------------------------------------------------------------------------------
// Responses (fields in the order the published interface lists them)

// What the record example above is answered with (the id and the times of writing aside).
const PAYMENT_EXAMPLE = {
  id: 'pmt_01JJZK6C2B8X5Q4W7R9T3V1N2M',
  ...RECORD_EXAMPLE,
  status: 'PENDING',
  preTaxChargingSessionCost: 2741,
  preTaxCosts: { energy: 2460, idle: 139, flat: 93, time: 50 },
  preTaxAdditionalFee: 93,
  priceAdjustment: { ...RECORD_EXAMPLE.priceAdjustment, calculatedAdjustment: 500 },
  taxes: { totalPercentSalesTax: 190, energyPerKwhExciseTax: 40 },
  totalTaxAmount: 230,
  billedAmount: 2564,
  collectedAt: null,
  createdAt: '2025-01-31T18:04:05.200Z',
  updatedAt: '2025-01-31T18:04:05.200Z',
};

const int = z.number().int();
const dateTime = z.string().meta({ format: 'date-time' });

export const sessionPaymentSchema = z
  .object({
    id: z.string(),
    network: z.string(),
    session: z.string(),
    sitePartners: z.array(z.string()),
    location: z.string(),
    currency: z.string(),
    status: z.enum(PAYMENT_STATUSES),
    paymentType: z.enum(PAYMENT_TYPES),
    costs: z.object({ energy: int, idle: int, flat: int, time: int }),
    usages: z.object({ energy: z.number(), time: z.number(), idle: z.number() }),
    taxConfig: z
      .object({ totalPercentSalesTax: z.number().nullable().optional(), energyPerKwhExciseTax: z.number().nullable().optional() })
      .nullable(),
    preTaxChargingSessionCost: int,
    preTaxCosts: z.object({ energy: int, idle: int, flat: int, time: int }),
    additionalFee: int.optional(),
    preTaxAdditionalFee: int.optional(),
    priceAdjustment: z
      .object({ id: z.string(), amount: z.number(), maxAdjustment: z.number().nullable(), calculatedAdjustment: int })
      .nullable(),
    taxes: z.object({ totalPercentSalesTax: int, energyPerKwhExciseTax: int }),
    totalTaxAmount: int,
    billedAmount: int,
    recordedAt: dateTime,
    collectedAt: dateTime.nullable(),
    createdAt: dateTime,
    updatedAt: dateTime,
  })
  .meta({
    id: 'SessionPayment',
    description: 'The payment for one charging session (amounts in minor units of currency)',
    examples: [PAYMENT_EXAMPLE],
  });

export type SessionPayment = z.output<typeof sessionPaymentSchema>;

export const notModifiedResponse = z.null().meta({ description: 'Not modified: the payment still has the ETag given in If-None-Match' });
