// The service behind PgBouncer in transaction mode, as operators run it: real service processes
// with DATABASE_URL at the pooler (deploy/pgbouncer/pgbouncer.ini, stock settings: nothing in
// ignore_startup_parameters, no max_prepared_statements) and DATABASE_DIRECT_URL at the server.
// Only the pooler pass of .ci/run runs this file: it sets PGBOUNCER_URL (and vitest.config.ts
// leaves the file out of every run without it).
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrapToken, killProcess, startService } from '../helpers/service-process.js';
import { paymentBody } from '../helpers/payments-factory.js';
import { createServerDatabase } from '../helpers/test-database.js';
import { stationClient, type StationClient } from '../helpers/station-factory.js';

const STATEMENT_TIMEOUT_MS = 1000;
const CONCURRENT_LISTS = 40;

interface Replica {
  child: ChildProcess;
  base: string;
  endpoint: string;
  stderr(): string;
  service: Awaited<ReturnType<typeof startService>>;
}

describe('the service behind PgBouncer 1.18 in transaction mode (PostgreSQL + PgBouncer)', () => {
  let database: Awaited<ReturnType<typeof createServerDatabase>>;
  let a: Replica;
  let b: Replica;
  let token: string;
  const stations: StationClient[] = [];

  async function startReplica(): Promise<Replica> {
    const service = await startService({
      LOG_LEVEL: 'error',
      ...database.env,
      DATABASE_POOL_MAX: '10',
      DATABASE_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS),
      AUTH_ISSUER: 'http://cns.test',
      OCPP_MIN_SECURITY_PROFILE: '1',
    });
    return { child: service.child, base: service.base, endpoint: service.endpoint, stderr: () => service.output.stderr, service };
  }

  async function api(base: string, path: string, body?: unknown) {
    const res = await fetch(`${base}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as Record<string, unknown> };
  }

  // A session on the server itself, as another process (an operator, a migration) would have.
  async function directSession(): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: database.directUrl });
    await client.connect();
    return client;
  }

  beforeAll(async () => {
    const pooler = process.env.PGBOUNCER_URL;
    if (!pooler || !process.env.DATABASE_DIRECT_URL) throw new Error('needs PGBOUNCER_URL and DATABASE_DIRECT_URL (set by the pooler pass of .ci/run)');
    database = await createServerDatabase();
    // The service's pools really go through the pooler, and only its direct URL reaches the server.
    expect(new URL(database.env.DATABASE_URL).port).toBe(new URL(pooler).port);
    expect(new URL(database.directUrl!).port).not.toBe(new URL(pooler).port);
    a = await startReplica();
    ({ token } = await bootstrapToken(a.service));
    b = await startReplica();
  }, 120_000);

  afterAll(async () => {
    await Promise.all(stations.map((s) => s.close({ force: true }).catch(() => undefined)));
    await killProcess(a?.child);
    await killProcess(b?.child);
    await database?.drop();
  });

  it('starts (migrations and the start-up lock on the direct URL) and is ready through the pooler (PostgreSQL + PgBouncer)', async () => {
    for (const replica of [a, b]) expect((await fetch(`${replica.base}/readyz`)).status).toBe(200);
  });

  it(`answers ${CONCURRENT_LISTS} concurrent list requests, all 200 with the payments asked for (PostgreSQL + PgBouncer)`, async () => {
    const sessions: string[] = [];
    for (let i = 0; i < 5; i++) {
      const body = paymentBody({ network: 'net_pooler' });
      const recorded = await api(a.base, '/payments/v1/session-payments', body);
      expect(recorded.status, JSON.stringify(recorded.body)).toBe(201);
      sessions.push(body.session);
    }
    const answers = await Promise.all(
      Array.from({ length: CONCURRENT_LISTS }, async (_, i) => {
        const asked = sessions.slice(0, 1 + (i % sessions.length));
        const res = await fetch(`${[a, b][i % 2]!.base}/payments/v1/session-payments?sessionIds=${asked.join(',')}`, { headers: { authorization: `Bearer ${token}` } });
        return { status: res.status, asked: asked.length, body: await res.text() };
      }),
    );
    for (const answer of answers) {
      expect(answer.status, answer.body).toBe(200);
      expect((JSON.parse(answer.body) as unknown[]).length).toBe(answer.asked);
    }
  });

  it('enforces the statement timeout through the pooler: a list and a write stuck behind a lock answer 503 and their statements are cancelled on the server (PostgreSQL + PgBouncer)', async () => {
    const holder = await directSession();
    const watcher = await directSession();
    try {
      await holder.query('begin');
      await holder.query('lock table session_payments in access exclusive mode');
      const started = Date.now();
      const [list, write] = await Promise.all([
        api(a.base, '/payments/v1/session-payments?sessionIds=ses_pooler_timeout'),
        api(b.base, '/payments/v1/session-payments', paymentBody({ network: 'net_pooler' })),
      ]);
      // The bound for the answer (503 within the statement timeout); the client's own read timeout comes only later
      // (statement timeout + 1 s) and would leave the statements waiting on the server.
      expect(Date.now() - started).toBeLessThan(STATEMENT_TIMEOUT_MS + 4000);
      for (const res of [list, write]) {
        expect(res.status, JSON.stringify(res.body)).toBe(503);
        expect(res.body).toEqual({ code: 'SERVICE_UNAVAILABLE', message: expect.any(String), status: 503 });
        expect(Number(res.retryAfter)).toBeGreaterThan(0);
      }
      // The server cancelled them (SQLSTATE 57014): nothing of the service still waits for the lock.
      const { rows } = await watcher.query<{ n: number }>(
        "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
      );
      expect(rows[0]!.n).toBe(0);
    } finally {
      await holder.query('rollback').catch(() => undefined);
      await holder.end();
      await watcher.end();
    }
    expect((await api(a.base, '/payments/v1/session-payments?sessionIds=ses_pooler_timeout')).status).toBe(200);
  });

  it('leaves no session state on the pooled server connections: no statement timeout, no prepared statement (PostgreSQL + PgBouncer)', async () => {
    // Any client of the pooler may get the sessions the service used: they hold nothing of it.
    const other = new pg.Pool({ connectionString: database.env.DATABASE_URL, max: 20 });
    try {
      const seen = await Promise.all(
        Array.from({ length: 20 }, async () => {
          const { rows } = await other.query<{ timeout: string; prepared: number }>(
            "select current_setting('statement_timeout') as timeout, (select count(*)::int from pg_prepared_statements) as prepared",
          );
          return rows[0]!;
        }),
      );
      expect(new Set(seen.map((s) => `${s.timeout}/${s.prepared}`))).toEqual(new Set(['0/0']));
    } finally {
      await other.end();
    }
  });

  it('routes a password change asked through one replica to the station connected to the other (LISTEN on the direct URL) (PostgreSQL + PgBouncer)', async () => {
    const id = `CP-${randomUUID().slice(0, 8)}`;
    expect((await api(a.base, '/asset-management/v1/assets', { id, network: 'net_pooler', securityProfile: 1 })).status).toBe(201);
    const provisioned = await api(a.base, '/asset-management/v1/assets/change-password', { id });
    expect(provisioned.status, JSON.stringify(provisioned.body)).toBe(200);
    const station = stationClient(a.endpoint, { identity: id, password: (provisioned.body.data as { password: string }).password, protocols: ['ocpp2.0.1'] });
    stations.push(station);
    const received: unknown[] = [];
    station.handle('SetVariables', async ({ params }: { params?: unknown }) => {
      received.push(params);
      const data = (params as { setVariableData: Array<{ component: unknown; variable: unknown }> }).setVariableData[0]!;
      return { setVariableResult: [{ attributeStatus: 'Accepted', component: data.component, variable: data.variable }] };
    });
    await station.connect();

    const changed = await api(b.base, '/asset-management/v1/assets/change-password', { id });
    expect(changed.status, JSON.stringify(changed.body)).toBe(200);
    const password = (changed.body.data as { password: string }).password;
    expect(received).toEqual([{ setVariableData: [{ component: { name: 'SecurityCtrlr' }, variable: { name: 'BasicAuthPassword' }, attributeValue: password }] }]);
    expect(a.stderr() + b.stderr()).toBe('');
  });
});
