// The SessionPayment JSON (the published shape) built in TypeScript from a stored row: the tests' independent
// account of what the database's one rendering (the session_payments_render trigger) must say.
// It must give the same keys in the same order with the same values; the service itself never
// uses it.
import type { SessionPaymentRow } from '../../src/payments/payments-repository.js';
import type { SessionPayment } from '../../src/payments/payments-schemas.js';

export function toSessionPayment(row: SessionPaymentRow): SessionPayment {
  return {
    id: row.id,
    network: row.network,
    session: row.session,
    sitePartners: row.sitePartners,
    location: row.location,
    currency: row.currency,
    status: row.status,
    paymentType: row.paymentType,
    costs: { energy: row.costEnergy, idle: row.costIdle, flat: row.costFlat, time: row.costTime },
    usages: { energy: row.usageEnergyWh, time: row.usageTimeSeconds, idle: row.usageIdleSeconds },
    taxConfig: row.taxConfig === null ? null : taxConfigOf(row.taxConfig),
    preTaxChargingSessionCost: row.preTaxChargingSessionCost,
    preTaxCosts: { energy: row.preTaxEnergy, idle: row.preTaxIdle, flat: row.preTaxFlat, time: row.preTaxTime },
    // The fee_pair CHECK constraint stores both fee columns or neither.
    ...(row.additionalFee === null ? {} : { additionalFee: row.additionalFee, preTaxAdditionalFee: row.preTaxAdditionalFee ?? 0 }),
    priceAdjustment:
      row.priceAdjustmentId === null
        ? null
        : {
            id: row.priceAdjustmentId,
            // The adjustment_complete CHECK constraint stores these together with the ID.
            amount: row.priceAdjustmentAmount ?? 0,
            maxAdjustment: row.priceAdjustmentMax,
            calculatedAdjustment: row.calculatedAdjustment ?? 0,
          },
    taxes: { totalPercentSalesTax: row.taxSales, energyPerKwhExciseTax: row.taxExcise },
    totalTaxAmount: row.totalTaxAmount,
    billedAmount: row.billedAmount,
    recordedAt: row.recordedAt.toISOString(),
    collectedAt: row.collectedAt === null ? null : row.collectedAt.toISOString(),
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

// Members keep their presence (absent stays absent, null stays null) but take the published order.
function taxConfigOf(stored: NonNullable<SessionPaymentRow['taxConfig']>): NonNullable<SessionPayment['taxConfig']> {
  const out: NonNullable<SessionPayment['taxConfig']> = {};
  if ('totalPercentSalesTax' in stored) out.totalPercentSalesTax = stored.totalPercentSalesTax ?? null;
  if ('energyPerKwhExciseTax' in stored) out.energyPerKwhExciseTax = stored.energyPerKwhExciseTax ?? null;
  return out;
}
