// The fuzzer's stations: each kind of session runs against a live endpoint and returns what it
// saw go wrong (an empty list when every answer and every close was one the station may get).
import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { RPCClient } from 'ocpp-rpc';
import WebSocket from 'ws';
import { OCPP_VERSIONS, subprotocolOf } from '../../src/kernel/ocpp-vocabulary.js';
import { callParams, closingFrame, frameArb, MAX_FRAME_BYTES, type Frame, type Version } from './ocpp-fuzz-frames.js';
import { expectationOf, judge, matchAnswers, readAnswer, type Seen } from './ocpp-fuzz-oracle.js';

export interface StationAsset {
  id: string;
  version: Version;
  // As the API gave it: 2.0.1 the password itself, 1.6 the AuthorizationKey's hex text.
  password: string;
}

// Valid stations connect from 127.0.0.1, refused logins from 127.0.0.3: refused logins are
// throttled by peer address, which must never delay a correct login from another address.
const STATION_ADDRESS = '127.0.0.1';
const REFUSED_ADDRESS = '127.0.0.3';
// How long a session waits for the answers it is owed before it calls them missing.
const ANSWER_WAIT_MS = 4000;

const passwordBytes = (asset: StationAsset) => (asset.version === '1.6' ? Buffer.from(asset.password, 'hex') : Buffer.from(asset.password, 'utf8'));
const basic = (user: string, password: Buffer) => `Basic ${Buffer.concat([Buffer.from(`${user}:`), password]).toString('base64')}`;

export type SessionSpec =
  | { kind: 'raw'; version: Version; batches: Frame[][] }
  | { kind: 'rpc'; version: Version; concurrency: number; calls: Array<{ action: string; params: unknown }> }
  | { kind: 'nonReader'; version: Version; frameBytes: number; answerMiB: number }
  | { kind: 'refused'; version: Version; how: 'wrong-password' | 'unknown-identity' | 'other-user' | 'no-credentials' | 'malformed'; junk: string };

const versionArb = fc.constantFrom<Version>(...OCPP_VERSIONS);

export const sessionArb: fc.Arbitrary<SessionSpec> = fc.oneof(
  {
    weight: 6,
    arbitrary: versionArb.chain((version) =>
      fc
        .record({ batches: fc.array(fc.array(frameArb(version), { minLength: 1, maxLength: 8 }), { minLength: 1, maxLength: 5 }), ending: fc.option(closingFrame, { freq: 4, nil: undefined }) })
        // A frame that closes the socket comes last (with the frames sent beside it), so that
        // most sessions show what every other frame gets.
        .map(({ batches, ending }) => ({ kind: 'raw' as const, version, batches: ending ? [...batches.slice(0, -1), [...batches.at(-1)!, ending]] : batches })),
    ),
  },
  {
    weight: 3,
    arbitrary: versionArb.chain((version) =>
      fc.record({ kind: fc.constant('rpc' as const), version: fc.constant(version), concurrency: fc.integer({ min: 1, max: 8 }), calls: fc.array(callParams(version), { minLength: 1, maxLength: 12 }) }),
    ),
  },
  // Enough answers that no kernel buffer holds them: the endpoint must close the station or hold
  // them in its own memory.
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('nonReader' as const), version: versionArb, frameBytes: fc.integer({ min: 64 * 1024, max: MAX_FRAME_BYTES - 1024 }), answerMiB: fc.integer({ min: 48, max: 160 }) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('refused' as const),
      version: versionArb,
      how: fc.constantFrom('wrong-password', 'unknown-identity', 'other-user', 'no-credentials', 'malformed'),
      junk: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 30 }),
    }),
  },
);

function wsUrl(endpoint: string, asset: StationAsset): string {
  return `${endpoint}/${encodeURIComponent(asset.id)}`;
}

// A WebSocket of `asset`, logged in with its password; a refused login is a problem of the
// session (correct logins from this address are never refused).
async function openSocket(endpoint: string, asset: StationAsset): Promise<WebSocket | string> {
  const ws = new WebSocket(wsUrl(endpoint, asset), [subprotocolOf(asset.version)], {
    headers: { authorization: basic(asset.id, passwordBytes(asset)) },
    localAddress: STATION_ADDRESS,
    perMessageDeflate: false,
  });
  return new Promise((resolve) => {
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => {
      res.resume();
      resolve(`a correct login of ${asset.id} was refused with HTTP ${res.statusCode}`);
    });
    ws.once('error', (error) => resolve(`a correct login of ${asset.id} failed: ${error.message}`));
  });
}

async function waitFor(done: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done() && Date.now() < deadline) await sleep(10);
}


async function runRaw(endpoint: string, asset: StationAsset, spec: Extract<SessionSpec, { kind: 'raw' }>): Promise<string[]> {
  const ws = await openSocket(endpoint, asset);
  if (typeof ws === 'string') return [ws];
  const label = `raw ${spec.version} session of ${asset.id}`;
  const seen: Seen = { frames: [], pipelined: 0, pipelinedBytes: 0, inbound: [], closedByServer: undefined };
  let closingOurselves = false;
  const closed = new Promise<void>((resolve) =>
    ws.once('close', (code, reason) => {
      if (!closingOurselves) seen.closedByServer = { code, reason: reason.toString() };
      resolve();
    }),
  );
  ws.on('message', (data, binary) => seen.inbound.push({ text: Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.concat(data as Buffer[]).toString('utf8'), binary }));
  ws.on('error', () => undefined);
  // Whether a CALL sent has no answer with its id yet (right or wrong: judge() says which).
  const owed = () => {
    const expectations = seen.frames.map((f) => ({ ...expectationOf(f, spec.version, new Set()), accepts: () => true }));
    const answers = seen.inbound.flatMap((m) => readAnswer(m.text) ?? []);
    const { answered } = matchAnswers(expectations, answers);
    return expectations.some((e, i) => e.required && !answered[i]);
  };
  const sentinel: Frame = { data: `[2,"sentinel-${randomBytes(4).toString('hex')}","Heartbeat",{}]`, binary: false };
  for (const batch of [...spec.batches, [sentinel]]) {
    if (seen.closedByServer || ws.readyState !== WebSocket.OPEN) break;
    for (const frame of batch) {
      ws.send(frame.data, { binary: frame.binary });
      seen.frames.push(frame);
    }
    seen.pipelined = Math.max(seen.pipelined, batch.filter((f) => expectationOf(f, spec.version, new Set()).isCall).length);
    seen.pipelinedBytes = Math.max(seen.pipelinedBytes, batch.reduce((n, f) => n + Buffer.byteLength(f.data), 0));
    await waitFor(() => seen.closedByServer !== undefined || !owed(), ANSWER_WAIT_MS);
  }
  // A socket already CLOSING got the endpoint's close frame: its 'close' event is the endpoint's.
  closingOurselves = ws.readyState === WebSocket.OPEN;
  if (closingOurselves) ws.close(1000);
  await Promise.race([closed, sleep(2000).then(() => ws.terminate())]);
  return judge(label, spec.version, seen);
}

async function runRpc(endpoint: string, asset: StationAsset, spec: Extract<SessionSpec, { kind: 'rpc' }>): Promise<string[]> {
  const label = `RPC ${spec.version} session of ${asset.id} (concurrency ${spec.concurrency})`;
  const client = new RPCClient({
    endpoint,
    identity: asset.id,
    password: passwordBytes(asset) as unknown as string,
    protocols: [subprotocolOf(spec.version)],
    strictMode: false,
    reconnect: false,
    callConcurrency: spec.concurrency,
    callTimeoutMs: ANSWER_WAIT_MS,
    wsOpts: { localAddress: STATION_ADDRESS },
  } as never);
  const seen: Seen = { frames: [], pipelined: Math.min(spec.concurrency, spec.calls.length), pipelinedBytes: 0, inbound: [], closedByServer: undefined };
  let closingOurselves = false;
  client.on('message', ({ message, outbound }: { message: string; outbound: boolean }) => {
    if (outbound) seen.frames.push({ data: message, binary: false });
    else seen.inbound.push({ text: message, binary: false });
  });
  // Calls in flight at once: their sizes, as far as the client's concurrency lets them overlap.
  const sizes = spec.calls.map((c) => JSON.stringify(c.params ?? null).length).sort((a, b) => b - a);
  seen.pipelinedBytes = sizes.slice(0, spec.concurrency).reduce((n, s) => n + s, 0);
  client.on('close', ({ code, reason }: { code: number; reason: string }) => {
    if (!closingOurselves) seen.closedByServer = { code, reason: String(reason) };
  });
  try {
    await client.connect();
  } catch (error) {
    return [`a correct login of ${asset.id} was refused: ${(error as Error).message}`];
  }
  await Promise.allSettled(spec.calls.map(({ action, params }) => client.call(action, params)));
  if (!seen.closedByServer) await client.call('Heartbeat', {}).catch(() => undefined);
  // The library's socket, CLOSING when the endpoint's close frame has arrived but not its 'close'.
  closingOurselves = (client as unknown as { _ws?: WebSocket })._ws?.readyState === WebSocket.OPEN;
  await client.close({ code: 1000, force: true }).catch(() => undefined);
  return judge(label, spec.version, seen);
}

// A station that sends calls and never reads: its socket is paused once open. Its calls have long
// ids, which every answer repeats, so the answers owed add up to `answerMiB`.
async function runNonReader(endpoint: string, asset: StationAsset, spec: Extract<SessionSpec, { kind: 'nonReader' }>): Promise<string[]> {
  const ws = await openSocket(endpoint, asset);
  if (typeof ws === 'string') return [ws];
  let closedByServer = false;
  let closingOurselves = false;
  const closed = new Promise<void>((resolve) =>
    ws.once('close', () => {
      closedByServer = !closingOurselves;
      resolve();
    }),
  );
  ws.on('error', () => undefined);
  (ws as unknown as { _socket: Socket })._socket.pause();
  const count = Math.ceil((spec.answerMiB * 2 ** 20) / spec.frameBytes);
  const padding = 'p'.repeat(spec.frameBytes - 100);
  let sent = 0;
  let inFlight = 0;
  const deadline = Date.now() + 10_000;
  // A few sends outstanding at a time, so the test's own memory stays small.
  while (sent < count && !closedByServer && ws.readyState === WebSocket.OPEN && Date.now() < deadline) {
    if (inFlight >= 4) {
      await sleep(1);
      continue;
    }
    inFlight += 1;
    ws.send(`[2,"${sent}-${padding}","NoSuchAction",{}]`, () => void (inFlight -= 1));
    sent += 1;
  }
  // The last calls reach the endpoint and their answers queue (or the station is closed).
  await Promise.race([closed, sleep(500)]);
  closingOurselves = true;
  ws.terminate();
  await closed;
  const owedMiB = (sent * spec.frameBytes) / 2 ** 20;
  return closedByServer ? [] : [`non-reading ${spec.version} station ${asset.id}: answers to ${owedMiB.toFixed(0)} MiB of calls owed (${sent} calls) and its socket was never closed`];
}

// A login that must be refused before the upgrade, from another address than the valid stations.
async function runRefused(port: number, asset: StationAsset, spec: Extract<SessionSpec, { kind: 'refused' }>): Promise<string[]> {
  const identity = spec.how === 'unknown-identity' ? `CP-nobody-${randomBytes(4).toString('hex')}` : asset.id;
  const wrong = Buffer.from(`Wrong:${spec.junk}`);
  const authorization = {
    'wrong-password': basic(identity, wrong),
    'unknown-identity': basic(identity, wrong),
    'other-user': basic(`${identity}x`, passwordBytes(asset)),
    'no-credentials': undefined,
    malformed: `Basic ${spec.junk}`,
  }[spec.how];
  const allowed = new Set([spec.how === 'unknown-identity' ? 404 : 401, 429, 503]);
  const status = await new Promise<{ status: number; retryAfter: string | undefined } | string>((resolve) => {
    const req = httpRequest({
      host: '127.0.0.1',
      port,
      localAddress: REFUSED_ADDRESS,
      path: `/ocpp/${encodeURIComponent(identity)}`,
      agent: false,
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': randomBytes(16).toString('base64'),
        'sec-websocket-protocol': subprotocolOf(spec.version),
        ...(authorization === undefined ? {} : { authorization }),
      },
    });
    req.setTimeout(10_000, () => req.destroy(new Error('no answer within 10 s')));
    req.on('upgrade', (_res, socket) => {
      socket.destroy();
      resolve('let in');
    });
    req.on('response', (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] });
    });
    req.on('error', (error) => resolve(`failed: ${error.message}`));
    req.end();
  });
  const label = `refused login (${spec.how}) of ${identity}`;
  if (typeof status === 'string') return [`${label}: ${status}`];
  if (!allowed.has(status.status)) return [`${label}: HTTP ${status.status}, expected one of ${[...allowed].join(', ')}`];
  if (status.status === 429 && status.retryAfter === undefined) return [`${label}: 429 without Retry-After`];
  return [];
}

export function runSession(target: { port: number; endpoint: string }, asset: StationAsset, spec: SessionSpec): Promise<string[]> {
  switch (spec.kind) {
    case 'raw':
      return runRaw(target.endpoint, asset, spec);
    case 'rpc':
      return runRpc(target.endpoint, asset, spec);
    case 'nonReader':
      return runNonReader(target.endpoint, asset, spec);
    case 'refused':
      return runRefused(target.port, asset, spec);
  }
}
