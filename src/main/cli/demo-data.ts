// `cli demo-data`: records a realistic spread of session payments through the same service code
// the API uses, so the demo exercises the real billing and constraints. Session IDs are fixed, so
// a second run records nothing new: sessions that already have a payment are skipped.
import { createClient } from '../../auth/clients-service.js';
import { cliCommand, listCommand, tokenCommand } from './printed-commands.js';
import type { Db } from '../../db/database.js';
import { ConflictError } from '../../kernel/errors.js';
import type { TaxConfig } from '../../payments/billing.js';
import type { RecordPaymentInput, SessionPayment } from '../../payments/payments-schemas.js';
import { PAYMENT_TYPES } from '../../payments/payments-tables.js';
import { collectSessionPayment, recordSessionPayment } from '../../payments/payments-service.js';

interface Location {
  id: string;
  currency: string;
  taxConfig: TaxConfig | null;
  sitePartners: string[];
  // tax-inclusive tariff in minor units
  perKwh: number;
  perIdleMinute: number;
  perHour: number;
  flat: number;
}

interface Network {
  id: string;
  short: string;
  locations: Location[];
}

const NETWORKS: Network[] = [
  {
    id: 'net_demo_voltway',
    short: 'voltway',
    locations: [
      { id: 'loc_voltway_austin_downtown', currency: 'USD', taxConfig: { totalPercentSalesTax: 0.0825, energyPerKwhExciseTax: 0.02 }, sitePartners: ['sp_capitol_parking', 'sp_lone_star_energy'], perKwh: 48, perIdleMinute: 40, perHour: 0, flat: 100 },
      { id: 'loc_voltway_portland_airport', currency: 'USD', taxConfig: null, sitePartners: ['sp_pdx_port_authority'], perKwh: 42, perIdleMinute: 30, perHour: 120, flat: 0 },
      { id: 'loc_voltway_denver_union', currency: 'USD', taxConfig: { totalPercentSalesTax: 0.0881 }, sitePartners: [], perKwh: 39, perIdleMinute: 25, perHour: 0, flat: 50 },
    ],
  },
  {
    id: 'net_demo_alpencharge',
    short: 'alpen',
    locations: [
      { id: 'loc_alpen_munich_hbf', currency: 'EUR', taxConfig: { totalPercentSalesTax: 0.19, energyPerKwhExciseTax: null }, sitePartners: ['sp_db_station_parking'], perKwh: 59, perIdleMinute: 10, perHour: 0, flat: 0 },
      { id: 'loc_alpen_innsbruck_mall', currency: 'EUR', taxConfig: { totalPercentSalesTax: 0.2, energyPerKwhExciseTax: 0.015 }, sitePartners: ['sp_tirol_retail', 'sp_alpine_grid'], perKwh: 62, perIdleMinute: 10, perHour: 60, flat: 0 },
      { id: 'loc_alpen_zurich_west', currency: 'CHF', taxConfig: { totalPercentSalesTax: 0.081 }, sitePartners: ['sp_limmat_immobilien'], perKwh: 55, perIdleMinute: 15, perHour: 0, flat: 150 },
    ],
  },
  {
    id: 'net_demo_sakura',
    short: 'sakura',
    locations: [
      { id: 'loc_sakura_shibuya', currency: 'JPY', taxConfig: { totalPercentSalesTax: 0.1, energyPerKwhExciseTax: null }, sitePartners: ['sp_shibuya_tower'], perKwh: 65, perIdleMinute: 20, perHour: 0, flat: 0 },
      { id: 'loc_sakura_osaka_umeda', currency: 'JPY', taxConfig: { totalPercentSalesTax: 0.1, energyPerKwhExciseTax: 1.5 }, sitePartners: ['sp_umeda_sky', 'sp_kansai_power'], perKwh: 58, perIdleMinute: 20, perHour: 300, flat: 0 },
    ],
  },
  {
    id: 'net_demo_gulfcharge',
    short: 'gulf',
    locations: [
      { id: 'loc_gulf_kuwait_city', currency: 'KWD', taxConfig: { totalPercentSalesTax: null, energyPerKwhExciseTax: null }, sitePartners: ['sp_avenues_mall'], perKwh: 25, perIdleMinute: 5, perHour: 0, flat: 0 },
    ],
  },
];

const SESSIONS_PER_NETWORK = 20;
const HOUR_MS = 3_600_000;

// Small deterministic PRNG (mulberry32): the same run twice produces the same sessions. The
// benchmark seeds its rows with it too.
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

interface DemoPayment {
  input: RecordPaymentInput;
  collectAfterMinutes: number | null;
}

function demoPayments(now: number): DemoPayment[] {
  const out: DemoPayment[] = [];
  NETWORKS.forEach((network, n) => {
    const rand = seededRandom(n + 1);
    for (let i = 0; i < SESSIONS_PER_NETWORK; i++) {
      const location = network.locations[i % network.locations.length]!;
      const paymentType = PAYMENT_TYPES[i % PAYMENT_TYPES.length]!;
      const free = paymentType === 'FREE';
      const wh = free ? Math.round(rand() * 3000) : Math.round(4_000 + rand() * 60_000) + Math.round(rand() * 1000) / 1000;
      const connectedSeconds = Math.round(1_200 + rand() * 10_000);
      const idleSeconds = i % 3 === 0 ? Math.round(rand() * 2_400) : 0;
      const costs = free
        ? { energy: 0, idle: 0, flat: 0, time: 0 }
        : {
            energy: Math.round((wh / 1000) * location.perKwh),
            idle: Math.round((idleSeconds / 60) * location.perIdleMinute),
            flat: location.flat,
            time: Math.round((connectedSeconds / 3600) * location.perHour),
          };
      const discounted = !free && i % 4 === 1;
      const withFee = !free && (paymentType === 'GUEST' || paymentType === 'PAYMENT_TERMINAL');
      const recordedAt = new Date(now - (i * 7 + n + 1) * HOUR_MS - Math.round(rand() * HOUR_MS));
      out.push({
        input: {
          network: network.id,
          session: `ses_demo_${network.short}_${String(i + 1).padStart(3, '0')}`,
          sitePartners: location.sitePartners,
          location: location.id,
          currency: location.currency,
          paymentType,
          costs,
          usages: { energy: wh, time: connectedSeconds, idle: idleSeconds },
          taxConfig: location.taxConfig,
          priceAdjustment: discounted
            ? i % 8 === 1
              ? { id: 'padj_member_20', amount: 20, maxAdjustment: 500 }
              : { id: 'padj_fleet_12_5', amount: 12.5, maxAdjustment: null }
            : null,
          additionalFee: withFee ? (location.currency === 'JPY' ? 110 : 75) : undefined,
          recordedAt,
        },
        // Older sessions have been collected; the most recent and the free ones are still pending.
        collectAfterMinutes: !free && i >= 4 && i % 5 !== 0 ? 3 + (i % 7) : null,
      });
    }
  });
  return out;
}

export interface DemoSummary {
  recorded: number;
  collected: number;
  skipped: number;
  sessions: string[];
}

export interface DemoOptions {
  // Where the server that serves this database is reached (its HOST and PORT).
  baseUrl: string;
}

export async function seedDemoData(
  db: Db,
  write: (text: string) => void = (text) => process.stdout.write(text),
  options: DemoOptions = { baseUrl: 'http://127.0.0.1:3000' },
): Promise<DemoSummary> {
  const everyNetwork = { network: null };
  const summary: DemoSummary = { recorded: 0, collected: 0, skipped: 0, sessions: [] };
  for (const { input, collectAfterMinutes } of demoPayments(Date.now())) {
    summary.sessions.push(input.session);
    let payment;
    try {
      payment = await recordSessionPayment(db, everyNetwork, input);
    } catch (error) {
      if (!(error instanceof ConflictError)) throw error;
      summary.skipped += 1;
      continue;
    }
    summary.recorded += 1;
    if (collectAfterMinutes !== null) {
      // The service answers JSON text; a demo run can afford to read a field back out of it.
      const recorded = JSON.parse(payment.json) as Pick<SessionPayment, 'recordedAt'>;
      const collectedAt = new Date(Date.parse(recorded.recordedAt) + collectAfterMinutes * 60_000);
      await collectSessionPayment(db, everyNetwork, payment.id, collectedAt);
      summary.collected += 1;
    }
  }

  // One pending and one collected payment per network.
  const sample = NETWORKS.flatMap((network) => [1, 8].map((k) => `ses_demo_${network.short}_${String(k).padStart(3, '0')}`));
  // The printed commands must run as printed: a read-only client of their own, rather than
  // credentials the reader would have to fill in.
  const reader = await createClient(db, { name: 'demo-data reader', scopes: ['read:sessionpayment'], isAdmin: false });
  write(
    [
      `demo-data: recorded ${summary.recorded} session payments (${summary.collected} collected); ${summary.skipped} sessions already had one and were skipped`,
      `networks: ${NETWORKS.map((network) => network.id).join(', ')}`,
      `some sessions: ${sample.join(' ')}`,
      `a client that may only read payments was made for the commands below (its secret is shown only this once; remove it with: ${cliCommand()} clients revoke ${reader.clientId})`,
      'with the server running, list them:',
      `  ${tokenCommand(options.baseUrl, reader.clientId, reader.clientSecret)}`,
      `  ${listCommand(options.baseUrl, sample)}`,
      '',
    ].join('\n'),
  );
  return summary;
}
