// The naive baseline: what a straightforward implementation of the 100-ID list would do.
// node:http + pg, one plain SELECT of every column, rows mapped to SessionPayment JSON in JS and
// JSON.stringify'd. No auth, no validation, no logging. Same pool size as the service's default.
// Usage: DATABASE_URL=postgres://… PORT=… [NAIVE_APPLICATION_NAME=…] node bench/naive-server.mjs
import http from 'node:http';
import pg from 'pg';

// NAIVE_APPLICATION_NAME: how the floor comparison finds its PostgreSQL backends (bench/floor.ts).
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.POOL_MAX ?? 10), application_name: process.env.NAIVE_APPLICATION_NAME });

const LIST_SQL = `SELECT id, network, session, site_partners, location, currency, status, payment_type,
  cost_energy, cost_idle, cost_flat, cost_time, usage_energy_wh, usage_time_seconds, usage_idle_seconds,
  tax_config, pre_tax_charging_session_cost, pre_tax_energy, pre_tax_idle, pre_tax_flat, pre_tax_time,
  additional_fee, pre_tax_additional_fee, price_adjustment_id, price_adjustment_amount, price_adjustment_max,
  calculated_adjustment, tax_sales, tax_excise, total_tax_amount, billed_amount,
  recorded_at, collected_at, created_at, updated_at
FROM session_payments WHERE session = ANY($1)`;

const num = (v) => (v === null ? null : Number(v)); // numeric columns arrive as strings

function toSessionPayment(r) {
  return {
    id: r.id,
    network: r.network,
    session: r.session,
    sitePartners: r.site_partners,
    location: r.location,
    currency: r.currency,
    status: r.status,
    paymentType: r.payment_type,
    costs: { energy: r.cost_energy, idle: r.cost_idle, flat: r.cost_flat, time: r.cost_time },
    usages: { energy: r.usage_energy_wh, time: r.usage_time_seconds, idle: r.usage_idle_seconds },
    taxConfig: r.tax_config,
    preTaxChargingSessionCost: r.pre_tax_charging_session_cost,
    preTaxCosts: { energy: r.pre_tax_energy, idle: r.pre_tax_idle, flat: r.pre_tax_flat, time: r.pre_tax_time },
    ...(r.additional_fee === null ? {} : { additionalFee: r.additional_fee, preTaxAdditionalFee: r.pre_tax_additional_fee }),
    priceAdjustment:
      r.price_adjustment_id === null
        ? null
        : { id: r.price_adjustment_id, amount: num(r.price_adjustment_amount), maxAdjustment: num(r.price_adjustment_max), calculatedAdjustment: r.calculated_adjustment },
    taxes: { totalPercentSalesTax: r.tax_sales, energyPerKwhExciseTax: r.tax_excise },
    totalTaxAmount: r.total_tax_amount,
    billedAmount: r.billed_amount,
    recordedAt: r.recorded_at.toISOString(),
    collectedAt: r.collected_at === null ? null : r.collected_at.toISOString(),
    createdAt: r.created_at.toISOString(),
    updatedAt: r.updated_at.toISOString(),
  };
}

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url ?? '/', 'http://localhost');
  if (url.pathname !== '/payments/v1/session-payments') {
    res.writeHead(404).end();
    return;
  }
  const ids = (url.searchParams.get('sessionIds') ?? '').split(',');
  try {
    const { rows } = await pool.query(LIST_SQL, [ids]);
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(rows.map(toSessionPayment)));
  } catch (error) {
    console.error(error);
    res.writeHead(500).end();
  }
});

server.listen(Number(process.env.PORT ?? 3001), process.env.HOST ?? '127.0.0.1', () => console.log('naive server listening'));
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => server.close(() => pool.end().then(() => process.exit(0))));
