import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getTableColumns } from 'drizzle-orm';
import pg from 'pg';
import { createClient, type CreatedClient } from '../src/auth/clients-service.js';
import { openDatabase, sql, type Database } from '../src/db/database.js';
import { computeBilling, type BillingInput } from '../src/payments/billing.js';
import { seededRandom } from '../src/main/cli/demo-data.js';
import { billedColumns, type NewSessionPaymentRow } from '../src/payments/payments-repository.js';
import { sessionPayments } from '../src/payments/payments-tables.js';
import { BENCH_DATABASE_SETTINGS } from './postgres-cluster.js';

export const NETWORK_COUNT = 20;
// The network-scoped token's network; sessions ses_bench_<g> with g % 20 == 0 belong to it.
export const SCOPED_NETWORK = networkOf(0);
const TEMPLATE_COUNT = 1024;
const CHUNK_ROWS = 50_000;

export function networkOf(g: number): string {
  return `net_bench_${String(g % NETWORK_COUNT).padStart(2, '0')}`;
}

export function sessionOf(g: number): string {
  return `ses_bench_${g}`;
}

// Where the bench database lives: a throwaway database on the PostgreSQL server that
// DATABASE_URL names, or a temporary PGlite directory.
export interface BenchTarget {
  kind: 'postgres' | 'pglite';
  url?: string;
  dataDir?: string;
  name: string;
  drop(): Promise<void>;
}

export async function createBenchTarget(databaseUrl: string | undefined): Promise<BenchTarget> {
  if (!databaseUrl) {
    const dataDir = mkdtempSync(join(tmpdir(), 'cns-bench-pglite-'));
    return {
      kind: 'pglite',
      dataDir,
      name: dataDir,
      async drop() {
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  }
  const name = `cns_bench_${randomBytes(5).toString('hex')}`;
  await adminQuery(databaseUrl, `CREATE DATABASE ${name}`);
  // Applies to every connection opened afterwards: the service's, the naive server's and pgbench's.
  for (const [setting, value] of Object.entries(BENCH_DATABASE_SETTINGS)) {
    await adminQuery(databaseUrl, `ALTER DATABASE ${name} SET ${setting} = '${value}'`);
  }
  const url = new URL(databaseUrl);
  url.pathname = `/${name}`;
  return {
    kind: 'postgres',
    url: url.toString(),
    name,
    async drop() {
      await adminQuery(databaseUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

async function adminQuery(url: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, application_name: 'cns-bench-admin' });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

// Opens the bench database the way the service does, running the migrations under the start-up lock.
export async function openBenchDatabase(target: BenchTarget): Promise<Database> {
  const database = await openDatabase({ url: target.url, poolMax: 4, dataDir: target.dataDir });
  await database.migrate();
  return database;
}

export async function query<T = Record<string, unknown>>(database: Database, text: string): Promise<T[]> {
  const result = (await database.db.execute(sql.raw(text))) as unknown as { rows: T[] };
  return result.rows;
}

export interface BenchClients {
  // every scope the scenarios need, admin role, no network claim
  all: CreatedClient;
  // read/write session payments, scoped to SCOPED_NETWORK
  network: CreatedClient;
}

export async function createBenchClients(database: Database): Promise<BenchClients> {
  const all = await createClient(database.db, {
    name: 'bench-unscoped-admin',
    scopes: ['read:sessionpayment', 'write:sessionpayment', 'read:asset', 'write:asset', 'read:chargingstationmodel', 'write:chargingstationmodel'],
    isAdmin: true,
  });
  const network = await createClient(database.db, {
    name: 'bench-network',
    scopes: ['read:sessionpayment', 'write:sessionpayment'],
    network: SCOPED_NETWORK,
  });
  return { all, network };
}

type PaymentType = NewSessionPaymentRow['paymentType'];
const PAID_TYPES = ['GUEST', 'PAYMENT_TERMINAL', 'ROAMING', 'DRIVER_ACCOUNT', 'DRIVER_ACCOUNT', 'DRIVER_ACCOUNT', 'UNKNOWN'] as const;
const CURRENCIES = ['USD', 'USD', 'USD', 'EUR', 'EUR', 'GBP', 'CAD', 'JPY'] as const;
const SALES_TAX = [0.0725, 0.08, 0.19, 0.2, 0.05, 0.0625] as const;

// A realistic spread of billing inputs; the seeded rows reuse these figures (computed once each by
// the service's own billing module: computing 1,000,000 of them would take minutes).
export function billingInputs(count: number, random: () => number): { input: BillingInput; paymentType: PaymentType }[] {
  const out: { input: BillingInput; paymentType: PaymentType }[] = [];
  const int = (lo: number, hi: number) => lo + Math.floor(random() * (hi - lo + 1));
  for (let i = 0; i < count; i++) {
    const free = i % 50 === 0;
    const currency = CURRENCIES[int(0, CURRENCIES.length - 1)]!;
    const energyWh = int(500, 80_000);
    const input: BillingInput = {
      currency,
      costs: free
        ? { energy: 0, idle: 0, flat: 0, time: 0 }
        : {
            // price per kWh in minor units (cents; yen for JPY, which has no minor unit)
            energy: Math.round((energyWh / 1000) * int(25, 60)),
            idle: random() < 0.3 ? int(0, 1500) : 0,
            flat: random() < 0.4 ? int(50, 300) : 0,
            time: random() < 0.3 ? int(0, 900) : 0,
          },
      usages: { energy: energyWh, time: int(600, 4 * 3600), idle: int(0, 1800) },
      taxConfig:
        random() < 0.3
          ? null
          : {
              totalPercentSalesTax: SALES_TAX[int(0, SALES_TAX.length - 1)]!,
              energyPerKwhExciseTax: random() < 0.3 ? 0.01 : null,
            },
      priceAdjustment: !free && random() < 0.3 ? { id: `pa_${int(1, 50)}`, amount: [10, 15, 20, 50][int(0, 3)]!, maxAdjustment: random() < 0.5 ? 500 : null } : null,
      ...(!free && random() < 0.2 ? { additionalFee: int(50, 300) } : {}),
    };
    out.push({ input, paymentType: free ? 'FREE' : PAID_TYPES[int(0, PAID_TYPES.length - 1)]! });
  }
  return out;
}

// One template row per billing input: its billing columns exactly as the service records them
// (billedColumns), keyed by the table's snake_case column names, with a template number k.
function templateRows(): { columns: [string, string][]; rows: Record<string, unknown>[] } {
  const table = getTableColumns(sessionPayments);
  const billed = billingInputs(TEMPLATE_COUNT, seededRandom(20_240_601)).map(({ input, paymentType }) =>
    billedColumns({ ...input, paymentType }, computeBilling(input)),
  );
  const keys = Object.keys(billed[0]!) as (keyof typeof table)[];
  const columns: [string, string][] = keys.map((key) => [table[key].name, table[key].getSQLType()]);
  const rows = billed.map((values, k) => {
    const row: Record<string, unknown> = { k };
    for (const key of keys) row[table[key].name] = (values as Record<string, unknown>)[key];
    return row;
  });
  return { columns, rows };
}


// Brings session_payments from `from` to `to` seeded rows (ses_bench_<from> … ses_bench_<to-1>):
// a multi-row INSERT … SELECT over generate_series, joined with the billing templates.
export async function seedPayments(database: Database, from: number, to: number, progress: (done: number) => void): Promise<void> {
  const templates = templateRows();
  const definition = [['k', 'integer'], ...templates.columns].map(([c, t]) => `${c} ${t}`).join(', ');
  const paymentColumns = templates.columns.map(([name]) => name);
  await query(database, `CREATE TABLE IF NOT EXISTS bench_seed_templates (${definition})`);
  const [{ n } = { n: 0 }] = await query<{ n: number }>(database, 'SELECT count(*)::int AS n FROM bench_seed_templates');
  if (Number(n) === 0) {
    await database.db.execute(
      sql`INSERT INTO bench_seed_templates SELECT * FROM jsonb_to_recordset(${JSON.stringify(templates.rows)}::jsonb) AS t(${sql.raw(definition)})`,
    );
  }
  for (let lo = from; lo < to; lo += CHUNK_ROWS) {
    const hi = Math.min(to, lo + CHUNK_ROWS) - 1;
    await query(
      database,
      `INSERT INTO session_payments (id, network, session, site_partners, location, status, recorded_at, collected_at, created_at, updated_at, ${paymentColumns.join(', ')})
       SELECT 'pmt_01BENCH' || lpad(upper(to_hex(g)), 19, '0'),
              'net_bench_' || lpad((g % ${NETWORK_COUNT})::text, 2, '0'),
              'ses_bench_' || g,
              CASE WHEN g % 3 = 0 THEN ARRAY['sp_' || (g % 300), 'sp_' || ((g + 7) % 300)] ELSE ARRAY['sp_' || (g % 300)] END,
              'loc_' || (g % 5000),
              CASE WHEN g % 3 = 1 THEN 'COLLECTED' ELSE 'PENDING' END,
              r.ts,
              CASE WHEN g % 3 = 1 THEN r.ts + interval '2 hours' END,
              r.ts, r.ts,
              ${paymentColumns.map((c) => `t.${c}`).join(', ')}
       FROM generate_series(${lo}, ${hi}) AS g
       JOIN bench_seed_templates t ON t.k = g % ${TEMPLATE_COUNT}
       CROSS JOIN LATERAL (SELECT timestamptz '2025-01-01 00:00:00+00' + g * interval '7 seconds' AS ts) r`,
    );
    progress(hi + 1 - from);
  }
  await query(database, 'VACUUM ANALYZE session_payments');
}

// Loads the payments table, its TOAST table and its indexes into shared_buffers, so that every
// scenario starts from the steady state of a server that has been answering for a while rather
// than from whatever the bulk load's ring buffer left behind. Only what fits is loaded.
export async function prewarm(database: Database): Promise<{ pages: number; sharedBuffersPages: number } | string> {
  try {
    await query(database, 'CREATE EXTENSION IF NOT EXISTS pg_prewarm');
  } catch (error) {
    return `pg_prewarm unavailable (${error instanceof Error ? error.message : String(error)})`;
  }
  const [row] = await query<{ pages: string; shared: string }>(
    database,
    `SELECT coalesce(sum(pg_prewarm(c.oid)), 0) AS pages,
            (SELECT setting FROM pg_settings WHERE name = 'shared_buffers') AS shared
       FROM pg_class c
      WHERE c.oid = 'session_payments'::regclass
         OR c.oid = (SELECT reltoastrelid FROM pg_class WHERE oid = 'session_payments'::regclass)
         OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = 'session_payments'::regclass)`,
  );
  return { pages: Number(row?.pages ?? 0), sharedBuffersPages: Number(row?.shared ?? 0) };
}

export async function postgresSettings(database: Database): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of ['server_version', 'shared_buffers', 'effective_cache_size', 'work_mem', 'max_connections', 'random_page_cost', 'jit', 'synchronous_commit', 'max_wal_size', 'checkpoint_timeout']) {
    try {
      const [row] = await query<Record<string, string>>(database, `SHOW ${name}`);
      out[name] = row ? String(Object.values(row)[0]) : '?';
    } catch {
      out[name] = '?';
    }
  }
  return out;
}

export async function tableSize(database: Database): Promise<string> {
  const [row] = await query<{ size: string }>(database, "SELECT pg_size_pretty(pg_total_relation_size('session_payments')) AS size");
  return row?.size ?? '?';
}
