// Stations connect over OCPP-J and log in with the password the service stores (docs/stations.md).
// The station is ocpp-rpc's RPCClient: a real implementation of the other side.
import { eq, sql } from 'drizzle-orm';
import { afterAll, describe, expect, it } from 'vitest';
import type { AddressInfo, Socket } from 'node:net';
import { request as httpRequest } from 'node:http';
import type { ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import WebSocket from 'ws';
import { passwordHashQueue } from '../../src/asset-management/password-hash-queue.js';
import { stationConnections } from '../../src/stations/stations-tables.js';
import { deleteStationTakeovers, findStationTakeovers } from '../../src/stations/replicas-repository.js';
import { stationEvents } from '../../src/stations/station-events.js';
import { claimStations, releaseStations } from '../../src/stations/stations-repository.js';
import { bootstrapToken, startService } from '../helpers/service-process.js';
import { createServerDatabase } from '../helpers/test-database.js';
import { eventually } from '../helpers/eventually.js';
import { createAsset, siblingApp } from '../helpers/asset-factory.js';
import { basic, provisionStation, rawUpgrade, refusedWith, stationClient, useStationApp, type StationClient } from '../helpers/station-factory.js';

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

// Profile 1 (plain ws://) here; profile 2 has its own test file with a TLS listener.
const t = useStationApp({
  env: { OCPP_HEARTBEAT_INTERVAL_SECONDS: '120', OCPP_PING_INTERVAL_SECONDS: '1', OCPP_LEASE_SECONDS: '1' },
});

function station(options: Parameters<typeof stationClient>[1]): StationClient {
  const client = stationClient(t.endpoint, options);
  t.open.push(client);
  return client;
}

async function connected(options: Parameters<typeof stationClient>[1]): Promise<StationClient> {
  const client = station(options);
  await client.connect();
  return client;
}

async function readStation(id: string) {
  const res = await t.app.inject({ url: `/asset-management/v1/assets/${id}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data.station;
}

async function connectionRow(id: string) {
  const [row] = await t.database.db.select().from(stationConnections).where(eq(stationConnections.assetId, id));
  return row;
}

const BOOT_201 = {
  reason: 'PowerUp',
  chargingStation: { vendorName: 'Alfen', model: 'Eve Double', serialNumber: 'SN-201', firmwareVersion: '6.1.0' },
};
const BOOT_16 = { chargePointVendor: 'ABB', chargePointModel: 'Terra AC', chargePointSerialNumber: 'SN-16', firmwareVersion: '1.8.2' };

describe('OCPP 2.0.1 station', () => {
  it('a BootNotification with NUL characters is Accepted and stored with U+FFFD in their place; a station booting in the same batch is not hurt by it', async () => {
    const [a, b] = [await provisionStation(t, { ocppVersion: '2.0.1' }), await provisionStation(t, { ocppVersion: '1.6' })];
    const [ca, cb] = [
      await connected({ identity: a.id, password: a.password, protocols: ['ocpp2.0.1'] }),
      await connected({ identity: b.id, password: Buffer.from(b.password, 'hex'), protocols: ['ocpp1.6'] }),
    ];
    const nul = { reason: 'PowerUp', chargingStation: { vendorName: 'a\u0000b', model: '\u0000', serialNumber: 'SN', firmwareVersion: 'x\u0000' } };
    // Sent together, so the two boots may share one statement.
    const [bootA, bootB] = await Promise.all([ca.call('BootNotification', nul), cb.call('BootNotification', BOOT_16)]);
    expect(bootA).toMatchObject({ status: 'Accepted' });
    expect(bootB).toMatchObject({ status: 'Accepted' });
    expect(await readStation(a.id)).toMatchObject({ vendor: 'a\uFFFDb', model: '\uFFFD', serialNumber: 'SN', firmwareVersion: 'x\uFFFD' });
    expect(await readStation(b.id)).toMatchObject({ vendor: 'ABB', model: 'Terra AC' });
  });

  it('logs in with its generated password, boots, heartbeats and reports a connector; the asset read shows it', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    expect(await readStation(s.id)).toBeNull();
    const client = await connected({ identity: s.id, password: s.password, protocols: ['ocpp2.0.1'] });
    expect(client.protocol).toBe('ocpp2.0.1');

    const boot = (await client.call('BootNotification', BOOT_201)) as Record<string, unknown>;
    expect(boot).toEqual({ status: 'Accepted', interval: 120, currentTime: expect.stringMatching(ISO_MS) });
    // Stored before the answer: a read right after it shows the boot.
    expect(await readStation(s.id)).toEqual({
      connected: true,
      protocol: 'ocpp2.0.1',
      connectedAt: expect.stringMatching(ISO_MS),
      lastSeenAt: expect.stringMatching(ISO_MS),
      vendor: 'Alfen',
      model: 'Eve Double',
      serialNumber: 'SN-201',
      firmwareVersion: '6.1.0',
    });

    expect(await client.call('Heartbeat', {})).toEqual({ currentTime: expect.stringMatching(ISO_MS) });
    const status = { timestamp: new Date().toISOString(), connectorStatus: 'Available', evseId: 1, connectorId: 1 };
    expect(await client.call('StatusNotification', status)).toEqual({});
    expect((await connectionRow(s.id))!.connectorStatuses).toEqual({
      '1/1': { status: 'Available', timestamp: status.timestamp, receivedAt: expect.stringMatching(ISO_MS) },
    });

    const list = await t.app.inject({
      url: `/asset-management/v1/assets?network=${s.network}`,
      headers: { authorization: t.bearer({ scopes: ['read:asset'] }) },
    });
    expect(list.json().data.items).toEqual([expect.objectContaining({ id: s.id, station: expect.objectContaining({ connected: true, vendor: 'Alfen' }) })]);
  });

  it('logs in with a supplied (argon2id) password', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1', password: 'Supplied:Pass|word-2024' });
    const client = await connected({ identity: s.id, password: s.password, protocols: ['ocpp2.0.1'] });
    expect(client.protocol).toBe('ocpp2.0.1');
  });
});

describe('OCPP 1.6 station', () => {
  it('sends its AuthorizationKey as raw bytes (OCPP-J 1.6 §6.2.2), boots and reports a connector', async () => {
    const s = await provisionStation(t, { ocppVersion: '1.6' });
    const client = await connected({ identity: s.id, password: Buffer.from(s.password, 'hex'), protocols: ['ocpp1.6'] });
    expect(client.protocol).toBe('ocpp1.6');
    expect(await client.call('BootNotification', BOOT_16)).toEqual({ status: 'Accepted', interval: 120, currentTime: expect.stringMatching(ISO_MS) });
    expect(await readStation(s.id)).toMatchObject({ connected: true, protocol: 'ocpp1.6', vendor: 'ABB', model: 'Terra AC', serialNumber: 'SN-16', firmwareVersion: '1.8.2' });
    expect(await client.call('Heartbeat', {})).toEqual({ currentTime: expect.stringMatching(ISO_MS) });
    expect(await client.call('StatusNotification', { connectorId: 2, errorCode: 'NoError', status: 'Charging' })).toEqual({});
    expect((await connectionRow(s.id))!.connectorStatuses).toEqual({ '2': { status: 'Charging', errorCode: 'NoError', receivedAt: expect.stringMatching(ISO_MS) } });
  });

  it.each([
    ['lowercase', (hex: string) => hex],
    ['uppercase', (hex: string) => hex.toUpperCase()],
  ])('accepts the key sent as %s hex text (a common station quirk)', async (_case, spell) => {
    const s = await provisionStation(t, { ocppVersion: '1.6' });
    const client = await connected({ identity: s.id, password: spell(s.password), protocols: ['ocpp1.6'] });
    expect(client.protocol).toBe('ocpp1.6');
  });

  it('a key supplied in upper case is stored in lower case and accepted as raw bytes', async () => {
    const key = 'ABCDEF0123456789ABCDEF0123456789ABCDEF01';
    const s = await provisionStation(t, { ocppVersion: '1.6', password: key });
    const client = await connected({ identity: s.id, password: Buffer.from(key, 'hex'), protocols: ['ocpp1.6'] });
    expect(client.protocol).toBe('ocpp1.6');
  });

  it('refuses other bytes, and the hex text of other bytes', async () => {
    const s = await provisionStation(t, { ocppVersion: '1.6' });
    const wrong = Buffer.from(s.password, 'hex');
    wrong[0]! ^= 1;
    expect(await refusedWith(station({ identity: s.id, password: wrong, protocols: ['ocpp1.6'] }))).toBe(401);
    expect(await refusedWith(station({ identity: s.id, password: wrong.toString('hex'), protocols: ['ocpp1.6'] }))).toBe(401);
  });
});

describe('refused logins: 404 for an unknown identity, 401 otherwise, the reason only in the log', () => {
  it('wrong password, no password, username that is not the identity, asset without password', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    const bare = await createAsset(t, { securityProfile: 1 });
    // One character changed, whatever the generated password ends with.
    const wrong = `${s.password.slice(0, -1)}${s.password.endsWith('x') ? 'y' : 'x'}`;
    const cases: Array<[StationClient, string]> = [
      [station({ identity: s.id, password: wrong, protocols: ['ocpp2.0.1'] }), 'wrong password'],
      [station({ identity: s.id, protocols: ['ocpp2.0.1'] }), 'no credentials'],
      [station({ identity: s.id, protocols: ['ocpp2.0.1'], headers: { authorization: basic(`${s.id}x`, s.password) } }), 'username is not the identity'],
      [station({ identity: s.id, protocols: ['ocpp2.0.1'], headers: { authorization: 'Bearer abc' } }), 'malformed Authorization header'],
      [station({ identity: bare.id, password: s.password, protocols: ['ocpp2.0.1'] }), 'asset has no password'],
    ];
    for (const [client, reason] of cases) {
      expect(await refusedWith(client), reason).toBe(401);
      expect(t.logLines().some((l) => l.includes('station login refused') && l.includes(reason))).toBe(true);
    }
    expect(await readStation(s.id)).toBeNull();
    expect(t.logLines().filter((l) => l.includes(s.password))).toEqual([]);
  });

  it('an unknown identity is 404 and costs no password hash: it is answered while the hashing queue is full', async () => {
    const releases: Array<() => void> = [];
    const held = Array.from({ length: passwordHashQueue.concurrency }, () => passwordHashQueue(() => new Promise<void>((r) => releases.push(r))));
    try {
      expect(await refusedWith(station({ identity: 'CP-no-such-station', password: 'whatever-password-1', protocols: ['ocpp2.0.1'] }))).toBe(404);
      expect(passwordHashQueue.pendingCount).toBe(0);
    } finally {
      for (const release of releases) release();
      await Promise.all(held);
    }
  });

  it('a wrong supplied password waits for its turn in the bounded hashing queue', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1', password: 'Another:Supplied-pass1' });
    const releases: Array<() => void> = [];
    const held = Array.from({ length: passwordHashQueue.concurrency }, () => passwordHashQueue(() => new Promise<void>((r) => releases.push(r))));
    const refused = refusedWith(station({ identity: s.id, password: 'Wrong:Supplied-password', protocols: ['ocpp2.0.1'] }));
    await eventually(() => expect(passwordHashQueue.pendingCount).toBe(1));
    for (const release of releases) release();
    await Promise.all(held);
    expect(await refused).toBe(401);
  });

  it('a station that hangs up while its password waits in the queue is never recorded as connected', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1', password: 'Hangs-up:while-queued1' });
    const releases: Array<() => void> = [];
    const held = Array.from({ length: passwordHashQueue.concurrency }, () => passwordHashQueue(() => new Promise<void>((r) => releases.push(r))));
    // The server's side of the connection: the queue is released only once the server has seen
    // the hang-up. Released sooner, the login may finish before the server reads the FIN, and a
    // station that hangs up at the moment it is accepted cannot be told from one that stays.
    const serverSockets: Socket[] = [];
    const onConnection = (connection: Socket) => serverSockets.push(connection);
    t.app.server.on('connection', onConnection);
    const socket = await new Promise<Socket>((resolve, reject) => {
      const req = httpRequest({
        host: '127.0.0.1',
        port: t.port,
        path: `/ocpp/${s.id}`,
        headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', 'sec-websocket-protocol': 'ocpp2.0.1', authorization: basic(s.id, s.password) },
      });
      req.on('socket', resolve);
      req.on('error', () => undefined);
      req.on('upgrade', () => reject(new Error('upgraded before the queue was released')));
      req.end();
    });
    await eventually(() => expect(passwordHashQueue.pendingCount).toBe(1));
    t.app.server.off('connection', onConnection);
    expect(serverSockets.length).toBeGreaterThan(0);
    socket.destroy();
    await Promise.all(serverSockets.map((connection) => (connection.destroyed ? undefined : new Promise((resolve) => connection.once('close', resolve)))));
    for (const release of releases) release();
    await Promise.all(held);
    await eventually(() => expect(t.logLines().some((l) => l.includes(s.id) && (l.includes('hung up before the login completed') || l.includes('hung up before its password was checked')))).toBe(true));
    expect(await readStation(s.id)).toBeNull();
  });

  it('profile 3 is never served, and profile 2 needs TLS: a plain connection gets 401', async () => {
    const p3 = await createAsset(t, { securityProfile: 3 });
    expect(await refusedWith(station({ identity: p3.id, password: 'irrelevant-password-1', protocols: ['ocpp2.0.1'] }))).toBe(401);
    const p2 = await provisionStation(t, { ocppVersion: '2.0.1', securityProfile: 2 });
    expect(await refusedWith(station({ identity: p2.id, password: p2.password, protocols: ['ocpp2.0.1'] }))).toBe(401);
    // X-Forwarded-Proto counts only from a trusted proxy (TRUST_PROXY is off here).
    expect(
      await refusedWith(station({ identity: p2.id, password: p2.password, protocols: ['ocpp2.0.1'], headers: { 'x-forwarded-proto': 'https' } })),
    ).toBe(401);
    expect(t.logLines().some((l) => l.includes('security profile 2 needs TLS'))).toBe(true);
  });

  it('behind a trusted proxy, X-Forwarded-Proto https meets profile 2', async () => {
    const p2 = await provisionStation(t, { ocppVersion: '2.0.1', securityProfile: 2 });
    const proxied = await siblingApp(t, { OCPP_MIN_SECURITY_PROFILE: '1', TRUST_PROXY: 'true' });
    try {
      await proxied.app.listen({ host: '127.0.0.1', port: 0 });
      const url = `ws://127.0.0.1:${(proxied.app.server.address() as AddressInfo).port}/ocpp`;
      const plain = stationClient(url, { identity: p2.id, password: p2.password, protocols: ['ocpp2.0.1'] });
      expect(await refusedWith(plain)).toBe(401);
      const spoofed = stationClient(url, { identity: p2.id, password: p2.password, protocols: ['ocpp2.0.1'], headers: { 'x-forwarded-proto': 'http, https' } });
      expect(await refusedWith(spoofed)).toBe(401);
      const client = stationClient(url, { identity: p2.id, password: p2.password, protocols: ['ocpp2.0.1'], headers: { 'x-forwarded-proto': 'https' } });
      await client.connect();
      expect(client.protocol).toBe('ocpp2.0.1');
      await client.close({ force: true });
    } finally {
      await proxied.close();
    }
  });

  it('other paths are no OCPP endpoint', async () => {
    for (const path of ['/ocpp', '/ocpp/', '/other/CP-1', '/ocpp/a/b', '/ocpp/%ZZ', `/ocpp/${'x'.repeat(129)}`]) {
      expect((await rawUpgrade(t.port, path, {})).status, path).toBe(404);
    }
  });
});

describe('subprotocols', () => {
  it.each([
    ['2.0.1', 'ocpp2.0.1'],
    ['1.6', 'ocpp1.6'],
  ] as const)('a %s asset offered both gets %s', async (ocppVersion, protocol) => {
    const s = await provisionStation(t, { ocppVersion });
    const client = await connected({ identity: s.id, password: s.password, protocols: ['ocpp1.6', 'ocpp2.0.1'] });
    expect(client.protocol).toBe(protocol);
  });

  it('a station that does not offer its version completes no OCPP session and is never connected', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    const client = station({ identity: s.id, password: s.password, protocols: ['ocpp1.6'] });
    await expect(client.connect()).rejects.toThrow(/no subprotocol/);
    expect(await readStation(s.id)).toBeNull();
  });

  it('per-message compression is declined', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    const res = await rawUpgrade(t.port, `/ocpp/${s.id}`, {
      authorization: basic(s.id, s.password),
      'sec-websocket-protocol': 'ocpp2.0.1',
      'sec-websocket-extensions': 'permessage-deflate; client_max_window_bits',
    });
    expect(res.status).toBe(101);
    expect(res.headers['sec-websocket-protocol']).toBe('ocpp2.0.1');
    expect(res.headers['sec-websocket-extensions']).toBeUndefined();
    res.socket!.destroy();
  });
});

describe('messages', () => {
  it.each([
    ['2.0.1', ['ocpp2.0.1'], 'Authorize', { idToken: { idToken: 'TAG1', type: 'ISO14443' } }],
    ['1.6', ['ocpp1.6'], 'Authorize', { idTag: 'TAG1' }],
  ] as const)('%s: an action the service does not handle gets NotImplemented; the socket stays open', async (ocppVersion, protocols, method, params) => {
    const s = await provisionStation(t, { ocppVersion });
    const client = await connected({ identity: s.id, password: ocppVersion === '1.6' ? Buffer.from(s.password, 'hex') : s.password, protocols: [...protocols] });
    await expect(client.call(method, params)).rejects.toMatchObject({ rpcErrorCode: 'NotImplemented' });
    expect(await client.call('Heartbeat', {})).toEqual({ currentTime: expect.stringMatching(ISO_MS) });
  });

  it.each([
    ['2.0.1', 'ocpp2.0.1', { reason: 'PowerUp' }],
    ['1.6', 'ocpp1.6', { chargePointVendor: 'ABB' }],
  ] as const)('%s: a malformed BootNotification gets the schema’s CALLERROR and the socket stays open', async (ocppVersion, protocol, params) => {
    const s = await provisionStation(t, { ocppVersion });
    // Not strict on the station's side, so the malformed call goes out.
    const client = await connected({ identity: s.id, password: s.password, protocols: [protocol], strictMode: false });
    // OCPP 2.0.1 spells it OccurenceConstraintViolation.
    await expect(client.call('BootNotification', params)).rejects.toMatchObject({ rpcErrorCode: expect.stringMatching(/^Occurr?enceConstraintViolation$/) });
    await expect(client.call('BootNotification', { ...params, extra: 1 })).rejects.toMatchObject({ rpcErrorCode: expect.stringMatching(/Violation$/) });
    expect(await client.call('Heartbeat', {})).toEqual({ currentTime: expect.stringMatching(ISO_MS) });
    expect((await connectionRow(s.id))!.vendor).toBeNull();
  });

  it('garbage that is not OCPP-J leaves the socket open', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    const client = await connected({ identity: s.id, password: s.password, protocols: ['ocpp2.0.1'] });
    client.sendRaw('this is not json');
    client.sendRaw('[9,"x"]');
    expect(await client.call('Heartbeat', {})).toEqual({ currentTime: expect.stringMatching(ISO_MS) });
  });
});

describe('connection state', () => {
  it('a second connection for the same identity replaces the first: the old socket is closed, the station stays connected', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    const first = await connected({ identity: s.id, password: s.password, protocols: ['ocpp2.0.1'] });
    const firstClosed = new Promise<{ code: number }>((resolve) => first.once('close', resolve));
    const second = await connected({ identity: s.id, password: s.password, protocols: ['ocpp2.0.1'] });
    expect((await firstClosed).code).toBe(1000);
    expect(await second.call('Heartbeat', {})).toEqual({ currentTime: expect.stringMatching(ISO_MS) });
    // The older socket's close must not disconnect the newer one.
    await eventually(async () => expect((await connectionRow(s.id))!.epoch).toBe(2));
    expect(await readStation(s.id)).toMatchObject({ connected: true });
    expect(t.app.stations.isConnectedHere(s.id)).toBe(true);
  });

  it('connections of one identity that arrive together (their claims share a batch) leave exactly one open, the one with the newest epoch', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    const clients = Array.from({ length: 5 }, () => station({ identity: s.id, password: s.password, protocols: ['ocpp2.0.1'] }));
    const closed = new Set<StationClient>();
    for (const c of clients) c.once('close', () => closed.add(c));
    await Promise.allSettled(clients.map((c) => c.connect()));
    await eventually(() => expect(closed.size).toBe(4));
    const survivor = clients.find((c) => !closed.has(c))!;
    expect(await survivor.call('Heartbeat', {})).toEqual({ currentTime: expect.stringMatching(ISO_MS) });
    expect((await connectionRow(s.id))!.epoch).toBe(5);
    expect(await readStation(s.id)).toMatchObject({ connected: true });
    expect(t.app.stations.isConnectedHere(s.id)).toBe(true);
    // A release clears the row only at its own epoch: the survivor's close disconnects the
    // station only if the survivor holds epoch 5.
    await survivor.close({ force: true });
    await eventually(async () => expect((await readStation(s.id)).connected).toBe(false));
  });

  it('stations that connect and boot together (their claims and boots share batches) each read their own boot right after its answer', async () => {
    const stations = await Promise.all(Array.from({ length: 40 }, () => provisionStation(t, { ocppVersion: '2.0.1' })));
    const clients = await Promise.all(stations.map((s) => connected({ identity: s.id, password: s.password, protocols: ['ocpp2.0.1'] })));
    // Each station is read as soon as its own answer is in, while the others' boots may still be
    // on their way: the boot is stored before its answer goes out, whatever batch it went in.
    const read = await Promise.all(
      clients.map(async (client, i) => {
        await client.call('BootNotification', { reason: 'PowerUp', chargingStation: { vendorName: `Vendor-${i}`, model: `Model-${i}`, serialNumber: `SN-${i}` } });
        return readStation(stations[i]!.id);
      }),
    );
    expect(read.map((r) => [r.vendor, r.model, r.serialNumber, r.firmwareVersion])).toEqual(stations.map((_, i) => [`Vendor-${i}`, `Model-${i}`, `SN-${i}`, null]));
    // Held here, each by its own claim. (What the API calls connected also needs this replica's
    // lease, renewed every 333 ms for 1 s here: on a loaded machine it may lapse for a moment, which
    // says nothing about claims and boots sharing batches.)
    const rows = await Promise.all(stations.map((s) => connectionRow(s.id)));
    expect(rows.map((r) => [r!.replicaId, r!.epoch])).toEqual(stations.map(() => [t.app.stations.replicaId, 1]));
    expect(stations.every((s) => t.app.stations.isConnectedHere(s.id))).toBe(true);
  });

  it('a disconnect reads connected: false, and connectedAt/lastSeenAt stay', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    const client = await connected({ identity: s.id, password: s.password, protocols: ['ocpp2.0.1'] });
    await client.call('BootNotification', BOOT_201);
    const before = await readStation(s.id);
    await client.close({ code: 1000 });
    await eventually(async () => expect((await readStation(s.id)).connected).toBe(false));
    expect(await readStation(s.id)).toEqual({ ...before, connected: false, lastSeenAt: expect.stringMatching(ISO_MS) });
  });

  it('a station that never sends a message stays connected on pings, and its lastSeenAt moves with its pongs', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    await connected({ identity: s.id, password: s.password, protocols: ['ocpp2.0.1'] });
    const first = await readStation(s.id);
    // Pings every second; each pong counts as seen and is written in the next batch.
    await eventually(async () => expect(Date.parse((await readStation(s.id)).lastSeenAt)).toBeGreaterThan(Date.parse(first.lastSeenAt)), 100);
    expect(await readStation(s.id)).toMatchObject({ connected: true });
  });

  it('heartbeats move the stored lastSeenAt in writes at least the write interval apart, never one per heartbeat, and it lags the last one by no more than that interval and a flush', async () => {
    // OCPP_LEASE_SECONDS 1 here: written at most once a second, looked at every 333 ms.
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    const client = await connected({ identity: s.id, password: s.password, protocols: ['ocpp2.0.1'] });
    let lastBeat = Date.now();
    let beating = true;
    let beats = 0;
    const beatingDone = (async () => {
      while (beating) {
        await client.call('Heartbeat', {});
        lastBeat = Date.now();
        beats++;
        await sleep(25);
      }
    })();
    const stored: number[] = [];
    const lags: number[] = [];
    const until = Date.now() + 4000;
    while (Date.now() < until) {
      const beatBefore = lastBeat;
      const seen = (await connectionRow(s.id))!.lastSeenAt.getTime();
      if (stored.at(-1) !== seen) stored.push(seen);
      lags.push(beatBefore - seen);
      await sleep(20);
    }
    beating = false;
    await beatingDone;
    const gaps = stored.slice(1).map((v, i) => v - stored[i]!);
    expect(beats).toBeGreaterThan(40);
    // The claim's value, then a write within the first interval, then one a second or so.
    expect(stored.length).toBeGreaterThanOrEqual(3);
    expect(stored.length).toBeLessThanOrEqual(7);
    // Stored values are times of heartbeats 25 ms apart, so a write interval of 1 s puts them ~1 s
    // apart; a write per heartbeat or per 333 ms look would not (the bound leaves room for a busy
    // machine's stalls).
    for (const gap of gaps.slice(1)) expect(gap).toBeGreaterThanOrEqual(500);
    expect(Math.max(...lags)).toBeLessThan(1000 + 333 + 1500);
  });

  it('only a silent socket is pinged: a station that sends a message within the interval is not, and both stay connected', async () => {
    // ws, the library under ocpp-rpc, as a bare client: it shows the pings it receives.
    const [quiet, busy] = await Promise.all([provisionStation(t, { ocppVersion: '2.0.1' }), provisionStation(t, { ocppVersion: '2.0.1' })]);
    const open = (s: { id: string; password: string }) =>
      new Promise<{ socket: WebSocket; pings: () => number }>((resolve, reject) => {
        const socket = new WebSocket(`${t.endpoint}/${s.id}`, ['ocpp2.0.1'], { headers: { authorization: basic(s.id, s.password) } });
        let pings = 0;
        socket.on('ping', () => (pings += 1));
        socket.once('open', () => resolve({ socket, pings: () => pings }));
        socket.once('error', reject);
      });
    const [q, b] = await Promise.all([open(quiet), open(busy)]);
    try {
      let n = 0;
      // A Heartbeat every 200 ms against OCPP_PING_INTERVAL_SECONDS 1.
      const beats = setInterval(() => b.socket.send(JSON.stringify([2, `hb-${n++}`, 'Heartbeat', {}])), 200);
      await sleep(3500);
      clearInterval(beats);
      expect(q.pings()).toBeGreaterThanOrEqual(2);
      expect(b.pings()).toBe(0);
      expect(n).toBeGreaterThan(10);
      expect([(await readStation(quiet.id)).connected, (await readStation(busy.id)).connected]).toEqual([true, true]);
    } finally {
      q.socket.terminate();
      b.socket.terminate();
    }
  });

  it('a socket that stops answering pings is closed and reads disconnected', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    // A hand-written handshake never answers a ping.
    const res = await rawUpgrade(t.port, `/ocpp/${s.id}`, { authorization: basic(s.id, s.password), 'sec-websocket-protocol': 'ocpp2.0.1' });
    expect(res.status).toBe(101);
    const closed = new Promise<void>((resolve) => res.socket!.once('close', () => resolve()));
    res.socket!.on('data', () => undefined);
    expect(await readStation(s.id)).toMatchObject({ connected: true });
    await closed;
    await eventually(async () => expect((await readStation(s.id)).connected).toBe(false));
  });
});

describe('two replicas on one database', () => {
  it('the newest connection wins across replicas: the older replica closes its socket when its lease renewal reads the takeover', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    const other = await siblingApp(t, { OCPP_MIN_SECURITY_PROFILE: '1', OCPP_LEASE_SECONDS: '1' });
    try {
      await other.app.listen({ host: '127.0.0.1', port: 0 });
      const first = await connected({ identity: s.id, password: s.password, protocols: ['ocpp2.0.1'] });
      const firstClosed = new Promise<{ code: number }>((resolve) => first.once('close', resolve));
      const second = stationClient(`ws://127.0.0.1:${(other.app.server.address() as AddressInfo).port}/ocpp`, {
        identity: s.id,
        password: s.password,
        protocols: ['ocpp2.0.1'],
      });
      await second.connect();
      expect((await firstClosed).code).toBe(1000);
      expect(t.app.stations.isConnectedHere(s.id)).toBe(false);
      expect(other.app.stations.isConnectedHere(s.id)).toBe(true);
      expect(await readStation(s.id)).toMatchObject({ connected: true });
      expect((await connectionRow(s.id))!.replicaId).toBe(other.app.stations.replicaId);
      await second.close({ force: true });
    } finally {
      await other.close();
    }
  });

  it('a claim by another replica leaves the older replica a takeover notice with the new epoch; a first claim, a re-claim by the same replica and a release leave none; a notice raised after it was read outlives its deletion', async () => {
    const [a, b] = [`rep_a_${Date.now()}`, `rep_b_${Date.now()}`];
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    const db = t.database.db;
    const claim = async (replicaId: string) => (await claimStations(db, [{ assetId: s.id, replicaId, network: s.network, protocol: 'ocpp2.0.1' }], stationEvents))[0]!;
    const e1 = await claim(a);
    const e2 = await claim(a);
    await releaseStations(db, [{ assetId: s.id, epoch: e2, lastSeenAt: new Date() }], stationEvents);
    const e3 = await claim(a);
    expect(await findStationTakeovers(db, a)).toEqual([]);
    const e4 = await claim(b);
    expect([e1, e2, e3, e4]).toEqual([1, 2, 3, 4]);
    expect(await findStationTakeovers(db, a)).toEqual([{ assetId: s.id, epoch: e4 }]);
    // Taken twice before it is acted on: one notice, with the newest epoch.
    await claim(a);
    const e6 = await claim(b);
    const read = await findStationTakeovers(db, a);
    expect(read).toEqual([{ assetId: s.id, epoch: e6 }]);
    // Taken again between the read and the delete: that notice stays.
    await claim(a);
    const e8 = await claim(b);
    await deleteStationTakeovers(db, a, read);
    expect(await findStationTakeovers(db, a)).toEqual([{ assetId: s.id, epoch: e8 }]);
    await deleteStationTakeovers(db, a, await findStationTakeovers(db, a));
    expect(await findStationTakeovers(db, a)).toEqual([]);
    expect(await findStationTakeovers(db, b)).toEqual([{ assetId: s.id, epoch: e8 - 1 }]);
  });

  it('a replica that shuts down marks its stations disconnected at once', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    const other = await siblingApp(t, { OCPP_MIN_SECURITY_PROFILE: '1' });
    await other.app.listen({ host: '127.0.0.1', port: 0 });
    const client = stationClient(`ws://127.0.0.1:${(other.app.server.address() as AddressInfo).port}/ocpp`, {
      identity: s.id,
      password: s.password,
      protocols: ['ocpp2.0.1'],
    });
    await client.connect();
    const closed = new Promise<{ code: number }>((resolve) => client.once('close', resolve));
    expect(await readStation(s.id)).toMatchObject({ connected: true });
    await other.close();
    await closed;
    // Read through this replica, which never held the station.
    expect(await readStation(s.id)).toMatchObject({ connected: false });
  });

  it('a replica that shuts down first writes what its stations were last seen at, though their writes were not due (lastSeenAt is written at most every 30 s)', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    // The default lease: each station's lastSeenAt is written at most every 30 s.
    const other = await siblingApp(t, { OCPP_MIN_SECURITY_PROFILE: '1' });
    await other.app.listen({ host: '127.0.0.1', port: 0 });
    const client = stationClient(`ws://127.0.0.1:${(other.app.server.address() as AddressInfo).port}/ocpp`, {
      identity: s.id,
      password: s.password,
      protocols: ['ocpp2.0.1'],
    });
    await client.connect();
    const claimed = (await connectionRow(s.id))!.lastSeenAt.getTime();
    await sleep(200);
    const lastBeat = Date.now();
    await client.call('Heartbeat', {});
    await other.close();
    const row = (await connectionRow(s.id))!;
    expect(lastBeat).toBeGreaterThan(claimed);
    expect(row.lastSeenAt.getTime()).toBeGreaterThanOrEqual(lastBeat);
    expect(row.replicaId).toBeNull();
    await client.close({ force: true });
  });

  it('a replica whose lease has run out reads disconnected on every replica', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    // What a replica that died leaves behind: its stations' rows and a lease nobody renews.
    const dead = `rep_dead_${s.id}`;
    await t.database.db.execute(sql`insert into station_replicas (id, lease_expires_at) values (${dead}, now() + interval '30 seconds')`);
    await claimStations(t.database.db, [{ assetId: s.id, replicaId: dead, network: s.network, protocol: 'ocpp2.0.1' }], stationEvents);
    expect(await readStation(s.id)).toMatchObject({ connected: true });
    await t.database.db.execute(sql`update station_replicas set lease_expires_at = now() - interval '1 millisecond' where id = ${dead}`);
    expect(await readStation(s.id)).toMatchObject({ connected: false });
  });
});

// ---------------------------------------------------------------------------------------------
// Two real service processes on one PostgreSQL database (docs/stations.md, "Connection state"): a station connected to
// one reads connected through the other; a replica that stops marks its stations disconnected; a
// replica that dies is found out by its lease; the lease survives terminated backends.

const LEASE_SECONDS = 2;

interface Replica {
  child: ChildProcess;
  base: string;
  endpoint: string;
  stdout(): string;
  stderr(): string;
  exited: Promise<[number | null, NodeJS.Signals | null]>;
  service: Awaited<ReturnType<typeof startService>>;
}

async function startReplica(databaseEnv: Record<string, string>): Promise<Replica> {
  const r = await startService({
    LOG_LEVEL: 'error',
    ...databaseEnv,
    DATABASE_POOL_MAX: '4',
    // One issuer for both, as behind one load balancer: a token of one is good at the other.
    AUTH_ISSUER: 'http://cns.test',
    OCPP_MIN_SECURITY_PROFILE: '1',
    OCPP_LEASE_SECONDS: String(LEASE_SECONDS),
  });
  const exited = r.exited.then(({ code, signal }): [number | null, NodeJS.Signals | null] => [code, signal]);
  return { child: r.child, base: r.base, endpoint: r.endpoint, stdout: () => r.output.stdout, stderr: () => r.output.stderr, exited, service: r };
}

async function api(base: string, token: string, path: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as { data: Record<string, unknown> } };
}

const onServer = process.env.DATABASE_URL ? describe : undefined;

onServer?.('two service processes on one database (PostgreSQL)', () => {
  const replicas: Replica[] = [];
  const stations: StationClient[] = [];
  let dropDatabase: (() => Promise<void>) | undefined;

  afterAll(async () => {
    await Promise.all(stations.map((s) => s.close({ force: true }).catch(() => undefined)));
    for (const r of replicas) {
      if (r.child.exitCode === null && r.child.signalCode === null) {
        r.child.kill('SIGKILL');
        await r.exited;
      }
    }
    await dropDatabase?.();
  });

  it(
    'a station on one replica reads connected on the other; SIGTERM reads disconnected at once, kill -9 once the lease runs out; terminated backends change nothing (PostgreSQL)',
    async () => {
      const database = await createServerDatabase();
      dropDatabase = database.drop;
      const a = await startReplica(database.env);
      replicas.push(a);
      const { token } = await bootstrapToken(a.service);
      const b = await startReplica(database.env);
      replicas.push(b);

      const id = 'CP-replicas-1';
      expect((await api(a.base, token, '/asset-management/v1/assets', { id, network: 'net_replicas', securityProfile: 1 })).status).toBe(201);
      const changed = await api(b.base, token, '/asset-management/v1/assets/change-password', { id });
      expect(changed.status).toBe(200);
      const password = changed.body.data.password as string;
      const readThroughB = async () => (await api(b.base, token, `/asset-management/v1/assets/${id}`)).body.data.station as Record<string, unknown> | null;

      // Connected to A, read through B.
      const first = stationClient(a.endpoint, { identity: id, password, protocols: ['ocpp2.0.1'] });
      stations.push(first);
      await first.connect();
      await first.call('BootNotification', { reason: 'PowerUp', chargingStation: { vendorName: 'Kempower', model: 'S-Series' } });
      expect(await readThroughB()).toMatchObject({ connected: true, protocol: 'ocpp2.0.1', vendor: 'Kempower', model: 'S-Series' });

      // The hardening storm: every backend of the database terminated, again and again. A keeps
      // its station, its lease comes back, and nothing reaches the process as an unhandled error.
      const killer = new pg.Client({ connectionString: process.env.DATABASE_URL });
      await killer.connect();
      let terminated = 0;
      try {
        const until = Date.now() + 2000;
        while (Date.now() < until) {
          const { rows } = await killer.query<{ ok: boolean }>(
            'SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
            [database.name],
          );
          terminated += rows.filter((r) => r.ok).length;
          await sleep(100);
        }
      } finally {
        await killer.end();
      }
      expect(terminated).toBeGreaterThan(0);
      expect([a.child.exitCode, b.child.exitCode]).toEqual([null, null]);
      expect(await first.call('Heartbeat', {})).toEqual({ currentTime: expect.any(String) });
      await eventually(async () => expect(await readThroughB()).toMatchObject({ connected: true }), 200);
      expect(a.stderr() + b.stderr()).toBe('');

      // SIGTERM: A marks its stations disconnected before it exits.
      const firstClosed = new Promise<void>((resolve) => first.once('close', () => resolve()));
      a.child.kill('SIGTERM');
      expect(await a.exited).toEqual([0, null]);
      await firstClosed;
      expect(await readThroughB()).toMatchObject({ connected: false });

      // kill -9: nothing is marked; the lease that C no longer renews runs out.
      const c = await startReplica(database.env);
      replicas.push(c);
      const second = stationClient(c.endpoint, { identity: id, password, protocols: ['ocpp2.0.1'] });
      stations.push(second);
      await second.connect();
      expect(await readThroughB()).toMatchObject({ connected: true });
      c.child.kill('SIGKILL');
      await c.exited;
      await eventually(async () => expect(await readThroughB()).toMatchObject({ connected: false }), 100);
    },
    120_000,
  );
});
