import { spawn, type ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { freePort } from '../helpers/probe-app.js';
import { ROOT, waitUntilHealthy } from '../helpers/service-process.js';
import { stationClient, type StationClient } from '../helpers/station-factory.js';

interface HttpResult {
  status: number;
  body: string;
}

// One request on a fresh connection (no keep-alive pool), so "new connection" means what it says.
function get(port: number, path: string): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent: false, headers: { connection: 'close' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

// Whether a new connection is refused now (the listening socket is gone).
async function refused(port: number): Promise<boolean> {
  return get(port, '/healthz').then(
    () => false,
    (error: NodeJS.ErrnoException) => error.code === 'ECONNREFUSED' || error.code === 'ECONNRESET',
  );
}

// The fixture: the real app and runServer, a /slow route, and with STATION_ID a station to connect.
function startFixture(env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/slow-server.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', HOST: '127.0.0.1', LOG_LEVEL: 'silent', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = { stdout: '', stderr: '' };
  child.stdout.on('data', (chunk: Buffer) => (output.stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output.stderr += chunk.toString()));
  const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('exit', (c, s) => resolve([c, s])));
  return { child, output, exited };
}

describe('graceful shutdown (SIGTERM)', () => {
  let child: ChildProcess | undefined;
  const stations: StationClient[] = [];

  afterEach(async () => {
    await Promise.all(stations.splice(0).map((s) => s.close({ force: true }).catch(() => undefined)));
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  afterAll(() => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });

  it('with SHUTDOWN_DRAIN_SECONDS=0: finishes the request in flight, refuses new connections, closes the database and exits 0', async () => {
    const port = await freePort();
    const fixture = startFixture({ PORT: String(port), SLOW_MS: '1500', SHUTDOWN_TIMEOUT_MS: '20000', SHUTDOWN_DRAIN_SECONDS: '0' });
    child = fixture.child;

    await waitUntilHealthy(async () => (await get(port, '/healthz')).status, child);
    while (!fixture.output.stdout.includes('listening on')) await sleep(20);

    const slow = get(port, '/slow');
    // once the slow request is in its handler (and ~200 ms in), ask the process to stop
    while (!fixture.output.stdout.includes('slow request started')) await sleep(20);
    await sleep(200);
    expect(child.kill('SIGTERM')).toBe(true);
    await sleep(300);

    // The slow request is still running (1.5 s), yet the listening socket is gone: a new
    // connection is refused.
    const late = await get(port, '/healthz').then(
      (res) => ({ ok: true as const, res }),
      (error: NodeJS.ErrnoException) => ({ ok: false as const, code: error.code }),
    );
    expect(late).toMatchObject({ ok: false });
    expect(['ECONNREFUSED', 'ECONNRESET']).toContain((late as { code?: string }).code);

    const finished = await slow;
    expect(finished.status).toBe(200);
    expect(JSON.parse(finished.body)).toEqual({ done: true });

    const [code, signal] = await fixture.exited;
    expect({ code, signal, stderr: fixture.output.stderr }).toEqual({ code: 0, signal: null, stderr: '' });
    expect(fixture.output.stdout).toContain('database closed');
  }, 60_000);

  it(
    'with the default drain (5 s) and timeout (10 s): /readyz answers 503 while everything else is served, then the stations are closed with 1012 (reconnect), new connections are refused, the request in flight finishes, exit 0',
    async () => {
      const port = await freePort();
      const id = 'CP-drain-1';
      const fixture = startFixture({ PORT: String(port), SLOW_MS: '2500', STATION_ID: id });
      child = fixture.child;
      await waitUntilHealthy(async () => (await get(port, '/healthz')).status, child);
      while (!fixture.output.stdout.includes('listening on')) {
        if (child.exitCode !== null) throw new Error(fixture.output.stderr);
        await sleep(20);
      }
      const password = /station password: (\S+)/.exec(fixture.output.stdout)![1]!;
      const closes: { code: number; at: number }[] = [];
      const connect = async () => {
        const station = stationClient(`ws://127.0.0.1:${port}/ocpp`, { identity: id, password, protocols: ['ocpp2.0.1'] });
        stations.push(station);
        station.once('close', ({ code }: { code: number }) => closes.push({ code, at: Date.now() }));
        await station.connect();
        return station;
      };
      await connect();
      expect((await get(port, '/readyz')).status).toBe(200);

      const signalledAt = Date.now();
      expect(child.kill('SIGTERM')).toBe(true);
      // The drain: the balancer's health check fails, everything else is served as before, a
      // station may still log in (a newer login of the same station replaces the first socket).
      await sleep(500);
      expect((await get(port, '/readyz')).status).toBe(503);
      expect((await get(port, '/healthz')).status).toBe(200);
      const second = await connect();
      expect(await second.call('Heartbeat', {})).toEqual({ currentTime: expect.any(String) });
      await vi.waitFor(() => expect(closes).toEqual([{ code: 1000, at: expect.any(Number) }]));
      while (Date.now() - signalledAt < 3500) await sleep(50);
      // Late in the drain, a request that will still run once it is over.
      const slow = get(port, '/slow');
      while (!fixture.output.stdout.includes('slow request started')) await sleep(20);
      expect((await get(port, '/readyz')).status).toBe(503);
      expect(closes).toHaveLength(1);

      // After the drain: the station is asked to reconnect, and the port stops accepting while
      // the slow request still runs.
      while (closes.length < 2) {
        if (child.exitCode !== null) break;
        await sleep(20);
      }
      expect(closes[1]?.code).toBe(1012);
      let refusedBeforeSlowEnded = false;
      let slowDone = false;
      void slow.finally(() => (slowDone = true));
      while (!slowDone) {
        if (await refused(port)) {
          refusedBeforeSlowEnded = !slowDone;
          break;
        }
        await sleep(50);
      }
      expect(refusedBeforeSlowEnded).toBe(true);
      const finished = await slow;
      expect(finished).toEqual({ status: 200, body: JSON.stringify({ done: true }) });

      // Exit 0 means within SHUTDOWN_TIMEOUT_MS (10 s by default): past it the process exits 1.
      const [code, signal] = await fixture.exited;
      const exitMs = Date.now() - signalledAt;
      console.log(`SIGTERM to exit with the default drain: ${exitMs} ms; the stations were asked to reconnect ${closes[1]!.at - signalledAt} ms after SIGTERM`);
      expect({ code, signal, stderr: fixture.output.stderr }).toEqual({ code: 0, signal: null, stderr: '' });
      expect(closes[1]!.at - signalledAt).toBeGreaterThanOrEqual(5000);
      expect(fixture.output.stdout).toContain('database closed');
    },
    60_000,
  );
});
