// Password changes across replicas (docs/rotation.md, "Across replicas"): the replica holding the station's socket sends
// the command, the answer comes back; the password crosses only sealed; a replica that dies
// mid-call leaves the rotation UNCONFIRMED. Two real service processes on one PostgreSQL database.
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import pg from 'pg';
import { channelOf } from '../../src/stations/command-bus.js';
import { makeReplicaKeys, open, seal } from '../../src/stations/sealed-box.js';
import { bootstrapToken, killProcess, startService } from '../helpers/service-process.js';
import { createServerDatabase } from '../helpers/test-database.js';
import { stationClient, type StationClient } from '../helpers/station-factory.js';

describe('sealed box', () => {
  it('opens with the recipient key and the same additional data only', () => {
    const keys = makeReplicaKeys();
    const box = seal(keys.publicKey, 'Secret:password-123456', 'cmd-1');
    expect(open(keys, box, 'cmd-1')).toBe('Secret:password-123456');
    expect(JSON.stringify(box)).not.toContain('password-123456');
    expect(() => open(keys, box, 'cmd-2')).toThrow();
    expect(() => open(makeReplicaKeys(), box, 'cmd-1')).toThrow();
    // A fresh one-time key each time: the same password never seals to the same text.
    expect(seal(keys.publicKey, 'Secret:password-123456', 'cmd-1').ct).not.toBe(box.ct);
  });
});

interface Replica {
  child: ChildProcess;
  base: string;
  endpoint: string;
  output(): string;
  stderr(): string;
  service: Awaited<ReturnType<typeof startService>>;
}

async function startReplica(databaseEnv: Record<string, string>): Promise<Replica> {
  const r = await startService({
    // Everything the service logs is searched for the passwords below.
    LOG_LEVEL: 'debug',
    ...databaseEnv,
    DATABASE_POOL_MAX: '4',
    AUTH_ISSUER: 'http://cns.test',
    OCPP_MIN_SECURITY_PROFILE: '1',
    OCPP_LEASE_SECONDS: '2',
    OCPP_CALL_TIMEOUT_SECONDS: '1',
  });
  return { child: r.child, base: r.base, endpoint: r.endpoint, output: () => r.output.stdout + r.output.stderr, stderr: () => r.output.stderr, service: r };
}

const onServer = process.env.DATABASE_URL ? describe : undefined;

onServer?.('password changes across two service processes (PostgreSQL)', () => {
  let database: Awaited<ReturnType<typeof createServerDatabase>>;
  let a: Replica;
  let b: Replica;
  let token: string;
  let listener: pg.Client;
  const notifications: string[] = [];
  // Every plaintext password of these tests, searched for at the end.
  const passwords: string[] = [];
  const stations: StationClient[] = [];

  async function api(base: string, path: string, body?: unknown) {
    const res = await fetch(`${base}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as { data: Record<string, unknown>; code?: string; message?: string } };
  }

  async function connect(endpoint: string, id: string, password: string): Promise<StationClient> {
    const client = stationClient(endpoint, { identity: id, password, protocols: ['ocpp2.0.1'] });
    stations.push(client);
    await client.connect();
    return client;
  }

  async function canLogIn(endpoint: string, id: string, password: string): Promise<boolean> {
    const client = stationClient(endpoint, { identity: id, password, protocols: ['ocpp2.0.1'] });
    try {
      await client.connect();
    } catch {
      return false;
    }
    await client.close({ force: true });
    return true;
  }

  // An asset provisioned through A, its station connected to B and answering with `respond`.
  async function stationOnB(respond: (params: { setVariableData: Array<{ component: unknown; variable: unknown }> }) => unknown) {
    const id = `CP-${randomUUID().slice(0, 8)}`;
    expect((await api(a.base, '/asset-management/v1/assets', { id, network: 'net_rotation', securityProfile: 1 })).status).toBe(201);
    const provisioned = await api(a.base, '/asset-management/v1/assets/change-password', { id });
    expect(provisioned.status).toBe(200);
    const password = provisioned.body.data.password as string;
    passwords.push(password);
    const client = await connect(b.endpoint, id, password);
    const received: unknown[] = [];
    client.handle('SetVariables', ({ params }: { params?: unknown }) => {
      received.push(params);
      return respond(params as never) as Promise<Record<string, unknown>>;
    });
    return { id, password, client, received };
  }

  const status = (attributeStatus: string) => (params: { setVariableData: Array<{ component: unknown; variable: unknown }> }) => ({
    setVariableResult: [{ attributeStatus, component: params.setVariableData[0]!.component, variable: params.setVariableData[0]!.variable }],
  });

  beforeAll(async () => {
    database = await createServerDatabase();
    a = await startReplica(database.env);
    ({ token } = await bootstrapToken(a.service));
    b = await startReplica(database.env);
    // What crosses the notification queue, as any session of the database could read it.
    listener = new pg.Client({ connectionString: database.directUrl ?? database.url });
    await listener.connect();
    listener.on('notification', (n) => notifications.push(n.payload ?? ''));
    const { rows } = await listener.query<{ id: string }>('select id from station_replicas');
    expect(rows).toHaveLength(2);
    for (const { id } of rows) await listener.query(`LISTEN "${channelOf(id)}"`);
  }, 120_000);

  afterAll(async () => {
    await Promise.all(stations.map((s) => s.close({ force: true }).catch(() => undefined)));
    await listener?.end().catch(() => undefined);
    await killProcess(a?.child);
    await killProcess(b?.child);
    await database?.drop();
  });

  it('Accepted on B, asked through A: 200; the old password is refused and the new one logs in on either replica (PostgreSQL)', async () => {
    const s = await stationOnB(status('Accepted'));
    const res = await api(a.base, '/asset-management/v1/assets/change-password', { id: s.id });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const password = res.body.data.password as string;
    passwords.push(password);
    expect(s.received).toEqual([{ setVariableData: [{ component: { name: 'SecurityCtrlr' }, variable: { name: 'BasicAuthPassword' }, attributeValue: password }] }]);
    expect(await canLogIn(a.endpoint, s.id, s.password)).toBe(false);
    expect(await canLogIn(a.endpoint, s.id, password)).toBe(true);
    expect(await canLogIn(b.endpoint, s.id, password)).toBe(true);
  });

  it('Rejected on B: 409 STATION_REJECTED through A, and the old password keeps working (PostgreSQL)', async () => {
    const s = await stationOnB(status('Rejected'));
    const supplied = `Supplied:${randomUUID().slice(0, 12)}-x`;
    passwords.push(supplied);
    const res = await api(a.base, '/asset-management/v1/assets/change-password', { id: s.id, password: supplied });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ type: 'CONFLICT', code: 'STATION_REJECTED', message: expect.stringContaining('Rejected') });
    expect(await canLogIn(a.endpoint, s.id, supplied)).toBe(false);
    expect(await canLogIn(a.endpoint, s.id, s.password)).toBe(true);
  });

  it('no answer from the station on B: 202 UNCONFIRMED through A, both passwords accepted (PostgreSQL)', async () => {
    const s = await stationOnB(() => new Promise(() => undefined));
    const res = await api(a.base, '/asset-management/v1/assets/change-password', { id: s.id });
    expect(res.status).toBe(202);
    passwords.push(res.body.data.password as string);
    expect(res.body.data).toMatchObject({ id: s.id, status: 'UNCONFIRMED' });
    expect(s.received).toHaveLength(1);
    expect((await api(a.base, `/asset-management/v1/assets/${s.id}`)).body.data.rotation).toMatchObject({ state: 'UNCONFIRMED' });
  });

  it('a command past its deadline is dropped by the holder, never sent late (PostgreSQL)', async () => {
    const s = await stationOnB(status('Accepted'));
    const { rows } = await listener.query<{ id: string; public_key: string }>(
      'select r.id, r.public_key from station_replicas r join station_connections c on c.replica_id = r.id where c.asset_id = $1',
      [s.id],
    );
    const holder = rows[0]!;
    const late = { t: 'cmd', id: randomUUID(), from: 'rep_nobody', assetId: s.id, deadline: Date.now() - 1 };
    const lateBox = seal(holder.public_key, 'Late:password-never-sent', JSON.stringify([late.id, late.from, late.assetId, late.deadline]));
    await listener.query('select pg_notify($1, $2)', [channelOf(holder.id), JSON.stringify({ ...late, box: lateBox })]);
    // Delivered in order: once this change is answered, the late command has been handled.
    const res = await api(a.base, '/asset-management/v1/assets/change-password', { id: s.id });
    expect(res.status).toBe(200);
    passwords.push(res.body.data.password as string);
    expect(s.received).toHaveLength(1);
    expect(s.received[0]).toMatchObject({ setVariableData: [{ attributeValue: res.body.data.password }] });
  });

  it('a forged or malformed answer on the sender’s channel is no answer: the real one still decides (PostgreSQL)', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const s = await stationOnB(async (params) => {
      await held;
      return status('Accepted')(params);
    });
    const seen = notifications.length;
    const answer = api(a.base, '/asset-management/v1/assets/change-password', { id: s.id });
    await vi.waitFor(() => expect(s.received).toHaveLength(1));
    const command = notifications.slice(seen).map((n) => JSON.parse(n) as { t: string; id: string; from: string }).find((n) => n.t === 'cmd')!;
    for (const forged of [{ t: 'ans', id: command.id }, { t: 'ans', id: command.id, answer: null }, { t: 'ans', id: command.id, answer: { kind: 'status' } }, 'not json']) {
      await listener.query('select pg_notify($1, $2)', [channelOf(command.from), typeof forged === 'string' ? forged : JSON.stringify(forged)]);
    }
    release();
    const res = await answer;
    expect(res.status).toBe(200);
    passwords.push(res.body.data.password as string);
    expect([a.child.exitCode, b.child.exitCode]).toEqual([null, null]);
  });

  it('the listening connections are terminated: each replica listens again and commands still cross (PostgreSQL)', async () => {
    const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
    try {
      const before = await admin.query<{ pid: number }>(
        "select pid from pg_stat_activity where datname = $1 and application_name = 'charging-network-service/commands'",
        [database.name],
      );
      expect(before.rows).toHaveLength(2);
      await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and application_name = $2', [
        database.name,
        'charging-network-service/commands',
      ]);
      const old = new Set(before.rows.map((r) => r.pid));
      await vi.waitFor(
        async () => {
          const after = await admin.query<{ pid: number }>(
            "select pid from pg_stat_activity where datname = $1 and application_name = 'charging-network-service/commands'",
            [database.name],
          );
          expect(after.rows.filter((r) => !old.has(r.pid))).toHaveLength(2);
        },
        { timeout: 10_000, interval: 100 },
      );
    } finally {
      await admin.end();
    }
    const s = await stationOnB(status('Accepted'));
    const res = await api(a.base, '/asset-management/v1/assets/change-password', { id: s.id });
    expect(res.status).toBe(200);
    passwords.push(res.body.data.password as string);
    expect([a.child.exitCode, b.child.exitCode]).toEqual([null, null]);
  });

  it('nothing the service wrote holds a plaintext password: logs, every table, the notifications it sent (PostgreSQL)', async () => {
    expect(passwords.length).toBeGreaterThanOrEqual(8);
    expect(notifications.length).toBeGreaterThan(0);
    const db = new pg.Client({ connectionString: database.directUrl ?? database.url });
    await db.connect();
    let tables = '';
    try {
      const { rows } = await db.query<{ table_schema: string; table_name: string }>(
        "select table_schema, table_name from information_schema.tables where table_schema in ('public', 'drizzle') and table_type = 'BASE TABLE'",
      );
      expect(rows.map((r) => r.table_name)).toEqual(expect.arrayContaining(['assets', 'asset_password_changes', 'station_replicas', 'station_connections']));
      for (const t of rows) tables += JSON.stringify((await db.query(`select * from "${t.table_schema}"."${t.table_name}"`)).rows);
    } finally {
      await db.end();
    }
    const written = { logs: a.output() + b.output(), tables, notifications: notifications.join('\n') };
    expect(written.logs).toContain('password command');
    for (const password of passwords) {
      for (const [where, text] of Object.entries(written)) expect(text.includes(password), `${where} holds a password`).toBe(false);
    }
  });

  it('B killed (kill -9) while its station holds the command: A answers 202, and the station’s next login resolves it (PostgreSQL)', async () => {
    let received!: () => void;
    const got = new Promise<void>((resolve) => (received = resolve));
    const s = await stationOnB(() => {
      received();
      return new Promise(() => undefined);
    });
    const answer = api(a.base, '/asset-management/v1/assets/change-password', { id: s.id });
    await got;
    await killProcess(b.child);
    const res = await answer;
    expect(res.status).toBe(202);
    expect(res.body.data).toMatchObject({ id: s.id, status: 'UNCONFIRMED' });
    const password = res.body.data.password as string;
    expect(await canLogIn(a.endpoint, s.id, password)).toBe(true);
    expect((await api(a.base, `/asset-management/v1/assets/${s.id}`)).body.data.rotation).toMatchObject({ state: 'CONFIRMED', resolvedAt: expect.any(String) });
    expect(await canLogIn(a.endpoint, s.id, s.password)).toBe(false);
  });
});
