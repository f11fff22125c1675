// The listening sockets of a real service process (the HTTP port and the OCPP TLS port): their
// backlog (LISTEN_BACKLOG) and the extra acceptors beside the first (src/main/listeners.ts): sockets
// of their own where Node supports SO_REUSEPORT, else descriptors of the one socket. What the kernel
// has is read back with `ss`: one LISTEN line per socket, whose Send-Q column is its backlog after
// Linux's cap at net.core.somaxconn; the descriptors from /proc.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, request, type Server as HttpServer } from 'node:http';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { listenAcceptor } from '../../src/main/listeners.js';
import { duplicateListeningHandle } from '../../src/main/listening-handles.js';
import { freePort } from '../helpers/probe-app.js';
import { killProcess, outputLines, runProcess, startProcess, startService, waitUntilHealthy } from '../helpers/service-process.js';

const dir = mkdtempSync(join(tmpdir(), 'listen-backlog-'));
const running: Array<Awaited<ReturnType<typeof startService>>> = [];

afterAll(async () => {
  await Promise.all(running.map((r) => killProcess(r.child)));
  rmSync(dir, { recursive: true, force: true });
});

// The backlog of each listening socket on the port.
function backlogsOf(port: number): number[] {
  const lines = execFileSync('ss', ['-Hltn', `sport = :${port}`], { encoding: 'utf8' }).trim().split('\n');
  return lines.map((line) => {
    // State Recv-Q Send-Q Local-Address:Port Peer-Address:Port
    const columns = line.trim().split(/\s+/);
    if (columns[0] !== 'LISTEN') throw new Error(`no listening socket on ${port}: ${JSON.stringify(line)}`);
    return Number(columns[2]);
  });
}

// How many descriptors of process `pid` refer to a listening socket of the port: the acceptors libuv
// polls (sockets of their own with SO_REUSEPORT, or duplicates of one socket).
function acceptorsOf(pid: number, port: number): number {
  const lines = execFileSync('ss', ['-Hltne', `sport = :${port}`], { encoding: 'utf8' }).trim().split('\n');
  const inodes = new Set(lines.map((line) => /\bino:(\d+)/.exec(line)?.[1]).filter((inode) => inode !== undefined));
  if (inodes.size === 0) throw new Error(`no listening socket on ${port}`);
  const descriptors = readdirSync(`/proc/${pid}/fd`).map((fd) => {
    try {
      return readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      return '';
    }
  });
  return descriptors.filter((link) => [...inodes].some((inode) => link === `socket:[${inode}]`)).length;
}

// The service's log lines (pino's JSON, one a line).
function logLines(stdout: string): Array<Record<string, unknown>> {
  return stdout.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>);
}

function acceptorsLine(stdout: string, msg: string): Record<string, unknown> | undefined {
  return logLines(stdout).find((line) => line.msg === msg);
}

// The processes whose parent is `pid`.
function childrenOf(pid: number): string[] {
  try {
    return execFileSync('ps', ['--ppid', String(pid), '-o', 'pid=,args='], { encoding: 'utf8' }).trim().split('\n').filter(Boolean);
  } catch {
    return []; // ps exits 1 when it lists nothing
  }
}

const somaxconn = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8'));

function listen(server: Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port, reusePort: true }, () => resolve());
  });
}

// The port is held by nothing: a socket without SO_REUSEPORT binds it (and lets it go).
async function expectPortFree(port: number): Promise<void> {
  const again = createServer();
  await new Promise<void>((resolve, reject) => {
    again.once('error', reject);
    again.listen({ host: '127.0.0.1', port }, () => resolve());
  });
  await new Promise((resolve) => again.close(resolve));
}

// Whether this Node binds two sockets to one port with reusePort (22.12+, 23.1+); Node 20
// ignores the option and the second bind fails.
async function nodeSharesPorts(): Promise<boolean> {
  const first = createServer();
  const second = createServer();
  try {
    await listen(first, 0);
    await listen(second, (first.address() as { port: number }).port);
    return true;
  } catch {
    return false;
  } finally {
    first.close();
    second.close();
  }
}

// A self-signed certificate and its key for localhost, in files named after `name`.
function selfSigned(name: string): { certFile: string; keyFile: string } {
  const certFile = join(dir, `${name}-cert.pem`);
  const keyFile = join(dir, `${name}-key.pem`);
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-subj', '/CN=localhost', '-keyout', keyFile, '-out', certFile,
  ], { stdio: 'ignore' });
  return { certFile, keyFile };
}

function status(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/healthz', agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('listening sockets', () => {
  it('LISTEN_BACKLOG sets the accept queue of every socket of the HTTP port and of the OCPP TLS port', async () => {
    const { certFile, keyFile } = selfSigned('first');
    const tlsPort = await freePort();
    const service = await startService({
      DATA_DIR: join(dir, 'data-set'),
      LISTEN_BACKLOG: '1000',
      LOG_LEVEL: 'info',
      OCPP_TLS_PORT: String(tlsPort),
      OCPP_TLS_CERT_FILE: certFile,
      OCPP_TLS_KEY_FILE: keyFile,
    });
    running.push(service);
    const httpPort = Number(new URL(service.base).port);
    const sockets = (await nodeSharesPorts()) ? 8 : 1;
    await vi.waitFor(() => expect(acceptorsLine(service.output.stdout, 'acceptors on the OCPP TLS port')).toMatchObject({ port: tlsPort, sockets, acceptors: 8 }), { timeout: 10_000 });
    expect(acceptorsOf(service.child.pid!, tlsPort)).toBe(8);
    expect(backlogsOf(httpPort)).toEqual(Array(sockets).fill(Math.min(1000, somaxconn)));
    expect(backlogsOf(tlsPort)).toEqual(Array(sockets).fill(Math.min(1000, somaxconn)));
    // Without SO_REUSEPORT, duplicates of the one socket: the backlog above is still LISTEN_BACKLOG.
    expect(acceptorsOf(service.child.pid!, httpPort)).toBe(8);
    expect(acceptorsOf(service.child.pid!, tlsPort)).toBe(8);
  });

  it('the backlog defaults to 4096 (as far as the kernel allows), not Node’s 511; 8 acceptors on the port (8 sockets with SO_REUSEPORT, else 8 descriptors of one), every connection reaches the service, and a stop leaves the port free and no process behind', async () => {
    const service = await startService({ DATA_DIR: join(dir, 'data-default'), LOG_LEVEL: 'info' });
    running.push(service);
    const port = Number(new URL(service.base).port);
    const sockets = (await nodeSharesPorts()) ? 8 : 1;
    // The first socket answers while the others are made; the line counts those listened on.
    await vi.waitFor(() => expect(acceptorsLine(service.output.stdout, 'acceptors on the port')).toMatchObject({ port, sockets, acceptors: 8 }), { timeout: 10_000 });
    expect(acceptorsOf(service.child.pid!, port)).toBe(8);
    expect(backlogsOf(port)).toEqual(Array(sockets).fill(Math.min(4096, somaxconn)));
    // The child that duplicated the socket (Node 20) is gone once they are.
    expect(childrenOf(service.child.pid!)).toEqual([]);
    // Fresh connections, spread over the acceptors: each is answered by the one app.
    const statuses = await Promise.all(Array.from({ length: 64 }, () => status(port)));
    expect(statuses).toEqual(Array(64).fill(200));

    const exited = new Promise((resolve) => service.child.once('exit', resolve));
    service.child.kill('SIGINT');
    await exited;
    // No descriptor of the port's socket is left anywhere.
    await expectPortFree(port);
  });

  it('a child process that cannot be started (where the socket is duplicated) leaves the port one acceptor and a warning; the service serves and stops as usual', async () => {
    const preload = join(dir, 'no-node.mjs');
    writeFileSync(preload, "process.execPath = '/nonexistent/node';\n");
    const port = await freePort();
    const service = startProcess(['--import', preload, 'src/server.ts'], { DATA_DIR: join(dir, 'data-no-node'), PORT: String(port), LOG_LEVEL: 'info' });
    running.push({ ...service, base: '', endpoint: '' });
    await waitUntilHealthy(async () => status(port), service.child);
    const shares = await nodeSharesPorts();
    await vi.waitFor(() => expect(acceptorsLine(service.output.stdout, 'acceptors on the port')).toMatchObject({ port, acceptors: shares ? 8 : 1 }), { timeout: 10_000 });
    const warnings = logLines(service.output.stdout).filter((line) => line.msg === 'the listening socket could not be duplicated: the port keeps one acceptor');
    // Only where there is no SO_REUSEPORT is the child needed.
    expect(warnings).toHaveLength(shares ? 0 : 1);
    if (!shares) expect(JSON.stringify(warnings[0])).toContain('ENOENT');
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await status(port)).toBe(200);
    service.child.kill('SIGINT');
    expect((await service.exited).code).toBe(0);
  });

  it('a port another copy of the service holds (its socket asks for SO_REUSEPORT too) is in use: one line naming it, exit 1, not a shared port', async () => {
    const other = createServer();
    await listen(other, 0);
    const port = (other.address() as { port: number }).port;
    try {
      const second = await runProcess(['src/server.ts'], { DATA_DIR: join(dir, 'data-second'), PORT: String(port) });
      expect(second.code).toBe(1);
      expect(outputLines(second.stderr)).toEqual([`failed to start: 127.0.0.1:${port} is already in use (another process listens there): stop it, or set PORT`]);
    } finally {
      other.close();
    }
  });

  it('the OCPP TLS port likewise, its line naming OCPP_TLS_PORT; a certificate or key it cannot read is a line naming its variable', async () => {
    const { certFile, keyFile } = selfSigned('second');
    const other = createServer();
    await listen(other, 0);
    const port = (other.address() as { port: number }).port;
    try {
      const tls = { OCPP_TLS_PORT: String(port), OCPP_TLS_CERT_FILE: certFile, OCPP_TLS_KEY_FILE: keyFile };
      const held = await runProcess(['src/server.ts'], { DATA_DIR: join(dir, 'data-tls-held'), PORT: '0', ...tls });
      expect(held.code).toBe(1);
      expect(outputLines(held.stderr)).toEqual([`failed to start: 127.0.0.1:${port} is already in use (another process listens there): stop it, or set OCPP_TLS_PORT`]);
      const missing = join(dir, 'no-such-key.pem');
      const unread = await runProcess(['src/server.ts'], { DATA_DIR: join(dir, 'data-tls-key'), PORT: '0', ...tls, OCPP_TLS_PORT: '0', OCPP_TLS_KEY_FILE: missing });
      expect(unread.code).toBe(1);
      expect(outputLines(unread.stderr)).toEqual([`failed to start: OCPP_TLS_KEY_FILE ${missing}: cannot read it (ENOENT)`]);
    } finally {
      other.close();
    }
  });
});

// The hand-over itself, on any Node: an acceptor on a port of its own (Node 20 cannot share one).
describe('an acceptor socket handing its connections to the server', () => {
  function get(port: number, path: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path, agent: false }, (res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => (body += chunk.toString()));
        res.on('end', () => resolve(body));
      });
      req.on('error', reject);
      req.end();
    });
  }

  it('the server answers what it accepts; the server’s close closes it and calls back only after a request that came through it has finished; a failed accept is reported, not thrown', async () => {
    let started = false;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const target: HttpServer = createHttpServer((req, res) => {
      void (async () => {
        if (req.url === '/slow') {
          started = true;
          await gate;
        }
        res.end(`served ${req.url}`);
      })();
    });
    await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
    const errors: Error[] = [];
    const acceptor = await listenAcceptor(target, { host: '127.0.0.1', port: 0, backlog: 16 }, (error) => errors.push(error));
    const port = (acceptor.address() as { port: number }).port;

    expect(await get(port, '/fast')).toBe('served /fast');
    const slow = get(port, '/slow');
    await vi.waitFor(() => expect(started).toBe(true));
    let closed = false;
    target.close(() => (closed = true));
    await expect(get(port, '/fast')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    expect(closed).toBe(false);
    release();
    expect(await slow).toBe('served /slow');
    await vi.waitFor(() => expect(closed).toBe(true));

    acceptor.emit('error', Object.assign(new Error('accept EMFILE'), { code: 'EMFILE' }));
    expect(errors.map((e) => e.message)).toEqual(['accept EMFILE']);
  });

  it('duplicates of a listening socket (where SO_REUSEPORT is not): they keep its backlog, acceptors on them answer through its port once its own descriptor is closed, the duplicating process is gone, and closing them frees the port', async () => {
    const source = createServer();
    await new Promise<void>((resolve) => source.listen({ host: '127.0.0.1', port: 0, backlog: 100 }, resolve));
    const port = (source.address() as { port: number }).port;
    await expect(duplicateListeningHandle(createServer(), 1)).rejects.toThrow('the server does not listen');
    // A child that cannot be started is a rejection (no unhandled one, which would stop a service).
    const execPath = process.execPath;
    process.execPath = join(dir, 'no-such-node');
    try {
      await expect(duplicateListeningHandle(source, 1)).rejects.toThrow(/the process that duplicates the socket could not be started \(.*ENOENT/);
    } finally {
      process.execPath = execPath;
    }

    const handles = await duplicateListeningHandle(source, 3);
    expect(childrenOf(process.pid).filter((line) => line.includes('process.send(message, handle)'))).toEqual([]);
    await new Promise<void>((resolve) => source.close(() => resolve()));
    const target: HttpServer = createHttpServer((req, res) => res.end(`served ${req.url}`));
    const acceptors = await Promise.all(handles.map((handle) => listenAcceptor(target, { handle, backlog: 100 }, () => undefined)));
    expect(acceptorsOf(process.pid, port)).toBe(3);
    expect(backlogsOf(port)).toEqual([Math.min(100, somaxconn)]);
    const answers = await Promise.all(Array.from({ length: 32 }, (_, index) => get(port, `/${index}`)));
    expect(answers).toEqual(Array.from({ length: 32 }, (_, index) => `served /${index}`));

    await Promise.all(acceptors.map((acceptor) => new Promise((resolve) => acceptor.close(resolve))));
    await expectPortFree(port);
  });

  it('the server’s close waits for a request that came through a duplicate of its socket, as the graceful stop needs before the database closes', async () => {
    const gates: Array<() => void> = [];
    let current: Socket | undefined;
    const target: HttpServer = createHttpServer((req, res) => {
      current = req.socket;
      gates.push(() => res.end(`served ${req.url}`));
    });
    await new Promise<void>((resolve) => target.listen({ host: '127.0.0.1', port: 0, backlog: 100 }, resolve));
    const port = (target.address() as { port: number }).port;
    const handles = await duplicateListeningHandle(target, 3);
    const acceptors = await Promise.all(handles.map((handle) => listenAcceptor(target, { handle, backlog: 100 }, () => undefined)));
    const viaDuplicates = new Set<Socket>();
    for (const acceptor of acceptors) acceptor.on('connection', (socket: Socket) => viaDuplicates.add(socket));
    // Requests until one is accepted through a duplicate (the kernel picks which descriptor).
    let slow: Promise<string> | undefined;
    for (let i = 0; i < 100 && slow === undefined; i++) {
      current = undefined;
      const answer = get(port, `/${i}`);
      await vi.waitFor(() => expect(current).toBeDefined());
      if (viaDuplicates.has(current!)) slow = answer;
      else {
        gates.shift()!();
        await answer;
      }
    }
    expect(slow).toBeDefined();
    let closed = false;
    target.close(() => (closed = true));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(closed).toBe(false);
    gates.shift()!();
    expect(await slow).toMatch(/^served \//);
    await vi.waitFor(() => expect(closed).toBe(true));
  });
});
