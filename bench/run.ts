// Load benchmark of the service: `npm run bench` (see bench/README.md).
// Seeds a throwaway database, starts the compiled server (and the naive baseline server) as child
// processes, drives them over loopback with autocannon, runs pgbench on the same list SQL, and
// prints one table plus PASS/FAIL lines for the targets. Everything it starts it stops; the
// database it creates it drops.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { HASH_CONCURRENCY } from '../src/asset-management/password-hash-queue.js';
import { DEFAULT_ARGON2_PARAMS } from '../src/asset-management/password-hashing.js';
import type { Database } from '../src/db/database.js';
import {
  NETWORK_COUNT,
  SCOPED_NETWORK,
  createBenchClients,
  createBenchTarget,
  networkOf,
  openBenchDatabase,
  postgresSettings,
  prewarm,
  query,
  seedPayments,
  sessionOf,
  tableSize,
  type BenchClients,
  type BenchTarget,
} from './database.js';
import { NAIVE_APPLICATION_NAME, SERVICE_APPLICATION_NAME, assertSameAnswer, createClientWithCli, floorSummary, naiveSummary, startFloor } from './floor.js';
import { FLOOR_APPLICATION_NAME } from './floor-server.js';
import { SERVICE_LIST_SQL, normalizeSql } from './list-sql.js';
import { measureStartMemory } from './memory.js';
import { runClients, runLoad, runPaced, type LoadResult, type RequestShape } from './load.js';
import { BENCH_DIR, ROOT_DIR, parseOptions, type BenchOptions } from './options.js';
import { recordBody } from './payment-requests.js';
import { PEER_LABELS, assertPeersAnswer, peerRequest, peerSummary, peersMissing, preparePeerDatabase, startPeers, type RunningPeer } from './peers.js';
import { PGBENCH, pgbenchAvailable, runPgbench } from './pgbench.js';
import { startOwnCluster } from './postgres-cluster.js';
import {
  LOOPBACK,
  cpuMs,
  freePort,
  postgresCpuMs,
  killAllChildrenNow,
  rssMiB,
  runCommand,
  SERVER_ARGS,
  SERVER_NODE,
  SERVER_NODE_ARGS,
  startChild,
  stopAllChildren,
  waitForHttp,
  type Child,
} from './processes.js';
import { fmt, median, medianOf, renderTable, type Measurement, type ScenarioInfo, type ScenarioRecord } from './report.js';
import { compareSideBySide, type Contender, type SideBySide } from './side-by-side.js';

const LIST_ID_COUNTS = [1, 10, 100] as const;
const LIST_CONNECTIONS = [1, 32] as const;
const EXISTING_SHARE = 0.75; // of the requested session IDs, the rest have no payment
const WRITE_CONNECTIONS = 32;
const PASSWORD_CONNECTIONS = [1, 4] as const;
const PASSWORD_RATE_DURING_LIST = 5; // per second, target (e)
// target (f): a burst of password changes (closed loop) beside the list at this many connections
const PASSWORD_BURST_CLIENTS = 16;
const BURST_LIST_CONNECTIONS = 16;
const BURST_MIN_LIST_SHARE = 0.6; // of the list's throughput without the burst
const BURST_MAX_CHANGE_MS = 2000;
const ASSET_COUNT = 300;
const RSS_LIMIT_MIB = 250;
const RSS_GROWTH_TOLERANCE_MIB = 10;

const log = (line = '') => process.stdout.write(`${line}\n`);

interface Context {
  options: BenchOptions;
  target: BenchTarget;
  service: Child;
  servicePort: number;
  naive: Child | null;
  naivePort: number;
  bearerAll: string;
  bearerNetwork: string;
  basicAll: string;
  rows: number;
  records: Map<string, ScenarioRecord>;
  scenarioCount: number;
}

// ---------------------------------------------------------------------------------------------
// Requests

function randomInt(n: number): number {
  return Math.floor(Math.random() * n);
}

// `count` session IDs: 75 % with a payment (of the token's network when scoped), 25 % without.
function listIds(count: number, rows: number, scoped: boolean): string[] {
  const existing = count === 1 ? (Math.random() < EXISTING_SHARE ? 1 : 0) : Math.round(count * EXISTING_SHARE);
  const seen = new Set<string>();
  const span = scoped ? Math.floor(rows / NETWORK_COUNT) : rows;
  while (seen.size < existing) {
    const g = randomInt(span);
    seen.add(sessionOf(scoped ? g * NETWORK_COUNT : g));
  }
  const ids = [...seen];
  while (ids.length < count) ids.push(`ses_missing_${randomInt(1_000_000_000)}`);
  return ids;
}

function listPathOf(ids: string[]): string {
  return `/payments/v1/session-payments?sessionIds=${ids.join(',')}`;
}

function listPath(count: number, rows: number, scoped: boolean): string {
  return listPathOf(listIds(count, rows, scoped));
}

function listRequest(count: number, rows: number, bearer: string | null, scoped: boolean, acceptEncoding?: string): () => RequestShape {
  const headers = { ...(bearer ? { authorization: bearer } : {}), ...(acceptEncoding ? { 'accept-encoding': acceptEncoding } : {}) };
  return () => ({ method: 'GET', path: listPath(count, rows, scoped), ...(Object.keys(headers).length > 0 ? { headers } : {}) });
}

function modelBody(tag: string, i: number): string {
  return JSON.stringify({
    vendor: `Bench Vendor ${tag}`,
    model: `BV-${i}`,
    powerType: i % 2 ? 'AC_3_PHASE' : 'DC',
    connectors: [
      { id: 1, maxAmperage: 32, maxVoltage: 400, maxPowerWatts: 22_000 },
      { id: 2, maxAmperage: 32, maxVoltage: 400, maxPowerWatts: 22_000 },
    ],
    configurationKeys: { ocppUrl: 'wss://ocpp.example.com/ws' },
    friendlyName: `Bench model ${i}`,
    imageUrl: 'https://example.com/model.png',
  });
}

const JSON_HEADERS = { 'content-type': 'application/json' };

// ---------------------------------------------------------------------------------------------
// Measuring

function scenarioKey(info: Omit<ScenarioInfo, 'key'>): string {
  return [info.label, `rows=${info.rows}`, info.target].join(' | ');
}

async function measure(ctx: Context, info: Omit<ScenarioInfo, 'key'>, pid: number | null, fn: () => Promise<LoadResult>): Promise<Measurement> {
  const key = scenarioKey(info);
  // (pid null for a service scenario: figures measured inside another one, nothing to add)
  const pg = ctx.target.kind === 'postgres' && !(pid === null && info.target === 'service');
  const cpuBefore = pid === null ? null : cpuMs(pid);
  const pgBefore = pg ? postgresCpuMs() : 0;
  const harnessBefore = process.cpuUsage();
  const result = await fn();
  const harness = process.cpuUsage(harnessBefore);
  const cpuAfter = pid === null ? null : cpuMs(pid);
  const pgAfter = pg ? postgresCpuMs() : 0;
  const perRequest = (ms: number) => (result.requests > 0 ? ms / result.requests : null);
  const m: Measurement = {
    ...result,
    rssMiB: pid === null ? null : rssMiB(pid),
    cpuMsPerRequest: cpuBefore !== null && cpuAfter !== null ? perRequest(cpuAfter - cpuBefore) : null,
    pgCpuMsPerRequest: pg ? perRequest(pgAfter - pgBefore) : null,
    // pgbench generates its own load in its own process
    loadCpuMsPerRequest: info.target === 'pgbench' ? null : perRequest((harness.user + harness.system) / 1000),
  };
  let record = ctx.records.get(key);
  if (!record) {
    record = { ...info, key, runs: [], median: m };
    ctx.records.set(key, record);
  }
  record.runs.push(m);
  record.median = medianOf(record.runs);
  ctx.scenarioCount++;
  const errors = m.non2xx + m.socketErrors;
  log(
    `  ${info.label.padEnd(44)} ${info.target.padEnd(7)} rows ${fmt.rows(info.rows).padStart(4)}: ${fmt.int(m.rps).padStart(7)} rps  p50 ${fmt.ms(m.p50).padStart(6)} ms  p99 ${fmt.ms(m.p99).padStart(6)} ms  errors ${errors}${errors ? ` ${JSON.stringify(m.statusCodes)}` : ''}${m.rssMiB !== null ? `  RSS ${fmt.mib(m.rssMiB)} MiB` : ''}${m.cpuMsPerRequest !== null ? `  cpu ${fmt.cpu(m.cpuMsPerRequest)} ms/req` : ''}${m.pgCpuMsPerRequest !== null ? `  pg cpu ${fmt.cpu(m.pgCpuMsPerRequest)} ms/req` : ''}${m.loadCpuMsPerRequest !== null ? `  load cpu ${fmt.cpu(m.loadCpuMsPerRequest)} ms/req` : ''}`,
  );
  await sleep(300);
  return m;
}

// RSS read after a second without load, so that sockets and buffers of the last scenario are gone.
async function settledRss(pid: number): Promise<number> {
  await sleep(1000);
  return rssMiB(pid) ?? NaN;
}

async function warmUp(ctx: Context, port: number, bearer: string | null): Promise<void> {
  await runLoad({ port, connections: 32, durationSeconds: ctx.options.warmupSeconds, next: listRequest(100, ctx.rows, bearer, false, ctx.options.acceptEncoding) });
}

async function serviceList(ctx: Context, ids: number, connections: number, token: 'all' | 'network', label = `list ids=${ids} c=${connections} token=${token}`) {
  const bearer = token === 'all' ? ctx.bearerAll : ctx.bearerNetwork;
  return measure(ctx, { label, group: 'list', target: 'service', rows: ctx.rows, connections, ids, token }, ctx.service.pid, () =>
    runLoad({ port: ctx.servicePort, connections, durationSeconds: ctx.options.durationSeconds, next: listRequest(ids, ctx.rows, bearer, token === 'network', ctx.options.acceptEncoding) }),
  );
}

async function naiveList(ctx: Context, connections: number) {
  if (!ctx.naive) return;
  const naive = ctx.naive;
  await measure(ctx, { label: `list ids=100 c=${connections}`, group: 'list', target: 'naive', rows: ctx.rows, connections, ids: 100 }, naive.pid, () =>
    runLoad({ port: ctx.naivePort, connections, durationSeconds: ctx.options.durationSeconds, next: listRequest(100, ctx.rows, null, false) }),
  );
}

async function pgbenchList(ctx: Context, connections: number) {
  if (ctx.target.kind !== 'postgres' || !pgbenchAvailable()) return;
  await measure(ctx, { label: `list ids=100 c=${connections}`, group: 'list', target: 'pgbench', rows: ctx.rows, connections, ids: 100 }, null, () =>
    runPgbench(
      { url: ctx.target.url!, clients: connections, durationSeconds: ctx.options.durationSeconds, size: ctx.rows, ids: 100, existing: Math.round(100 * EXISTING_SHARE) },
      ROOT_DIR,
    ),
  );
}

// One pass over the list scenarios at the current table size. The 100-ID comparisons (service,
// naive, pgbench) run back to back so that they see the same machine conditions. With
// comparisonsLast they close the block (smallest size) and otherwise open it, in mirrored
// connection order, so that the figures target (b) divides are a minute apart, not ten.
async function listBlock(ctx: Context, comparisonsLast: boolean): Promise<void> {
  const comparisons = async () => {
    for (const connections of comparisonsLast ? LIST_CONNECTIONS : [...LIST_CONNECTIONS].reverse()) {
      await serviceList(ctx, 100, connections, 'all');
      await naiveList(ctx, connections);
      await pgbenchList(ctx, connections);
    }
  };
  if (!comparisonsLast) await comparisons();
  if (!ctx.options.baselineOnly) {
    for (const ids of LIST_ID_COUNTS) {
      for (const connections of LIST_CONNECTIONS) {
        for (const token of ['all', 'network'] as const) {
          if (ids === 100 && token === 'all') continue; // the comparisons
          await serviceList(ctx, ids, connections, token);
        }
      }
    }
  }
  if (comparisonsLast) await comparisons();
}

async function writeBlock(ctx: Context, run: number, assetIds: string[]): Promise<void> {
  const tag = `${Date.now().toString(36)}r${run}`;
  const pid = ctx.service.pid;
  const port = ctx.servicePort;
  const duration = ctx.options.durationSeconds;
  const bearer = { authorization: ctx.bearerAll };

  // 2. record: a new session on every request
  const recorded: string[] = [];
  let i = 0;
  await measure(ctx, { label: `record payment c=${WRITE_CONNECTIONS}`, group: 'write', target: 'service', rows: ctx.rows, connections: WRITE_CONNECTIONS }, pid, () =>
    runLoad({
      port,
      connections: WRITE_CONNECTIONS,
      durationSeconds: duration,
      next: () => ({ method: 'POST', path: '/payments/v1/session-payments', headers: { ...bearer, ...JSON_HEADERS }, body: recordBody(tag, i++) }),
      onResponse: (status, body) => {
        if (status === 201) recorded.push((JSON.parse(body) as { id: string }).id);
      },
    }),
  );

  // 3. collect: each request a distinct PENDING payment recorded just above
  if (recorded.length >= WRITE_CONNECTIONS) {
    let c = 0;
    await measure(ctx, { label: `collect payment c=${WRITE_CONNECTIONS}`, group: 'write', target: 'service', rows: ctx.rows, connections: WRITE_CONNECTIONS }, pid, () =>
      runLoad({
        port,
        connections: WRITE_CONNECTIONS,
        durationSeconds: duration,
        maxRequests: recorded.length,
        next: () => ({ method: 'POST', path: `/payments/v1/session-payments/${recorded[c++ % recorded.length]}/collect`, headers: { ...bearer, ...JSON_HEADERS }, body: '{}' }),
      }),
    );
  } else {
    log(`  collect skipped: only ${recorded.length} payments were recorded`);
  }

  // 4. create station model: unique vendor/model on every request
  let m = 0;
  await measure(ctx, { label: `create station model c=${WRITE_CONNECTIONS}`, group: 'write', target: 'service', rows: ctx.rows, connections: WRITE_CONNECTIONS }, pid, () =>
    runLoad({
      port,
      connections: WRITE_CONNECTIONS,
      durationSeconds: duration,
      next: () => ({ method: 'POST', path: '/asset-management/v1/charging-station-models', headers: { ...bearer, ...JSON_HEADERS }, body: modelBody(tag, m++) }),
    }),
  );

  // 5. change password, round-robin over existing assets: generated (a fast salted HMAC: ≥ 200
  // random bits need no slow hash) and supplied (argon2id through the bounded hashing queue, the
  // cost targets (e) and (f) are about).
  let a = 0;
  const changePassword = (supplied: boolean) => (): RequestShape => {
    const n = a++;
    const id = assetIds[n % assetIds.length];
    // A valid OCPP 2.0.1 passwordString (16-40 characters), new for every request.
    const body = supplied ? { id, password: `bench-supplied-${String(n).padStart(12, '0')}` } : { id };
    return { method: 'POST', path: '/asset-management/v1/assets/change-password', headers: { ...bearer, ...JSON_HEADERS }, body: JSON.stringify(body) };
  };
  const changeGenerated = changePassword(false);
  const changeSupplied = changePassword(true);
  for (const [kind, next] of [['generated', changeGenerated], ['supplied', changeSupplied]] as const) {
    for (const connections of PASSWORD_CONNECTIONS) {
      await measure(ctx, { label: `change password (${kind}) c=${connections}`, group: 'write', target: 'service', rows: ctx.rows, connections }, pid, () =>
        runLoad({ port, connections, durationSeconds: duration, next }),
      );
    }
  }

  // 6. token issuance, client_secret_basic
  await measure(ctx, { label: `token issuance c=${WRITE_CONNECTIONS}`, group: 'token', target: 'service', rows: ctx.rows, connections: WRITE_CONNECTIONS }, pid, () =>
    runLoad({
      port,
      connections: WRITE_CONNECTIONS,
      durationSeconds: duration,
      next: () => ({
        method: 'POST',
        path: '/oauth/token',
        headers: { authorization: ctx.basicAll, 'content-type': 'application/x-www-form-urlencoded' },
        body: 'grant_type=client_credentials',
      }),
    }),
  );

  // (e) the list with and without 5 password changes per second alongside, back to back
  await serviceList(ctx, 100, 32, 'all', 'list ids=100 c=32 token=all (reference for e)');
  const withPasswords = { label: `list ids=100 c=32 + ${PASSWORD_RATE_DURING_LIST} pw/s`, group: 'mixed' as const, target: 'service' as const, rows: ctx.rows, connections: 32, ids: 100, token: 'all' as const };
  let pwResult: LoadResult | null = null;
  await measure(ctx, withPasswords, pid, async () => {
    const [list, pw] = await Promise.all([
      runLoad({ port, connections: 32, durationSeconds: duration, next: listRequest(100, ctx.rows, ctx.bearerAll, false) }),
      runPaced({ port, rate: PASSWORD_RATE_DURING_LIST, durationSeconds: duration, next: changeSupplied }),
    ]);
    pwResult = pw;
    return list;
  });
  const pw = pwResult as LoadResult | null;
  if (pw) {
    await measure(
      ctx,
      { label: `change password ${PASSWORD_RATE_DURING_LIST}/s during list (paced)`, group: 'mixed', target: 'service', rows: ctx.rows, connections: 0 },
      null,
      async () => pw,
    );
  }

  // (f) the list with and without 16 clients changing passwords alongside, back to back: hashing
  // runs through a bounded queue, so the burst waits in it instead of taking every core.
  const burstBase = { group: 'mixed' as const, target: 'service' as const, rows: ctx.rows, connections: BURST_LIST_CONNECTIONS, ids: 100, token: 'all' as const };
  await serviceList(ctx, 100, BURST_LIST_CONNECTIONS, 'all', `list ids=100 c=${BURST_LIST_CONNECTIONS} token=all (reference for f)`);
  let burstResult: LoadResult | null = null;
  await measure(ctx, { ...burstBase, label: `list ids=100 c=${BURST_LIST_CONNECTIONS} + ${PASSWORD_BURST_CLIENTS} pw clients` }, pid, async () => {
    const [list, burst] = await Promise.all([
      runLoad({ port, connections: BURST_LIST_CONNECTIONS, durationSeconds: duration, next: listRequest(100, ctx.rows, ctx.bearerAll, false) }),
      runClients({ port, clients: PASSWORD_BURST_CLIENTS, durationSeconds: duration, next: changeSupplied }),
    ]);
    burstResult = burst;
    return list;
  });
  const burst = burstResult as LoadResult | null;
  if (burst) {
    await measure(
      ctx,
      { label: `change password ${PASSWORD_BURST_CLIENTS} clients during list`, group: 'mixed', target: 'service', rows: ctx.rows, connections: PASSWORD_BURST_CLIENTS },
      null,
      async () => burst,
    );
  }
}

// ---------------------------------------------------------------------------------------------
// Set-up helpers

async function fetchToken(port: number, basic: string): Promise<string> {
  const res = await fetch(`http://${LOOPBACK}:${port}/oauth/token`, {
    method: 'POST',
    headers: { authorization: basic, 'content-type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=client_credentials',
  });
  const body = (await res.json()) as { access_token?: string };
  if (res.status !== 200 || !body.access_token) throw new Error(`POST /oauth/token answered ${res.status}: ${JSON.stringify(body)}`);
  return `Bearer ${body.access_token}`;
}

function basicOf(client: { clientId: string; clientSecret: string }): string {
  return `Basic ${Buffer.from(`${encodeURIComponent(client.clientId)}:${encodeURIComponent(client.clientSecret)}`).toString('base64')}`;
}

async function getJson(port: number, path: string, bearer: string | null): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`http://${LOOPBACK}:${port}${path}`, { headers: bearer ? { authorization: bearer } : {} });
  const text = await res.text();
  try {
    return { status: res.status, body: JSON.parse(text) };
  } catch {
    return { status: res.status, body: text };
  }
}

async function createAssets(ctx: Context, count: number): Promise<string[]> {
  const ids: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const res = await fetch(`http://${LOOPBACK}:${ctx.servicePort}/asset-management/v1/assets`, {
        method: 'POST',
        headers: { authorization: ctx.bearerAll, ...JSON_HEADERS },
        body: JSON.stringify({ network: networkOf(i), name: `bench asset ${i}`, ocppVersion: '2.0.1', securityProfile: 2 }),
      });
      const body = (await res.json()) as { data?: { id?: string } };
      if (res.status !== 201 || !body.data?.id) throw new Error(`POST /asset-management/v1/assets answered ${res.status}: ${JSON.stringify(body)}`);
      ids.push(body.data.id);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  return ids;
}

// The list SQL as the service's own code renders it, captured through a Drizzle logger on an
// empty in-memory PGlite (the query itself fails there; only its text matters).
async function serviceListSql(): Promise<{ all: string; network: string } | string> {
  try {
    const repo = (await import('../src/payments/payments-repository.js')) as Record<string, unknown>;
    if (typeof repo.listPaymentsJson !== 'function') return 'listPaymentsJson is not exported by src/payments/payments-repository.ts';
    const { PGlite } = await import('@electric-sql/pglite');
    const { drizzle } = await import('drizzle-orm/pglite');
    const captured: string[] = [];
    const client = new PGlite();
    try {
      const db = drizzle(client, { logger: { logQuery: (q: string) => void captured.push(q) } });
      const list = repo.listPaymentsJson as (db: unknown, scope: { network: string | null }, ids: string[]) => Promise<string>;
      await list(db, { network: null }, ['x']).catch(() => undefined);
      await list(db, { network: 'n' }, ['x']).catch(() => undefined);
    } finally {
      await client.close();
    }
    if (captured.length < 2) return 'could not capture the list SQL';
    return { all: captured[0]!, network: captured[1]! };
  } catch (error) {
    return `could not capture the list SQL: ${error instanceof Error ? error.message : String(error)}`;
  }
}

function machineInfo() {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model ?? 'unknown',
    cores: cpus.length,
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    os: `${os.type()} ${os.release()}`,
    node: process.version,
    loadAverageAtStart: os.loadavg().map((l) => Math.round(l * 100) / 100),
  };
}

// ---------------------------------------------------------------------------------------------
// Targets

interface TargetLine {
  id: string;
  status: 'PASS' | 'FAIL' | 'N/A';
  text: string;
}

function find(ctx: Context, target: string, label: string, rows: number): ScenarioRecord | undefined {
  return ctx.records.get([label, `rows=${rows}`, target].join(' | '));
}

function evaluateTargets(ctx: Context, rssSamples: number[], sizes: number[]): TargetLine[] {
  const lines: TargetLine[] = [];
  const pg = ctx.target.kind === 'postgres';

  // (a)
  for (const rows of sizes) {
    const svcRecord = find(ctx, 'service', 'list ids=100 c=32 token=all', rows);
    const naiveRecord = find(ctx, 'naive', 'list ids=100 c=32', rows);
    const pgbRecord = find(ctx, 'pgbench', 'list ids=100 c=32', rows);
    if (!svcRecord || !naiveRecord) {
      lines.push({ id: 'a', status: 'N/A', text: `(a) rows ${fmt.rows(rows)}: needs PostgreSQL (naive server)` });
      continue;
    }
    const svc = svcRecord.median;
    const naive = naiveRecord.median;
    // Each run's service and naive figures were measured side by side; their ratios are taken
    // within the run and then the median, never one run's service against another's naive.
    const rpsRatio = pairedRatio(svcRecord, naiveRecord, (m) => m.rps);
    const p99Ratio = pairedRatio(svcRecord, naiveRecord, (m) => m.p99);
    const ok = rpsRatio.value >= 2 && p99Ratio.value <= 1;
    const perRun = rpsRatio.perRun.length > 1 ? ` (per run: rps ${rpsRatio.perRun.map(fmt.ratio).join(', ')}; p99 ${p99Ratio.perRun.map(fmt.ratio).join(', ')})` : '';
    lines.push({
      id: 'a',
      status: ok ? 'PASS' : 'FAIL',
      text: `(a) rows ${fmt.rows(rows)}, list 100 IDs, 32 conns: service ${fmt.int(svc.rps)} rps vs naive ${fmt.int(naive.rps)}: ${fmt.ratio(rpsRatio.value)} (need >= 2.00x); p99 ${fmt.ms(svc.p99)} ms vs naive ${fmt.ms(naive.p99)} ms: ${fmt.ratio(p99Ratio.value)} (need <= 1.00x)${perRun}; pgbench ${pgbRecord ? `${fmt.int(pgbRecord.median.rps)} tps, service = ${fmt.ratio(pairedRatio(svcRecord, pgbRecord, (m) => m.rps).value)} of it` : 'n/a'}`,
    });
  }

  // (b)
  if (sizes.length >= 2 && pg) {
    const small = sizes[0]!;
    const large = sizes[sizes.length - 1]!;
    const s1 = find(ctx, 'service', 'list ids=100 c=32 token=all', small)?.runs;
    const s2 = find(ctx, 'service', 'list ids=100 c=32 token=all', large)?.runs;
    const p1 = find(ctx, 'pgbench', 'list ids=100 c=32', small)?.runs;
    const p2 = find(ctx, 'pgbench', 'list ids=100 c=32', large)?.runs;
    if (s1 && s2 && p1 && p2) {
      // Ratios within each run (its small and large blocks are a minute apart), then the median.
      const n = Math.min(s1.length, s2.length, p1.length, p2.length);
      const sRatios = Array.from({ length: n }, (_, k) => s2[k]!.rps / s1[k]!.rps);
      const pRatios = Array.from({ length: n }, (_, k) => p2[k]!.rps / p1[k]!.rps);
      const sr = median(sRatios);
      const pr = median(pRatios);
      const perRun = n > 1 ? ` (per run: service ${sRatios.map((r) => r.toFixed(2)).join(', ')}; pgbench ${pRatios.map((r) => r.toFixed(2)).join(', ')})` : '';
      lines.push({
        id: 'b',
        status: sr >= pr - 0.1 ? 'PASS' : 'FAIL',
        text: `(b) list 100 IDs, 32 conns, rps at ${fmt.rows(large)} / rps at ${fmt.rows(small)} rows: service ${sr.toFixed(2)}, pgbench ${pr.toFixed(2)} (need service >= ${(pr - 0.1).toFixed(2)})${perRun}`,
      });
    } else {
      lines.push({ id: 'b', status: 'N/A', text: '(b) missing figures (pgbench not available?)' });
    }
  } else {
    lines.push({ id: 'b', status: 'N/A', text: `(b) needs PostgreSQL and two sizes (this run: ${ctx.target.kind}, ${sizes.map(fmt.rows).join(', ')})` });
  }

  // (c)
  if (pg && rssSamples.length >= 3) {
    const max = Math.max(...rssSamples);
    const growth = rssSamples[rssSamples.length - 1]! - rssSamples[0]!;
    const ok = max <= RSS_LIMIT_MIB && growth <= RSS_GROWTH_TOLERANCE_MIB;
    lines.push({
      id: 'c',
      status: ok ? 'PASS' : 'FAIL',
      text: `(c) service RSS after the list runs, 3 repetitions: ${rssSamples.map((r) => fmt.mib(r)).join(' -> ')} MiB (need max <= ${RSS_LIMIT_MIB}, last - first <= ${RSS_GROWTH_TOLERANCE_MIB} MiB)`,
    });
  } else {
    lines.push({ id: 'c', status: 'N/A', text: `(c) RSS target is for PostgreSQL (PGlite runs the database inside the server process); samples ${rssSamples.map((r) => fmt.mib(r)).join(', ')} MiB` });
  }

  // (d)
  const failing = [...ctx.records.values()].filter((r) => r.target !== 'pgbench' && r.median.non2xx + r.median.socketErrors > 0);
  const pgbFailing = [...ctx.records.values()].filter((r) => r.target === 'pgbench' && r.median.non2xx > 0);
  lines.push({
    id: 'd',
    status: failing.length + pgbFailing.length === 0 ? 'PASS' : 'FAIL',
    text:
      failing.length + pgbFailing.length === 0
        ? `(d) zero non-2xx responses and zero socket errors in all ${ctx.records.size} scenarios`
        : `(d) errors in: ${[...failing, ...pgbFailing].map((r) => `${r.label} [${r.target}, ${fmt.rows(r.rows)}]: ${r.median.non2xx} non-2xx ${JSON.stringify(r.median.statusCodes)}, ${r.median.socketErrors} socket errors`).join('; ')}`,
  });

  // (e)
  const rows = sizes[sizes.length - 1]!;
  const p = DEFAULT_ARGON2_PARAMS;
  const params = `argon2id m=${p.memoryKiB} KiB (${(p.memoryKiB / 1024).toFixed(0)} MiB per hash), t=${p.iterations}, p=${p.parallelism}, hashLength=${p.hashLength}, saltLength=${p.saltLength}`;
  const pw1 = find(ctx, 'service', 'change password (supplied) c=1', rows)?.median;
  const pw4 = find(ctx, 'service', 'change password (supplied) c=4', rows)?.median;
  const ref = find(ctx, 'service', 'list ids=100 c=32 token=all (reference for e)', rows)?.median;
  const mixed = find(ctx, 'service', `list ids=100 c=32 + ${PASSWORD_RATE_DURING_LIST} pw/s`, rows)?.median;
  const pwDuring = find(ctx, 'service', `change password ${PASSWORD_RATE_DURING_LIST}/s during list (paced)`, rows)?.median;
  if (ref && mixed) {
    lines.push({
      id: 'e',
      status: mixed.p99 <= 2 * ref.p99 ? 'PASS' : 'FAIL',
      text: `(e) ${params}; change password p50/p99 ${fmt.ms(pw1?.p50 ?? NaN)}/${fmt.ms(pw1?.p99 ?? NaN)} ms at 1 conn, ${fmt.ms(pw4?.p50 ?? NaN)}/${fmt.ms(pw4?.p99 ?? NaN)} ms at 4 conns (${fmt.int(pw4?.rps ?? NaN)}/s); list 100 IDs c=32 p99 ${fmt.ms(mixed.p99)} ms with ${PASSWORD_RATE_DURING_LIST} password changes started per second (${fmt.int(pwDuring?.rps ?? NaN)}/s completed, p50 ${fmt.ms(pwDuring?.p50 ?? NaN)} ms) vs ${fmt.ms(ref.p99)} ms without (need <= ${fmt.ms(2 * ref.p99)} ms)`,
    });
  } else {
    lines.push({ id: 'e', status: 'N/A', text: `(e) ${params}; not measured in this run${ctx.options.baselineOnly ? ' (--baseline)' : ''}` });
  }

  // (f)
  const burstRef = find(ctx, 'service', `list ids=100 c=${BURST_LIST_CONNECTIONS} token=all (reference for f)`, rows);
  const burstList = find(ctx, 'service', `list ids=100 c=${BURST_LIST_CONNECTIONS} + ${PASSWORD_BURST_CLIENTS} pw clients`, rows);
  const burstPw = find(ctx, 'service', `change password ${PASSWORD_BURST_CLIENTS} clients during list`, rows)?.median;
  if (burstRef && burstList && burstPw && burstPw.requests > 0) {
    const share = pairedRatio(burstList, burstRef, (m) => m.rps);
    const slowest = burstPw.max ?? NaN;
    const ok = share.value >= BURST_MIN_LIST_SHARE && slowest <= BURST_MAX_CHANGE_MS;
    const perRun = share.perRun.length > 1 ? ` (per run: ${share.perRun.map((r) => r.toFixed(2)).join(', ')})` : '';
    lines.push({
      id: 'f',
      status: ok ? 'PASS' : 'FAIL',
      text: `(f) list 100 IDs c=${BURST_LIST_CONNECTIONS} with ${PASSWORD_BURST_CLIENTS} clients changing passwords alongside: ${fmt.int(burstList.median.rps)} rps vs ${fmt.int(burstRef.median.rps)} without, ${share.value.toFixed(2)} of it${perRun} (need >= ${BURST_MIN_LIST_SHARE.toFixed(2)}); p99 ${fmt.ms(burstList.median.p99)} vs ${fmt.ms(burstRef.median.p99)} ms; password changes ${fmt.int(burstPw.rps)}/s, p50 ${fmt.ms(burstPw.p50)} ms, slowest ${fmt.ms(slowest)} ms (need <= ${BURST_MAX_CHANGE_MS}), the last of the first ${PASSWORD_BURST_CLIENTS} simultaneous changes answered after ${fmt.ms(burstPw.firstRoundMax ?? NaN)} ms; hashing queue bound ${HASH_CONCURRENCY} on ${os.availableParallelism()} cores`,
    });
  } else {
    lines.push({ id: 'f', status: 'N/A', text: `(f) not measured in this run${ctx.options.baselineOnly ? ' (--baseline)' : ''}` });
  }
  return lines;
}

// a/b for two scenarios measured in the same runs: the median of the per-run ratios. Scenarios
// with different run counts (measured in different blocks) fall back to the ratio of medians.
function pairedRatio(a: ScenarioRecord, b: ScenarioRecord, f: (m: Measurement) => number): { value: number; perRun: number[] } {
  if (a.runs.length !== b.runs.length) return { value: f(a.median) / f(b.median), perRun: [] };
  const perRun = a.runs.map((r, k) => f(r) / f(b.runs[k]!));
  return { value: median(perRun), perRun };
}

function resultTable(ctx: Context): string {
  const header = ['scenario', 'target', 'rows', 'conns', 'rps', 'p50 ms', 'p99 ms', 'errors', 'RSS MiB', 'cpu ms/req', 'pg cpu ms/req', 'rps/naive', 'p99/naive', 'rps/pgbench'];
  const rows: string[][] = [];
  // List scenarios by size, IDs, connections, token, then service/naive/pgbench; the rest as run.
  const targetOrder = { service: 0, naive: 1, pgbench: 2 } as const;
  const plainList = (r: ScenarioRecord) => r.group === 'list' && !r.label.includes('(');
  const records = [...ctx.records.values()];
  const sorted = [
    ...records
      .filter(plainList)
      .sort(
        (a, b) =>
          a.rows - b.rows ||
          (a.ids ?? 0) - (b.ids ?? 0) ||
          a.connections - b.connections ||
          (a.token === 'network' ? 1 : 0) - (b.token === 'network' ? 1 : 0) ||
          targetOrder[a.target] - targetOrder[b.target],
      ),
    ...records.filter((r) => !plainList(r)),
  ];
  for (const r of sorted) {
    const m = r.median;
    const isList = r.group === 'list' || r.group === 'mixed';
    const naive = isList && r.target !== 'naive' && r.ids !== undefined ? find(ctx, 'naive', `list ids=100 c=${r.connections}`, r.rows) : undefined;
    const pgb = isList && r.target === 'service' && r.ids === 100 ? find(ctx, 'pgbench', `list ids=100 c=${r.connections}`, r.rows) : undefined;
    rows.push([
      r.label,
      r.target,
      fmt.rows(r.rows),
      r.connections === 0 ? 'paced' : String(r.connections),
      fmt.int(m.rps),
      fmt.ms(m.p50),
      fmt.ms(m.p99),
      String(m.non2xx + m.socketErrors),
      fmt.mib(m.rssMiB),
      fmt.cpu(m.cpuMsPerRequest),
      fmt.cpu(m.pgCpuMsPerRequest),
      naive ? fmt.ratio(pairedRatio(r, naive, (x) => x.rps).value) : '',
      naive ? fmt.ratio(pairedRatio(r, naive, (x) => x.p99).value) : '',
      pgb ? fmt.ratio(pairedRatio(r, pgb, (x) => x.rps).value) : '',
    ]);
  }
  return renderTable(header, rows, [false, false, true, true, true, true, true, true, true, true, true, true, true, true]);
}

// ---------------------------------------------------------------------------------------------
// Main

let cleanupStarted = false;
let cleanupTasks: (() => Promise<void>)[] = [];

async function cleanup(): Promise<void> {
  if (cleanupStarted) return;
  cleanupStarted = true;
  await stopAllChildren().catch(() => killAllChildrenNow());
  for (const task of cleanupTasks.reverse()) {
    await task().catch((error: unknown) => log(`cleanup: ${error instanceof Error ? error.message : String(error)}`));
  }
  cleanupTasks = [];
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2), process.env);
  const missing = options.peers ? peersMissing() : null;
  if (missing) {
    process.stderr.write(`${missing}\n`);
    process.exit(2);
  }
  const startedAt = new Date();
  const machine = machineInfo();
  log(`charging-network-service benchmark, ${startedAt.toISOString()}`);
  log(`machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, ${machine.os}, node ${machine.node}, load average ${machine.loadAverageAtStart.join(' ')}`);
  log(`options: runs ${options.runs}, ${options.durationSeconds} s per scenario${options.quick ? ' (--quick)' : ''}${options.baselineOnly ? ', --baseline' : ''}${options.memoryOnly ? ', --memory' : ''}${options.peers ? ', --peers' : options.floorOnly ? ', --floor' : ''}, floor rounds ${options.floorRounds}${options.acceptEncoding ? `, service list requests with Accept-Encoding: ${options.acceptEncoding}` : ''}, sizes ${options.sizes.map(fmt.rows).join(', ')}, pool ${options.poolMax}`);

  if (options.build) {
    log('building: npm run build');
    const build = await runCommand('npm', ['run', 'build'], { cwd: ROOT_DIR, timeoutMs: 300_000 });
    if (build.code !== 0) throw new Error(`npm run build failed:\n${build.stdout}\n${build.stderr}`);
  }

  let databaseUrl = options.databaseUrl;
  if (options.ownPostgres) {
    const cluster = await startOwnCluster();
    cleanupTasks.push(() => cluster.stop());
    databaseUrl = cluster.url;
    log(`PostgreSQL: throwaway cluster in ${cluster.dataDir} on ${new URL(cluster.url).port}, configured by the benchmark (bench/postgres-cluster.ts)`);
  }
  const logDir = mkdtempSync(join(os.tmpdir(), 'cns-bench-logs-'));
  cleanupTasks.push(async () => rmSync(logDir, { recursive: true, force: true }));

  // First, on a fresh process and before any load: what a start holds in memory.
  let memory: Awaited<ReturnType<typeof measureStartMemory>> | null = null;
  // Not before --quick (a development run) unless asked for: it costs about a minute of starts.
  if (options.memoryOnly || (!options.baselineOnly && !options.floorOnly && !options.quick)) {
    log('\n== memory at start: peak RSS (VmHWM) and RSS 5 s after /readyz, idle ==');
    memory = await measureStartMemory(databaseUrl, logDir, log);
  }
  if (options.memoryOnly) {
    const json = { startedAt: startedAt.toISOString(), finishedAt: new Date().toISOString(), machine, memory };
    mkdirSync(dirname(options.out), { recursive: true });
    writeFileSync(options.out, `${JSON.stringify(json, null, 2)}\n`);
    log(`\nfigures written to ${options.out}`);
    return;
  }

  const target = await createBenchTarget(databaseUrl);
  cleanupTasks.push(() => target.drop());
  log(`database: ${target.kind === 'postgres' ? `PostgreSQL, throwaway database ${target.name}` : `PGlite in ${target.name}`}`);
  const postgresMode = target.kind !== 'postgres' ? null : options.ownPostgres ? 'own cluster (--own-postgres)' : 'DATABASE_URL';

  let sizes = options.sizes;
  const notes: string[] = [];
  if (target.kind === 'pglite' && sizes.some((s) => s > 100_000)) {
    notes.push(`PGlite: skipped ${sizes.filter((s) => s > 100_000).map(fmt.rows).join(', ')} rows (seeding and serving a table that size in WASM PostgreSQL is slow; use DATABASE_URL)`);
    sizes = sizes.filter((s) => s <= 100_000);
    if (sizes.length === 0) sizes = [10_000];
  }
  if (target.kind === 'pglite' && sizes.length > 1) {
    notes.push(`PGlite: one size only (${fmt.rows(sizes[0]!)}): the server process holds the database, so rows cannot be added while it runs`);
    sizes = [sizes[0]!];
  }
  if (target.kind === 'pglite') notes.push('PGlite: no naive server and no pgbench (they need a PostgreSQL server); targets (a)-(c) need DATABASE_URL');
  if (target.kind === 'postgres' && !pgbenchAvailable()) notes.push(`pgbench not found at ${PGBENCH} (set PGBENCH=…)`);
  for (const n of notes) log(`note: ${n}`);

  // Seed the first size and create the API clients directly in the database.
  let seedDb: Database | null = await openBenchDatabase(target);
  const closeSeedDb = async () => {
    if (seedDb) {
      const d = seedDb;
      seedDb = null;
      await d.close();
    }
  };
  cleanupTasks.push(closeSeedDb);
  const clients: BenchClients = await createBenchClients(seedDb);
  const seedTimes: { from: number; rows: number; seconds: number; tableSize?: string }[] = [];
  const seed = async (from: number, to: number) => {
    const t0 = performance.now();
    process.stdout.write(`seeding session_payments ${fmt.rows(from)} -> ${fmt.rows(to)} rows over ${NETWORK_COUNT} networks ...`);
    await seedPayments(seedDb!, from, to, () => process.stdout.write('.'));
    const seconds = (performance.now() - t0) / 1000;
    const size = target.kind === 'postgres' ? await tableSize(seedDb!) : undefined;
    seedTimes.push({ from, rows: to, seconds: Math.round(seconds * 10) / 10, ...(size ? { tableSize: size } : {}) });
    log(` ${seconds.toFixed(1)} s (incl. VACUUM ANALYZE)${size ? `, table + indexes ${size}` : ''}`);
    if (target.kind === 'postgres') {
      const warm = await prewarm(seedDb!);
      if (typeof warm === 'string') {
        log(`prewarm: ${warm}`);
        notes.push(warm);
      } else {
        const fits = warm.pages <= warm.sharedBuffersPages;
        log(`prewarm: ${warm.pages.toLocaleString('en-US')} pages of session_payments and its indexes into shared_buffers (${warm.sharedBuffersPages.toLocaleString('en-US')} pages)${fits ? '' : ': DOES NOT FIT'}`);
        if (!fits) notes.push(`at ${fmt.rows(to)} rows session_payments and its indexes (${warm.pages} pages) do not fit in shared_buffers (${warm.sharedBuffersPages} pages): reads go through the kernel's page cache; --own-postgres configures a server for the benchmark`);
      }
    }
  };
  await seed(0, sizes[0]!);
  const settings = target.kind === 'postgres' ? await postgresSettings(seedDb) : {};
  if (target.kind === 'postgres') log(`PostgreSQL settings (${postgresMode}; jit and random_page_cost set on the bench database): ${Object.entries(settings).map(([k, v]) => `${k}=${v}`).join(', ')}`);
  if (target.kind === 'pglite') await closeSeedDb(); // the server process needs the data directory to itself

  // The list SQL pgbench runs must be the service's.
  const captured = await serviceListSql();
  const sqlCheck =
    typeof captured === 'string'
      ? `not verified: ${captured}`
      : normalizeSql(captured.all) === normalizeSql(SERVICE_LIST_SQL)
        ? 'matches the service (bench/list-sql.ts)'
        : 'DIFFERS from the service: update SERVICE_LIST_SQL in bench/list-sql.ts';
  log(`list SQL for pgbench: ${sqlCheck}`);

  // Start the compiled server.
  const servicePort = await freePort();
  const serverEnv: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    NODE_ENV: 'production',
    LOG_LEVEL: 'warn',
    HOST: LOOPBACK,
    PORT: String(servicePort),
    RATE_LIMIT_MAX: '0',
    DATABASE_POOL_MAX: String(options.poolMax),
    AUTH_TOKEN_TTL_SECONDS: '86400',
    ...(target.kind === 'postgres' ? { DATABASE_URL: target.url } : { DATA_DIR: target.dataDir }),
  };
  const service = startChild('service', SERVER_NODE, SERVER_ARGS, { cwd: ROOT_DIR, env: serverEnv, logFile: join(logDir, 'service.log') });
  await waitForHttp(service, `http://${LOOPBACK}:${servicePort}/readyz`, 60_000, 200);
  log(`service: node dist/server.js pid ${service.pid} on ${LOOPBACK}:${servicePort} (NODE_ENV=production LOG_LEVEL=warn RATE_LIMIT_MAX=0, DATABASE_POOL_MAX=${options.poolMax})${SERVER_NODE_ARGS.length ? ` node args ${SERVER_NODE_ARGS.join(' ')}` : ''}`);

  let naive: Child | null = null;
  let naivePort = 0;
  if (target.kind === 'postgres') {
    naivePort = await freePort();
    // On the service's Node and flags (BENCH_SERVER_NODE, BENCH_SERVER_NODE_ARGS), as the floor and
    // the peers are: a ratio on the image's Node compares both servers on it.
    naive = startChild('naive', SERVER_NODE, [...SERVER_NODE_ARGS, join(BENCH_DIR, 'naive-server.mjs')], {
      cwd: ROOT_DIR,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'production', HOST: LOOPBACK, PORT: String(naivePort), DATABASE_URL: target.url, POOL_MAX: String(options.poolMax), NAIVE_APPLICATION_NAME },
      logFile: join(logDir, 'naive.log'),
    });
    await waitForHttp(naive, `http://${LOOPBACK}:${naivePort}/`, 30_000);
    log(`naive server: ${SERVER_NODE === process.execPath ? 'node' : SERVER_NODE} bench/naive-server.mjs pid ${naive.pid} on ${LOOPBACK}:${naivePort} (pool ${options.poolMax})`);
  }

  const basicAll = basicOf(clients.all);
  const ctx: Context = {
    options,
    target,
    service,
    servicePort,
    naive,
    naivePort,
    bearerAll: await fetchToken(servicePort, basicAll),
    bearerNetwork: await fetchToken(servicePort, basicOf(clients.network)),
    basicAll,
    rows: sizes[0]!,
    records: new Map(),
    scenarioCount: 0,
  };

  // The floor: a network-scoped client made with the CLI, and the bare server for its network,
  // which must answer the service's bytes before anything is measured.
  let floor: { child: Child; port: number; bearer: string; check: string } | null = null;
  if (target.kind === 'postgres') {
    const cliClient = await createClientWithCli(target.url!, SCOPED_NETWORK);
    const started = await startFloor(target.url!, options.poolMax, SCOPED_NETWORK, logDir);
    const bearer = await fetchToken(servicePort, basicOf(cliClient));
    const check = await assertSameAnswer(servicePort, started.port, listPath(100, ctx.rows, true), bearer);
    floor = { ...started, bearer, check };
    log(`floor server: bench/floor-server.ts pid ${started.child.pid} on ${LOOPBACK}:${started.port} (pool ${options.poolMax}, network ${SCOPED_NETWORK}); its answer and the service's: ${check}`);
  }
  // The peers, verifying the floor comparison's token; they must answer the service's rows.
  let peers: RunningPeer[] = [];
  let peersCheck: string | null = null;
  if (floor && options.peers) {
    const role = `${target.name}_peer`;
    cleanupTasks.push(await preparePeerDatabase(target.url!, role));
    peers = await startPeers({ databaseUrl: target.url!, poolMax: options.poolMax, role, servicePort, bearer: floor.bearer, logDir });
    const ids = listIds(100, ctx.rows, true);
    peersCheck = await assertPeersAnswer({ peers, servicePort, servicePath: listPathOf(ids), ids, bearer: floor.bearer, network: SCOPED_NETWORK });
    for (const p of peers) log(`peer: ${PEER_LABELS[p.name]} (bench/peers/${p.name}-server.mjs) pid ${p.child.pid} on ${LOOPBACK}:${p.port} (pool ${options.poolMax})`);
    log(`peers' answers: ${peersCheck}`);
  }
  const floorComparisons: SideBySide[] = [];

  // Sanity: the service answers the list, and the naive server answers the same JSON.
  const probe = listPath(100, ctx.rows, false);
  const svcProbe = await getJson(servicePort, probe, ctx.bearerAll);
  if (svcProbe.status !== 200 || !Array.isArray(svcProbe.body)) throw new Error(`service list answered ${svcProbe.status}: ${JSON.stringify(svcProbe.body).slice(0, 500)}`);
  let shapeCheck = 'n/a (no naive server)';
  if (naive) {
    const naiveProbe = await getJson(naivePort, probe, null);
    const sorted = (v: unknown) => JSON.stringify([...(v as { id: string }[])].sort((x, y) => x.id.localeCompare(y.id)));
    shapeCheck = sorted(svcProbe.body) === sorted(naiveProbe.body) ? `identical JSON for ${svcProbe.body.length} payments` : 'DIFFERENT JSON from the service (the comparison is not like for like)';
    log(`naive vs service answer: ${shapeCheck}`);
  }

  // List scenarios at every size. The server keeps running; rows are added between sizes, and
  // each further run starts again from the smallest size (TRUNCATE and re-seed), so that every
  // run pairs a small-table block with a large-table block measured minutes apart, not a run apart.
  const rssSamples: number[] = [];
  for (let run = 1; run <= options.runs; run++) {
    for (let si = 0; si < sizes.length; si++) {
      const rows = sizes[si]!;
      if (si > 0) {
        await seed(sizes[si - 1]!, rows);
      } else if (run > 1 && sizes.length > 1) {
        await query(seedDb!, 'TRUNCATE session_payments');
        await seed(0, rows);
      }
      ctx.rows = rows;
      log(`\n== list, ${fmt.rows(rows)} rows${options.runs > 1 ? `, run ${run}/${options.runs}` : ''} ==`);
      if (!options.floorOnly) {
        if (run === 1 || sizes.length > 1) {
          await warmUp(ctx, servicePort, ctx.bearerAll);
          if (naive) await warmUp(ctx, naivePort, null);
        }
        await listBlock(ctx, si === 0 && sizes.length > 1);
      }
      if (floor) {
        const f = floor;
        const contenders: Contender[] = [
          { name: 'service', port: servicePort, pid: service.pid, applicationName: SERVICE_APPLICATION_NAME, next: listRequest(100, rows, f.bearer, true, options.acceptEncoding) },
          { name: 'floor', port: f.port, pid: f.child.pid, applicationName: FLOOR_APPLICATION_NAME, next: listRequest(100, rows, null, true) },
          // The same IDs of the token's network: the naive server answers the same payments.
          ...(naive ? [{ name: 'naive', port: naivePort, pid: naive.pid, applicationName: NAIVE_APPLICATION_NAME, next: listRequest(100, rows, null, true) }] : []),
          ...peers.map((p) => ({ name: p.name, port: p.port, pid: p.child.pid, applicationName: p.applicationName, next: () => peerRequest(p.name, listIds(100, rows, true), f.bearer) })),
        ];
        const comparison = await compareSideBySide({
          databaseUrl: target.url!,
          rows,
          connections: 32,
          rounds: options.floorRounds,
          durationSeconds: options.durationSeconds,
          warmupSeconds: options.warmupSeconds,
          contenders,
          log,
        });
        floorComparisons.push(comparison);
        log(`  floor: ${floorSummary(comparison).text}`);
        if (naive) log(`  naive: ${naiveSummary(comparison).text}`);
        for (const p of peers) log(`  ${p.name}: ${peerSummary(comparison, p.name).text}`);
      }
    }
    rssSamples.push(await settledRss(service.pid));
  }
  // (c) needs three repetitions of the list in one server process.
  if (rssSamples.length < 3 && !options.floorOnly) {
    log('\n== RSS repetitions: list ids=100 c=32 ==');
    while (rssSamples.length < 3) {
      await serviceList(ctx, 100, 32, 'all', 'list ids=100 c=32 token=all (RSS repetition)');
      rssSamples.push(await settledRss(service.pid));
    }
  }

  if (!options.baselineOnly && !options.floorOnly) {
    log(`\n== writes, tokens, passwords (${fmt.rows(ctx.rows)} seeded rows) ==`);
    process.stdout.write(`creating ${ASSET_COUNT} assets through the API ...`);
    const assetIds = await createAssets(ctx, ASSET_COUNT);
    log(' done');
    for (let run = 1; run <= options.runs; run++) {
      if (options.runs > 1) log(` run ${run}/${options.runs}`);
      await writeBlock(ctx, run, assetIds);
    }
  }

  const serviceHwm = rssMiB(service.pid, 'VmHWM');
  const finishedAt = new Date();
  const targets = options.floorOnly ? [] : evaluateTargets(ctx, rssSamples, sizes);
  for (const c of floorComparisons) {
    const summary = floorSummary(c);
    targets.push({ id: 'floor', status: summary.ok ? 'PASS' : 'FAIL', text: `(floor) ${summary.text}` });
    if (c.contenders.includes('naive')) {
      const naive = naiveSummary(c);
      targets.push({ id: 'naive', status: naive.ok ? 'PASS' : 'FAIL', text: `(naive) ${naive.text}` });
    }
    for (const p of peers) {
      const peer = peerSummary(c, p.name);
      targets.push({ id: 'peers', status: peer.ok ? 'PASS' : 'FAIL', text: `(peers) ${peer.text}` });
    }
  }
  if (!floor) targets.push({ id: 'floor', status: 'N/A', text: '(floor) needs PostgreSQL (the floor is node:http + pg)' });

  log(`\n== results: ${options.runs > 1 ? `medians of ${options.runs} runs` : 'one run'}, ${options.durationSeconds} s per scenario, ${target.kind} ==`);
  log(resultTable(ctx));
  log('');
  log(`seeding (not benchmarked, incl. VACUUM ANALYZE): ${seedTimes.map((s) => `${fmt.rows(s.from)} -> ${fmt.rows(s.rows)} rows ${s.seconds} s${s.tableSize ? ` (${s.tableSize})` : ''}`).join('; ')}`);
  if (target.kind === 'postgres') log(`PostgreSQL (${postgresMode}): ${Object.entries(settings).map(([k, v]) => `${k}=${v}`).join(', ')}`);
  for (const m of memory?.starts ?? []) log(`memory at start: ${m.label}: peak ${fmt.mib(m.peakMiB)} MiB, steady ${fmt.mib(m.steadyMiB)} MiB`);
  log(`service peak RSS (VmHWM): ${fmt.mib(serviceHwm)} MiB; list SQL for pgbench: ${sqlCheck}; naive vs service: ${shapeCheck}`);
  log(`load average at end: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')} (the load generator, the servers and PostgreSQL share this machine's ${machine.cores} cores)`);
  for (const n of notes) log(`note: ${n}`);
  log('');
  for (const t of targets) log(`${t.status.padEnd(4)} ${t.text}`);

  const json = {
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    machine: { ...machine, loadAverageAtEnd: os.loadavg().map((l) => Math.round(l * 100) / 100) },
    options: { runs: options.runs, durationSeconds: options.durationSeconds, quick: options.quick, baselineOnly: options.baselineOnly, floorOnly: options.floorOnly, peers: options.peers, floorRounds: options.floorRounds, sizes, poolMax: options.poolMax, acceptEncoding: options.acceptEncoding ?? null },
    database: { kind: target.kind, mode: postgresMode, settings, seeding: seedTimes },
    memory,
    service: { node: SERVER_NODE, nodeArgs: SERVER_NODE_ARGS, env: { NODE_ENV: 'production', LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '0', DATABASE_POOL_MAX: String(options.poolMax) }, peakRssMiB: serviceHwm, rssAfterListRepetitionsMiB: rssSamples },
    checks: { listSql: sqlCheck, naiveShape: shapeCheck, floorAnswer: floor?.check ?? null, peersAnswers: peersCheck },
    floor: floorComparisons,
    passwordHash: { argon2id: DEFAULT_ARGON2_PARAMS },
    hashConcurrency: HASH_CONCURRENCY,
    notes,
    scenarios: [...ctx.records.values()].map((r) => ({
      label: r.label,
      target: r.target,
      group: r.group,
      rows: r.rows,
      connections: r.connections,
      ids: r.ids ?? null,
      token: r.token ?? null,
      median: r.median,
      runs: r.runs,
    })),
    targets,
  };
  mkdirSync(dirname(options.out), { recursive: true });
  writeFileSync(options.out, `${JSON.stringify(json, null, 2)}\n`);
  log(`\nfigures written to ${options.out}`);
}

// The "webhooks" group (npm run bench -- --webhooks) has a harness of its own, which drops its
// database on Ctrl-C itself: bench/webhooks.ts.
const webhooks = process.argv.includes('--webhooks');
if (!webhooks) {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`\n${signal}: stopping child processes and dropping the bench database`);
      void cleanup().finally(() => process.exit(130));
    });
  }
}
process.on('exit', () => killAllChildrenNow());

// The "stations" group (npm run bench -- --stations, its abuse part alone with --abuse) has a
// harness of its own: bench/stations.ts.
if (webhooks) {
  await import('./webhooks.js');
} else if (process.argv.includes('--stations') || process.argv.includes('--abuse')) {
  await import('./stations.js');
} else {
  main()
    .then(async () => {
      await cleanup();
      process.exit(0);
    })
    .catch(async (error: unknown) => {
      process.stderr.write(`benchmark failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      await cleanup();
      process.exit(1);
    });
}
