// Idempotency-Key on record payment, collect, create model and create asset (docs/api.md,
// "Idempotency"): a retry with the key replays the first answer byte for byte, another request with it is a
// 422, a request while the first still runs is a 409, a 5xx gives the key back, keys live 24 h.
import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { describe, expect, it, vi } from 'vitest';
import { ASSET_MANAGEMENT_ERROR_FAMILY } from '../../../src/asset-management/asset-management-error-family.js';
import { IDEMPOTENCY_KEY_TTL_MS, inFlightLeaseMs } from '../../../src/http/idempotency/idempotency-rules.js';
import { purgeExpiredKeys } from '../../../src/http/idempotency/idempotency-service.js';
import { useTestApp } from '../../helpers/test-app.js';
import { RECORD_URL, collectUrl, oneUrl, paymentBody, recordPayment, writer } from '../../helpers/payments-factory.js';
import { ASSET_WRITER, BAD_REQUEST, MODEL_ADMIN, createAsset, familyError, modelBody, unique, uniqueNetwork } from '../../helpers/asset-factory.js';

const ASSETS_URL = '/asset-management/v1/assets';
const MODELS_URL = '/asset-management/v1/charging-station-models';
const HELD_URL = '/asset-management/v1/test-held';

// The clock the app's keys live by: tests move it forward (never back), so every test uses keys
// of its own.
let now = Date.now();

// A route that honours keys and runs until the test lets it finish: a request "in flight".
let held: { runs: number; release: () => void; gate: Promise<void> } = newGate();
function newGate() {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  return { runs: 0, release, gate };
}

const t = useTestApp({
  clock: () => new Date(now),
  routes: async (app) => {
    await app.register(async (family) => {
      family.setErrorHandler(ASSET_MANAGEMENT_ERROR_FAMILY.render);
      family.post('/test-held', { config: { idempotencyKey: 'honoured' } }, async (_request, reply) => {
        const run = ++held.runs;
        await held.gate;
        return reply.code(201).send({ data: { run } });
      });
    }, { prefix: '/asset-management/v1' });
  },
});

const key = () => randomUUID();

// Async, so the request is sent at the call: light-my-request sends when its chain is awaited.
async function post(url: string, options: { key?: string; payload?: unknown; authorization?: string }): Promise<LightMyRequestResponse> {
  const headers: Record<string, string> = { authorization: options.authorization ?? t.bearer({ ...ASSET_WRITER, ...MODEL_ADMIN, scopes: ['write:asset', 'write:chargingstationmodel', 'write:sessionpayment'] }) };
  if (options.key !== undefined) headers['idempotency-key'] = options.key;
  return await t.app.inject({ method: 'POST', url, headers, ...(options.payload === undefined ? {} : { payload: options.payload as object }) });
}

// A retry got the first answer again: same status, same bytes, same Location, marked replayed.
function expectReplay(replay: LightMyRequestResponse, first: LightMyRequestResponse) {
  expect(replay.statusCode, replay.body).toBe(first.statusCode);
  expect(replay.rawPayload.equals(first.rawPayload)).toBe(true);
  expect(replay.headers.location).toBe(first.headers.location);
  expect(replay.headers['content-type']).toBe(first.headers['content-type']);
  expect(replay.headers['idempotent-replayed']).toBe('true');
  expect(first.headers['idempotent-replayed']).toBeUndefined();
}

// The Db type is both drivers' union; both answer { rows }.
async function count(query: ReturnType<typeof sql>): Promise<number> {
  const result = (await t.database.db.execute(query)) as unknown as { rows: { n: number }[] };
  return result.rows[0]!.n;
}

const assetsOf = (network: string) => count(sql`select count(*)::int as n from assets where network = ${network}`);
const keyRows = (k: string) => count(sql`select count(*)::int as n from idempotency_keys where key = ${k}`);

// Makes inserts into `table` fail for rows whose `column` is `value`, with the given SQLSTATE.
async function failInserts(table: 'assets' | 'session_payments', column: string, value: string, sqlstate: string) {
  const name = `fail_${randomUUID().replaceAll('-', '')}`;
  const db = t.database.db;
  await db.execute(
    sql.raw(`CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.${column} = '${value}' THEN RAISE EXCEPTION 'injected fault' USING ERRCODE = '${sqlstate}'; END IF; RETURN NEW; END $$`),
  );
  await db.execute(sql.raw(`CREATE TRIGGER ${name} BEFORE INSERT ON ${table} FOR EACH ROW EXECUTE FUNCTION ${name}()`));
  return async () => {
    await db.execute(sql.raw(`DROP TRIGGER ${name} ON ${table}`));
    await db.execute(sql.raw(`DROP FUNCTION ${name}()`));
  };
}

describe('a retry with the same key replays the first answer', () => {
  it('record payment: the same status, bytes and Location, and one payment', async () => {
    const k = key();
    const body = paymentBody();
    const first = await post(RECORD_URL, { key: k, payload: body });
    expect(first.statusCode, first.body).toBe(201);
    // The body's keys in another order and with other spacing are the same request.
    const reordered = JSON.stringify(Object.fromEntries(Object.entries(body).reverse()), null, 2);
    const retry = await t.app.inject({
      method: 'POST',
      url: RECORD_URL,
      headers: { authorization: writer(t), 'idempotency-key': k, 'content-type': 'application/json' },
      payload: reordered,
    });
    expectReplay(retry, first);
    // The draft's quoted form names the same key.
    expectReplay(await post(RECORD_URL, { key: `"${k}"`, payload: body, authorization: writer(t) }), first);
  });

  it('collect: the first answer even after the payment changed, with or without a body', async () => {
    const payment = await recordPayment(t);
    const k = key();
    const first = await post(collectUrl(payment.id), { key: k });
    expect(first.statusCode, first.body).toBe(200);
    expectReplay(await post(collectUrl(payment.id), { key: k }), first);
    // Without the key, a second collect is the 409 of a collected payment.
    expect((await post(collectUrl(payment.id), {})).statusCode).toBe(409);
    expectReplay(await post(collectUrl(payment.id), { key: k }), first);
  });

  it('create model and create asset (without an id, where a second run would make a second asset)', async () => {
    const k = key();
    const model = modelBody();
    const firstModel = await post(MODELS_URL, { key: k, payload: model });
    expect(firstModel.statusCode, firstModel.body).toBe(201);
    expectReplay(await post(MODELS_URL, { key: k, payload: model }), firstModel);

    // The same key on another route is another request.
    const network = uniqueNetwork();
    const asset = { network, name: 'Depot 4' };
    const other = await post(ASSETS_URL, { key: k, payload: asset });
    expect(other.statusCode, other.body).toBe(422);
    const k2 = key();
    const firstAsset = await post(ASSETS_URL, { key: k2, payload: asset });
    expect(firstAsset.statusCode, firstAsset.body).toBe(201);
    expectReplay(await post(ASSETS_URL, { key: k2, payload: asset }), firstAsset);
    expect(await assetsOf(network)).toBe(1);
  });

  it('a 4xx of the operation is stored and replayed too (Stripe does the same)', async () => {
    const payment = await recordPayment(t);
    const k = key();
    const first = await post(RECORD_URL, { key: k, payload: paymentBody({ session: payment.session }) });
    expect(first.statusCode).toBe(409);
    expectReplay(await post(RECORD_URL, { key: k, payload: paymentBody({ session: payment.session }) }), first);
  });

  it('a request refused by validation takes no key: the corrected request with it runs', async () => {
    const k = key();
    const bad = await post(RECORD_URL, { key: k, payload: { ...paymentBody(), currency: 'XYZ' } });
    expect(bad.statusCode).toBe(400);
    expect(await keyRows(k)).toBe(0);
    const good = await post(RECORD_URL, { key: k, payload: paymentBody() });
    expect(good.statusCode, good.body).toBe(201);
    expect(good.headers['idempotent-replayed']).toBeUndefined();
  });
});

describe('the same key with another request is a 422 in the family shape, and changes nothing', () => {
  it('payments: { code: IDEMPOTENCY_KEY_REUSED, message, status: 422 }', async () => {
    const k = key();
    const body = paymentBody();
    expect((await post(RECORD_URL, { key: k, payload: body })).statusCode).toBe(201);
    const other = paymentBody();
    const res = await post(RECORD_URL, { key: k, payload: other });
    expect(res.statusCode).toBe(422);
    expect(res.json()).toEqual({ code: 'IDEMPOTENCY_KEY_REUSED', message: expect.any(String), status: 422 });
    const list = await t.app.inject({ method: 'GET', url: `${RECORD_URL}?sessionIds=${other.session}`, headers: { authorization: writer(t) } });
    expect(list.json()).toEqual([]);

    // Collect of another payment with a key used for a collect: the path differs.
    const [a, b] = [await recordPayment(t), await recordPayment(t)];
    const k2 = key();
    expect((await post(collectUrl(a.id), { key: k2 })).statusCode).toBe(200);
    const res2 = await post(collectUrl(b.id), { key: k2 });
    expect(res2.statusCode).toBe(422);
    expect((await t.app.inject({ method: 'GET', url: oneUrl(b.id), headers: { authorization: writer(t) } })).json()).toMatchObject({ status: 'PENDING' });
  });

  it('asset management: { type: UNPROCESSABLE_ENTITY, code: IDEMPOTENCY_KEY_REUSED, message }', async () => {
    const k = key();
    const network = uniqueNetwork();
    expect((await post(ASSETS_URL, { key: k, payload: { network, name: 'one' } })).statusCode).toBe(201);
    const res = await post(ASSETS_URL, { key: k, payload: { network, name: 'two' } });
    expect(res.statusCode).toBe(422);
    expect(res.json()).toEqual(familyError('UNPROCESSABLE_ENTITY', 'IDEMPOTENCY_KEY_REUSED'));
    expect(await assetsOf(network)).toBe(1);
  });
});

describe('a malformed key is a 400 in the family shape', () => {
  it.each([
    ['256 characters', 'k'.repeat(256)],
    ['a repeated header', 'a, b'],
    ['an unterminated quoted string', '"abc'],
    ['a control character', 'a\u0001b'],
  ])('%s', async (_name, bad) => {
    const body = paymentBody();
    const payments = await post(RECORD_URL, { key: bad, payload: body });
    expect(payments.statusCode).toBe(400);
    expect(payments.json()).toEqual({
      success: false,
      error: { name: 'ZodError', issues: [{ code: 'custom', message: expect.stringContaining('printable ASCII'), path: ['idempotency-key'] }] },
    });
    const network = uniqueNetwork();
    const assets = await post(ASSETS_URL, { key: bad, payload: { network } });
    expect(assets.statusCode).toBe(400);
    expect(assets.json()).toEqual(BAD_REQUEST);
    expect(assets.json().message).toMatch(/^idempotency-key: /);
    expect(await assetsOf(network)).toBe(0);
  });
});

describe('keys are per client and per network', () => {
  it('two clients, and one client with tokens of two networks, use one key independently', async () => {
    const k = key();
    const network = uniqueNetwork();
    const as = (clientId: string, tokenNetwork: string | null) => t.bearer({ scopes: ['write:asset'], clientId, network: tokenNetwork });
    const answers = [
      await post(ASSETS_URL, { key: k, payload: { network, name: 'a' }, authorization: as('cli_a', null) }),
      await post(ASSETS_URL, { key: k, payload: { network, name: 'b' }, authorization: as('cli_b', null) }),
      await post(ASSETS_URL, { key: k, payload: { network, name: 'c' }, authorization: as('cli_a', network) }),
    ];
    for (const answer of answers) {
      expect(answer.statusCode, answer.body).toBe(201);
      expect(answer.headers['idempotent-replayed']).toBeUndefined();
    }
    expect(await assetsOf(network)).toBe(3);
  });
});

describe('a 5xx is not stored: the key is given back and the retry runs', () => {
  it('a 500 (a fault in the database) of record payment', async () => {
    const body = paymentBody();
    const restore = await failInserts('session_payments', 'session', body.session, 'XX000');
    const k = key();
    const failed = await post(RECORD_URL, { key: k, payload: body });
    expect(failed.statusCode).toBe(500);
    expect(failed.json()).toEqual({ code: 'INTERNAL_SERVER_ERROR', message: expect.any(String), status: 500 });
    expect(await keyRows(k)).toBe(0);
    await restore();
    const retry = await post(RECORD_URL, { key: k, payload: body });
    expect(retry.statusCode, retry.body).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    expectReplay(await post(RECORD_URL, { key: k, payload: body }), retry);
  });

  it('a 503 (the database gave up) of create asset', async () => {
    const network = uniqueNetwork();
    const restore = await failInserts('assets', 'network', network, '40001');
    const k = key();
    const failed = await post(ASSETS_URL, { key: k, payload: { network } });
    expect(failed.statusCode).toBe(503);
    expect(failed.json()).toEqual(familyError('SERVICE_UNAVAILABLE', 'DATABASE_UNAVAILABLE'));
    await restore();
    const retry = await post(ASSETS_URL, { key: k, payload: { network } });
    expect(retry.statusCode, retry.body).toBe(201);
    expect(await assetsOf(network)).toBe(1);
  });
});

describe('a key whose first request is still running', () => {
  it('is a 409 in the family shape; once the first finishes, its answer is replayed', async () => {
    held = newGate();
    const k = key();
    const first = post(HELD_URL, { key: k, payload: { a: 1 } });
    await vi.waitFor(() => expect(held.runs).toBe(1));
    const busy = await post(HELD_URL, { key: k, payload: { a: 1 } });
    expect(busy.statusCode).toBe(409);
    expect(busy.json()).toEqual(familyError('CONFLICT', 'IDEMPOTENCY_KEY_IN_USE'));
    // Another request with the key is refused as reuse, whether the first has finished or not.
    expect((await post(HELD_URL, { key: k, payload: { a: 2 } })).statusCode).toBe(422);
    held.release();
    const answer = await first;
    expect(answer.json()).toEqual({ data: { run: 1 } });
    expectReplay(await post(HELD_URL, { key: k, payload: { a: 1 } }), answer);
    expect(held.runs).toBe(1);
  });

  it('whose process never finished it (past its lease) no longer holds the key', async () => {
    held = newGate();
    const k = key();
    const abandoned = post(HELD_URL, { key: k, payload: {} });
    await vi.waitFor(() => expect(held.runs).toBe(1));
    now += inFlightLeaseMs(t.config.database);
    const gate = held;
    held = { ...newGate(), runs: 1 };
    held.release();
    const takeover = await post(HELD_URL, { key: k, payload: {} });
    expect(takeover.json()).toEqual({ data: { run: 2 } });
    gate.release();
    // The late first answer reaches its client but is not the key's answer.
    expect((await abandoned).json()).toEqual({ data: { run: 1 } });
    expectReplay(await post(HELD_URL, { key: k, payload: {} }), takeover);
  });

  it('of concurrent requests with one key exactly one runs; the others get its answer or a 409', async () => {
    const k = key();
    const network = uniqueNetwork();
    const answers = await Promise.all(Array.from({ length: 8 }, () => post(ASSETS_URL, { key: k, payload: { network } })));
    const created = answers.filter((a) => a.statusCode === 201);
    expect(created.length).toBeGreaterThanOrEqual(1);
    for (const a of created) expect(a.body).toBe(created[0]!.body);
    for (const a of answers.filter((x) => x.statusCode !== 201)) {
      expect(a.statusCode, a.body).toBe(409);
      expect(a.json()).toEqual(familyError('CONFLICT', 'IDEMPOTENCY_KEY_IN_USE'));
    }
    expect(await assetsOf(network)).toBe(1);
  });

  // A second connection holds the payment's row, so the collect that took the key waits inside
  // the database, as a slow request would: PostgreSQL only (PGlite has one connection, which the
  // lock would hold for every request). CI runs the suite on both.
  const onServer = process.env.DATABASE_URL ? it : undefined;
  onServer?.('on PostgreSQL: a collect waiting on a row lock holds its key (409), then its answer is replayed', async () => {
    const payment = await recordPayment(t);
    const locker = new pg.Client({ connectionString: t.database.connectionString });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('SELECT 1 FROM session_payments WHERE id = $1 FOR UPDATE', [payment.id]);
      const k = key();
      const first = post(collectUrl(payment.id), { key: k });
      await vi.waitFor(async () => expect((await locker.query('SELECT state FROM idempotency_keys WHERE key = $1', [k])).rows).toEqual([{ state: 'IN_FLIGHT' }]));
      const busy = await post(collectUrl(payment.id), { key: k });
      expect(busy.statusCode).toBe(409);
      expect(busy.json()).toEqual({ code: 'CONFLICT', message: expect.stringContaining('Idempotency-Key'), status: 409 });
      await locker.query('COMMIT');
      const answer = await first;
      expect(answer.statusCode, answer.body).toBe(200);
      expectReplay(await post(collectUrl(payment.id), { key: k }), answer);
    } finally {
      await locker.end();
    }
  });
});

describe('keys expire after 24 hours', () => {
  it('a later reuse is a fresh request, and expired keys are deleted', async () => {
    const k = key();
    const network = uniqueNetwork();
    expect((await post(ASSETS_URL, { key: k, payload: { network, name: 'first' } })).statusCode).toBe(201);
    now += IDEMPOTENCY_KEY_TTL_MS - 1;
    expect((await post(ASSETS_URL, { key: k, payload: { network, name: 'other' } })).statusCode).toBe(422);
    now += 1;
    const fresh = await post(ASSETS_URL, { key: k, payload: { network, name: 'other' } });
    expect(fresh.statusCode, fresh.body).toBe(201);
    expect(fresh.headers['idempotent-replayed']).toBeUndefined();
    expect(await assetsOf(network)).toBe(2);

    // A key nobody reuses is deleted once it has expired, after a later request's answer.
    const forgotten = key();
    expect((await post(ASSETS_URL, { key: forgotten, payload: { network } })).statusCode).toBe(201);
    expect(await keyRows(forgotten)).toBe(1);
    now += IDEMPOTENCY_KEY_TTL_MS;
    await post(ASSETS_URL, { key: key(), payload: { network } });
    await vi.waitFor(async () => expect(await keyRows(forgotten)).toBe(0));
  });

  it('the deletion takes bounded batches', async () => {
    const db = t.database.db;
    const at = new Date(now);
    const client = unique('cli');
    for (let i = 0; i < 5; i++) {
      await db.execute(sql`insert into idempotency_keys (client_id, network, key, fingerprint, state, claim_id, response_status, response_headers, response_body, created_at, expires_at)
        values (${client}, '', ${`k${i}`}, 'f', 'COMPLETED', ${`c${i}`}, 201, '{}'::jsonb, '{}', ${at.toISOString()}, ${at.toISOString()})`);
    }
    const later = new Date(now + 1);
    let removed = 0;
    let batch: number;
    do {
      batch = await purgeExpiredKeys(db, later, 2);
      expect(batch).toBeLessThanOrEqual(2);
      removed += batch;
    } while (batch > 0);
    expect(removed).toBeGreaterThanOrEqual(5);
    expect(await count(sql`select count(*)::int as n from idempotency_keys where client_id = ${client}`)).toBe(0);
  });
});

describe('change-password refuses the header', () => {
  it('400 in the asset-management shape, naming why; the password is not changed', async () => {
    const asset = await createAsset(t);
    const res = await post(`${ASSETS_URL}/change-password`, { key: key(), payload: { id: asset.id } });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual(BAD_REQUEST);
    expect(res.json().message).toMatch(/^idempotency-key: .*generated password/);
    const read = await t.app.inject({ method: 'GET', url: `${ASSETS_URL}/${asset.id}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
    expect(read.json().data.passwordChangedAt).toBeNull();
  });
});

describe('Idempotency-Key with compression', () => {
  it('an answer large enough to be compressed is stored as the plain body: a retry that asks for gzip, or for nothing, replays it and creates nothing', async () => {
    const connectors = Array.from({ length: 32 }, (_, i) => ({ id: i + 1, maxAmperage: 32, maxVoltage: 400, maxPowerWatts: 22_000 }));
    const body = modelBody({ connectors });
    const k = key();
    const authorization = t.bearer({ ...MODEL_ADMIN, scopes: ['write:chargingstationmodel'] });
    const send = (encoding?: string) =>
      t.app.inject({ method: 'POST', url: MODELS_URL, headers: { authorization, 'idempotency-key': k, ...(encoding ? { 'accept-encoding': encoding } : {}) }, payload: body });
    const first = await send('gzip');
    expect(first.statusCode, first.body).toBe(201);
    expect(first.headers['content-encoding']).toBe('gzip');
    const plain = await send();
    expect(plain.statusCode).toBe(201);
    expect(plain.headers['idempotent-replayed']).toBe('true');
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.json().data.id).toBe(plain.headers.location!.toString().split('/').pop());
    const again = await send('gzip');
    expect(again.headers['content-encoding']).toBe('gzip');
    expectReplay(again, first);
    expect(await count(sql`select count(*)::int as n from charging_station_models where vendor = ${body.vendor as string}`)).toBe(1);
  });
});
