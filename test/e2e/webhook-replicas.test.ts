// Webhook delivery across real service processes on one PostgreSQL database (docs/events.md):
// several processes deliver one backlog with no delivery made twice beyond the attempts the
// deliveries record (at least once, one attempt at a time), and a process killed with kill -9
// while its deliveries wait for a receiver's answer loses none of them: each is attempted again
// after the restart, with the same webhook-id. vitest.config.ts leaves this file out of runs
// without DATABASE_URL.
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { paymentBody } from '../helpers/payments-factory.js';
import { bootstrapToken, killProcess, startService } from '../helpers/service-process.js';
import { createServerDatabase } from '../helpers/test-database.js';
import { verified } from '../helpers/webhook-receiver.js';
import { eventually } from '../helpers/eventually.js';

type Service = Awaited<ReturnType<typeof startService>>;

interface Delivery {
  subscription: string;
  headers: IncomingHttpHeaders;
  body: string;
}

// A receiver on 127.0.0.1 that counts deliveries per subscription (the path's last segment) and,
// while `holding`, keeps its answers back: the attempts stay in flight.
async function startCountingReceiver() {
  const deliveries: Delivery[] = [];
  const held: ServerResponse[] = [];
  let holding = false;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      deliveries.push({ subscription: (req.url ?? '').split('/').pop() ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      if (holding) held.push(res);
      // A short wait, so the replicas' attempts overlap.
      else setTimeout(() => res.writeHead(204).end(), 5);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (name: string) => `http://127.0.0.1:${port}/hooks/${name}`,
    deliveries,
    hold(on: boolean) {
      holding = on;
    },
    close() {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('webhooks delivered by several service processes on one database (PostgreSQL)', () => {
  const services: Service[] = [];
  const drops: Array<() => Promise<void>> = [];
  const receivers: Array<{ close(): Promise<void> }> = [];
  afterAll(async () => {
    for (const s of services) await killProcess(s.child);
    for (const r of receivers) await r.close();
    for (const drop of drops) await drop();
  });

  async function start(env: Record<string, string>): Promise<Service> {
    const s = await startService({ LOG_LEVEL: 'error', DATABASE_POOL_MAX: '4', AUTH_ISSUER: 'http://cns.test', WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true', ...env });
    services.push(s);
    return s;
  }

  async function call(s: Service, token: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: { data: Record<string, unknown> } }> {
    const res = await fetch(`${s.base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, json: (await res.json()) as { data: Record<string, unknown> } };
  }

  async function subscribe(s: Service, token: string, url: string): Promise<{ id: string; secret: string }> {
    const made = await call(s, token, 'POST', '/webhooks/v1/subscriptions', { url, events: ['payment.recorded'] });
    expect(made.status, JSON.stringify(made.json)).toBe(201);
    return made.json.data as { id: string; secret: string };
  }

  async function attemptsOf(url: string): Promise<Map<string, { attempts: number; state: string }>> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows } = await client.query<{ event_id: string; subscription_id: string; attempts: number; state: string }>(
        'select event_id, subscription_id, attempts, state from webhook_deliveries',
      );
      return new Map(rows.map((r) => [`${r.subscription_id} ${r.event_id}`, { attempts: r.attempts, state: r.state }]));
    } finally {
      await client.end();
    }
  }

  const succeeded = (metrics: string) => Number(/^webhook_deliveries_total\{outcome="succeeded"\} (\d+)/m.exec(metrics)?.[1] ?? 0);

  it('three processes deliver a backlog of 300 events to two subscriptions: each event reaches each subscription, none more often than its recorded attempts (PostgreSQL)', async () => {
    const database = await createServerDatabase();
    drops.push(database.drop);
    const receiver = await startCountingReceiver();
    receivers.push(receiver);
    const first = await start(database.env);
    const { token } = await bootstrapToken(first);
    const replicas = [first, await start(database.env), await start(database.env)];
    const subscriptions = { a: await subscribe(first, token, receiver.url('a')), b: await subscribe(first, token, receiver.url('b')) };

    // The backlog: recorded through all three, 30 at a time, faster than one worker delivers them.
    const sessions: string[] = [];
    for (let from = 0; from < 300; from += 30) {
      await Promise.all(
        Array.from({ length: 30 }, async (_, i) => {
          const body = paymentBody({ network: 'net_webhooks' });
          const res = await call(replicas[(from + i) % 3]!, token, 'POST', '/payments/v1/session-payments', body);
          expect(res.status).toBe(201);
          sessions.push(body.session);
        }),
      );
    }
    // A safety net, not a speed check.
    await vi.waitFor(
      () => {
        for (const name of ['a', 'b']) expect(new Set(receiver.deliveries.filter((d) => d.subscription === name).map((d) => d.headers['webhook-id'])).size).toBe(300);
      },
      { timeout: 60_000, interval: 200 },
    );
    // A receiver has an attempt before its replica records the answer: wait for the records too.
    const attempts = await eventually(async () => {
      const recorded = await attemptsOf(database.url);
      expect([...recorded.values()].filter((a) => a.state !== 'SUCCEEDED')).toEqual([]);
      return recorded;
    }, 200);

    for (const [name, subscription] of Object.entries(subscriptions)) {
      const mine = receiver.deliveries.filter((d) => d.subscription === name);
      const perId = new Map<string, number>();
      for (const d of mine) perId.set(String(d.headers['webhook-id']), (perId.get(String(d.headers['webhook-id'])) ?? 0) + 1);
      for (const [id, received] of perId) {
        const recorded = attempts.get(`${subscription.id} ${id}`);
        expect(recorded, `${name} ${id}`).toBeDefined();
        expect(received, `${name} ${id}: received ${received}, attempts recorded ${recorded!.attempts}`).toBeLessThanOrEqual(recorded!.attempts);
      }
      // Every one verifies with the subscription's secret, and the sessions are the ones recorded.
      const payloads = mine.map((d) => verified(subscription.secret, d) as { type: string; data: { session: string } });
      expect(new Set(payloads.map((p) => p.data.session))).toEqual(new Set(sessions));
      expect(payloads.every((p) => p.type === 'payment.recorded')).toBe(true);
    }
    expect(attempts.size).toBe(600);
    // Each process counts what it delivered: together exactly what the receiver got, and the
    // backlog was shared.
    const counts = await Promise.all(replicas.map(async (r) => succeeded(await (await fetch(`${r.base}/metrics`)).text())));
    expect(counts.reduce((x, y) => x + y, 0)).toBe(receiver.deliveries.length);
    expect(counts.filter((n) => n > 0).length).toBeGreaterThanOrEqual(2);
  }, 180_000);

  it('a process killed with kill -9 while its attempts wait for the receiver: each is attempted again after the restart, with the same webhook-id, and verifies (PostgreSQL)', async () => {
    const database = await createServerDatabase();
    drops.push(database.drop);
    const receiver = await startCountingReceiver();
    receivers.push(receiver);
    const doomed = await start(database.env);
    const { token } = await bootstrapToken(doomed);
    const subscription = await subscribe(doomed, token, receiver.url('held'));

    receiver.hold(true);
    for (let i = 0; i < 5; i++) expect((await call(doomed, token, 'POST', '/payments/v1/session-payments', paymentBody({ network: 'net_webhooks' }))).status).toBe(201);
    await vi.waitFor(() => expect(receiver.deliveries).toHaveLength(5), { timeout: 30_000, interval: 100 });
    const inFlight = receiver.deliveries.map((d) => String(d.headers['webhook-id']));
    expect(new Set(inFlight).size).toBe(5);

    await killProcess(doomed.child);
    receiver.hold(false);
    const restarted = await start(database.env);
    // The bound of docs/events.md ("Delivery and retries"): within 60 s of the restart.
    await vi.waitFor(
      () => {
        const again = receiver.deliveries.slice(5).map((d) => String(d.headers['webhook-id']));
        expect(new Set(again)).toEqual(new Set(inFlight));
      },
      { timeout: 60_000, interval: 200 },
    );
    for (const d of receiver.deliveries.slice(5)) expect(verified(subscription.secret, d)).toMatchObject({ type: 'payment.recorded' });
    await vi.waitFor(async () => expect([...(await attemptsOf(database.url)).values()].map((a) => a.state)).toEqual(Array(5).fill('SUCCEEDED')), { timeout: 10_000 });
    await killProcess(restarted.child);
  }, 180_000);
});
