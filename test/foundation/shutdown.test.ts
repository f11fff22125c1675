import { spawn, type ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/probe-app.js';
import { ROOT, waitUntilHealthy } from '../helpers/service-process.js';


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


describe('graceful shutdown (SIGTERM)', () => {
  let child: ChildProcess | undefined;

  afterAll(() => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });

  it('finishes the request in flight, refuses new connections, closes the database and exits 0', async () => {
    const port = await freePort();
    child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/slow-server.ts'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        HOST: '127.0.0.1',
        PORT: String(port),
        LOG_LEVEL: 'silent',
        SLOW_MS: '1500',
        SHUTDOWN_TIMEOUT_MS: '20000',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child!.on('exit', (c, s) => resolve([c, s])));

    await waitUntilHealthy(async () => (await get(port, '/healthz')).status, child);
    expect(stdout).toContain('listening on');

    const slow = get(port, '/slow');
    // once the slow request is in its handler (and ~200 ms in), ask the process to stop
    while (!stdout.includes('slow request started')) await sleep(20);
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

    const [code, signal] = await exited;
    expect({ code, signal, stderr }).toEqual({ code: 0, signal: null, stderr: '' });
    expect(stdout).toContain('database closed');
  });
});
