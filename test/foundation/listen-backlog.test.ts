// LISTEN_BACKLOG reaches both listening sockets of a real service process (the HTTP port and the
// OCPP TLS port). What the kernel applied is read back with `ss`: for a listening TCP socket its
// Send-Q column is the backlog, after Linux's cap at net.core.somaxconn.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/probe-app.js';
import { killProcess, startService } from '../helpers/service-process.js';

const dir = mkdtempSync(join(tmpdir(), 'listen-backlog-'));
const running: Array<Awaited<ReturnType<typeof startService>>> = [];

afterAll(async () => {
  await Promise.all(running.map((r) => killProcess(r.child)));
  rmSync(dir, { recursive: true, force: true });
});

function backlogOf(port: number): number {
  const line = execFileSync('ss', ['-Hltn', `sport = :${port}`], { encoding: 'utf8' }).trim();
  // State Recv-Q Send-Q Local-Address:Port Peer-Address:Port
  const columns = line.split(/\s+/);
  if (columns[0] !== 'LISTEN') throw new Error(`no listening socket on ${port}: ${JSON.stringify(line)}`);
  return Number(columns[2]);
}

const somaxconn = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8'));

describe('LISTEN_BACKLOG', () => {
  it('sets the accept queue of the HTTP port and of the OCPP TLS port', async () => {
    const certFile = join(dir, 'cert.pem');
    const keyFile = join(dir, 'key.pem');
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
      '-subj', '/CN=localhost', '-keyout', keyFile, '-out', certFile,
    ], { stdio: 'ignore' });
    const tlsPort = await freePort();
    const service = await startService({
      DATA_DIR: join(dir, 'data-set'),
      LISTEN_BACKLOG: '1000',
      OCPP_TLS_PORT: String(tlsPort),
      OCPP_TLS_CERT_FILE: certFile,
      OCPP_TLS_KEY_FILE: keyFile,
    });
    running.push(service);
    const httpPort = Number(new URL(service.base).port);
    expect(backlogOf(httpPort)).toBe(Math.min(1000, somaxconn));
    expect(backlogOf(tlsPort)).toBe(Math.min(1000, somaxconn));
  });

  it('defaults to 4096 (as far as the kernel allows), not Node’s 511', async () => {
    const service = await startService({ DATA_DIR: join(dir, 'data-default') });
    running.push(service);
    expect(backlogOf(Number(new URL(service.base).port))).toBe(Math.min(4096, somaxconn));
  });
});
