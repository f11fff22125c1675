// The stations' events (docs/stations.md, "Events"): `station.connected` and
// `station.disconnected` are appended to the outbox by the statements that claim and release the
// stations' rows, exactly when `connected` (as the API reads it) turns true or false. Real OCPP-J
// clients play the stations; the outbox is read as the delivery worker reads it.
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'drizzle-orm';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { claimStations, releaseStations } from '../../src/stations/stations-repository.js';
import { stationEvents } from '../../src/stations/station-events.js';
import type { Db } from '../../src/db/database.js';
import { siblingApp } from '../helpers/asset-factory.js';
import { bootstrapToken, startService } from '../helpers/service-process.js';
import { createServerDatabase } from '../helpers/test-database.js';
import { provisionStation, stationClient, useStationApp, type ProvisionedStation, type StationClient } from '../helpers/station-factory.js';
import { eventually } from '../helpers/eventually.js';

// A lease of 3 s, renewed (and lapsed replicas swept) every second.
const t = useStationApp({ env: { OCPP_LEASE_SECONDS: '3', OCPP_PING_INTERVAL_SECONDS: '1' } });

interface StationEvent {
  type: string;
  network: string;
  data: { assetId: string; network: string; protocol: string; at: string };
  createdAt: string;
}

async function eventsOf(db: Db, assetId: string): Promise<StationEvent[]> {
  const { rows } = (await db.execute(sql`
    select type, network, data, created_at::text as created_at from events
     where type like 'station.%' and (data::json ->> 'assetId') = ${assetId}
     order by (data::json ->> 'at'), type desc`)) as unknown as { rows: Array<{ type: string; network: string; data: string; created_at: string }> };
  return rows.map((r) => ({ type: r.type, network: r.network, data: JSON.parse(r.data) as StationEvent['data'], createdAt: r.created_at }));
}

const typesOf = async (assetId: string) => (await eventsOf(t.database.db, assetId)).map((e) => e.type);

function station(s: ProvisionedStation, endpoint = t.endpoint): StationClient {
  const client = stationClient(endpoint, { identity: s.id, password: s.password, protocols: ['ocpp2.0.1'] });
  t.open.push(client);
  return client;
}

async function closed(client: StationClient): Promise<void> {
  const done = new Promise<void>((resolve) => client.once('close', () => resolve()));
  await client.close({ force: true });
  await done;
}

async function readConnected(id: string): Promise<boolean | undefined> {
  const res = await t.app.inject({ url: `/asset-management/v1/assets/${id}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json().data.station as { connected: boolean } | null)?.connected;
}

async function row(id: string): Promise<{ replica_id: string | null; connected_at: string; disconnected_at: string | null }> {
  const { rows } = (await t.database.db.execute(sql`
    select replica_id, to_char(connected_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as connected_at,
           to_char(disconnected_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as disconnected_at
      from station_connections where asset_id = ${id}`)) as unknown as { rows: Array<{ replica_id: string | null; connected_at: string; disconnected_at: string | null }> };
  return rows[0]!;
}

// A replica that died: a lease nobody renews, expiring `inMs` from now (negative: already out).
async function deadReplica(name: string, inMs: number): Promise<string> {
  const id = `rep_dead_${name}`;
  await t.database.db.execute(sql`insert into station_replicas (id, lease_expires_at) values (${id}, now() + make_interval(secs => ${inMs / 1000}))`);
  return id;
}

async function leaseEnd(replicaId: string): Promise<string> {
  const { rows } = (await t.database.db.execute(
    sql`select to_char(lease_expires_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as at from station_replicas where id = ${replicaId}`,
  )) as unknown as { rows: Array<{ at: string }> };
  return rows[0]!.at;
}

describe('a station that connects and hangs up', () => {
  it('yields one station.connected and one station.disconnected with { assetId, network, protocol, at }, at the times its row records', async () => {
    const s = await provisionStation(t);
    const client = station(s);
    await client.connect();
    const claimed = await row(s.id);
    await closed(client);
    await vi.waitFor(async () => expect(await readConnected(s.id)).toBe(false));
    const released = await row(s.id);

    const events = await eventsOf(t.database.db, s.id);
    expect(events.map((e) => [e.type, e.network, e.data])).toEqual([
      ['station.connected', s.network, { assetId: s.id, network: s.network, protocol: 'ocpp2.0.1', at: claimed.connected_at }],
      ['station.disconnected', s.network, { assetId: s.id, network: s.network, protocol: 'ocpp2.0.1', at: released.disconnected_at }],
    ]);
    // The key order of the contract's data, and nothing else in it.
    const { rows } = (await t.database.db.execute(sql`select data from events where type like 'station.%' and (data::json ->> 'assetId') = ${s.id} limit 1`)) as unknown as { rows: Array<{ data: string }> };
    expect(Object.keys(JSON.parse(rows[0]!.data) as object)).toEqual(['assetId', 'network', 'protocol', 'at']);
  });

  it('a station that logs in again after a hang-up yields a new pair each time; one connected twice before its first socket closed yields one connected only', async () => {
    const s = await provisionStation(t);
    const first = station(s);
    await first.connect();
    await closed(first);
    await vi.waitFor(async () => expect(await readConnected(s.id)).toBe(false));
    const second = station(s);
    await second.connect();
    // A third connection before the second closed: the station stays connected throughout.
    const third = station(s);
    await third.connect();
    await vi.waitFor(() => expect(second.state).toBe(3));
    expect(await readConnected(s.id)).toBe(true);
    expect(await typesOf(s.id)).toEqual(['station.connected', 'station.disconnected', 'station.connected']);
    await closed(third);
    await vi.waitFor(async () => expect(await typesOf(s.id)).toEqual(['station.connected', 'station.disconnected', 'station.connected', 'station.disconnected']));
  });
});

describe('the batched statements', () => {
  it('one claim statement for many stations appends one station.connected each in the same statement; one release statement one station.disconnected each', async () => {
    const stations = await Promise.all([1, 2, 3, 4, 5].map(() => provisionStation(t)));
    const replicaId = t.app.stations.replicaId;
    const epochs = await claimStations(
      t.database.db,
      stations.map((s) => ({ assetId: s.id, replicaId, network: s.network, protocol: 'ocpp2.0.1' })),
      stationEvents,
    );
    await releaseStations(
      t.database.db,
      stations.map((s, i) => ({ assetId: s.id, epoch: epochs[i]!, lastSeenAt: new Date() })),
      stationEvents,
    );
    const all = (await Promise.all(stations.map((s) => eventsOf(t.database.db, s.id)))).flat();
    expect(all.filter((e) => e.type === 'station.connected')).toHaveLength(5);
    expect(all.filter((e) => e.type === 'station.disconnected')).toHaveLength(5);
    // Two statements wrote them: each statement's rows share its time.
    expect(new Set(all.map((e) => e.createdAt)).size).toBe(2);
    // A release at an epoch the row has left, and a second release of the same epoch, append nothing.
    await releaseStations(t.database.db, [{ assetId: stations[0]!.id, epoch: epochs[0]!, lastSeenAt: new Date() }], stationEvents);
    await releaseStations(t.database.db, [{ assetId: stations[1]!.id, epoch: epochs[1]! - 1, lastSeenAt: new Date() }], stationEvents);
    expect(await typesOf(stations[0]!.id)).toEqual(['station.connected', 'station.disconnected']);
    expect(await typesOf(stations[1]!.id)).toEqual(['station.connected', 'station.disconnected']);
  });

  it('a claim rolled back with its transaction leaves no event', async () => {
    const s = await provisionStation(t);
    await expect(
      t.database.db.transaction(async (tx) => {
        await claimStations(tx as unknown as Db, [{ assetId: s.id, replicaId: t.app.stations.replicaId, network: s.network, protocol: 'ocpp2.0.1' }], stationEvents);
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(await typesOf(s.id)).toEqual([]);
  });
});

describe('a station taken over by another replica', () => {
  it('is no event: it stays connected throughout; its one station.disconnected comes when the newer connection closes', async () => {
    const other = await siblingApp(t, { OCPP_MIN_SECURITY_PROFILE: '1', OCPP_LEASE_SECONDS: '3' });
    try {
      await other.app.listen({ host: '127.0.0.1', port: 0 });
      const s = await provisionStation(t);
      const older = station(s, `ws://127.0.0.1:${(other.app.server.address() as AddressInfo).port}/ocpp`);
      await older.connect();
      const newer = station(s);
      await newer.connect();
      // The older replica reads its takeover notice at its next renewal and closes the older socket.
      await vi.waitFor(() => expect(other.app.stations.isConnectedHere(s.id)).toBe(false), { timeout: 5000 });
      expect(await readConnected(s.id)).toBe(true);
      expect(await typesOf(s.id)).toEqual(['station.connected']);
      await closed(newer);
      await vi.waitFor(async () => expect(await typesOf(s.id)).toEqual(['station.connected', 'station.disconnected']));
    } finally {
      await other.close();
    }
  });
});

describe('releases the healing makes', () => {
  it('a disconnect whose first release writes fail yields one station.disconnected, written with the release that landed', async () => {
    const s = await provisionStation(t);
    const client = station(s);
    await client.connect();
    const db = t.database.db;
    // The next two releases of the row fail inside the database, as a write on a lost connection does.
    await db.execute(sql.raw(`create sequence "events_fault_${s.id}"`));
    await db.execute(sql`
      create or replace function events_fault() returns trigger language plpgsql as $$
      begin
        if old.replica_id is not null and new.replica_id is null and to_regclass(quote_ident('events_fault_' || new.asset_id)) is not null
           and nextval(quote_ident('events_fault_' || new.asset_id)) <= 2 then
          raise exception 'injected fault: release of % lost', new.asset_id;
        end if;
        return new;
      end $$`);
    await db.execute(sql`create or replace trigger events_fault before update on station_connections for each row execute function events_fault()`);
    await closed(client);
    await vi.waitFor(async () => expect(await readConnected(s.id)).toBe(false), { timeout: 10_000 });
    expect(t.logLines().some((l) => l.includes('could not record a station disconnect') && l.includes(s.id))).toBe(true);
    expect(await typesOf(s.id)).toEqual(['station.connected', 'station.disconnected']);
    await db.execute(sql`drop trigger events_fault on station_connections`);
  });

  it('a row recorded connected here without a connection (a claim whose answer was lost): its station.disconnected comes with the reconciliation that releases it', async () => {
    const s = await provisionStation(t);
    await claimStations(t.database.db, [{ assetId: s.id, replicaId: t.app.stations.replicaId, network: s.network, protocol: 'ocpp2.0.1' }], stationEvents);
    expect(await typesOf(s.id)).toEqual(['station.connected']);
    await vi.waitFor(async () => expect(await readConnected(s.id)).toBe(false), { timeout: 10_000 });
    expect(await typesOf(s.id)).toEqual(['station.connected', 'station.disconnected']);
  });

  it('a replica that shuts down: one station.disconnected for each of its stations', async () => {
    const other = await siblingApp(t, { OCPP_MIN_SECURITY_PROFILE: '1' });
    await other.app.listen({ host: '127.0.0.1', port: 0 });
    const s = await provisionStation(t);
    const client = station(s, `ws://127.0.0.1:${(other.app.server.address() as AddressInfo).port}/ocpp`);
    await client.connect();
    await other.close();
    expect(await readConnected(s.id)).toBe(false);
    expect(await typesOf(s.id)).toEqual(['station.connected', 'station.disconnected']);
  });
});

describe('a replica whose lease runs out (killed with kill -9)', () => {
  it('its stations’ station.disconnected is written by a live replica once the lease has run out, once, at the lease’s end: when connected turned false', async () => {
    const s = await provisionStation(t);
    const dead = await deadReplica(s.id, 1500);
    await claimStations(t.database.db, [{ assetId: s.id, replicaId: dead, network: s.network, protocol: 'ocpp2.0.1' }], stationEvents);
    expect(await readConnected(s.id)).toBe(true);
    await vi.waitFor(async () => expect(await typesOf(s.id)).toEqual(['station.connected', 'station.disconnected']), { timeout: 10_000 });
    const [, disconnected] = await eventsOf(t.database.db, s.id);
    expect(disconnected!.data.at).toBe(await leaseEnd(dead));
    expect((await row(s.id)).replica_id).toBeNull();
    expect(await readConnected(s.id)).toBe(false);
  });

  it('a station whose row names a replica whose lease ran out logs in: the missing station.disconnected (at the lease’s end), then station.connected', async () => {
    const s = await provisionStation(t);
    const dead = await deadReplica(`${s.id}_b`, 30_000);
    await claimStations(t.database.db, [{ assetId: s.id, replicaId: dead, network: s.network, protocol: 'ocpp2.0.1' }], stationEvents);
    // Its lease ends now, after the claim: the events' times keep their order.
    await sleep(10);
    await t.database.db.execute(sql`update station_replicas set lease_expires_at = now() where id = ${dead}`);
    const client = station(s);
    await client.connect();
    // Whether the sweep or the claim came first, the same events.
    const events = await eventsOf(t.database.db, s.id);
    expect(events.map((e) => e.type)).toEqual(['station.connected', 'station.disconnected', 'station.connected']);
    expect(events[1]!.data.at).toBe(await leaseEnd(dead));
    await closed(client);
  });

  it('a replica whose own lease ran out while it kept its sockets: its stations read disconnected since then (station.disconnected at the lease’s end), then connected here again (station.connected)', async () => {
    const s = await provisionStation(t);
    const client = station(s);
    await client.connect();
    const me = t.app.stations.replicaId;
    // The claim is written in a batch after the login: the lease ends once it is, so the lease's
    // end comes after the claim's time, as it does when a real lease runs out.
    await eventually(async () => expect(await typesOf(s.id)).toEqual(['station.connected']));
    await t.database.db.execute(sql`update station_replicas set lease_expires_at = now() - interval '1 millisecond' where id = ${me}`);
    await vi.waitFor(async () => expect(await typesOf(s.id)).toEqual(['station.connected', 'station.disconnected', 'station.connected']), { timeout: 10_000 });
    expect(await readConnected(s.id)).toBe(true);
    expect((await row(s.id)).replica_id).toBe(me);
    await closed(client);
  });
});

// ---------------------------------------------------------------------------------------------
// Real processes on one PostgreSQL database: a replica killed with kill -9.
const onServer = process.env.DATABASE_URL ? describe : undefined;

onServer?.('a service process killed with kill -9 (PostgreSQL)', () => {
  const children: Array<Awaited<ReturnType<typeof startService>>> = [];
  let drop: (() => Promise<void>) | undefined;
  afterAll(async () => {
    for (const c of children) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGKILL');
    await Promise.all(children.map((c) => c.exited));
    await drop?.();
  });

  it('its station reads disconnected once its lease runs out, and the other process writes one station.disconnected at the lease’s end (PostgreSQL)', async () => {
    const database = await createServerDatabase();
    drop = database.drop;
    const env = { ...database.env, LOG_LEVEL: 'error', DATABASE_POOL_MAX: '4', AUTH_ISSUER: 'http://cns.test', OCPP_MIN_SECURITY_PROFILE: '1', OCPP_LEASE_SECONDS: '2' };
    const a = await startService(env);
    children.push(a);
    const b = await startService(env);
    children.push(b);
    const { token } = await bootstrapToken(a);
    const call = async (path: string, body: unknown) =>
      fetch(`${a.base}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const id = 'CP-events-kill-1';
    expect((await call('/asset-management/v1/assets', { id, network: 'net_events', securityProfile: 1 })).status).toBe(201);
    const password = ((await (await call('/asset-management/v1/assets/change-password', { id })).json()) as { data: { password: string } }).data.password;

    const client = stationClient(b.endpoint, { identity: id, password, protocols: ['ocpp2.0.1'] });
    await client.connect();
    b.child.kill('SIGKILL');
    await b.exited;
    await client.close({ force: true });

    const { openDatabase } = await import('../../src/db/database.js');
    const reader = await openDatabase({ url: database.url, poolMax: 1 });
    try {
      // A safety net, not a speed check: the lease (2 s) and A's next renewal.
      await vi.waitFor(async () => expect((await eventsOf(reader.db, id)).map((e) => e.type)).toEqual(['station.connected', 'station.disconnected']), {
        timeout: 20_000,
        interval: 200,
      });
      const { rows } = (await reader.db.execute(
        sql`select to_char(lease_expires_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as at from station_replicas where lease_expires_at < now()`,
      )) as unknown as { rows: Array<{ at: string }> };
      const [, disconnected] = await eventsOf(reader.db, id);
      expect(rows.map((r) => r.at)).toContain(disconnected!.data.at);
      expect(disconnected!.data).toMatchObject({ assetId: id, network: 'net_events', protocol: 'ocpp2.0.1' });
    } finally {
      await reader.close();
    }
  }, 120_000);
});
