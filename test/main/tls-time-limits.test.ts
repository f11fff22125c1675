// The OCPP TLS listener (OCPP_TLS_PORT) keeps the API port's time limits: a connection that never
// completes its TLS handshake, or whose request never arrives, is ended within REQUEST_TIMEOUT_MS
// and Node's checking interval. The certificate is made for the test by the machine's openssl.
import { rmSync } from 'node:fs';
import { connect as connectTcp } from 'node:net';
import { connect as connectTls } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenOcppTls, type OcppTlsListener } from '../../src/main/listeners.js';
import { createTestApp, type TestApp } from '../helpers/test-app.js';
import { selfSignedCertificate } from '../helpers/tls-certificate.js';

const LIMIT_MS = 1000;
// How long after the limit the request may take to be ended (docs/api.md, "Errors": at most 1 s; 2 s of room here).
const GRACE_MS = 2000;
// A safety net for a hung test, far above the bound asserted.
const GIVE_UP_MS = 15_000;

let t: TestApp;
let tls: OcppTlsListener;
let dir: string;
let ca: Buffer;

beforeAll(async () => {
  let certFile: string, keyFile: string;
  ({ dir, certFile, keyFile, ca } = selfSignedCertificate('tls-limits-'));
  t = await createTestApp({ env: { REQUEST_TIMEOUT_MS: String(LIMIT_MS) } });
  tls = await listenOcppTls(t.app, { host: '127.0.0.1', port: 0, certFile, keyFile, requestTimeoutMs: t.config.requestTimeoutMs, backlog: 511 });
});
afterAll(async () => {
  await tls?.close();
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Ended {
  closedByServer: boolean;
  // from the moment the client had nothing more to send in time
  afterMs: number;
  received: string;
}

// Resolves when the server ends the socket (or GIVE_UP_MS pass); `trickle` writes one byte every
// 300 ms meanwhile, so the socket is never idle.
function untilEnded(socket: NodeJS.ReadWriteStream & { destroy(): void }, trickle?: () => void): Promise<Ended> {
  const start = performance.now();
  return new Promise((resolve) => {
    let received = '';
    const timer = trickle ? setInterval(trickle, 300) : undefined;
    const giveUp = setTimeout(() => finish(false), GIVE_UP_MS);
    function finish(closedByServer: boolean) {
      clearInterval(timer);
      clearTimeout(giveUp);
      socket.destroy();
      resolve({ closedByServer, afterMs: performance.now() - start, received });
    }
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('end', () => finish(true));
    socket.on('close', () => finish(true));
    socket.on('error', () => finish(true));
  });
}

describe(`the OCPP TLS listener with REQUEST_TIMEOUT_MS=${LIMIT_MS}`, () => {
  it('closes a TCP connection that never sends a ClientHello within the limit + 2 s', async () => {
    const socket = connectTcp(tls.port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const ended = await untilEnded(socket);
    expect(ended.closedByServer).toBe(true);
    expect(ended.received).toBe('');
    expect(ended.afterMs).toBeLessThanOrEqual(LIMIT_MS + GRACE_MS);
  });

  it('ends an upgrade request whose headers trickle in, with 408 or a close, within the limit + 2 s', async () => {
    const socket = connectTls({ host: '127.0.0.1', port: tls.port, ca, servername: 'localhost' });
    await new Promise<void>((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject));
    socket.write('GET /ocpp/CP-trickle HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Slow: ');
    const ended = await untilEnded(socket, () => socket.write('x'));
    expect(ended.closedByServer).toBe(true);
    if (ended.received !== '') expect(ended.received).toMatch(/^HTTP\/1\.1 408 /);
    expect(ended.afterMs).toBeLessThanOrEqual(LIMIT_MS + GRACE_MS);
  });

  it('closes a connection that completes the handshake and then sends nothing, within the limit + 2 s', async () => {
    const socket = connectTls({ host: '127.0.0.1', port: tls.port, ca, servername: 'localhost' });
    await new Promise<void>((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject));
    const ended = await untilEnded(socket);
    expect(ended.closedByServer).toBe(true);
    if (ended.received !== '') expect(ended.received).toMatch(/^HTTP\/1\.1 408 /);
    expect(ended.afterMs).toBeLessThanOrEqual(LIMIT_MS + GRACE_MS);
  });
});
