// Stations are refused or wait, never crash the process (docs/stations.md): crowds of refused
// stations retrying together, a database that answers slowly during a login storm, garbage and
// oversized frames, a flood of calls, and upgrade requests that never finish arriving.
import { connect, type AddressInfo, type Socket } from 'node:net';
import { request as httpRequest } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { HASH_CONCURRENCY, passwordHashQueue } from '../../src/asset-management/password-hash-queue.js';
import { otherSession, waitForLockWaiters } from '../helpers/test-database.js';
import { ASSET_WRITER, createAsset } from '../helpers/asset-factory.js';
import { listPayments, recordPayment } from '../helpers/payments-factory.js';
import { basic, provisionStation, refusedWith, stationClient, useStationApp, type StationClient } from '../helpers/station-factory.js';
import { createTestApp, type TestApp } from '../helpers/test-app.js';
import { eventually } from '../helpers/eventually.js';
import { MAX_CALLS_IN_PROGRESS } from '../../src/stations/station-bounds.js';

// Every slow hash (argon2id) of the process, counted where it starts and while it runs: the one
// place all supplied-password hashing goes through, whichever queue let it in.
const slowHashRuns = vi.hoisted(() => ({ started: 0, running: 0, maxRunning: 0 }));
vi.mock('argon2', async (importOriginal) => {
  const argon2 = (await importOriginal<{ default: typeof import('argon2') }>()).default;
  async function countedHash(...args: Parameters<typeof argon2.hash>) {
    slowHashRuns.started += 1;
    slowHashRuns.running += 1;
    slowHashRuns.maxRunning = Math.max(slowHashRuns.maxRunning, slowHashRuns.running);
    try {
      return await argon2.hash(...args);
    } finally {
      slowHashRuns.running -= 1;
    }
  }
  return { default: { ...argon2, hash: countedHash } };
});

function resetSlowHashRuns(): void {
  slowHashRuns.started = 0;
  slowHashRuns.maxRunning = slowHashRuns.running;
}

// Small, so upgrade requests that never finish arriving are ended within a few seconds.
const REQUEST_TIMEOUT_MS = 1000;

const t = useStationApp({ env: { REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS) } });

// Loopback addresses other than 127.0.0.1 for the crowds: the login throttle counts refusals per
// address, and a crowd from one address would be throttled (that has a test file of its own).
function crowdAddress(i: number): string {
  return `127.0.${100 + Math.floor(i / 250)}.${(i % 250) + 1}`;
}

// Stations with supplied passwords: a wrong login of each costs a slow hash.
async function suppliedStations(count: number, prefix: string) {
  const stations: Array<Awaited<ReturnType<typeof provisionStation>>> = [];
  for (let from = 0; from < count; from += 25) {
    const batch = Array.from({ length: Math.min(25, count - from) }, (_, i) => `${prefix}-${String(from + i).padStart(4, '0')}-pass`);
    stations.push(...(await Promise.all(batch.map((password) => provisionStation(t, { ocppVersion: '2.0.1', password })))));
  }
  return stations;
}

function station(options: Parameters<typeof stationClient>[1], url = t.endpoint): StationClient {
  const client = stationClient(url, options);
  t.open.push(client);
  return client;
}

async function connected(options: Parameters<typeof stationClient>[1], url = t.endpoint): Promise<StationClient> {
  const client = station(options, url);
  await client.connect();
  return client;
}

// Over the network, not app.inject: what a client of the API sees while stations crowd the port.
function httpGet(path: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: t.port, path, headers, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

// An upgrade request whose answer the test never waits for: the socket it went out on.
function pendingUpgrade(path: string, headers: Record<string, string>, localAddress?: string): Promise<Socket> {
  return new Promise((resolve) => {
    const req = httpRequest({
      host: '127.0.0.1',
      port: t.port,
      path,
      agent: false,
      ...(localAddress ? { localAddress } : {}),
      headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', ...headers },
    });
    req.on('socket', resolve);
    req.on('error', () => undefined);
    req.end();
  });
}

function serverConnections(): Promise<number> {
  return new Promise((resolve, reject) => t.app.server.getConnections((err, count) => (err ? reject(err) : resolve(count))));
}

function readAsset(app: TestApp, id: string) {
  return app.app.inject({ url: `/asset-management/v1/assets/${id}`, headers: { authorization: app.bearer({ scopes: ['read:asset'] }) } });
}

// Each status with how many stations got it.
function tally(codes: number[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const code of codes) counts[code] = (counts[code] ?? 0) + 1;
  return counts;
}

function closeCode(client: StationClient): Promise<number> {
  return new Promise((resolve) => client.once('close', ({ code }: { code: number }) => resolve(code)));
}

describe('crowds of refused stations retrying together', () => {
  it('300 stations with a wrong supplied password: one hash each, never more than HASH_CONCURRENCY at once, all 401, and the API answers while they queue', async () => {
    const CROWD = 300;
    // Ten stations per address: under the throttle's burst and the queue's share of an address.
    const PER_ADDRESS = 10;
    const crowdStations = await suppliedStations(CROWD, 'Crowd:Supplied');
    const s = crowdStations[0]!;
    const other = await createAsset(t, { ocppVersion: '2.0.1', securityProfile: 1 });
    const payment = await recordPayment(t);
    resetSlowHashRuns();

    // The hashing queue is held until the whole crowd has queued, so the API calls below meet
    // the storm at its largest whatever the speed of the machine.
    const releases: Array<() => void> = [];
    const held = Array.from({ length: passwordHashQueue.concurrency }, () => passwordHashQueue(() => new Promise<void>((r) => releases.push(r))));
    const crowd = crowdStations.map((c, i) =>
      refusedWith(station({ identity: c.id, password: 'Wrong:Supplied-pass-01', protocols: ['ocpp2.0.1'], wsOpts: { localAddress: crowdAddress(Math.floor(i / PER_ADDRESS)) } })),
    );
    const queue = t.app.stations.loginQueue;
    await vi.waitFor(() => expect(queue.waiting).toBe(CROWD), { timeout: 20_000, interval: 20 });

    // How much of the crowd was still waiting when each API answer arrived.
    const waitingAtAnswer: Record<string, number> = {};
    const answered = (name: string) => (status: number) => {
      waitingAtAnswer[name] = queue.waiting;
      return status;
    };
    const reads = [
      readAsset(t, s.id).then((res) => answered('asset read')(res.statusCode)),
      listPayments(t, `sessionIds=${payment.session}`).then((res) => answered('payments list')(res.statusCode)),
      httpGet('/healthz').then(answered('healthz')),
      // A password change hashes too: it waits behind at most one round of logins, not the crowd.
      t.app
        .inject({
          method: 'POST',
          url: '/asset-management/v1/assets/change-password',
          headers: { authorization: t.bearer(ASSET_WRITER) },
          payload: { id: other.id, password: 'Changed:During-the-storm' },
        })
        .then((res) => answered('password change')(res.statusCode)),
    ];
    await vi.waitFor(() => expect(passwordHashQueue.pendingCount).toBe(HASH_CONCURRENCY + 1), { timeout: 10_000, interval: 10 });
    for (const release of releases) release();
    await Promise.all(held);

    expect(await Promise.all(reads)).toEqual([200, 200, 200, 200]);
    for (const [name, waiting] of Object.entries(waitingAtAnswer)) expect(waiting, name).toBeGreaterThan(0);
    expect(tally(await Promise.all(crowd))).toEqual({ 401: CROWD });
    // One hash per attempt, plus the password change's.
    expect(slowHashRuns.started).toBe(CROWD + 1);
    expect(slowHashRuns.maxRunning).toBeLessThanOrEqual(HASH_CONCURRENCY);
    expect(t.logLines().filter((l) => l.includes('Wrong:Supplied-pass-01') || l.includes('Crowd:Supplied'))).toEqual([]);
    // The station itself still gets in.
    expect((await connected({ identity: s.id, password: s.password, protocols: ['ocpp2.0.1'] })).protocol).toBe('ocpp2.0.1');
  });

  it('stations that hang up while their login waits in the queue cost no hash when their turn comes', async () => {
    const GAVE_UP = 50;
    const impatient = await suppliedStations(GAVE_UP, 'Impatient:Supplied');
    resetSlowHashRuns();
    const releases: Array<() => void> = [];
    const held = Array.from({ length: passwordHashQueue.concurrency }, () => passwordHashQueue(() => new Promise<void>((r) => releases.push(r))));
    const sockets = await Promise.all(
      impatient.map((s, i) =>
        pendingUpgrade(`/ocpp/${s.id}`, { authorization: basic(s.id, 'Impatient:Wrong-pass-01'), 'sec-websocket-protocol': 'ocpp2.0.1' }, crowdAddress(200 + Math.floor(i / 10))),
      ),
    );
    const queue = t.app.stations.loginQueue;
    await vi.waitFor(() => expect(queue.waiting).toBe(GAVE_UP), { timeout: 10_000, interval: 10 });
    const before = await serverConnections();
    for (const socket of sockets) socket.destroy();
    // The server has seen every one of them go before their turn comes.
    await vi.waitFor(async () => expect(await serverConnections()).toBeLessThanOrEqual(before - GAVE_UP), { timeout: 10_000, interval: 10 });
    for (const release of releases) release();
    await Promise.all(held);
    await vi.waitFor(() => expect(queue.waiting + queue.running).toBe(0), { timeout: 10_000, interval: 10 });
    // A login's check is chosen when its turn comes, so none of them was hashed.
    expect(slowHashRuns.started).toBe(0);
    for (const s of impatient) {
      expect(t.logLines().filter((l) => l.includes(s.id) && l.includes('hung up before its password was checked')).length, s.id).toBe(1);
    }
  });

  it('500 unknown identities at once cost no hash at all: all 404', async () => {
    resetSlowHashRuns();
    const codes = await Promise.all(
      Array.from({ length: 500 }, (_, i) =>
        refusedWith(station({ identity: `CP-unknown-${i}`, password: 'Some:Password-of-16+', protocols: ['ocpp2.0.1'], wsOpts: { localAddress: crowdAddress(300 + Math.floor(i / 10)) } })),
      ),
    );
    expect(tally(codes)).toEqual({ 404: 500 });
    expect(slowHashRuns.started).toBe(0);
  });
});

describe('garbage and abuse from a connected station', () => {
  it('an oversized message closes that socket only (1009); the other station and the API carry on', async () => {
    const [a, b] = await Promise.all([provisionStation(t), provisionStation(t)]);
    const abuser = await connected({ identity: a.id, password: a.password, protocols: ['ocpp2.0.1'] });
    const bystander = await connected({ identity: b.id, password: b.password, protocols: ['ocpp2.0.1'] });
    const closed = closeCode(abuser);
    abuser.sendRaw(JSON.stringify([2, 'big', 'DataTransfer', { vendorId: 'x', data: 'x'.repeat(1024 * 1024) }]));
    expect(await closed).toBe(1009);
    expect(await bystander.call('Heartbeat', {})).toEqual({ currentTime: expect.any(String) });
    expect(await httpGet('/healthz')).toBe(200);
    await eventually(async () => expect((await readAsset(t, a.id)).json().data.station.connected).toBe(false));
    expect((await readAsset(t, b.id)).json().data.station.connected).toBe(true);
  });

  it('binary frames, garbage and frames of every other kind of nonsense leave the process serving and the socket usable', async () => {
    const [a, b] = await Promise.all([provisionStation(t), provisionStation(t)]);
    const abuser = await connected({ identity: a.id, password: a.password, protocols: ['ocpp2.0.1'] });
    const bystander = await connected({ identity: b.id, password: b.password, protocols: ['ocpp2.0.1'] });
    // The library sends a Buffer as a binary frame; its typings say string.
    const send = (frame: string | Buffer) => abuser.sendRaw(frame as string);
    send(Buffer.from([0xff, 0xfe, 0x00, 0x80, 0xc3]));
    send(Buffer.from(JSON.stringify([2, 'bin', 'Heartbeat', {}])));
    for (const garbage of ['', 'null', '{}', '[]', '[2]', '[2,1,2,3]', '[3,"nobody-asked",{}]', '[4,"x","y","z",{}]', '[2,"x",{},{}]', '\u0000', '"'.repeat(1000), '['.repeat(10_000)]) {
      send(garbage);
    }
    expect(await abuser.call('Heartbeat', {})).toEqual({ currentTime: expect.any(String) });
    expect(await bystander.call('Heartbeat', {})).toEqual({ currentTime: expect.any(String) });
    expect(await httpGet('/healthz')).toBe(200);
  });

  it('a flood of calls without waiting for answers: the flooding station is closed (1008), the process keeps serving and another station is answered', async () => {
    const [a, b] = await Promise.all([provisionStation(t), provisionStation(t)]);
    const abuser = await connected({ identity: a.id, password: a.password, protocols: ['ocpp2.0.1'] });
    const bystander = await connected({ identity: b.id, password: b.password, protocols: ['ocpp2.0.1'] });
    const FLOOD = 2000;
    let answers = 0;
    abuser.on('message', ({ outbound }: { outbound: boolean }) => {
      if (!outbound) answers += 1;
    });
    const closed = closeCode(abuser);
    const status = { timestamp: new Date().toISOString(), connectorStatus: 'Available', evseId: 1, connectorId: 1 };
    for (let i = 0; i < FLOOD; i++) {
      abuser.sendRaw(JSON.stringify(i % 2 ? [2, `hb-${i}`, 'Heartbeat', {}] : [2, `sn-${i}`, 'StatusNotification', status]));
    }
    expect(await bystander.call('BootNotification', { reason: 'PowerUp', chargingStation: { vendorName: 'V', model: 'M' } })).toMatchObject({ status: 'Accepted' });
    expect(await httpGet('/healthz')).toBe(200);
    expect((await readAsset(t, b.id)).statusCode).toBe(200);
    // Only the calls within the bound were answered (station-bounds.test.ts has the details).
    expect(await closed).toBe(1008);
    expect(answers).toBeLessThanOrEqual(MAX_CALLS_IN_PROGRESS);
  });
});

describe('upgrade requests that never finish arriving', () => {
  it('500 half-open upgrade requests: other requests are served, and REQUEST_TIMEOUT_MS ends every one of them', async () => {
    const s = await provisionStation(t);
    const HALF_OPEN = 500;
    const sockets: Socket[] = [];
    const ended = Array.from(
      { length: HALF_OPEN },
      (_, i) =>
        new Promise<string>((resolve, reject) => {
          const socket = connect({ host: '127.0.0.1', port: t.port });
          sockets.push(socket);
          let received = '';
          socket.on('data', (chunk) => (received += chunk.toString('latin1')));
          socket.on('error', reject);
          socket.on('close', () => resolve(received.split('\r\n')[0] ?? ''));
          // Headers without the blank line that ends them: the request never arrives.
          socket.write(`GET /ocpp/CP-half-open-${i} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n`);
        }),
    );
    try {
      await Promise.all(sockets.map((socket) => new Promise<void>((resolve) => (socket.connecting ? socket.once('connect', () => resolve()) : resolve()))));
      expect(await httpGet('/healthz')).toBe(200);
      expect((await connected({ identity: s.id, password: s.password, protocols: ['ocpp2.0.1'] })).protocol).toBe('ocpp2.0.1');
      const firstLines = await Promise.race([
        Promise.all(ended),
        sleep(REQUEST_TIMEOUT_MS + 15_000).then(() => {
          throw new Error('half-open upgrade requests were still open long after REQUEST_TIMEOUT_MS');
        }),
      ]);
      expect(tally(firstLines.map((line) => (line.startsWith('HTTP/1.1 408') ? 408 : -1)))).toEqual({ 408: HALF_OPEN });
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  });
});

// ---------------------------------------------------------------------------------------------
// PostgreSQL: another session holds the lock a login's write needs.

const onServer = process.env.DATABASE_URL ? describe : undefined;


onServer?.('a database that answers slowly during a login storm (PostgreSQL)', () => {
  const STATEMENT_TIMEOUT_MS = 1500;
  let slow: TestApp;
  let slowEndpoint: string;
  beforeAll(async () => {
    slow = await createTestApp({
      captureLogs: true,
      env: { OCPP_MIN_SECURITY_PROFILE: '1', DATABASE_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS) },
    });
    await slow.app.listen({ host: '127.0.0.1', port: 0 });
    slowEndpoint = `ws://127.0.0.1:${(slow.app.server.address() as AddressInfo).port}/ocpp`;
  });
  afterAll(async () => {
    await slow?.close();
  });

  it('stations whose claim waits on a locked row wait, or are refused with 503 past the statement timeout; the API answers meanwhile; afterwards they log in (PostgreSQL)', async () => {
    const STORM = 10;
    const stations = await Promise.all(Array.from({ length: STORM }, () => provisionStation(slow)));
    const ids = stations.map((s) => s.id);
    const login = (s: (typeof stations)[number]) => station({ identity: s.id, password: s.password, protocols: ['ocpp2.0.1'] }, slowEndpoint);
    const holder = await otherSession(slow.database);
    const watcher = await otherSession(slow.database);
    const lockConnectionRows = async () => {
      await holder.query('begin');
      await holder.query('select asset_id from station_connections where asset_id = any($1) for update', [ids]);
    };
    const allDisconnected = async () => {
      for (const id of ids) await eventually(async () => expect((await readAsset(slow, id)).json().data.station.connected).toBe(false));
    };
    try {
      // Each station has logged in once, so each has a connection row its next login rewrites.
      const first = await Promise.all(stations.map((s) => connected({ identity: s.id, password: s.password, protocols: ['ocpp2.0.1'] }, slowEndpoint)));
      await Promise.all(first.map((c) => c.close({ force: true })));
      await allDisconnected();

      // Waiting: another session holds the rows, and lets go before the statement timeout. Claims
      // go in batches, one statement at a time: the first waits on the lock, the rest behind it.
      await lockConnectionRows();
      let connectedEarly = 0;
      const waiting = stations.map((s) => {
        const client = login(s);
        return client.connect().then(() => {
          connectedEarly += 1;
          return client.protocol;
        });
      });
      await waitForLockWaiters(watcher, 1);
      await sleep(300);
      expect(connectedEarly).toBe(0);
      await holder.query('rollback');
      expect(await Promise.all(waiting)).toEqual(Array(STORM).fill('ocpp2.0.1'));
      await Promise.all(t.open.splice(-STORM).map((c) => c.close({ force: true })));
      await allDisconnected();

      // Refused: held past the statement timeout, every station gets a 503 and none reads connected.
      await lockConnectionRows();
      const refused = Promise.all(stations.map((s) => refusedWith(login(s))));
      await waitForLockWaiters(watcher, 1);
      expect((await slow.app.inject({ url: '/healthz' })).statusCode).toBe(200);
      const reads = await Promise.all(ids.map((id) => readAsset(slow, id)));
      expect(reads.map((r) => r.statusCode)).toEqual(Array(STORM).fill(200));
      expect(tally(await refused)).toEqual({ 503: STORM });
      for (const read of await Promise.all(ids.map((id) => readAsset(slow, id)))) expect(read.json().data.station.connected).toBe(false);
      await holder.query('rollback');

      // Afterwards they log in.
      const again = await Promise.all(stations.map((s) => connected({ identity: s.id, password: s.password, protocols: ['ocpp2.0.1'] }, slowEndpoint)));
      expect(again.map((c) => c.protocol)).toEqual(Array(STORM).fill('ocpp2.0.1'));
      for (const read of await Promise.all(ids.map((id) => readAsset(slow, id)))) expect(read.json().data.station.connected).toBe(true);
      expect(slow.logLines().filter((l) => stations.some((s) => l.includes(s.password)))).toEqual([]);
    } finally {
      await holder.query('rollback').catch(() => undefined);
      await holder.end();
      await watcher.end();
    }
  });

  it('a call whose write fails past the statement timeout gets a bare InternalError: the failed query stays in the log (PostgreSQL)', async () => {
    const s = await provisionStation(slow);
    const client = await connected({ identity: s.id, password: s.password, protocols: ['ocpp2.0.1'] }, slowEndpoint);
    const holder = await otherSession(slow.database);
    try {
      await holder.query('begin');
      await holder.query('select asset_id from station_connections where asset_id = $1 for update', [s.id]);
      const boot = { reason: 'PowerUp', chargingStation: { vendorName: 'Vendor-in-the-query', model: 'M' } };
      const error = (await client.call('BootNotification', boot).then(
        () => {
          throw new Error('the boot was answered');
        },
        (e: unknown) => e,
      )) as { rpcErrorCode?: string; message?: string; details?: unknown };
      expect(error).toMatchObject({ rpcErrorCode: 'InternalError', message: 'BootNotification could not be handled', details: {} });
      await holder.query('rollback');
      expect(slow.logLines().some((l) => l.includes('station endpoint error') && l.includes('57014'))).toBe(true);
      // The socket carries on.
      expect(await client.call('BootNotification', boot)).toMatchObject({ status: 'Accepted' });
    } finally {
      await holder.query('rollback').catch(() => undefined);
      await holder.end();
    }
  });
});

onServer?.('a station that floods while its row is locked (PostgreSQL)', () => {
  let small: TestApp;
  let smallEndpoint: string;
  beforeAll(async () => {
    small = await createTestApp({
      env: { OCPP_MIN_SECURITY_PROFILE: '1', DATABASE_POOL_MAX: '4', DATABASE_ACQUIRE_TIMEOUT_MS: '500' },
    });
    await small.app.listen({ host: '127.0.0.1', port: 0 });
    smallEndpoint = `ws://127.0.0.1:${(small.app.server.address() as AddressInfo).port}/ocpp`;
  });
  afterAll(async () => {
    await small?.close();
  });

  it('its calls take one pooled connection at a time, in order: the other station and the API are served meanwhile, and its last status is the one stored (PostgreSQL)', async () => {
    const [a, b] = await Promise.all([provisionStation(small), provisionStation(small)]);
    const abuser = await connected({ identity: a.id, password: a.password, protocols: ['ocpp2.0.1'] }, smallEndpoint);
    const bystander = await connected({ identity: b.id, password: b.password, protocols: ['ocpp2.0.1'] }, smallEndpoint);
    const holder = await otherSession(small.database);
    const watcher = await otherSession(small.database);
    try {
      await holder.query('begin');
      await holder.query('select asset_id from station_connections where asset_id = $1 for update', [a.id]);
      // A burst of notifications without waiting for answers, each for the same connector: as many
      // as may be in progress at once.
      const FLOOD = MAX_CALLS_IN_PROGRESS;
      const statuses = Array.from({ length: FLOOD }, (_, i) => (i === FLOOD - 1 ? 'Faulted' : i % 2 ? 'Occupied' : 'Available'));
      // Written by hand: the library's client would wait for each answer before the next call.
      const answers = new Map<string, unknown>();
      abuser.on('message', ({ message, outbound }: { message: string; outbound: boolean }) => {
        const [type, id, payload] = JSON.parse(message) as [number, string, unknown];
        if (!outbound && id.startsWith('flood-')) answers.set(id, type === 3 ? payload : `CALLERROR ${String(payload)}`);
      });
      statuses.forEach((connectorStatus, i) =>
        abuser.sendRaw(JSON.stringify([2, `flood-${i}`, 'StatusNotification', { timestamp: new Date().toISOString(), connectorStatus, evseId: 1, connectorId: 1 }])),
      );
      await waitForLockWaiters(watcher, 1);

      expect(await bystander.call('BootNotification', { reason: 'PowerUp', chargingStation: { vendorName: 'V', model: 'M' } })).toMatchObject({ status: 'Accepted' });
      expect((await readAsset(small, b.id)).statusCode).toBe(200);
      expect((await small.app.inject({ url: '/readyz' })).statusCode).toBe(200);

      await holder.query('rollback');
      await vi.waitFor(() => expect(answers.size).toBe(FLOOD), { timeout: 15_000, interval: 20 });
      expect([...answers.values()]).toEqual(Array(FLOOD).fill({}));
      const { rows } = await watcher.query<{ statuses: Record<string, { status: string }> }>(
        'select connector_statuses as statuses from station_connections where asset_id = $1',
        [a.id],
      );
      expect(rows[0]!.statuses['1/1']!.status).toBe('Faulted');
    } finally {
      await holder.query('rollback').catch(() => undefined);
      await holder.end();
      await watcher.end();
    }
  });
});

onServer?.('a newer login that hangs up while its claim waits (PostgreSQL)', () => {
  it('the older socket of the station closes too: the claim took the row from it, and no socket of the station stays open here (PostgreSQL)', async () => {
    const s = await provisionStation(t);
    const older = await connected({ identity: s.id, password: s.password, protocols: ['ocpp2.0.1'] });
    let olderClosedWith: number | undefined;
    older.once('close', ({ code }: { code: number }) => (olderClosedWith = code));
    const holder = await otherSession(t.database);
    const watcher = await otherSession(t.database);
    try {
      await holder.query('begin');
      await holder.query('select asset_id from station_connections where asset_id = $1 for update', [s.id]);
      // The newer login's password is checked, then its claim waits on the lock; it hangs up.
      const newer = await pendingUpgrade(`/ocpp/${s.id}`, { authorization: basic(s.id, s.password), 'sec-websocket-protocol': 'ocpp2.0.1' });
      await waitForLockWaiters(watcher, 1);
      newer.destroy();
      await holder.query('rollback');
      await vi.waitFor(() => expect(olderClosedWith).toBe(1000), { timeout: 5000, interval: 20 });
      expect(t.app.stations.isConnectedHere(s.id)).toBe(false);
      await eventually(async () => expect((await readAsset(t, s.id)).json().data.station.connected).toBe(false));
    } finally {
      await holder.query('rollback').catch(() => undefined);
      await holder.end();
      await watcher.end();
    }
  });
});
