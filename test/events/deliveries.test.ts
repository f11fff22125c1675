import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { rowsOf } from '../../src/db/database.js';
import { GATHER_MS, NETWORK_SHARE, SUBSCRIPTION_SHARE } from '../../src/events/delivery-worker.js';
import { appendEvents } from '../../src/events/events-service.js';
import { createTestApp, type TestApp } from '../helpers/test-app.js';
import { uniqueNetwork } from '../helpers/asset-factory.js';
import { collectUrl, listPayments, recordPayment, uniqueId } from '../helpers/payments-factory.js';
import { startReceiver, verified, type WebhookReceiver } from '../helpers/webhook-receiver.js';

const BASE = '/webhooks/v1/subscriptions';

let t: TestApp;
let receiver: WebhookReceiver;

// Short waits between attempts, so a test sees every retry: two retries, then FAILED.
const RETRY_DELAYS_MS = [100, 200];

beforeAll(async () => {
  t = await createTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true' }, webhookRetryDelaysMs: RETRY_DELAYS_MS });
});
afterAll(() => t.close());
beforeEach(async () => {
  receiver = await startReceiver();
});
afterEach(() => receiver.close());

interface Subscription {
  id: string;
  secret: string;
}

async function subscribe(network: string | null, events: string[], url = receiver.url, on: TestApp = t): Promise<Subscription> {
  const res = await on.app.inject({ method: 'POST', url: BASE, headers: { authorization: on.bearer({ scopes: ['write:webhooks'], network }) }, payload: { url, events } });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().data as Subscription;
}

async function deliveriesOf(id: string, on: TestApp = t): Promise<{ eventId: string; eventType: string; state: string; attempts: number; lastStatus: number | null; lastError: string | null }[]> {
  const res = await on.app.inject({ url: `${BASE}/${id}/deliveries`, headers: { authorization: on.bearer({ scopes: ['read:webhooks'] }) } });
  expect(res.statusCode, res.body).toBe(200);
  expect(res.body).not.toContain('whsec_');
  return res.json().data;
}

// Every delivery of a subscription, from its table: the endpoint shows the latest 100 only.
// `count` asset.password.ignored events of `network` appended at once, as a burst of changes leaves
// them in the outbox.
function appendBacklog(network: string, count: number): Promise<void> {
  return t.database.db.transaction((tx) =>
    appendEvents(
      tx,
      Array.from({ length: count }, (_, i) => ({ type: 'asset.password.ignored' as const, network, data: { assetId: `CP-${i}`, network, rotationId: `apc_${i}`, at: new Date().toISOString() } })),
    ),
  );
}

async function allDeliveriesOf(id: string): Promise<{ state: string; attempts: number; lastStatus: number | null; lastError: string | null }[]> {
  return rowsOf(t.database.db, sql`SELECT state, attempts, last_status AS "lastStatus", last_error AS "lastError" FROM webhook_deliveries WHERE subscription_id = ${id}`);
}

// Waits until the deliveries endpoint shows what `done` looks for (a guard, not a speed check).
async function eventually<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 20_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > until) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('webhook deliveries', () => {
  it('delivers payment.recorded and payment.collected signed, with the text the list answers, verified by the reference library', async () => {
    const network = uniqueNetwork();
    const subscription = await subscribe(network, ['payment.recorded', 'payment.collected']);
    const payment = await recordPayment(t, { network, session: uniqueId('ses') });
    const [recorded] = await receiver.waitFor(1);
    const body = verified(subscription.secret, recorded!);
    expect(body.type).toBe('payment.recorded');
    expect(recorded!.headers['webhook-id']).toMatch(/^evt_[0-9a-f]{32}$/);
    expect(Number(recorded!.headers['webhook-timestamp'])).toBeCloseTo(Date.now() / 1000, -2);
    const listed = await listPayments(t, `sessionIds=${payment.session}`);
    // The same JSON text as the list's, byte for byte.
    expect(recorded!.body).toContain(`"data":${listed.body.slice(1, -1)}}`);

    const collect = await t.app.inject({ method: 'POST', url: collectUrl(payment.id), headers: { authorization: t.bearer({ scopes: ['write:sessionpayment'] }) } });
    expect(collect.statusCode, collect.body).toBe(200);
    const [, collected] = await receiver.waitFor(2);
    const collectedBody = verified(subscription.secret, collected!);
    expect(collectedBody.type).toBe('payment.collected');
    expect(collectedBody.data).toEqual(collect.json());
    expect(collected!.headers['webhook-id']).not.toBe(recorded!.headers['webhook-id']);

    const deliveries = await eventually(() => deliveriesOf(subscription.id), (d) => d.length === 2 && d.every((x) => x.state === 'SUCCEEDED'));
    expect(deliveries.map((d) => [d.eventType, d.state, d.attempts, d.lastStatus]).sort()).toEqual([
      ['payment.collected', 'SUCCEEDED', 1, 204],
      ['payment.recorded', 'SUCCEEDED', 1, 204],
    ]);
  });

  it('a network’s subscription gets its network’s events only; one without a network gets every network’s', async () => {
    const a = uniqueNetwork();
    const b = uniqueNetwork();
    const everyNetwork = await startReceiver();
    try {
      const onlyA = await subscribe(a, ['payment.recorded']);
      const all = await subscribe(null, ['payment.recorded'], everyNetwork.url);
      const fromB = await recordPayment(t, { network: b, session: uniqueId('ses') });
      const fromA = await recordPayment(t, { network: a, session: uniqueId('ses') });
      const sessionsOf = (secret: string, got: WebhookReceiver['received']) => got.map((w) => (verified(secret, w).data as { session: string }).session);
      await receiver.waitFor(1);
      // Other tests' payments reach the subscription of every network too.
      await eventually(
        async () => sessionsOf(all.secret, everyNetwork.received),
        (sessions) => sessions.includes(fromA.session) && sessions.includes(fromB.session),
      );
      expect(sessionsOf(all.secret, everyNetwork.received)).toEqual(expect.arrayContaining([fromA.session, fromB.session]));
      // b's payment was delivered elsewhere by now, so a's subscription has had its chance at it.
      expect(sessionsOf(onlyA.secret, receiver.received)).toEqual([fromA.session]);
    } finally {
      await everyNetwork.close();
    }
  });

  it('writes a fresh delivery twice: made already taken, then its outcome (no claim in between)', async () => {
    // Every UPDATE of a delivery row of this subscription, counted by a trigger of the test's own.
    await t.database.db.execute(sql`CREATE TABLE IF NOT EXISTS test_delivery_updates (event_id text, subscription_id text, attempts int, state text)`);
    await t.database.db.execute(sql`
      CREATE OR REPLACE FUNCTION test_count_delivery_update() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO test_delivery_updates VALUES (NEW.event_id, NEW.subscription_id, NEW.attempts, NEW.state);
        RETURN NEW;
      END $$`);
    await t.database.db.execute(sql`
      CREATE OR REPLACE TRIGGER test_delivery_updates AFTER UPDATE ON webhook_deliveries
      FOR EACH ROW EXECUTE FUNCTION test_count_delivery_update()`);
    try {
      const network = uniqueNetwork();
      const subscription = await subscribe(network, ['payment.recorded']);
      for (let i = 0; i < 3; i++) await recordPayment(t, { network, session: uniqueId('ses') });
      await receiver.waitFor(3);
      const deliveries = await eventually(() => deliveriesOf(subscription.id), (d) => d.length === 3 && d.every((x) => x.state === 'SUCCEEDED'));
      expect(deliveries.map((d) => [d.state, d.attempts])).toEqual([['SUCCEEDED', 1], ['SUCCEEDED', 1], ['SUCCEEDED', 1]]);
      const updates = await rowsOf<{ eventId: string; attempts: number; state: string }>(
        t.database.db,
        sql`SELECT event_id AS "eventId", attempts, state FROM test_delivery_updates WHERE subscription_id = ${subscription.id} ORDER BY event_id`,
      );
      // One update each, the outcome's: the first attempt was counted when the row was made.
      expect(updates.map((u) => [u.attempts, u.state])).toEqual([[1, 'SUCCEEDED'], [1, 'SUCCEEDED'], [1, 'SUCCEEDED']]);
      expect(new Set(updates.map((u) => u.eventId)).size).toBe(3);
    } finally {
      await t.database.db.execute(sql`DROP TRIGGER test_delivery_updates ON webhook_deliveries`);
    }
  });

  it('writes the outcomes of attempts that end a few milliseconds apart together, a statement per gathering wait rather than one each, and without waiting for a poll', async () => {
    // An app of its own whose worker never polls within the test: only its own wakes (a signal,
    // a gathering) can deliver and write the outcomes, and no other test's subscription is there.
    const own = await createTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true' }, webhookPollIntervalMs: 600_000 });
    // The transaction of every outcome written, by a trigger of the test's own: each of the
    // worker's statements is a transaction of its own.
    await own.database.db.execute(sql`CREATE TABLE test_outcome_writes (subscription_id text, tx bigint)`);
    await own.database.db.execute(sql`
      CREATE FUNCTION test_record_outcome_write() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.state <> 'PENDING' THEN INSERT INTO test_outcome_writes VALUES (NEW.subscription_id, txid_current()); END IF;
        RETURN NEW;
      END $$`);
    await own.database.db.execute(sql`
      CREATE TRIGGER test_outcome_writes AFTER UPDATE ON webhook_deliveries
      FOR EACH ROW EXECUTE FUNCTION test_record_outcome_write()`);
    try {
      const network = uniqueNetwork();
      const subscription = await subscribe(network, ['asset.password.ignored'], receiver.url, own);
      const count = 30;
      receiver.hang(true);
      await own.database.db.transaction((tx) =>
        appendEvents(
          tx,
          Array.from({ length: count }, (_, i) => ({ type: 'asset.password.ignored' as const, network, data: { assetId: `CP-${i}`, network, rotationId: `apc_${i}`, at: new Date().toISOString() } })),
        ),
      );
      await receiver.waitFor(count);
      // The answers come one by one, a turn of the event loop apart: before, each ended attempt started a round
      // of its own as soon as the worker was idle.
      const started = performance.now();
      while (receiver.answerOne()) await new Promise((resolve) => setImmediate(resolve));
      const answeringMs = performance.now() - started;
      const deliveries = await eventually(() => deliveriesOf(subscription.id, own), (d) => d.length === count && d.every((x) => x.state === 'SUCCEEDED'));
      expect(deliveries.map((d) => d.state)).toEqual(Array(count).fill('SUCCEEDED'));
      const [writes] = await rowsOf<{ statements: number; rows: number }>(
        own.database.db,
        sql`SELECT count(DISTINCT tx)::int AS statements, count(*)::int AS rows FROM test_outcome_writes WHERE subscription_id = ${subscription.id}`,
      );
      expect(writes!.rows).toBe(count);
      // One statement per gathering wait that the answers spanned, one for the round running when
      // they began, one for the last ones.
      expect(writes!.statements).toBeLessThanOrEqual(Math.ceil(answeringMs / GATHER_MS) + 2);
    } finally {
      receiver.hang(false);
      await own.close();
    }
  });

  it('retries a failed attempt with the same webhook-id, and succeeds', async () => {
    const network = uniqueNetwork();
    const subscription = await subscribe(network, ['payment.recorded']);
    receiver.answerWith(500);
    await recordPayment(t, { network, session: uniqueId('ses') });
    await receiver.waitFor(1);
    receiver.answerWith(200);
    const [first, second] = await receiver.waitFor(2);
    expect(second!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(second!.body).toBe(first!.body);
    verified(subscription.secret, second!);
    const [delivery] = await eventually(() => deliveriesOf(subscription.id), (d) => d[0]?.state === 'SUCCEEDED');
    expect(delivery).toMatchObject({ state: 'SUCCEEDED', attempts: 2, lastStatus: 200, lastError: null });
  });

  it('marks a delivery FAILED after the last retry, and shows why', async () => {
    const network = uniqueNetwork();
    const subscription = await subscribe(network, ['payment.recorded']);
    receiver.answerWith(503);
    await recordPayment(t, { network, session: uniqueId('ses') });
    const [delivery] = await eventually(() => deliveriesOf(subscription.id), (d) => d[0]?.state === 'FAILED');
    expect(delivery).toMatchObject({ state: 'FAILED', attempts: RETRY_DELAYS_MS.length + 1, lastStatus: 503, lastError: null });
    expect(new Set(receiver.received.map((w) => w.headers['webhook-id'])).size).toBe(1);
    expect(receiver.received).toHaveLength(RETRY_DELAYS_MS.length + 1);
  });

  it('records a redirect as a failed attempt that says it was not followed', async () => {
    const network = uniqueNetwork();
    const subscription = await subscribe(network, ['payment.recorded']);
    receiver.answerWith(302);
    await recordPayment(t, { network, session: uniqueId('ses') });
    // A claimed attempt counts before its answer is recorded: wait for the answer itself.
    const [delivery] = await eventually(() => deliveriesOf(subscription.id), (d) => d[0]?.lastStatus != null);
    expect(delivery).toMatchObject({ lastStatus: 302, lastError: 'redirects are not followed' });
    expect(delivery!.state).not.toBe('SUCCEEDED');
  });

  it('records an unreachable target’s error', async () => {
    const network = uniqueNetwork();
    // A port nothing listens on.
    const closed = await startReceiver();
    await closed.close();
    const subscription = await subscribe(network, ['payment.recorded'], closed.url);
    await recordPayment(t, { network, session: uniqueId('ses') });
    const [delivery] = await eventually(() => deliveriesOf(subscription.id), (d) => (d[0]?.attempts ?? 0) >= 1 && d[0]?.lastError !== null);
    expect(delivery).toMatchObject({ lastStatus: null, lastError: expect.any(String) });
  });

  it('a receiver that hangs holds its subscription’s share of the slots and no more: another subscription’s backlog is delivered while its attempts hang, and its own deliveries are made once it answers', async () => {
    const hung = uniqueNetwork();
    const other = uniqueNetwork();
    const otherReceiver = await startReceiver();
    try {
      const a = await subscribe(hung, ['asset.password.ignored']);
      const b = await subscribe(other, ['asset.password.ignored'], otherReceiver.url);
      receiver.hang(true);
      // More due deliveries than its share: it takes its share, and they hang.
      const backlogA = SUBSCRIPTION_SHARE + 16;
      await appendBacklog(hung, backlogA);
      await receiver.waitFor(SUBSCRIPTION_SHARE);
      const backlogB = 20;
      await appendBacklog(other, backlogB);
      const deliveredB = await otherReceiver.waitFor(backlogB);
      expect(deliveredB.map((w) => verified(b.secret, w).type)).toEqual(Array(backlogB).fill('asset.password.ignored'));
      // B's backlog went through while every attempt A was given still hangs: none of them has
      // ended, none beyond its share was started.
      expect(receiver.hanging()).toBe(SUBSCRIPTION_SHARE);
      expect(receiver.received).toHaveLength(SUBSCRIPTION_SHARE);
      const waitingA = await allDeliveriesOf(a.id);
      expect(waitingA.filter((d) => d.attempts === 1)).toHaveLength(SUBSCRIPTION_SHARE);
      expect(waitingA.every((d) => d.state === 'PENDING' && d.lastStatus === null && d.lastError === null)).toBe(true);

      // Once it answers, A gets its whole backlog.
      receiver.hang(false);
      const deliveriesA = await eventually(() => allDeliveriesOf(a.id), (d) => d.length === backlogA && d.every((x) => x.state === 'SUCCEEDED'));
      expect(deliveriesA.map((d) => d.state)).toEqual(Array(backlogA).fill('SUCCEEDED'));
      for (const webhook of receiver.received) verified(a.secret, webhook);
      expect(new Set(receiver.received.map((w) => w.headers['webhook-id'])).size).toBe(backlogA);
    } finally {
      receiver.hang(false);
      await otherReceiver.close();
    }
  });

  it('the subscriptions of one network together hold the network’s share and no more: three of its receivers hanging leave the slots to other networks', async () => {
    const hung = uniqueNetwork();
    const other = uniqueNetwork();
    const otherReceiver = await startReceiver();
    try {
      // Three subscriptions of one network, each with more due deliveries than its own share: more
      // than the network's share together.
      const a1 = await subscribe(hung, ['asset.password.ignored']);
      const a2 = await subscribe(hung, ['asset.password.ignored']);
      const a3 = await subscribe(hung, ['asset.password.ignored']);
      expect(3 * SUBSCRIPTION_SHARE).toBeGreaterThan(NETWORK_SHARE);
      receiver.hang(true);
      const backlogA = SUBSCRIPTION_SHARE + 16;
      await appendBacklog(hung, backlogA);
      await receiver.waitFor(NETWORK_SHARE);
      const backlogB = 20;
      const b = await subscribe(other, ['asset.password.ignored'], otherReceiver.url);
      await appendBacklog(other, backlogB);
      const deliveredB = await otherReceiver.waitFor(backlogB);
      expect(deliveredB.map((w) => verified(b.secret, w).type)).toEqual(Array(backlogB).fill('asset.password.ignored'));
      // The network's share was started and hangs, split between its subscriptions; none beyond it.
      expect(receiver.hanging()).toBe(NETWORK_SHARE);
      expect(receiver.received).toHaveLength(NETWORK_SHARE);
      const started = [...(await allDeliveriesOf(a1.id)), ...(await allDeliveriesOf(a2.id)), ...(await allDeliveriesOf(a3.id))].filter((d) => d.attempts === 1);
      expect(started).toHaveLength(NETWORK_SHARE);

      receiver.hang(false);
      for (const a of [a1, a2, a3]) {
        const done = await eventually(() => allDeliveriesOf(a.id), (d) => d.length === backlogA && d.every((x) => x.state === 'SUCCEEDED'));
        expect(done.map((d) => d.state)).toEqual(Array(backlogA).fill('SUCCEEDED'));
      }
    } finally {
      receiver.hang(false);
      await otherReceiver.close();
    }
  });

  it('makes an attempt cut short by a crash again once its lease ends, with the same webhook-id', async () => {
    const network = uniqueNetwork();
    const subscription = await subscribe(network, ['payment.recorded']);
    // What a replica killed during its first attempt leaves behind: the event, and its delivery
    // counted once and leased for a moment.
    const [event] = await rowsOf<{ id: string }>(
      t.database.db,
      sql`INSERT INTO events (network, type, data, dispatched_at) VALUES (${network}, 'payment.recorded', '{"id":"pmt_crashed"}', now()) RETURNING id`,
    );
    await t.database.db.execute(sql`
      INSERT INTO webhook_deliveries (event_id, subscription_id, attempts, next_attempt_at, lease_until)
      VALUES (${event!.id}, ${subscription.id}, 1, now() + interval '300 milliseconds', now() + interval '300 milliseconds')`);
    const [webhook] = await receiver.waitFor(1);
    expect(webhook!.headers['webhook-id']).toBe(event!.id);
    expect(verified(subscription.secret, webhook!).data).toEqual({ id: 'pmt_crashed' });
    const [delivery] = await eventually(() => deliveriesOf(subscription.id), (d) => d[0]?.state === 'SUCCEEDED');
    expect(delivery).toMatchObject({ eventId: event!.id, state: 'SUCCEEDED', attempts: 2 });
  });

  it('sends webhook.test to the one subscription, signed with the rotated secret after a rotation', async () => {
    const network = uniqueNetwork();
    const subscription = await subscribe(network, ['station.connected']);
    const rotate = await t.app.inject({ method: 'POST', url: `${BASE}/${subscription.id}/rotate-secret`, headers: { authorization: t.bearer({ scopes: ['write:webhooks'], network }) } });
    const { secret } = rotate.json().data as { secret: string };
    const res = await t.app.inject({ method: 'POST', url: `${BASE}/${subscription.id}/test`, headers: { authorization: t.bearer({ scopes: ['write:webhooks'], network }) } });
    expect(res.statusCode, res.body).toBe(202);
    const { eventId } = res.json().data as { eventId: string };
    const [webhook] = await receiver.waitFor(1);
    expect(webhook!.headers['webhook-id']).toBe(eventId);
    expect(verified(secret, webhook!)).toEqual({ type: 'webhook.test', timestamp: expect.any(String), data: { subscriptionId: subscription.id, at: expect.any(String) } });
    expect(() => verified(subscription.secret, webhook!)).toThrow();
  });

  it('shows deliveries by outcome, the backlog and the oldest pending age on /metrics', async () => {
    const network = uniqueNetwork();
    await subscribe(network, ['payment.recorded']);
    await recordPayment(t, { network, session: uniqueId('ses') });
    await receiver.waitFor(1);
    const metrics = await eventually(
      async () => (await t.app.inject({ url: '/metrics' })).body,
      (text) => /webhook_deliveries_total\{outcome="succeeded"\} [1-9]/.test(text),
    );
    expect(metrics).toMatch(/webhook_deliveries_total\{outcome="succeeded"\} [1-9]/);
    expect(metrics).toMatch(/webhook_deliveries_total\{outcome="failed"\} \d/);
    expect(metrics).toMatch(/webhook_backlog\{kind="deliveries"\} \d/);
    expect(metrics).toMatch(/webhook_oldest_pending_event_age_seconds \d/);
  });

  it('a network whose receivers\' names stop answering makes one lookup at a time, and another network\'s deliveries still look theirs up and go', async () => {
    // Every name answers the receiver's address until `silent` is set; then the names under
    // silent.example never answer, until the test lets them.
    let silent = false;
    const started: string[] = [];
    const answers: Array<() => void> = [];
    const resolver = (hostname: string) => {
      started.push(hostname);
      const address = [{ address: '127.0.0.1', family: 4 }];
      if (!silent || !hostname.endsWith('.silent.example')) return Promise.resolve(address);
      return new Promise<typeof address>((resolve) => answers.push(() => resolve(address)));
    };
    const own = await createTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true' }, webhookRetryDelaysMs: [600_000], webhookResolveHost: resolver });
    try {
      const at = (host: string) => receiver.url.replace('127.0.0.1', host);
      const hostile = uniqueNetwork();
      const other = uniqueNetwork();
      const stalled = await Promise.all(['a', 'b', 'c'].map((name) => subscribe(hostile, ['payment.recorded'], at(`${name}.silent.example`), own)));
      const honest = await subscribe(other, ['payment.recorded'], at('receiver.example.test'), own);
      silent = true;
      started.length = 0;
      for (const { id } of stalled) {
        const res = await own.app.inject({ method: 'POST', url: `${BASE}/${id}/test`, headers: { authorization: own.bearer({ scopes: ['write:webhooks'], network: hostile }) } });
        expect(res.statusCode, res.body).toBe(202);
      }
      const counts = await eventually(async () => own.app.webhookLookups.counts(), (c) => c.running === 1 && c.waiting === 2);
      expect(counts).toMatchObject({ running: 1, waiting: 2 });
      // Three deliveries to three silent names: one lookup runs, the others wait for their network's turn.
      expect(started).toHaveLength(1);
      const test = await own.app.inject({ method: 'POST', url: `${BASE}/${honest.id}/test`, headers: { authorization: own.bearer({ scopes: ['write:webhooks'], network: other }) } });
      expect(test.statusCode, test.body).toBe(202);
      const [webhook] = await receiver.waitFor(1);
      expect(webhook!.headers['webhook-id']).toBe(test.json().data.eventId);
      expect(started).toContain('receiver.example.test');
      expect(started.filter((name) => name.endsWith('.silent.example'))).toHaveLength(1);
      // Once the names answer, the hostile network's deliveries go too, one lookup after another.
      const answering = setInterval(() => answers.splice(0).forEach((answer) => answer()), 20);
      try {
        await receiver.waitFor(4);
      } finally {
        clearInterval(answering);
      }
      expect(new Set(receiver.received.map((r) => r.headers['webhook-id'])).size).toBe(4);
    } finally {
      await own.close();
    }
  });

  it('counts a DISABLED subscription\'s pending deliveries as held: not as deliveries to make and not in the oldest age, until it is enabled again', async () => {
    // An app of its own: /metrics counts the whole database, so this test's rows must be all of it.
    const own = await createTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true' }, webhookRetryDelaysMs: RETRY_DELAYS_MS });
    try {
      const network = uniqueNetwork();
      const held = await subscribe(network, ['payment.recorded'], receiver.url, own);
      const disable = await own.app.inject({ method: 'PATCH', url: `${BASE}/${held.id}`, headers: { authorization: own.bearer({ scopes: ['write:webhooks'], network }) }, payload: { status: 'DISABLED' } });
      expect(disable.statusCode, disable.body).toBe(200);
      // An hour-old event whose delivery waits for the subscription, as one left when it was disabled.
      const [old] = await rowsOf<{ id: string }>(
        own.database.db,
        sql`INSERT INTO events (network, type, data, created_at, dispatched_at) VALUES (${network}, 'payment.recorded', '{"id":"pmt_held"}', now() - interval '1 hour', now()) RETURNING id`,
      );
      await own.database.db.execute(sql`INSERT INTO webhook_deliveries (event_id, subscription_id, next_attempt_at) VALUES (${old!.id}, ${held.id}, now())`);
      const gauges = async () => {
        const text = (await own.app.inject({ url: '/metrics' })).body;
        const read = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
        return { deliveries: read('webhook_backlog\\{kind="deliveries"\\}'), held: read('webhook_backlog\\{kind="held"\\}'), age: read('webhook_oldest_pending_event_age_seconds') };
      };
      expect(await gauges()).toEqual({ deliveries: 0, held: 1, age: 0 });

      // A test event to it is sent whatever its status: a delivery to make, ten minutes old, due later.
      const [test] = await rowsOf<{ id: string }>(
        own.database.db,
        sql`INSERT INTO events (network, type, data, created_at, dispatched_at) VALUES (${network}, 'webhook.test', '{}', now() - interval '10 minutes', now()) RETURNING id`,
      );
      await own.database.db.execute(sql`INSERT INTO webhook_deliveries (event_id, subscription_id, next_attempt_at) VALUES (${test!.id}, ${held.id}, now() + interval '1 hour')`);
      const withTest = await eventually(gauges, (g) => g.deliveries === 1);
      expect(withTest).toMatchObject({ deliveries: 1, held: 1 });
      expect(withTest.age).toBeGreaterThanOrEqual(600);
      expect(withTest.age).toBeLessThan(900);

      // Enabled again, the held delivery is one to make: it goes, and nothing is held.
      const enable = await own.app.inject({ method: 'PATCH', url: `${BASE}/${held.id}`, headers: { authorization: own.bearer({ scopes: ['write:webhooks'], network }) }, payload: { status: 'ENABLED' } });
      expect(enable.statusCode, enable.body).toBe(200);
      const [sent] = await receiver.waitFor(1);
      expect(sent!.headers['webhook-id']).toBe(old!.id);
      expect(await eventually(gauges, (g) => g.held === 0 && g.deliveries === 1)).toMatchObject({ deliveries: 1, held: 0 });
    } finally {
      await own.close();
    }
  });
});
