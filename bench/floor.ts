// The service's 100-ID list against its floor (bench/floor-server.ts), side by side: the same
// list requests, a network-scoped token made with the CLI, rounds that alternate which server goes
// first, and per round the ratio of the two throughputs and the CPU each cost per request, in its
// own process and in the PostgreSQL backends serving it. bench/README.md describes the method.
import http from 'node:http';
import { join } from 'node:path';
import pg from 'pg';
import { FLOOR_APPLICATION_NAME } from './floor-server.js';
import { runLoad, type LoadResult, type RequestShape } from './load.js';
import { BENCH_DIR, ROOT_DIR } from './options.js';
import { LOOPBACK, SERVER_NODE, SERVER_NODE_ARGS, cpuMs, freePort, runCommand, startChild, waitForHttp, type Child } from './processes.js';
import { fmt, median } from './report.js';

// The service's pool connections carry this application_name (src/db/postgres-database.ts); the
// readiness probe's has a suffix and is left out.
const SERVICE_APPLICATION_NAME = 'charging-network-service';
export const FLOOR_TARGET = 0.9;

export interface FloorWindow extends LoadResult {
  server: 'service' | 'floor';
  cpuMsPerRequest: number | null;
  pgCpuMsPerRequest: number | null;
}

export interface FloorRound {
  service: FloorWindow;
  floor: FloorWindow;
  ratio: number;
}

export interface FloorComparison {
  rows: number;
  connections: number;
  rounds: FloorRound[];
  ratio: number;
  serviceCpuMsPerRequest: number;
  floorCpuMsPerRequest: number;
  servicePgCpuMsPerRequest: number;
  floorPgCpuMsPerRequest: number;
}

// A client scoped to one network, made the way an operator makes one: `node dist/cli.js clients
// create … --network …` against the bench database.
export async function createClientWithCli(databaseUrl: string, network: string): Promise<{ clientId: string; clientSecret: string }> {
  const result = await runCommand(
    SERVER_NODE,
    ['dist/cli.js', 'clients', 'create', '--name', `bench-list-${network}`, '--scopes', 'read:sessionpayment', '--network', network],
    { cwd: ROOT_DIR, env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'production', DATABASE_URL: databaseUrl }, timeoutMs: 60_000 },
  );
  const clientId = /client_id:\s+(\S+)/.exec(result.stdout)?.[1];
  const clientSecret = /client_secret:\s+(\S+)/.exec(result.stdout)?.[1];
  if (result.code !== 0 || !clientId || !clientSecret) throw new Error(`cli clients create failed (${result.code}):\n${result.stdout}\n${result.stderr}`);
  return { clientId, clientSecret };
}

export async function startFloor(databaseUrl: string, poolMax: number, network: string, logDir: string): Promise<{ child: Child; port: number }> {
  const port = await freePort();
  // The service's Node and flags (BENCH_SERVER_NODE, BENCH_SERVER_NODE_ARGS), so that a profile or a
  // V8 flag applies to both sides of the comparison.
  const child = startChild('floor', SERVER_NODE, [...SERVER_NODE_ARGS, '--import', 'tsx', join(BENCH_DIR, 'floor-server.ts')], {
    cwd: ROOT_DIR,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'production', HOST: LOOPBACK, PORT: String(port), DATABASE_URL: databaseUrl, POOL_MAX: String(poolMax), FLOOR_NETWORK: network },
    logFile: join(logDir, 'floor.log'),
  });
  await waitForHttp(child, `http://${LOOPBACK}:${port}/`, 30_000);
  return { child, port };
}

interface RawAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

// The answer as sent: no Accept-Encoding (the list's load sends none), nothing decoded.
function rawGet(port: number, path: string, headers: Record<string, string>): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: LOOPBACK, port, path, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      })
      .on('error', reject);
  });
}

// The floor must answer exactly what the service answers: status, the headers that frame the body
// (type, length, encoding) and the body's bytes. The service's other headers (x-request-id, Date,
// keep-alive) are not the floor's business.
export async function assertSameAnswer(servicePort: number, floorPort: number, path: string, bearer: string): Promise<string> {
  const [svc, floor] = await Promise.all([rawGet(servicePort, path, { authorization: bearer }), rawGet(floorPort, path, {})]);
  const framing = (r: RawAnswer) => ['content-type', 'content-length', 'transfer-encoding', 'content-encoding'].map((h) => `${h}: ${r.headers[h]}`).join(', ');
  const same = svc.status === 200 && floor.status === 200 && framing(svc) === framing(floor) && svc.body.equals(floor.body);
  if (!same) {
    throw new Error(
      `the floor does not answer the service's bytes: service ${svc.status} ${framing(svc)}, ${svc.body.length} B; floor ${floor.status} ${framing(floor)}, ${floor.body.length} B`,
    );
  }
  return `same bytes (${svc.body.length} B, ${(JSON.parse(svc.body.toString()) as unknown[]).length} payments)`;
}

// CPU time so far of the bench database's backends serving one server, by pid. Read from
// /proc/<pid>/stat (user + system), so only backends alive when it is read count; compareWindows
// takes the difference per pid, a backend that appeared during the window counting whole.
async function backendCpu(admin: pg.Client, applicationName: string): Promise<Map<number, number>> {
  const { rows } = await admin.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1', [applicationName]);
  const out = new Map<number, number>();
  for (const { pid } of rows) {
    const ms = cpuMs(pid);
    if (ms !== null) out.set(pid, ms);
  }
  return out;
}

function cpuSpent(before: Map<number, number>, after: Map<number, number>): number {
  let total = 0;
  for (const [pid, ms] of after) total += ms - (before.get(pid) ?? 0);
  return total;
}

interface Contender {
  server: 'service' | 'floor';
  port: number;
  pid: number;
  applicationName: string;
  next: () => RequestShape;
}

async function window(admin: pg.Client, c: Contender, connections: number, durationSeconds: number): Promise<FloorWindow> {
  const pgBefore = await backendCpu(admin, c.applicationName);
  const cpuBefore = cpuMs(c.pid);
  const result = await runLoad({ port: c.port, connections, durationSeconds, next: c.next });
  const cpuAfter = cpuMs(c.pid);
  const pgAfter = await backendCpu(admin, c.applicationName);
  const perRequest = (ms: number) => (result.requests > 0 ? ms / result.requests : null);
  return {
    ...result,
    server: c.server,
    cpuMsPerRequest: cpuBefore !== null && cpuAfter !== null ? perRequest(cpuAfter - cpuBefore) : null,
    pgCpuMsPerRequest: perRequest(cpuSpent(pgBefore, pgAfter)),
  };
}

export interface CompareOptions {
  databaseUrl: string;
  rows: number;
  connections: number;
  rounds: number;
  durationSeconds: number;
  warmupSeconds: number;
  service: { port: number; pid: number; next: () => RequestShape };
  floor: { port: number; pid: number; next: () => RequestShape };
  log: (line: string) => void;
}

export async function compareWithFloor(o: CompareOptions): Promise<FloorComparison> {
  const admin = new pg.Client({ connectionString: o.databaseUrl, application_name: 'cns-bench-admin' });
  await admin.connect();
  try {
    const service: Contender = { server: 'service', applicationName: SERVICE_APPLICATION_NAME, ...o.service };
    const floor: Contender = { server: 'floor', applicationName: FLOOR_APPLICATION_NAME, ...o.floor };
    for (const c of [service, floor]) await runLoad({ port: c.port, connections: o.connections, durationSeconds: o.warmupSeconds, next: c.next });
    const rounds: FloorRound[] = [];
    for (let r = 0; r < o.rounds; r++) {
      // Alternated: the service first in odd rounds, the floor first in even ones.
      const order = r % 2 === 0 ? [service, floor] : [floor, service];
      const got: Partial<Record<'service' | 'floor', FloorWindow>> = {};
      for (const c of order) got[c.server] = await window(admin, c, o.connections, o.durationSeconds);
      const round = { service: got.service!, floor: got.floor!, ratio: got.service!.rps / got.floor!.rps };
      rounds.push(round);
      const line = (w: FloorWindow) =>
        `${w.server.padEnd(7)} ${fmt.int(w.rps).padStart(6)} rps p99 ${fmt.ms(w.p99).padStart(5)} ms errors ${w.non2xx + w.socketErrors} cpu ${fmt.cpu(w.cpuMsPerRequest)} + pg ${fmt.cpu(w.pgCpuMsPerRequest)} ms/req`;
      o.log(`  floor round ${r + 1}/${o.rounds} (${order[0]!.server} first): ${line(round.service)} | ${line(round.floor)} | ratio ${fmt.ratio(round.ratio)}`);
    }
    const med = (f: (x: FloorRound) => number | null) => median(rounds.map((x) => f(x) ?? NaN));
    return {
      rows: o.rows,
      connections: o.connections,
      rounds,
      ratio: med((x) => x.ratio),
      serviceCpuMsPerRequest: med((x) => x.service.cpuMsPerRequest),
      floorCpuMsPerRequest: med((x) => x.floor.cpuMsPerRequest),
      servicePgCpuMsPerRequest: med((x) => x.service.pgCpuMsPerRequest),
      floorPgCpuMsPerRequest: med((x) => x.floor.pgCpuMsPerRequest),
    };
  } finally {
    await admin.end();
  }
}

export function floorSummary(c: FloorComparison): { ok: boolean; text: string } {
  const total = (a: number, b: number) => fmt.cpu(a + b);
  // What the ratio would be where CPU alone bounds both (the same cores for the server and
  // PostgreSQL, nothing else running): steadier on a shared machine than requests per second.
  const cpuBound = (c.floorCpuMsPerRequest + c.floorPgCpuMsPerRequest) / (c.serviceCpuMsPerRequest + c.servicePgCpuMsPerRequest);
  return {
    ok: c.ratio >= FLOOR_TARGET,
    text:
      `rows ${fmt.rows(c.rows)}, list 100 IDs, network-scoped token, ${c.connections} conns: service / floor ${fmt.ratio(c.ratio)} ` +
      `(median of ${c.rounds.length} alternated rounds: ${c.rounds.map((x) => fmt.ratio(x.ratio)).join(', ')}; need >= ${FLOOR_TARGET.toFixed(2)}x); ` +
      `CPU ms/request, server + PostgreSQL backends: service ${fmt.cpu(c.serviceCpuMsPerRequest)} + ${fmt.cpu(c.servicePgCpuMsPerRequest)} = ${total(c.serviceCpuMsPerRequest, c.servicePgCpuMsPerRequest)}, ` +
      `floor ${fmt.cpu(c.floorCpuMsPerRequest)} + ${fmt.cpu(c.floorPgCpuMsPerRequest)} = ${total(c.floorCpuMsPerRequest, c.floorPgCpuMsPerRequest)} ` +
      `(floor / service CPU per request ${fmt.ratio(cpuBound)})`,
  };
}
