// The attacker of the "abuse" benchmark group, in a process of its own (bench/abuse.ts starts it
// with a raised file-descriptor limit). One attack per process, for DURATION_SECONDS at most and
// within the counts below, every socket to 127.0.0.x:
//   flood      one authenticated station sends BootNotification CALLs without waiting for answers
//              (it reads them); closed, it logs in again and carries on
//   nonreader  one authenticated station stops reading its socket and sends Heartbeat CALLs with
//              long message ids (each answer repeats its id); closed, it logs in again
//   wrongpass  LOOPS concurrent loops of logins with a wrong password against one asset
//   trickle    SOCKETS connections that send an upgrade request one byte at a time
//
// env: ATTACK, PORT, STATION (asset id), PASSWORD, DURATION_SECONDS, LOOPS, SOCKETS, MAX_CALLS,
// MAX_MIB, SOURCE (local address of the attacker's sockets).
// stdout: one JSON line { event: 'started' } once the attack runs, and { event: 'done', … } at its end.
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';

const attack = process.env.ATTACK!;
const port = Number(process.env.PORT);
const station = process.env.STATION!;
const password = process.env.PASSWORD ?? '';
const source = process.env.SOURCE ?? '127.0.0.1';
const deadline = Date.now() + Number(process.env.DURATION_SECONDS ?? 15) * 1000;
const maxCalls = Number(process.env.MAX_CALLS ?? 100_000);
const maxBytes = Number(process.env.MAX_MIB ?? 256) * 2 ** 20;
// A closed attacker logs in again, but not for ever.
const MAX_CONNECTIONS = 1000;
// The attacker's own send buffer: it never holds more than this unsent.
const CLIENT_BUFFER_BYTES = 2 ** 20;

const emit = (event: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(event)}\n`);
const closes: Record<string, number> = {};
const count = (table: Record<string, number>, key: string | number) => void (table[String(key)] = (table[String(key)] ?? 0) + 1);
const authorization = (user: string, secret: string) => `Basic ${Buffer.from(`${user}:${secret}`).toString('base64')}`;

function open(): Promise<WebSocket | null> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/ocpp/${encodeURIComponent(station)}`, ['ocpp2.0.1'], {
    headers: { authorization: authorization(station, password) },
    localAddress: source,
    perMessageDeflate: false,
  });
  ws.on('error', () => undefined);
  return new Promise((resolve) => {
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => {
      count(closes, `http ${res.statusCode}`);
      res.resume();
      resolve(null);
    });
    ws.once('close', () => resolve(null));
  });
}

// One station sending calls as fast as its own buffer allows, logging in again whenever it is
// closed, until the time, the calls or the bytes run out.
async function sendCalls(reading: boolean, call: (n: number) => string): Promise<Record<string, unknown>> {
  let sent = 0;
  let bytes = 0;
  let answers = 0;
  let connections = 0;
  let started = false;
  while (Date.now() < deadline && connections < MAX_CONNECTIONS) {
    const ws = await open();
    if (!ws) {
      await sleep(100);
      continue;
    }
    connections += 1;
    const closed = new Promise<void>((resolve) => ws.once('close', (code) => resolve(void count(closes, code))));
    ws.on('message', () => void (answers += 1));
    if (!reading) (ws as unknown as { _socket: Socket })._socket.pause();
    if (!started) {
      started = true;
      emit({ event: 'started' });
    }
    // Past its bounds it stays connected, idle, until the time is up.
    while (ws.readyState === WebSocket.OPEN && Date.now() < deadline) {
      if (ws.bufferedAmount > CLIENT_BUFFER_BYTES || sent >= maxCalls || bytes >= maxBytes) {
        await sleep(2);
        continue;
      }
      const frame = call(sent);
      ws.send(frame);
      sent += 1;
      bytes += frame.length;
      // Let the socket's events in now and then.
      if (sent % 200 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    // Closed (or out of time), it drops the socket at once and logs in again: it waits for no
    // closing handshake, and the service may have stopped reading it.
    if (ws.readyState !== WebSocket.CLOSED) ws.terminate();
    await closed;
  }
  if (!started) emit({ event: 'started' });
  return { sent, sentMiB: bytes / 2 ** 20, answers, connections, closes };
}

const BOOT = { reason: 'PowerUp', chargingStation: { vendorName: 'bench', model: 'flood' } };
const LONG_ID = 'n'.repeat(32 * 1024);

// Logins with a wrong password, LOOPS at once, each loop at most 10 a second.
async function wrongPasswords(): Promise<Record<string, unknown>> {
  const loops = Number(process.env.LOOPS ?? 300);
  const statuses: Record<string, number> = {};
  const times: number[] = [];
  const attempt = () =>
    new Promise<void>((resolve) => {
      const started = performance.now();
      const req = request({
        host: '127.0.0.1',
        port,
        localAddress: source,
        path: `/ocpp/${encodeURIComponent(station)}`,
        agent: false,
        headers: {
          connection: 'Upgrade',
          upgrade: 'websocket',
          'sec-websocket-version': '13',
          'sec-websocket-key': randomBytes(16).toString('base64'),
          'sec-websocket-protocol': 'ocpp2.0.1',
          authorization: authorization(station, `Wrong:${randomBytes(8).toString('hex')}`),
        },
      });
      req.setTimeout(30_000, () => req.destroy());
      const done = (key: string | number) => {
        count(statuses, key);
        times.push(performance.now() - started);
        resolve();
      };
      req.on('upgrade', (_res, socket) => {
        socket.destroy();
        done('101');
      });
      req.on('response', (res) => {
        res.resume();
        done(res.statusCode ?? 0);
      });
      req.on('error', () => done('error'));
      req.end();
    });
  const loop = async () => {
    for (let i = 0; i < 200 && Date.now() < deadline; i++) {
      const started = Date.now();
      await attempt();
      await sleep(Math.max(0, 100 - (Date.now() - started)));
    }
  };
  emit({ event: 'started' });
  await Promise.all(Array.from({ length: loops }, loop));
  times.sort((a, b) => a - b);
  return { attempts: times.length, statuses, p50Ms: times[Math.floor(times.length / 2)] ?? null, maxMs: times.at(-1) ?? null };
}

// Upgrade requests that arrive a byte every 200 ms and never end.
async function trickle(): Promise<Record<string, unknown>> {
  const total = Number(process.env.SOCKETS ?? 500);
  const head = Buffer.from(`GET /ocpp/${encodeURIComponent(station)} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Padding: ${'p'.repeat(4000)}`);
  let closedEarly = 0;
  let connected = 0;
  const sockets: Socket[] = [];
  for (let i = 0; i < total; i++) {
    const socket = connect({ host: '127.0.0.1', port, localAddress: source });
    socket.on('error', () => undefined);
    socket.once('connect', () => void (connected += 1));
    socket.once('close', () => void (closedEarly += Date.now() < deadline ? 1 : 0));
    sockets.push(socket);
  }
  emit({ event: 'started' });
  for (let offset = 0; Date.now() < deadline && offset < head.length; offset++) {
    for (const socket of sockets) if (!socket.destroyed) socket.write(head.subarray(offset, offset + 1));
    await sleep(200);
  }
  const stillOpen = sockets.filter((s) => !s.destroyed).length;
  for (const socket of sockets) socket.destroy();
  return { sockets: total, connected, closedByServer: closedEarly, openAtEnd: stillOpen };
}

let result: Record<string, unknown>;
switch (attack) {
  case 'flood':
    result = await sendCalls(true, (n) => JSON.stringify([2, `f${n}`, 'BootNotification', BOOT]));
    break;
  case 'nonreader':
    result = await sendCalls(false, (n) => `[2,"${n}-${LONG_ID}","Heartbeat",{}]`);
    break;
  case 'wrongpass':
    result = await wrongPasswords();
    break;
  case 'trickle':
    result = await trickle();
    break;
  default:
    throw new Error(`unknown attack ${attack}`);
}
emit({ event: 'done', attack, ...result });
process.exit(0);
