import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ShuttingDownError } from '../../src/kernel/errors.js';
import { requireScope } from '../../src/auth/auth-plugin.js';
import { ConfigError, loadConfig } from '../../src/kernel/config.js';
import { createTestApp, type TestApp } from '../helpers/test-app.js';

const LIMIT_MS = 1000;
// A safety net for a hung test, far above limit + 2 s; the outcome is asserted, never the time.
const GIVE_UP_MS = 15_000;
const SLOW_PROBE = '/payments/v1/_slow-probe';
const GATED_PROBE = '/payments/v1/_gated-probe';

interface Exchange {
  // everything the server wrote before the socket closed
  received: string;
  closedByServer: boolean;
}

// Writes `head` on a raw socket, then one byte every 300 ms (when `trickle`), until the server
// closes the socket or GIVE_UP_MS pass.
function exchange(port: number, head: string, options: { trickle?: boolean } = {}): Promise<Exchange> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    const trickle = options.trickle ? setInterval(() => socket.write('x'), 300) : undefined;
    const giveUp = setTimeout(() => finish(false), GIVE_UP_MS);
    function finish(closedByServer: boolean) {
      clearInterval(trickle);
      clearTimeout(giveUp);
      socket.destroy();
      resolve({ received, closedByServer });
    }
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (received += chunk));
    socket.on('end', () => finish(true));
    socket.on('close', () => finish(true));
    // A reset after the answer is still the server closing the socket.
    socket.on('error', () => finish(true));
    socket.write(head);
  });
}

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

// The HTTP/1.1 answers in `text`, in order (each has a content-length).
function answers(text: string): Answer[] {
  const out: Answer[] = [];
  let rest = text;
  while (rest.startsWith('HTTP/1.1 ')) {
    const end = rest.indexOf('\r\n\r\n');
    const [statusLine, ...lines] = rest.slice(0, end).split('\r\n');
    const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
    const length = Number(headers['content-length']);
    const body = Buffer.from(rest.slice(end + 4), 'utf8').subarray(0, length).toString('utf8');
    out.push({ status: Number(statusLine!.split(' ')[1]), headers, body: JSON.parse(body) });
    rest = rest.slice(end + 4 + body.length);
  }
  return out;
}

function postHead(path: string, authorization?: string): string {
  const lines = [`POST ${path} HTTP/1.1`, 'Host: localhost', 'Content-Type: application/json', 'Content-Length: 1000'];
  if (authorization) lines.push(`Authorization: ${authorization}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

async function listen(t: TestApp): Promise<number> {
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const address = t.app.server.address();
  if (address === null || typeof address === 'string') throw new Error('not listening on a port');
  return address.port;
}

describe('REQUEST_TIMEOUT_MS', () => {
  it('defaults to 30 s and accepts any value from 1000 ms', () => {
    expect(loadConfig({}).requestTimeoutMs).toBe(30_000);
    expect(loadConfig({ REQUEST_TIMEOUT_MS: '1000' }).requestTimeoutMs).toBe(1000);
    expect(loadConfig({ REQUEST_TIMEOUT_MS: '600000' }).requestTimeoutMs).toBe(600_000);
    expect(() => loadConfig({ REQUEST_TIMEOUT_MS: '999' })).toThrow(ConfigError);
    expect(() => loadConfig({ REQUEST_TIMEOUT_MS: 'soon' })).toThrow(/^invalid configuration: REQUEST_TIMEOUT_MS: /);
  });
});

describe('requests that do not arrive in time (listening server)', () => {
  let t: TestApp;
  let port: number;

  beforeAll(async () => {
    t = await createTestApp({
      captureLogs: true,
      env: { REQUEST_TIMEOUT_MS: String(LIMIT_MS) },
      routes: (app) => {
        // Longer than the limit plus Node's checking interval: the limit must not cut it.
        app.post(SLOW_PROBE, { onRequest: [requireScope('write:sessionpayment')] }, async () => {
          await sleep(LIMIT_MS + 1500);
          return { done: true };
        });
      },
    });
    port = await listen(t);
  });
  afterAll(async () => {
    await t.close();
  });

  it('ends a payments body that trickles in with 408 in the payments shape and closes the socket', async () => {
    const authorization = t.bearer({ scopes: ['write:sessionpayment'] });
    const result = await exchange(port, postHead('/payments/v1/session-payments', authorization), { trickle: true });
    expect(result.closedByServer).toBe(true);
    const [answer, ...more] = answers(result.received);
    expect(more).toEqual([]);
    expect(answer).toMatchObject({ status: 408, headers: { connection: 'close' } });
    expect(answer!.body).toEqual({ code: 'REQUEST_TIMEOUT', message: expect.stringContaining(`${LIMIT_MS} ms`), status: 408 });
  });

  it('closes the socket of an unauthenticated trickle after its 401, without a second answer', async () => {
    const result = await exchange(port, postHead('/payments/v1/session-payments'), { trickle: true });
    expect(result.closedByServer).toBe(true);
    const all = answers(result.received);
    expect(all.map((a) => a.status)).toEqual([401]);
  });

  it('ends an asset-management body that trickles in with 408 in that family shape', async () => {
    const authorization = t.bearer({ scopes: ['write:asset'] });
    const result = await exchange(port, postHead('/asset-management/v1/assets', authorization), { trickle: true });
    expect(result.closedByServer).toBe(true);
    const [answer, ...more] = answers(result.received);
    expect(more).toEqual([]);
    expect(answer?.status).toBe(408);
    expect(answer!.body).toEqual({ type: 'REQUEST_TIMEOUT', code: 'REQUEST_TIMEOUT', message: expect.any(String) });
  });

  it('ends headers that never finish with 408 { message }: the family is not known yet', async () => {
    const result = await exchange(port, 'POST /payments/v1/session-payments HTTP/1.1\r\nHost: localhost\r\nX-Slow: ', { trickle: true });
    expect(result.closedByServer).toBe(true);
    const [answer, ...more] = answers(result.received);
    expect(more).toEqual([]);
    expect(answer?.status).toBe(408);
    expect(answer!.body).toEqual({ message: expect.any(String) });
  });

  it('logs an ended request at info, without a stack', async () => {
    await exchange(port, 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n', { trickle: true });
    const lines = t.logLines().map((l) => JSON.parse(l) as { level: number; msg: string; statusCode?: number; stack?: unknown; err?: unknown });
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
    expect(lines.some((l) => l.statusCode === 408 && l.level === 30 && l.err === undefined)).toBe(true);
  });

  it('closes an idle kept-alive socket', async () => {
    const result = await exchange(port, 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
    expect(result.closedByServer).toBe(true);
    expect(answers(result.received).map((a) => a.status)).toEqual([200]);
  });

  it('does not limit the time a handler takes once the request has arrived', async () => {
    const authorization = t.bearer({ scopes: ['write:sessionpayment'] });
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(
        { host: '127.0.0.1', port, path: SLOW_PROBE, method: 'POST', agent: false, headers: { authorization, 'content-type': 'application/json' } },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (body += chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on('error', reject);
      req.end('{}');
    });
    expect(answer).toEqual({ status: 200, body: '{"done":true}' });
  });

  it('answers oversized headers with 431 { message }', async () => {
    const result = await exchange(port, `GET /payments/v1/session-payments HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(result.closedByServer).toBe(true);
    const [answer] = answers(result.received);
    expect(answer?.status).toBe(431);
    expect(answer!.body).toEqual({ message: expect.any(String) });
  });

  it('answers a request line that is not HTTP with 400 { message }', async () => {
    const result = await exchange(port, 'NOT HTTP AT ALL\r\n\r\n');
    expect(result.closedByServer).toBe(true);
    const [answer] = answers(result.received);
    expect(answer?.status).toBe(400);
    expect(answer!.body).toEqual({ message: expect.any(String) });
  });

  it('answers a URL that does not decode, or an over-long path parameter, with 400 in the family shape', async () => {
    const authorization = t.bearer({ scopes: ['read:sessionpayment', 'read:asset'] });
    const undecodable = await t.app.inject({ url: '/payments/v1/session-payments/%E0%A4%A', headers: { authorization } });
    expect(undecodable.statusCode).toBe(400);
    expect(undecodable.json()).toMatchObject({ success: false, error: { name: 'ZodError', issues: [{ code: 'custom', path: [] }] } });
    const overLong = await t.app.inject({ url: `/asset-management/v1/assets/${'a'.repeat(600)}`, headers: { authorization } });
    expect(overLong.statusCode).toBe(400);
    expect(overLong.json()).toEqual({ type: 'BAD_REQUEST', code: 'INVALID_REQUEST_PARAMETERS', message: expect.any(String) });
  });
});

describe('requests that arrive while the server closes', () => {
  it('get 503 in the family shape with Retry-After', async () => {
    let started = 0;
    let bothStarted!: () => void;
    const handlersStarted = new Promise<void>((resolve) => (bothStarted = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const t = await createTestApp({
      routes: (app) => {
        app.get(GATED_PROBE, { config: { public: true } }, async () => {
          if (++started === 2) bothStarted();
          await released;
          return { done: true };
        });
      },
    });
    const port = await listen(t);
    let arrived = 0;
    let allArrived!: () => void;
    const fourArrived = new Promise<void>((resolve) => (allArrived = resolve));
    t.app.server.on('request', () => {
      if (++arrived === 4) allArrived();
    });
    const token = t.bearer({ scopes: ['read:sessionpayment', 'read:asset'] });

    // One kept-alive connection per family, each with a request in flight.
    const connections = ['/payments/v1/session-payments?sessionIds=a', '/asset-management/v1/assets'].map((url) => {
      const socket = connect(port, '127.0.0.1');
      const connection = { url, socket, received: '', closed: new Promise<void>((resolve) => socket.on('close', () => resolve())) };
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (connection.received += chunk));
      socket.on('error', () => undefined);
      socket.write(`GET ${GATED_PROBE} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
      return connection;
    });
    await handlersStarted;

    const closing = t.close();
    // Pipelined behind the request in flight: they arrive while the server closes.
    for (const c of connections) c.socket.write(`GET ${c.url} HTTP/1.1\r\nHost: localhost\r\nAuthorization: ${token}\r\n\r\n`);
    // They must reach the server before the first answers let it finish closing.
    await fourArrived;
    release();
    await closing;
    await Promise.all(connections.map((c) => c.closed));

    const [paymentsAnswers, assetAnswers] = connections.map((c) => answers(c.received));
    expect(paymentsAnswers!.map((a) => a.status)).toEqual([200, 503]);
    expect(paymentsAnswers![1]!.headers['retry-after']).toMatch(/^\d+$/);
    expect(paymentsAnswers![1]!.body).toEqual({ code: 'SERVICE_UNAVAILABLE', message: expect.any(String), status: 503 });
    expect(assetAnswers!.map((a) => a.status)).toEqual([200, 503]);
    expect(assetAnswers![1]!.headers['retry-after']).toMatch(/^\d+$/);
    expect(assetAnswers![1]!.body).toEqual({ type: 'SERVICE_UNAVAILABLE', code: 'SHUTTING_DOWN', message: expect.any(String) });
  });
});

describe('a 503 at the token endpoint', () => {
  it('is RFC 6749 temporarily_unavailable with Retry-After, for a closing server as for an unavailable database', async () => {
    const probe = '/oauth/_closing-probe';
    const t = await createTestApp({
      routes: (app) => {
        // what the onRequest hook throws for a request that reaches a closing server
        app.post(probe, { config: { public: true } }, async () => {
          throw new ShuttingDownError();
        });
      },
    });
    try {
      const res = await t.app.inject({ method: 'POST', url: probe });
      expect(res.statusCode).toBe(503);
      expect(res.headers['retry-after']).toBe('1');
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.json()).toEqual({ error: 'temporarily_unavailable', error_description: expect.any(String) });
    } finally {
      await t.close();
    }
  });
});
