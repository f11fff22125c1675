// One station must never hurt the service, whatever it sends: a few calls of its own
// in progress at most, a bounded number of bytes waiting to be sent to it, frames nested too deep
// answered before anything recursive reads them, every unhandled action NotImplemented, a
// malformed handshake refused before any login check, and connector statuses bounded per station.
import { once } from 'node:events';
import { request as httpRequest } from 'node:http';
import type { Socket } from 'node:net';
import { eq } from 'drizzle-orm';
import fc from 'fast-check';
import { afterAll, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import { nestsDeeperThan } from '../../src/http/json-depth.js';
import { stationConnections } from '../../src/stations/stations-tables.js';
import {
  MAX_CALLS_IN_PROGRESS,
  MAX_CONNECTOR_STATUSES,
  MAX_FRAME_DEPTH,
  MAX_SUBPROTOCOL_HEADER_LENGTH,
  frameHead,
} from '../../src/stations/station-bounds.js';
import { ASSET_WRITER } from '../helpers/asset-factory.js';
import { basic, provisionStation, rawUpgrade, stationClient, useStationApp, type ProvisionedStation, type StationClient } from '../helpers/station-factory.js';
import { eventually } from '../helpers/eventually.js';

const t = useStationApp();

type Frame = [number, string, ...unknown[]];

const raws: WebSocket[] = [];
afterAll(() => {
  for (const ws of raws) ws.terminate();
});

const PROTOCOL = { '1.6': 'ocpp1.6', '2.0.1': 'ocpp2.0.1' } as const;

function wirePassword(s: ProvisionedStation): string | Buffer {
  return s.ocppVersion === '1.6' ? Buffer.from(s.password, 'hex') : s.password;
}

// A station written with `ws` itself, for what no OCPP client lets a test do: several frames in
// one TCP write (so the service reads them in one go, before any of them is answered), frames
// nested at will, and a socket that stops reading.
async function rawStation(s: ProvisionedStation) {
  const ws = new WebSocket(`${t.endpoint}/${s.id}`, [PROTOCOL[s.ocppVersion]], { headers: { authorization: basic(s.id, wirePassword(s)) } });
  raws.push(ws);
  const received: Frame[] = [];
  ws.on('message', (data) => received.push(JSON.parse(String(data)) as Frame));
  const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
  await once(ws, 'open');
  const socket = (ws as unknown as { _socket: Socket })._socket;
  return {
    ws,
    socket,
    received,
    closed,
    burst(frames: Array<Frame | string>) {
      socket.cork();
      for (const frame of frames) ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
      socket.uncork();
    },
    // The answer to the call with this id.
    async answer(id: string): Promise<Frame> {
      await vi.waitFor(() => expect(received.find((f) => f[1] === id)).toBeDefined(), { timeout: 5000, interval: 10 });
      return received.find((f) => f[1] === id)!;
    },
  };
}

async function connected(s: ProvisionedStation): Promise<StationClient> {
  const client = stationClient(t.endpoint, { identity: s.id, password: wirePassword(s), protocols: [PROTOCOL[s.ocppVersion]] });
  t.open.push(client);
  await client.connect();
  return client;
}

async function readStation(id: string) {
  const res = await t.app.inject({ url: `/asset-management/v1/assets/${id}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data.station;
}

const boot = (vendorName: string) => ({ reason: 'PowerUp', chargingStation: { vendorName, model: 'M' } });

// `1` wrapped in `levels` arrays.
function nested(levels: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < levels; i++) value = [value];
  return value;
}

// The same as JSON text, for depths JSON.stringify cannot write (it is recursive too).
const deepJson = (levels: number) => `${'['.repeat(levels)}1${']'.repeat(levels)}`;

function logsOf(id: string, text: string): string[] {
  return t.logLines().filter((l) => l.includes(id) && l.includes(text));
}

describe('calls in progress', () => {
  it(`a station that sends calls without waiting for answers is closed with 1008 beyond ${MAX_CALLS_IN_PROGRESS}: the surplus reaches no handler and no row, and another station is served`, async () => {
    const [a, b] = await Promise.all([provisionStation(t), provisionStation(t)]);
    const abuser = await rawStation(a);
    const bystander = await connected(b);
    const FLOOD = 200;
    abuser.burst(Array.from({ length: FLOOD }, (_, i): Frame => [2, `flood-${i}`, 'BootNotification', boot(`V-${i}`)]));
    expect(await abuser.closed).toBe(1008);
    // Only the calls within the bound were handled, and answered before the close.
    const answered = abuser.received.map((f) => f[1]);
    expect(answered.length).toBeLessThanOrEqual(MAX_CALLS_IN_PROGRESS);
    for (const id of answered) expect(Number(id.replace('flood-', ''))).toBeLessThan(MAX_CALLS_IN_PROGRESS);
    const vendor = (await readStation(a.id)).vendor as string;
    expect(Number(vendor.replace('V-', ''))).toBeLessThan(MAX_CALLS_IN_PROGRESS);
    expect(logsOf(a.id, 'crossed a per-station bound').join('\n')).toContain('Too many calls in progress');
    expect(await bystander.call('BootNotification', boot('bystander'))).toMatchObject({ status: 'Accepted' });
    expect((await readStation(b.id)).vendor).toBe('bystander');
  });

  it(`what a flooding station sends after the call beyond ${MAX_CALLS_IN_PROGRESS} is not read: the service reads no more of its socket than it had read by then, however much it sends, and the station still gets its 1008`, async () => {
    const s = await provisionStation(t);
    // The service's side of the station's TCP connection, to count what it read.
    let serverSide: Socket | undefined;
    const capture = (_request: unknown, socket: Socket) => (serverSide ??= socket);
    t.app.server.on('upgrade', capture);
    const abuser = await rawStation(s);
    t.app.server.off('upgrade', capture);
    abuser.burst(Array.from({ length: MAX_CALLS_IN_PROGRESS + 1 }, (_, i): Frame => [2, `flood-${i}`, 'BootNotification', boot(`V-${i}`)]));
    // 32 MiB more behind the cut, in frames of 64 KiB; the station's own close reply comes after them.
    const filler = JSON.stringify([2, 'filler', 'Heartbeat', { pad: 'p'.repeat(64 * 1024) }]);
    for (let i = 0; i < 512; i++) abuser.ws.send(filler);
    expect(await abuser.closed).toBe(1008);
    // Read by then: the burst and at most one read's worth (64 KiB) of what came after it.
    expect(serverSide!.bytesRead).toBeLessThan(1024 * 1024);
    expect(logsOf(s.id, 'crossed a per-station bound').join('\n')).toContain('Too many calls in progress');
  });

  it(`a flooding station that never reads again, so never answers the closing handshake, still has its socket ended: paused at the cut, it is not held open`, async () => {
    const s = await provisionStation(t);
    let serverSide: Socket | undefined;
    const capture = (_request: unknown, socket: Socket) => (serverSide ??= socket);
    t.app.server.on('upgrade', capture);
    const abuser = await rawStation(s);
    t.app.server.off('upgrade', capture);
    const ended = once(serverSide!, 'close');
    abuser.socket.pause();
    abuser.burst(Array.from({ length: MAX_CALLS_IN_PROGRESS + 1 }, (_, i): Frame => [2, `silent-${i}`, 'BootNotification', boot(`S-${i}`)]));
    await vi.waitFor(() => expect(logsOf(s.id, 'crossed a per-station bound').join('\n')).toContain('Too many calls in progress'), { timeout: 10_000, interval: 20 });
    await ended;
    expect(serverSide!.destroyed).toBe(true);
    await vi.waitFor(() => expect(t.app.stations.isConnectedHere(s.id)).toBe(false), { timeout: 5000, interval: 20 });
  }, 30_000);

  it('calls the service refuses at once (unknown actions, schema violations, duplicate ids) are answered at once: never in progress, however many come together', async () => {
    const s = await provisionStation(t);
    const station = await rawStation(s);
    const BURST = 50;
    station.burst(
      Array.from({ length: BURST }, (_, i): Frame => (i % 2 ? [2, `refused-${i}`, 'FooBar', {}] : [2, `refused-${i}`, 'BootNotification', { reason: 'PowerUp' }])),
    );
    await vi.waitFor(() => expect(station.received.length).toBe(BURST), { timeout: 5000, interval: 10 });
    expect(station.received.every((f) => f[0] === 4)).toBe(true);
    station.burst([[2, 'after', 'Heartbeat', {}]]);
    expect((await station.answer('after'))[0]).toBe(3);
    expect(station.ws.readyState).toBe(WebSocket.OPEN);
  });

  it(`they count while in progress: ${MAX_CALLS_IN_PROGRESS} calls being handled and one more, even one nobody handles, close the station`, async () => {
    const s = await provisionStation(t);
    const station = await rawStation(s);
    station.burst([...Array.from({ length: MAX_CALLS_IN_PROGRESS }, (_, i): Frame => [2, `boot-${i}`, 'BootNotification', boot(`V-${i}`)]), [2, 'one-more', 'FooBar', {}]]);
    expect(await station.closed).toBe(1008);
    expect(station.received.map((f) => f[1]).sort()).toEqual(Array.from({ length: MAX_CALLS_IN_PROGRESS }, (_, i) => `boot-${i}`));
  });
});

describe('bytes waiting to be sent', () => {
  it('a station that sends calls but never reads its answers is ended, the service keeps nothing for it, and another station is served', async () => {
    const [a, b] = await Promise.all([provisionStation(t), provisionStation(t)]);
    const abuser = await rawStation(a);
    const bystander = await connected(b);
    abuser.socket.pause();
    // Each answer repeats the unknown action's name: about 200 KB for every call, which the
    // station never reads. 300 of them are 60 MB, far more than the kernel's buffers take.
    const action = 'A'.repeat(200_000);
    for (let i = 0; i < 300 && t.app.stations.isConnectedHere(a.id); i++) {
      abuser.ws.send(JSON.stringify([2, `unread-${i}`, action, {}]));
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await vi.waitFor(() => expect(t.app.stations.isConnectedHere(a.id)).toBe(false), { timeout: 5000, interval: 20 });
    expect(logsOf(a.id, 'crossed a per-station bound').join('\n')).toContain('does not read');
    await eventually(async () => expect((await readStation(a.id)).connected).toBe(false));
    expect(await bystander.call('Heartbeat', {})).toEqual({ currentTime: expect.any(String) });
    // Ended without a closing handshake: the station finds its socket gone once it reads again.
    abuser.socket.resume();
    expect(await abuser.closed).toBe(1006);
  });
});

describe('reading a frame before the parser (pure)', () => {
  // The nesting of a parsed JSON value, its outer array or object included.
  function depthOf(value: unknown): number {
    if (Array.isArray(value)) return 1 + Math.max(0, ...value.map(depthOf));
    if (value !== null && typeof value === 'object') return 1 + Math.max(0, ...Object.values(value).map(depthOf));
    return 0;
  }

  it('property: nestsDeeperThan reads the nesting of any JSON text exactly, brackets in strings and escapes included', () => {
    const text = fc.string({ unit: fc.constantFrom('[', ']', '{', '}', '"', '\\', 'a', 'é', '\u0000') });
    const value = fc.letrec((tie) => ({
      node: fc.oneof({ depthSize: 'small' }, text, fc.integer(), fc.array(tie('node'), { maxLength: 3 }), fc.dictionary(text, tie('node'), { maxKeys: 3 })),
    })).node;
    fc.assert(
      fc.property(value, fc.integer({ min: 0, max: 8 }), (v, limit) => {
        const json = Buffer.from(JSON.stringify(v));
        expect(nestsDeeperThan(json, limit)).toBe(depthOf(v) > limit);
      }),
      { numRuns: 2000 },
    );
  });

  it('property: frameHead reads the type and any message id of a frame, whatever follows', () => {
    fc.assert(
      fc.property(fc.constantFrom(2, 3, 4), fc.string({ maxLength: 36 }), fc.constantFrom('', ' ', '\n\t'), (type, id, space) => {
        const frame = Buffer.from(`${space}[${space}${type}${space},${space}${JSON.stringify(id)}${space},${deepJson(100)}]`);
        expect(frameHead(frame)).toEqual({ type, id });
      }),
    );
    expect(frameHead(Buffer.from(deepJson(10)))).toBeNull();
    expect(frameHead(Buffer.from(`[2, ${deepJson(10)}]`))).toEqual({ type: 2, id: null });
    expect(frameHead(Buffer.from(`[2, "${'x'.repeat(300)}", {}]`))).toEqual({ type: 2, id: null });
  });
});

describe('nesting', () => {
  it.each([
    ['2.0.1', 'FormatViolation'],
    ['1.6', 'FormationViolation'],
  ] as const)('%s: params nested 5,000 deep get %s and the connection stays open; nothing is stored', async (ocppVersion, code) => {
    const s = await provisionStation(t, { ocppVersion });
    const station = await rawStation(s);
    const params = JSON.stringify(ocppVersion === '1.6' ? { chargePointVendor: 'V', chargePointModel: 'M' } : boot('V'));
    station.burst([`[2,"deep","BootNotification",${params.slice(0, -1)},"deep":${deepJson(5000)}}]`]);
    expect(await station.answer('deep')).toEqual([4, 'deep', code, expect.stringContaining(`deeper than ${MAX_FRAME_DEPTH}`), {}]);
    station.burst([[2, 'after', 'Heartbeat', {}]]);
    expect((await station.answer('after'))[0]).toBe(3);
    expect(station.ws.readyState).toBe(WebSocket.OPEN);
    expect((await readStation(s.id)).vendor).toBeNull();
  });

  it(`a frame ${MAX_FRAME_DEPTH} levels deep is read as usual (vendor data in customData may nest), one level more is not`, async () => {
    const s = await provisionStation(t);
    const station = await rawStation(s);
    // frame, params, chargingStation, customData: 4 levels before the vendor's own.
    const withVendorData = (levels: number) => ({ ...boot('Deep-vendor'), chargingStation: { vendorName: 'Deep-vendor', model: 'M', customData: { vendorId: 'x', data: nested(levels - 4) } } });
    station.burst([[2, 'at-bound', 'BootNotification', withVendorData(MAX_FRAME_DEPTH)]]);
    expect((await station.answer('at-bound'))[0]).toBe(3);
    station.burst([[2, 'beyond', 'BootNotification', withVendorData(MAX_FRAME_DEPTH + 1)]]);
    expect((await station.answer('beyond')).slice(0, 3)).toEqual([4, 'beyond', 'FormatViolation']);
  });

  it('a deep frame whose id cannot be read gets RpcFrameworkError with the id "-1", as any unreadable message; the connection stays open', async () => {
    const s = await provisionStation(t);
    const station = await rawStation(s);
    station.burst([deepJson(5000), `[2, ${deepJson(5000)}]`]);
    await vi.waitFor(() => expect(station.received.length).toBe(2), { timeout: 5000, interval: 10 });
    for (const frame of station.received) expect(frame.slice(0, 3)).toEqual([4, '-1', 'RpcFrameworkError']);
    station.burst([[2, 'after', 'Heartbeat', {}]]);
    expect((await station.answer('after'))[0]).toBe(3);
  });

  it('a deep answer to the password command fails that command as a malformed answer: 409, the old password stays', async () => {
    const s = await provisionStation(t);
    const station = await rawStation(s);
    station.ws.on('message', (data) => {
      const [type, id, method, params] = JSON.parse(String(data)) as Frame;
      if (type !== 2 || method !== 'SetVariables') return;
      const set = (params as { setVariableData: Array<{ component: unknown; variable: unknown }> }).setVariableData[0]!;
      const result = JSON.stringify({ attributeStatus: 'Accepted', component: set.component, variable: set.variable });
      station.ws.send(`[3,${JSON.stringify(id)},{"setVariableResult":[${result.slice(0, -1)},"customData":{"vendorId":"x","deep":${deepJson(5000)}}}]}]`);
    });
    const res = await t.app.inject({
      method: 'POST',
      url: '/asset-management/v1/assets/change-password',
      headers: { authorization: t.bearer(ASSET_WRITER) },
      payload: { id: s.id },
    });
    expect(res.statusCode, res.body).toBe(409);
    expect(res.json()).toMatchObject({ code: 'STATION_REJECTED', message: expect.stringContaining('FormatViolation') });
    expect(station.ws.readyState).toBe(WebSocket.OPEN);
    expect((await connected(s)).protocol).toBe('ocpp2.0.1');
  });
});

describe('actions the service does not handle', () => {
  it.each([
    ['2.0.1', 'FooBar', {}],
    ['2.0.1', 'Authorize', {}],
    ['2.0.1', 'Authorize', { idToken: { idToken: 'TAG1', type: 'ISO14443' } }],
    ['2.0.1', 'MeterValues', { evseId: 1, meterValue: [{ timestamp: '2024-01-01T00:00:00Z', sampledValue: [{ value: 1 }] }] }],
    ['1.6', 'FooBar', {}],
    ['1.6', 'Authorize', { idTag: 42 }],
    ['1.6', 'MeterValues', { connectorId: 1, meterValue: [] }],
    ['1.6', 'DataTransfer', { vendorId: 'V' }],
  ] as const)('%s %s %j gets NotImplemented, whatever its params; the connection stays open', async (ocppVersion, method, params) => {
    const s = await provisionStation(t, { ocppVersion });
    const station = await rawStation(s);
    station.burst([[2, 'unhandled', method, params]]);
    expect((await station.answer('unhandled')).slice(0, 3)).toEqual([4, 'unhandled', 'NotImplemented']);
    station.burst([[2, 'after', 'Heartbeat', {}]]);
    expect((await station.answer('after'))[0]).toBe(3);
  });

  it.each([
    ['2.0.1', { reason: 'PowerUp' }],
    ['1.6', { chargePointVendor: 'V' }],
  ] as const)('%s: a handled action is still checked against its schema', async (ocppVersion, params) => {
    const s = await provisionStation(t, { ocppVersion });
    const station = await rawStation(s);
    station.burst([[2, 'malformed', 'BootNotification', params]]);
    expect((await station.answer('malformed')).slice(0, 3)).toEqual([4, 'malformed', expect.stringMatching(/^Occurr?enceConstraintViolation$/)]);
  });
});

describe('the handshake', () => {
  // Anything but a comma-separated list of distinct tokens (RFC 7230 tchar), at most
  // MAX_SUBPROTOCOL_HEADER_LENGTH characters.
  const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
  function wellFormed(header: string): boolean {
    const trimmed = header.replace(/^[ \t]+|[ \t]+$/g, '');
    if (trimmed.length > MAX_SUBPROTOCOL_HEADER_LENGTH) return false;
    const tokens = trimmed.split(/[ \t]*,[ \t]*/);
    return tokens.every((token) => TOKEN.test(token)) && new Set(tokens).size === tokens.length;
  }

  async function upgrade(identity: string, headers: Record<string, string>) {
    const res = await rawUpgrade(t.port, `/ocpp/${identity}`, headers);
    res.socket?.destroy();
    return res.status;
  }

  it.each([
    'ocpp2.0.1,,;',
    'ocpp2.0.1,,ocpp1.6',
    ',ocpp2.0.1',
    'ocpp2.0.1,',
    'ocpp2.0.1;q=1',
    'ocpp2.0.1 ocpp1.6',
    'ocpp2.0.1, ocpp2.0.1',
    'ocpp2.0.1/x',
    '"ocpp2.0.1"',
    'ocpp2.0.1,é',
    `ocpp2.0.1,${'x'.repeat(MAX_SUBPROTOCOL_HEADER_LENGTH)}`,
    Array.from({ length: 100 }, (_, i) => `p${i}`).join(','),
  ])('Sec-WebSocket-Protocol %j: 400 before any login check (an unknown identity is not even looked up), logged', async (header) => {
    const identity = `CP-bad-header-${Math.random().toString(36).slice(2)}`;
    expect(await upgrade(identity, { 'sec-websocket-protocol': header })).toBe(400);
    expect(logsOf(identity, 'station login refused').join('\n')).toContain('Sec-WebSocket-Protocol');
  });

  it('property: a malformed Sec-WebSocket-Protocol is a 400 and a well-formed one reaches the login (404 for an unknown identity)', async () => {
    const piece = fc.constantFrom('ocpp2.0.1', 'ocpp1.6', 'a', 'x-y', ',', ', ', ' ,', ',,', ' ', '\t', ';', '/', '"', '=', '(', 'é', '{');
    await fc.assert(
      fc.asyncProperty(fc.array(piece, { minLength: 1, maxLength: 8 }), async (pieces) => {
        const header = pieces.join('');
        const status = await upgrade('CP-property-unknown', { 'sec-websocket-protocol': header });
        expect(status).toBe(wellFormed(header) ? 404 : 400);
      }),
      { numRuns: 150 },
    );
  });

  it.each([
    [{ 'sec-websocket-key': 'not-a-key' }, 'Sec-WebSocket-Key'],
    [{ 'sec-websocket-version': '12' }, 'Sec-WebSocket-Version'],
  ])('%j: 400 before any login check', async (headers, logged) => {
    const identity = `CP-bad-handshake-${Math.random().toString(36).slice(2)}`;
    expect(await upgrade(identity, { 'sec-websocket-protocol': 'ocpp2.0.1', ...headers })).toBe(400);
    expect(logsOf(identity, 'station login refused').join('\n')).toContain(logged);
  });

  it('an upgrade request other than GET: 405 before any login check', async () => {
    const identity = `CP-post-${Math.random().toString(36).slice(2)}`;
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest({
        host: '127.0.0.1',
        port: t.port,
        method: 'POST',
        path: `/ocpp/${identity}`,
        headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', 'sec-websocket-protocol': 'ocpp2.0.1' },
      });
      req.on('upgrade', (res, socket) => {
        socket.destroy();
        resolve(res.statusCode ?? 0);
      });
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(405);
    expect(logsOf(identity, 'station login refused')).toHaveLength(1);
  });

  it('a well-formed handshake of a provisioned station still logs in', async () => {
    const s = await provisionStation(t);
    const res = await rawUpgrade(t.port, `/ocpp/${s.id}`, { authorization: basic(s.id, s.password), 'sec-websocket-protocol': 'ocpp1.6,\tocpp2.0.1' });
    res.socket?.destroy();
    expect(res.status).toBe(101);
  });
});

describe('connector statuses', () => {
  async function storedStatuses(id: string) {
    const [row] = await t.database.db.select({ statuses: stationConnections.connectorStatuses }).from(stationConnections).where(eq(stationConnections.assetId, id));
    return row!.statuses;
  }

  const notify = (client: StationClient, connectorId: number, connectorStatus: string) =>
    client.call('StatusNotification', { timestamp: new Date().toISOString(), connectorStatus, evseId: 1, connectorId });

  it(`at most ${MAX_CONNECTOR_STATUSES} connectors are stored per station, across reconnects; a stored one is always updated; a new one beyond is logged, not stored`, async () => {
    const s = await provisionStation(t);
    const first = await connected(s);
    const EXTRA = 6;
    for (let c = 1; c <= MAX_CONNECTOR_STATUSES + EXTRA; c++) expect(await notify(first, c, 'Available')).toEqual({});
    let stored = await storedStatuses(s.id);
    expect(Object.keys(stored)).toHaveLength(MAX_CONNECTOR_STATUSES);
    expect(stored[`1/${MAX_CONNECTOR_STATUSES}`]).toBeDefined();
    expect(stored[`1/${MAX_CONNECTOR_STATUSES + 1}`]).toBeUndefined();
    expect(logsOf(s.id, 'connector status not stored')).toHaveLength(EXTRA);

    // The bound is the stored row's: a new connection starts from it.
    await first.close({ force: true });
    const again = await connected(s);
    await notify(again, MAX_CONNECTOR_STATUSES + EXTRA + 1, 'Available');
    await notify(again, 1, 'Faulted');
    stored = await storedStatuses(s.id);
    expect(Object.keys(stored)).toHaveLength(MAX_CONNECTOR_STATUSES);
    expect(stored['1/1']!.status).toBe('Faulted');
    expect(logsOf(s.id, 'connector status not stored')).toHaveLength(EXTRA + 1);
  });
});
