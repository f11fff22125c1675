import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './probe-app.js';
import { ROOT } from './service-process.js';
import { selfSignedCertificate } from './tls-certificate.js';

// Debian's package, the balancer the repository's configuration is written for.
export const HAPROXY_BIN = '/usr/sbin/haproxy';
export const HAPROXY_CONFIG = 'deploy/haproxy/haproxy.cfg';

export interface BalancerAddresses {
  httpPort: number;
  httpsPort: number;
  statsPort: number;
  certFile: string;
  // The replicas' ports on 127.0.0.1, in the order of the file's servers (api1, api2, …).
  replicaPorts: number[];
}

// Replaces `pattern` in `text`, which must match exactly `count` times: a change in the shipped
// file fails here, never leaves a test running a configuration of its own.
function replaceExactly(text: string, pattern: RegExp, count: number, replacement: (...groups: string[]) => string): string {
  const found = text.match(new RegExp(pattern.source, 'gm'))?.length ?? 0;
  if (found !== count) throw new Error(`${HAPROXY_CONFIG}: expected ${count} lines matching ${pattern}, found ${found}`);
  return text.replace(new RegExp(pattern.source, 'gm'), (_match, ...groups: string[]) => replacement(...groups));
}

// The repository's configuration with only the listening addresses, the replicas' addresses and
// the certificate's path replaced, as an operator adapts it.
export function balancerConfig(text: string, at: BalancerAddresses): string {
  let config = replaceExactly(text, /^([ \t]*bind) :8080$/, 1, (bind) => `${bind} 127.0.0.1:${at.httpPort}`);
  config = replaceExactly(config, /^([ \t]*bind) :8443( ssl crt) \/etc\/haproxy\/certs\/cns\.pem$/, 1, (bind, ssl) => `${bind} 127.0.0.1:${at.httpsPort}${ssl} ${at.certFile}`);
  config = replaceExactly(config, /^([ \t]*bind) :8404$/, 1, (bind) => `${bind} 127.0.0.1:${at.statsPort}`);
  // Each replica appears twice: in the api backend and, tracking it, in the stations backend.
  return replaceExactly(config, /^([ \t]*server api(\d+)) api\d+:3000\b/, 2 * at.replicaPorts.length, (server, n) => {
    const port = at.replicaPorts[Number(n) - 1];
    if (port === undefined) throw new Error(`${HAPROXY_CONFIG} names api${n}; the test starts ${at.replicaPorts.length} replicas`);
    return `${server} 127.0.0.1:${port}`;
  });
}

export interface ServerState {
  // UP, DOWN, or a transition such as "UP 1/2" (going down) and "DOWN 1/2" (coming up).
  status: string;
  // Connections open to the server now.
  current: number;
}

export interface Balancer {
  base: string;
  httpsBase: string;
  wsEndpoint: string;
  wssEndpoint: string;
  // The certificate the TLS address presents, for clients to trust.
  ca: Buffer;
  // The servers' states by "backend/server", read from the stats page.
  servers(): Promise<Map<string, ServerState>>;
  // Waits until every server named is in `status` (a safety net of `timeoutMs`, not a speed check).
  waitFor(names: string[], status: 'UP' | 'DOWN', timeoutMs?: number): Promise<void>;
  log(): string;
  stop(): Promise<void>;
}

// Starts Debian's haproxy in the foreground with the repository's configuration in front of the
// replicas on `replicaPorts`, and returns once it answers on its stats address. Without the
// binary it fails (the tests of the balancer never skip).
export async function startBalancer(replicaPorts: number[]): Promise<Balancer> {
  if (!existsSync(HAPROXY_BIN)) throw new Error(`${HAPROXY_BIN} is missing: install Debian's haproxy (apt-get install haproxy; .ci/run does)`);
  const dir = mkdtempSync(join(tmpdir(), 'cns-haproxy-'));
  const certificate = selfSignedCertificate('cns-haproxy-cert-');
  const certFile = join(dir, 'cns.pem');
  // HAProxy reads the chain and the key from one file.
  writeFileSync(certFile, Buffer.concat([readFileSync(certificate.certFile), readFileSync(certificate.keyFile)]));
  rmSync(certificate.dir, { recursive: true, force: true });
  const at: BalancerAddresses = { httpPort: await freePort(), httpsPort: await freePort(), statsPort: await freePort(), certFile, replicaPorts };
  const configFile = join(dir, 'haproxy.cfg');
  writeFileSync(configFile, balancerConfig(readFileSync(join(ROOT, HAPROXY_CONFIG), 'utf8'), at));

  const child: ChildProcess = spawn(HAPROXY_BIN, ['-db', '-f', configFile], { stdio: ['ignore', 'pipe', 'pipe'] });
  // The last part of what it wrote (its request log included), for failure messages.
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-20_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));

  const statsUrl = `http://127.0.0.1:${at.statsPort}/stats;csv`;
  const servers = async (): Promise<Map<string, ServerState>> => {
    const text = await (await fetch(statsUrl)).text();
    const [header, ...rows] = text.trim().split('\n');
    const columns = header!.replace(/^# /, '').split(',');
    const column = (name: string) => columns.indexOf(name);
    const states = new Map<string, ServerState>();
    for (const row of rows) {
      const cells = row.split(',');
      const server = cells[column('svname')]!;
      if (server === 'FRONTEND' || server === 'BACKEND') continue;
      states.set(`${cells[column('pxname')]}/${server}`, { status: cells[column('status')]!, current: Number(cells[column('scur')]) });
    }
    return states;
  };

  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`haproxy exited with ${child.exitCode}:\n${output}`);
    try {
      await servers();
      break;
    } catch {
      if (Date.now() > deadline) throw new Error(`haproxy did not answer on its stats address:\n${output}`);
      await sleep(100);
    }
  }

  return {
    base: `http://127.0.0.1:${at.httpPort}`,
    httpsBase: `https://127.0.0.1:${at.httpsPort}`,
    wsEndpoint: `ws://127.0.0.1:${at.httpPort}/ocpp`,
    wssEndpoint: `wss://127.0.0.1:${at.httpsPort}/ocpp`,
    ca: certificate.ca,
    servers,
    async waitFor(names, status, timeoutMs = 60_000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const states = await servers();
        if (names.every((name) => states.get(name)?.status === status)) return;
        if (Date.now() > until) throw new Error(`not all of ${names.join(', ')} are ${status}: ${JSON.stringify([...states])}`);
        await sleep(100);
      }
    },
    log: () => output,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
