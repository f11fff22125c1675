// The service's 100-ID list against its floor (bench/floor-server.ts): a network-scoped token
// made with the CLI, the floor started for that network, and a check that both answer the same
// bytes before they are measured side by side (bench/side-by-side.ts). bench/README.md describes
// the method.
import http from 'node:http';
import { join } from 'node:path';
import { BENCH_DIR, ROOT_DIR } from './options.js';
import { LOOPBACK, SERVER_NODE, SERVER_NODE_ARGS, freePort, runCommand, startChild, waitForHttp, type Child } from './processes.js';
import { ratioSummary, type SideBySide } from './side-by-side.js';
import { fmt, median } from './report.js';

// The service's pool connections carry this application_name (src/db/postgres-database.ts); the
// readiness probe's has a suffix and is left out.
export const SERVICE_APPLICATION_NAME = 'charging-network-service';
// The naive server's (bench/naive-server.mjs), when it is measured in the same rounds.
export const NAIVE_APPLICATION_NAME = 'cns-bench-naive';
export const FLOOR_TARGET = 0.9;
// The hot-path targets against the naive server: 3x at 10,000 rows, 2x at 1,000,000.
const naiveTarget = (rows: number) => (rows <= 10_000 ? 3 : 2);

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

export function floorSummary(c: SideBySide): { ok: boolean; text: string } {
  return ratioSummary(c, 'floor', FLOOR_TARGET, 'floor');
}

// The service against the naive server in the floor's rounds, and the floor's own ratio to it,
// round by round: what the service could reach at its floor, beside what it reaches.
export function naiveSummary(c: SideBySide): { ok: boolean; text: string } {
  const summary = ratioSummary(c, 'naive', naiveTarget(c.rows), 'naive');
  const floorOverNaive = c.rounds.map((r) => r.windows.floor!.rps / r.windows.naive!.rps);
  return { ok: summary.ok, text: `${summary.text}; floor / naive ${fmt.ratio(median(floorOverNaive))} (rounds ${floorOverNaive.map(fmt.ratio).join(', ')})` };
}
