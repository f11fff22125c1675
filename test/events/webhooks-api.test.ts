import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/test-app.js';
import type { ResolveHost } from '../../src/events/target-rules.js';
import { familyError, uniqueNetwork } from '../helpers/asset-factory.js';
import { eventually } from '../helpers/eventually.js';

const BASE = '/webhooks/v1/subscriptions';
const LOOPBACK = () => Promise.resolve([{ address: '127.0.0.1', family: 4 }]);
const WRITE = 'write:webhooks';
const READ = 'read:webhooks';

let t: TestApp;

beforeAll(async () => {
  // Every host name resolves to this machine (no resolver is needed, none is asked).
  t = await createTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true' }, webhookResolveHost: LOOPBACK });
});
afterAll(() => t.close());

const auth = (scopes: string[], network: string | null = null) => ({ authorization: t.bearer({ scopes, network }) });

async function create(network: string | null, body: Record<string, unknown> = {}) {
  const res = await t.app.inject({
    method: 'POST',
    url: BASE,
    headers: auth([WRITE], network),
    payload: { url: 'https://hooks.example.com/a', events: ['payment.recorded'], ...body },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().data as { id: string; secret: string; network: string | null; [key: string]: unknown };
}

describe('webhook subscriptions', () => {
  it('creates one: 201 with the secret, once; the network is the token’s', async () => {
    const network = uniqueNetwork();
    const res = await t.app.inject({
      method: 'POST',
      url: BASE,
      headers: auth([WRITE], network),
      payload: { url: 'https://hooks.example.com/a', events: ['payment.recorded', 'station.connected'], description: ' Finance ' },
    });
    expect(res.statusCode, res.body).toBe(201);
    const created = res.json().data;
    expect(created).toEqual({
      id: expect.stringMatching(/^whk_[0-9A-Z]{26}$/),
      url: 'https://hooks.example.com/a',
      events: ['payment.recorded', 'station.connected'],
      network,
      status: 'ENABLED',
      description: 'Finance',
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]+=*$/),
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    expect(Buffer.from(created.secret.slice('whsec_'.length), 'base64').length).toBeGreaterThanOrEqual(24);
    expect(res.headers.location).toBe(`${BASE}/${created.id}`);

    const read = await t.app.inject({ url: `${BASE}/${created.id}`, headers: auth([READ], network) });
    expect(read.statusCode).toBe(200);
    const { secret: _secret, ...withoutSecret } = created;
    expect(read.json().data).toEqual(withoutSecret);
    expect(read.body).not.toContain(created.secret);
  });

  it('a token without a network claim makes subscriptions of every network (network null)', async () => {
    const created = await create(null);
    expect(created.network).toBeNull();
  });

  it('refuses unknown event types, webhook.test, an empty list, repeats and unknown fields with 400', async () => {
    for (const payload of [
      { url: 'https://hooks.example.com/a', events: ['payment.refunded'] },
      { url: 'https://hooks.example.com/a', events: ['webhook.test'] },
      { url: 'https://hooks.example.com/a', events: [] },
      { url: 'https://hooks.example.com/a', events: ['payment.recorded', 'payment.recorded'] },
      { url: 'https://hooks.example.com/a', events: ['payment.recorded'], secret: 'whsec_mine' },
      { url: 'not a url', events: ['payment.recorded'] },
      { url: 'ftp://hooks.example.com/a', events: ['payment.recorded'] },
      { events: ['payment.recorded'] },
    ]) {
      const res = await t.app.inject({ method: 'POST', url: BASE, headers: auth([WRITE]), payload });
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json()).toEqual(familyError('BAD_REQUEST', 'INVALID_REQUEST_PARAMETERS'));
    }
  });

  it('answers 401 without a token and 403 without the scope, in the family’s shape', async () => {
    const none = await t.app.inject({ method: 'GET', url: BASE });
    expect(none.statusCode).toBe(401);
    expect(none.json()).toEqual({ message: expect.any(String) });
    const readOnly = await t.app.inject({ method: 'POST', url: BASE, headers: auth([READ]), payload: { url: 'https://a.example.com', events: ['payment.recorded'] } });
    expect(readOnly.statusCode).toBe(403);
    const other = await t.app.inject({ method: 'GET', url: BASE, headers: auth(['read:asset']) });
    expect(other.statusCode).toBe(403);
    expect(other.json()).toEqual({ message: expect.any(String) });
  });

  it('write:webhooks alone reads too: the list, one subscription and its deliveries', async () => {
    const network = uniqueNetwork();
    const made = await create(network);
    for (const url of [BASE, `${BASE}/${made.id}`, `${BASE}/${made.id}/deliveries`]) {
      const res = await t.app.inject({ url, headers: auth([WRITE], network) });
      expect(res.statusCode, `${url}: ${res.body}`).toBe(200);
      expect(res.body).not.toContain(made.secret);
    }
  });

  it('another network’s subscription is a 404 for every operation, and missing from the list', async () => {
    const mine = uniqueNetwork();
    const theirs = await create(uniqueNetwork());
    const everyNetwork = await create(null);
    for (const id of [theirs.id, everyNetwork.id, 'whk_missing']) {
      for (const [method, suffix, scopes] of [
        ['GET', '', [READ]],
        ['PATCH', '', [WRITE]],
        ['DELETE', '', [WRITE]],
        ['POST', '/rotate-secret', [WRITE]],
        ['POST', '/test', [WRITE]],
        ['GET', '/deliveries', [READ]],
      ] as const) {
        const res = await t.app.inject({
          method,
          url: `${BASE}/${id}${suffix}`,
          headers: auth([...scopes], mine),
          ...(method === 'PATCH' ? { payload: { status: 'DISABLED' } } : {}),
        });
        expect(res.statusCode, `${method} ${suffix} ${id}`).toBe(404);
        expect(res.json()).toEqual({ type: 'NOT_FOUND', code: 'SUBSCRIPTION_NOT_FOUND', message: expect.any(String) });
      }
    }
    const list = await t.app.inject({ url: `${BASE}?limit=100`, headers: auth([READ], mine) });
    expect(list.json().data).toEqual({ items: [], hasMore: false });
    // The unscoped token sees them all.
    const unscoped = await t.app.inject({ url: `${BASE}/${theirs.id}`, headers: auth([READ]) });
    expect(unscoped.statusCode).toBe(200);
  });

  it('lists a network’s subscriptions in pages, ordered by id, without secrets', async () => {
    const network = uniqueNetwork();
    const made = [await create(network), await create(network), await create(network)];
    const first = await t.app.inject({ url: `${BASE}?limit=2`, headers: auth([READ], network) });
    expect(first.statusCode).toBe(200);
    const page1 = first.json().data;
    expect(page1.hasMore).toBe(true);
    expect(page1.items.map((s: { id: string }) => s.id)).toEqual(made.slice(0, 2).map((s) => s.id));
    const second = await t.app.inject({ url: `${BASE}?limit=2&startingAfter=${page1.items[1].id}`, headers: auth([READ], network) });
    expect(second.json().data).toEqual({ items: [expect.objectContaining({ id: made[2]!.id })], hasMore: false });
    for (const s of made) expect(first.body + second.body).not.toContain(s.secret);
    const bad = await t.app.inject({ url: `${BASE}?limit=0`, headers: auth([READ], network) });
    expect(bad.statusCode).toBe(400);
  });

  it('changes url, events, description and status with PATCH; an empty change is a 400', async () => {
    const network = uniqueNetwork();
    const s = await create(network, { description: 'old' });
    const res = await t.app.inject({
      method: 'PATCH',
      url: `${BASE}/${s.id}`,
      headers: auth([WRITE], network),
      payload: { url: 'https://hooks.example.com/b', events: ['asset.password.ignored'], description: null, status: 'DISABLED' },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().data).toMatchObject({ url: 'https://hooks.example.com/b', events: ['asset.password.ignored'], description: null, status: 'DISABLED' });
    expect(res.json().data).not.toHaveProperty('secret');
    const empty = await t.app.inject({ method: 'PATCH', url: `${BASE}/${s.id}`, headers: auth([WRITE], network), payload: {} });
    expect(empty.statusCode).toBe(400);
    const readOnly = await t.app.inject({ method: 'PATCH', url: `${BASE}/${s.id}`, headers: auth([READ], network), payload: { status: 'ENABLED' } });
    expect(readOnly.statusCode).toBe(403);
  });

  it('rotates the secret: the new one is shown once and differs', async () => {
    const network = uniqueNetwork();
    const s = await create(network);
    const res = await t.app.inject({ method: 'POST', url: `${BASE}/${s.id}/rotate-secret`, headers: auth([WRITE], network) });
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const rotated = res.json().data;
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(s.secret);
  });

  it('takes no body or {} for rotate-secret and test, refuses any field with 400 and changes nothing', async () => {
    const network = uniqueNetwork();
    const s = await create(network);
    for (const suffix of ['/rotate-secret', '/test']) {
      const res = await t.app.inject({ method: 'POST', url: `${BASE}/${s.id}${suffix}`, headers: auth([WRITE], network), payload: { secret: 'whsec_mine' } });
      expect(res.statusCode, suffix).toBe(400);
      expect(res.json()).toEqual(familyError('BAD_REQUEST', 'INVALID_REQUEST_PARAMETERS'));
    }
    const deliveries = await t.app.inject({ url: `${BASE}/${s.id}/deliveries`, headers: auth([READ], network) });
    expect(deliveries.json().data).toEqual([]);
    const rotated = await t.app.inject({ method: 'POST', url: `${BASE}/${s.id}/rotate-secret`, headers: auth([WRITE], network), payload: {} });
    expect(rotated.statusCode).toBe(200);
    const tested = await t.app.inject({ method: 'POST', url: `${BASE}/${s.id}/test`, headers: auth([WRITE], network), payload: {} });
    expect(tested.statusCode).toBe(202);
  });

  it('a network has at most 16 subscriptions: the 17th is a 409 that makes nothing, even when 20 are asked for at once; another network is not counted', async () => {
    const network = uniqueNetwork();
    const asked = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        t.app.inject({ method: 'POST', url: BASE, headers: auth([WRITE], network), payload: { url: `https://hooks.example.com/${i}`, events: ['payment.recorded'] } }),
      ),
    );
    expect(asked.filter((r) => r.statusCode === 201)).toHaveLength(16);
    const refused = asked.filter((r) => r.statusCode !== 201);
    expect(refused).toHaveLength(4);
    for (const r of refused) {
      expect(r.statusCode).toBe(409);
      expect(r.json()).toEqual({ type: 'CONFLICT', code: 'SUBSCRIPTION_LIMIT_REACHED', message: `Network ${network} may have at most 16 webhook subscriptions; delete one first` });
    }
    const listed = await t.app.inject({ url: `${BASE}?limit=100`, headers: auth([READ], network) });
    expect(listed.json().data.items).toHaveLength(16);
    // Another network has its own 16.
    expect((await create(uniqueNetwork())).id).toMatch(/^whk_/);
    // One deleted makes room for one.
    const first = listed.json().data.items[0] as { id: string };
    expect((await t.app.inject({ method: 'DELETE', url: `${BASE}/${first.id}`, headers: auth([WRITE], network) })).statusCode).toBe(204);
    expect((await create(network)).id).toMatch(/^whk_/);
    const again = await t.app.inject({ method: 'POST', url: BASE, headers: auth([WRITE], network), payload: { url: 'https://hooks.example.com/x', events: ['payment.recorded'] } });
    expect(again.statusCode).toBe(409);
  });

  it('subscriptions made without a network claim count as one network of their own', async () => {
    const fresh = await createTestApp({ env: { WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true' }, webhookResolveHost: LOOPBACK });
    try {
      const make = (network?: string) =>
        fresh.app.inject({ method: 'POST', url: BASE, headers: { authorization: fresh.bearer({ scopes: [WRITE], ...(network ? { network } : {}) }) }, payload: { url: 'https://hooks.example.com/all', events: ['payment.recorded'] } });
      for (let i = 0; i < 16; i++) expect((await make()).statusCode).toBe(201);
      const refused = await make();
      expect(refused.statusCode).toBe(409);
      expect(refused.json()).toEqual({ type: 'CONFLICT', code: 'SUBSCRIPTION_LIMIT_REACHED', message: 'At most 16 webhook subscriptions may be made without a network; delete one first' });
      // A network's own are counted apart from them.
      expect((await make(uniqueNetwork())).statusCode).toBe(201);
    } finally {
      await fresh.close();
    }
  });

  it('a test event sent while the subscription is deleted is 202 or 404, never a 500', async () => {
    const network = uniqueNetwork();
    for (let i = 0; i < 20; i++) {
      const s = await create(network);
      const [tested, deleted] = await Promise.all([
        t.app.inject({ method: 'POST', url: `${BASE}/${s.id}/test`, headers: auth([WRITE], network) }),
        t.app.inject({ method: 'DELETE', url: `${BASE}/${s.id}`, headers: auth([WRITE], network) }),
      ]);
      expect(deleted.statusCode).toBe(204);
      expect([202, 404], tested.body).toContain(tested.statusCode);
      if (tested.statusCode === 404) expect(tested.json()).toEqual(familyError('NOT_FOUND', 'SUBSCRIPTION_NOT_FOUND'));
    }
  });

  it('deletes: 204, then 404', async () => {
    const network = uniqueNetwork();
    const s = await create(network);
    const res = await t.app.inject({ method: 'DELETE', url: `${BASE}/${s.id}`, headers: auth([WRITE], network) });
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
    const again = await t.app.inject({ method: 'DELETE', url: `${BASE}/${s.id}`, headers: auth([WRITE], network) });
    expect(again.statusCode).toBe(404);
  });

  it('refuses a NUL or other control character in a url, an id or a page cursor with 400, never a 500', async () => {
    const made = await create(null);
    for (const url of ['https://hooks.example.com/a\u0000b', 'https://hooks.example.com/a\u007fb']) {
      for (const [method, path] of [['POST', BASE], ['PATCH', `${BASE}/${made.id}`]] as const) {
        const res = await t.app.inject({ method, url: path, headers: auth([WRITE]), payload: { url, events: ['payment.recorded'] } });
        expect(res.statusCode, `${method} ${JSON.stringify(url)}`).toBe(400);
        expect(res.json()).toEqual(familyError('BAD_REQUEST', 'INVALID_REQUEST_PARAMETERS'));
      }
    }
    for (const path of [`${BASE}/whk_%00`, `${BASE}/whk_%00/deliveries`, `${BASE}?startingAfter=whk_%00`]) {
      const res = await t.app.inject({ url: path, headers: auth([READ]) });
      expect(res.statusCode, path).toBe(400);
      expect(res.json()).toEqual(familyError('BAD_REQUEST', 'INVALID_REQUEST_PARAMETERS'));
    }
    for (const suffix of ['/test', '/rotate-secret']) {
      const res = await t.app.inject({ method: 'POST', url: `${BASE}/whk_%00${suffix}`, headers: auth([WRITE]) });
      expect(res.statusCode, suffix).toBe(400);
    }
  });

  it('takes a url of up to 2,048 characters, as docs/events.md says, and refuses a longer one with 400', async () => {
    const url = (length: number) => `https://hooks.example.com/${'a'.repeat(length - 'https://hooks.example.com/'.length)}`;
    const longest = await t.app.inject({ method: 'POST', url: BASE, headers: auth([WRITE]), payload: { url: url(2048), events: ['payment.recorded'] } });
    expect(longest.statusCode, longest.body).toBe(201);
    const tooLong = await t.app.inject({ method: 'POST', url: BASE, headers: auth([WRITE]), payload: { url: url(2049), events: ['payment.recorded'] } });
    expect(tooLong.statusCode).toBe(400);
    expect(tooLong.json()).toEqual(familyError('BAD_REQUEST', 'INVALID_REQUEST_PARAMETERS'));
  });

  it('answers an unserved method with 405 in the family’s shape', async () => {
    const res = await t.app.inject({ method: 'PUT', url: BASE, headers: auth([WRITE]) });
    expect(res.statusCode).toBe(405);
    expect(res.json()).toEqual(familyError('METHOD_NOT_ALLOWED', 'METHOD_NOT_ALLOWED'));
  });
});

describe('webhook targets', () => {
  let strict: TestApp;
  beforeAll(async () => {
    // Without the allowance; every host name resolves to a private address.
    strict = await createTestApp({ webhookResolveHost: () => Promise.resolve([{ address: '10.1.2.3', family: 4 }]) });
  });
  afterAll(() => strict.close());

  it('refuses http and private addresses with 400 unless private targets are allowed', async () => {
    const create = (url: string) =>
      strict.app.inject({ method: 'POST', url: BASE, headers: { authorization: strict.bearer({ scopes: [WRITE] }) }, payload: { url, events: ['payment.recorded'] } });
    for (const url of ['http://hooks.example.com/a', 'https://hooks.example.com/a', 'https://127.0.0.1/a', 'https://10.0.0.5/a', 'https://169.254.169.254/latest', 'https://[::1]/a']) {
      const res = await create(url);
      expect(res.statusCode, url).toBe(400);
      expect(res.json()).toEqual(familyError('BAD_REQUEST', 'INVALID_REQUEST_PARAMETERS'));
    }
    expect((await create('https://93.184.215.14/a')).statusCode).toBe(201);
    // A PATCH to a refused URL is refused the same way, and changes nothing.
    const made = (await create('https://93.184.215.14/b')).json().data as { id: string };
    const patch = await strict.app.inject({ method: 'PATCH', url: `${BASE}/${made.id}`, headers: { authorization: strict.bearer({ scopes: [WRITE] }) }, payload: { url: 'https://10.0.0.5/a' } });
    expect(patch.statusCode).toBe(400);
    const read = await strict.app.inject({ url: `${BASE}/${made.id}`, headers: { authorization: strict.bearer({ scopes: [READ] }) } });
    expect(read.json().data.url).toBe('https://93.184.215.14/b');
    const allowed = await t.app.inject({ method: 'POST', url: BASE, headers: auth([WRITE]), payload: { url: 'http://127.0.0.1:9/a', events: ['payment.recorded'] } });
    expect(allowed.statusCode).toBe(201);
  });

  it('a lookup that never answers is a 400 after its time limit; a network runs one lookup at a time, requests for one name share one, and another network\'s lookup goes meanwhile', async () => {
    const started: string[] = [];
    const answers: Array<() => void> = [];
    // Names under silent.example have servers that never answer, until the test lets them; the
    // others answer at once.
    const resolver: ResolveHost = (hostname) => {
      started.push(hostname);
      if (!hostname.endsWith('.silent.example')) return Promise.resolve([{ address: '93.184.215.14', family: 4 }]);
      return new Promise((resolve) => answers.push(() => resolve([{ address: '93.184.215.14', family: 4 }])));
    };
    const slow = await createTestApp({ webhookResolveHost: resolver, webhookLookupTimeoutMs: 300 });
    try {
      const create = (network: string, url: string) =>
        slow.app.inject({ method: 'POST', url: BASE, headers: { authorization: slow.bearer({ scopes: [WRITE], network }) }, payload: { url, events: ['payment.recorded'] } });
      const hostile = uniqueNetwork();
      const other = uniqueNetwork();
      const urls = ['https://a.silent.example/1', 'https://a.silent.example/2', 'https://b.silent.example/1', 'https://c.silent.example/1'];
      const stalled = Promise.all(urls.map((url) => create(hostile, url)));
      await eventually(() => expect(started).toEqual(['a.silent.example']));
      // The hostile network holds one of the two slots: another network's lookup runs on the other.
      const made = await create(other, 'https://receiver.example.com/hook');
      expect(made.statusCode, made.body).toBe(201);
      for (const [i, r] of (await stalled).entries()) {
        expect(r.statusCode, urls[i]).toBe(400);
        expect(r.json()).toEqual(familyError('BAD_REQUEST', 'INVALID_REQUEST_PARAMETERS'));
        expect(r.json().message).toMatch(/could not be resolved in time/);
      }
      // One lookup for the hostile network's four requests: a.silent.example's two shared one, and
      // those that gave up waiting for their network's turn started none.
      expect(started).toEqual(['a.silent.example', 'receiver.example.com']);
      const list = await slow.app.inject({ url: BASE, headers: { authorization: slow.bearer({ scopes: [READ], network: hostile }) } });
      expect(list.json().data.items).toEqual([]);
      // Once the resolver answers, the hostile network may look up again.
      for (const answer of answers.splice(0)) answer();
      const again = create(hostile, 'https://d.silent.example/1');
      await eventually(() => expect(started).toContain('d.silent.example'));
      answers.splice(0).forEach((answer) => answer());
      expect((await again).statusCode).toBe(201);
    } finally {
      await slow.close();
    }
  });

  it('at most two lookups run at once in a replica, whatever the networks: a third network waits for a slot, then goes', async () => {
    const started: string[] = [];
    const answers = new Map<string, () => void>();
    const resolver: ResolveHost = (hostname) => {
      started.push(hostname);
      return new Promise((resolve) => answers.set(hostname, () => resolve([{ address: '93.184.215.14', family: 4 }])));
    };
    const slow = await createTestApp({ webhookResolveHost: resolver, webhookLookupTimeoutMs: 5_000 });
    try {
      const create = (network: string | null, url: string) =>
        slow.app.inject({ method: 'POST', url: BASE, headers: { authorization: slow.bearer({ scopes: [WRITE], network }) }, payload: { url, events: ['payment.recorded'] } });
      const first = create(uniqueNetwork(), 'https://one.example.com/hook');
      const second = create(null, 'https://two.example.com/hook');
      await eventually(() => expect(started).toHaveLength(2));
      const third = create(uniqueNetwork(), 'https://three.example.com/hook');
      // The third waits for a slot: both are taken.
      await eventually(() => expect(slow.app.webhookLookups.counts()).toMatchObject({ running: 2, waiting: 1 }));
      expect(started).toEqual(['one.example.com', 'two.example.com']);
      answers.get('one.example.com')!();
      await eventually(() => expect(started).toContain('three.example.com'));
      answers.get('two.example.com')!();
      answers.get('three.example.com')!();
      expect((await Promise.all([first, second, third])).map((r) => r.statusCode)).toEqual([201, 201, 201]);
    } finally {
      await slow.close();
    }
  });

  it('…/deliveries shows an attempt whose target no longer resolves as that, not as a refused target', async () => {
    let resolves = true;
    const servers: ResolveHost = (hostname) =>
      resolves ? Promise.resolve([{ address: '93.184.215.14', family: 4 }]) : Promise.reject(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }));
    const own = await createTestApp({ webhookResolveHost: servers, webhookRetryDelaysMs: [600_000] });
    try {
      const network = uniqueNetwork();
      const headers = (scopes: string[]) => ({ authorization: own.bearer({ scopes, network }) });
      const made = await own.app.inject({ method: 'POST', url: BASE, headers: headers([WRITE]), payload: { url: 'https://gone.example.com/hook', events: ['payment.recorded'] } });
      expect(made.statusCode, made.body).toBe(201);
      const id = made.json().data.id as string;
      resolves = false;
      expect((await own.app.inject({ method: 'POST', url: `${BASE}/${id}/test`, headers: headers([WRITE]) })).statusCode).toBe(202);
      await eventually(async () => {
        const res = await own.app.inject({ url: `${BASE}/${id}/deliveries`, headers: headers([READ]) });
        expect(res.json().data).toMatchObject([{ eventType: 'webhook.test', state: 'PENDING', attempts: 1, lastStatus: null, lastError: 'the host name gone.example.com does not resolve' }]);
      });
    } finally {
      await own.close();
    }
  });
});
