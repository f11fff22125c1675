import { sql } from 'drizzle-orm';
import { check, doublePrecision, index, integer, jsonb, numeric, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { isOneOf } from '../db/checks.js';

// The one list of each: the column type, its CHECK constraint and the Zod enums derive from it.
export const PAYMENT_STATUSES = ['PENDING', 'COLLECTED'] as const;
export const PAYMENT_TYPES = ['GUEST', 'PAYMENT_TERMINAL', 'ROAMING', 'FREE', 'UNKNOWN', 'DRIVER_ACCOUNT'] as const;

export const sessionPayments = pgTable(
  'session_payments',
  {
    id: text('id').primaryKey(),
    network: text('network').notNull(),
    session: text('session').notNull(),
    sitePartners: text('site_partners').array().notNull(),
    location: text('location').notNull(),
    currency: text('currency').notNull(),
    status: text('status', { enum: PAYMENT_STATUSES }).notNull().default('PENDING'),
    paymentType: text('payment_type', { enum: PAYMENT_TYPES }).notNull(),
    costEnergy: integer('cost_energy').notNull(),
    costIdle: integer('cost_idle').notNull(),
    costFlat: integer('cost_flat').notNull(),
    costTime: integer('cost_time').notNull(),
    usageEnergyWh: doublePrecision('usage_energy_wh').notNull(),
    usageTimeSeconds: doublePrecision('usage_time_seconds').notNull(),
    usageIdleSeconds: doublePrecision('usage_idle_seconds').notNull(),
    // Rates are kept as the exact decimal text the client sent (0.0725 stays 0.0725).
    taxConfig: jsonb('tax_config').$type<{ totalPercentSalesTax?: number | null; energyPerKwhExciseTax?: number | null } | null>(),
    preTaxChargingSessionCost: integer('pre_tax_charging_session_cost').notNull(),
    preTaxEnergy: integer('pre_tax_energy').notNull(),
    preTaxIdle: integer('pre_tax_idle').notNull(),
    preTaxFlat: integer('pre_tax_flat').notNull(),
    preTaxTime: integer('pre_tax_time').notNull(),
    additionalFee: integer('additional_fee'),
    preTaxAdditionalFee: integer('pre_tax_additional_fee'),
    priceAdjustmentId: text('price_adjustment_id'),
    priceAdjustmentAmount: numeric('price_adjustment_amount', { mode: 'number' }),
    priceAdjustmentMax: numeric('price_adjustment_max', { mode: 'number' }),
    calculatedAdjustment: integer('calculated_adjustment'),
    taxSales: integer('tax_sales').notNull(),
    taxExcise: integer('tax_excise').notNull(),
    totalTaxAmount: integer('total_tax_amount').notNull(),
    billedAmount: integer('billed_amount').notNull(),
    recordedAt: timestamp('recorded_at', { withTimezone: true, precision: 3 }).notNull(),
    collectedAt: timestamp('collected_at', { withTimezone: true, precision: 3 }),
    createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
    // The row's SessionPayment JSON, rendered by the session_payments_render trigger on every
    // insert and update (migrations/0003, 0004): the payment's only rendering, which every answer
    // sends as is.
    document: text('document').notNull().default(''),
  },
  (t) => [
    // A session has at most one payment; the index also serves the unscoped list lookup.
    uniqueIndex('session_payments_session_key').on(t.session),
    // Network-scoped list: WHERE network = $1 AND session = ANY($2).
    index('session_payments_network_session_idx').on(t.network, t.session),
    check('session_payments_status_enum', isOneOf(t.status, PAYMENT_STATUSES)),
    check('session_payments_payment_type_enum', isOneOf(t.paymentType, PAYMENT_TYPES)),
    check('session_payments_collected_state', sql`(${t.status} = 'PENDING') = (${t.collectedAt} IS NULL)`),
    check(
      'session_payments_billed_invariant',
      sql`${t.billedAmount} = ${t.preTaxChargingSessionCost} + coalesce(${t.preTaxAdditionalFee}, 0) - coalesce(${t.calculatedAdjustment}, 0) + ${t.totalTaxAmount}`,
    ),
    check('session_payments_tax_sum', sql`${t.totalTaxAmount} = ${t.taxSales} + ${t.taxExcise}`),
    check(
      'session_payments_amounts_non_negative',
      sql`${t.costEnergy} >= 0 AND ${t.costIdle} >= 0 AND ${t.costFlat} >= 0 AND ${t.costTime} >= 0 AND ${t.billedAmount} >= 0 AND ${t.taxSales} >= 0 AND ${t.taxExcise} >= 0 AND ${t.preTaxChargingSessionCost} >= 0`,
    ),
    check('session_payments_fee_pair', sql`(${t.additionalFee} IS NULL) = (${t.preTaxAdditionalFee} IS NULL)`),
    check(
      'session_payments_adjustment_complete',
      sql`(${t.priceAdjustmentId} IS NULL) = (${t.calculatedAdjustment} IS NULL) AND (${t.priceAdjustmentId} IS NULL) = (${t.priceAdjustmentAmount} IS NULL)`,
    ),
  ],
);
