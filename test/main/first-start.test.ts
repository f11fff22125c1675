// A new install's first start, as a new user meets it: the bootstrap admin client's secret is
// never lost to a start that fails, and what the server prints runs as printed.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { freePort } from '../helpers/probe-app.js';
import { killProcess, outputLines, runProcess, startProcess, waitUntilHealthy } from '../helpers/service-process.js';

const folders: string[] = [];
function folder(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cns-first-start-'));
  folders.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of folders) rmSync(dir, { recursive: true, force: true });
});

// Runs the printed `TOKEN=$(curl -s -u 'ID:SECRET' -d … URL | sed -E 's/REGEX/\1/')` line: the same
// request, and the same sed expression over the answer's text.
async function runPrintedToken(printed: string): Promise<string> {
  const line = /^ {2}TOKEN=\$\(curl -s -u '([^':]+):([^']+)' -d grant_type=client_credentials (http:\/\/\S+) \| sed -E 's\/(.+)\/\\1\/'\)$/m.exec(printed);
  expect(line).not.toBeNull();
  const [, id, secret, url, sed] = line!;
  const res = await fetch(url!, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=client_credentials',
  });
  expect(res.status).toBe(200);
  const token = new RegExp(sed!).exec(await res.text())?.[1];
  expect(token).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
  return token!;
}

// Runs the printed `curl -s -H "Authorization: Bearer $TOKEN" 'URL'` line.
async function runPrintedList(printed: string, token: string): Promise<Response> {
  const url = /^ {2}curl -s -H "Authorization: Bearer \$TOKEN" '([^']+)'$/m.exec(printed)?.[1];
  expect(url).toBeDefined();
  return fetch(url!, { headers: { authorization: `Bearer ${token}` } });
}

describe('first start', () => {
  let server: ReturnType<typeof startProcess> | undefined;
  afterAll(() => killProcess(server?.child));

  it('a first start that cannot listen says why in one line and keeps no client; the next start prints credentials that get a token', { timeout: 120_000 }, async () => {
    const dir = folder();
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as AddressInfo).port;

    const failed = await runProcess(['src/server.ts'], { DATA_DIR: dir, PORT: String(port) });
    await new Promise((resolve) => blocker.close(resolve));
    expect(failed.code).toBe(1);
    expect(outputLines(failed.stderr)).toEqual([`failed to start: 127.0.0.1:${port} is already in use (another process listens there): stop it, or set PORT`]);
    expect(failed.stdout).not.toContain('client_secret');

    server = startProcess(['src/server.ts'], { DATA_DIR: dir, PORT: String(port) });
    await waitUntilHealthy(async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).status, server.child);
    await vi.waitFor(() => expect(server!.output.stdout).toContain('client_secret'), { timeout: 10_000 });
    const banner = server.output.stdout;
    expect(banner).toContain('The embedded database is empty. To load sample payments, stop the server, then run: npm run cli -- demo-data');
    const token = await runPrintedToken(banner);
    expect((await runPrintedList(banner, token)).status).toBe(200);

    // The newcomer's path: stop the server, load the demo data, start again, paste what it printed.
    server.child.kill('SIGTERM');
    expect((await server.exited).code).toBe(0);
    const demo = await runProcess(['src/cli.ts', 'demo-data'], { DATA_DIR: dir, PORT: String(port) });
    expect({ code: demo.code, stderr: demo.stderr }).toEqual({ code: 0, stderr: '' });
    expect(demo.stdout).not.toMatch(/\$CLIENT_ID|\$CLIENT_SECRET/);
    server = startProcess(['src/server.ts'], { DATA_DIR: dir, PORT: String(port) });
    await waitUntilHealthy(async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).status, server.child);
    const list = await runPrintedList(demo.stdout, await runPrintedToken(demo.stdout));
    expect(list.status).toBe(200);
    expect(((await list.json()) as unknown[]).length).toBe(8);
  });

  it('PUBLIC_URL is where the printed commands go and what the embedded issuer signs with', { timeout: 60_000 }, async () => {
    const port = await freePort();
    // Another spelling of this machine than the listen address, kept as an origin.
    const publicUrl = `http://LocalHost:${port}/`;
    const other = startProcess(['src/server.ts'], { DATA_DIR: folder(), PORT: String(port), PUBLIC_URL: publicUrl });
    try {
      await waitUntilHealthy(async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).status, other.child);
      await vi.waitFor(() => expect(other.output.stdout).toContain('client_secret'), { timeout: 10_000 });
      const banner = other.output.stdout;
      expect(banner).toContain(` http://localhost:${port}/oauth/token `);
      const token = await runPrintedToken(banner);
      const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { iss: string };
      expect(claims.iss).toBe(`http://localhost:${port}`);
      expect((await runPrintedList(banner, token)).status).toBe(200);
    } finally {
      await killProcess(other.child);
    }
  });

  it('a HOST that is not an address of the machine is one line naming HOST, exit 1', { timeout: 60_000 }, async () => {
    // 192.0.2.0/24 is reserved for documentation (RFC 5737): never a local address.
    const failed = await runProcess(['src/server.ts'], { DATA_DIR: folder(), HOST: '192.0.2.1', PORT: String(await freePort()) });
    expect(failed.code).toBe(1);
    expect(outputLines(failed.stderr)).toEqual([expect.stringMatching(/^failed to start: HOST 192\.0\.2\.1 is not an address of this machine \(EADDRNOTAVAIL\): set HOST/)]);
    expect(failed.stdout).not.toContain('client_secret');
  });
});
