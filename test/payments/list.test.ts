// GET /payments/v1/session-payments (docs/api.md, "Session payments").
import { describe, expect, it, vi } from 'vitest';
import { useTestApp } from '../helpers/test-app.js';
import {
  expectPaymentsShape,
  listPayments,
  reader,
  recordPayment,
  uniqueId,
  validationError,
  writer,
} from '../helpers/payments-factory.js';
import type { SessionPayment } from '../../src/payments/payments-schemas.js';

const t = useTestApp();

const sessions = (body: unknown) => (body as SessionPayment[]).map((p) => p.session).sort();
const ids = (n: number, prefix = 'x') => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

describe('answers', () => {
  it('returns the payments of the listed sessions, leaving out sessions without one', async () => {
    const a = await recordPayment(t);
    const b = await recordPayment(t, { additionalFee: 120, priceAdjustment: { id: 'padj_1', amount: 20, maxAdjustment: null } });
    const res = await listPayments(t, `sessionIds=${a.session},${uniqueId('none')},${b.session}`);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    const body = res.json() as SessionPayment[];
    expect(sessions(body)).toEqual([a.session, b.session].sort());
    // Same keys, same order, same values as the record answer (built in TypeScript).
    const byId = new Map(body.map((p) => [p.id, p]));
    expect(JSON.stringify(byId.get(a.id))).toBe(JSON.stringify(a));
    expect(JSON.stringify(byId.get(b.id))).toBe(JSON.stringify(b));
  });

  it('answers an empty array when no listed session has a payment', async () => {
    const res = await listPayments(t, `sessionIds=${uniqueId('none')},${uniqueId('none')}`);
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe('[]');
  });

  it('lists a session once however often it is asked for', async () => {
    const a = await recordPayment(t);
    const res = await listPayments(t, `sessionIds=${a.session},${a.session},%20${a.session}%20`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual([a]);
  });

  it('trims each entry', async () => {
    const a = await recordPayment(t);
    const b = await recordPayment(t);
    const res = await listPayments(t, `sessionIds=${encodeURIComponent(`  ${a.session} ,\t${b.session}  `)}`);
    expect(res.statusCode).toBe(200);
    expect(sessions(res.json())).toEqual([a.session, b.session].sort());
  });

  it('reads a repeated parameter as one comma-joined list', async () => {
    const [a, b, c] = [await recordPayment(t), await recordPayment(t), await recordPayment(t)];
    const res = await listPayments(t, `sessionIds=${a.session}&sessionIds=${b.session},${c.session}`);
    expect(res.statusCode).toBe(200);
    expect(sessions(res.json())).toEqual([a.session, b.session, c.session].sort());
  });

  it('ignores unknown query parameters', async () => {
    const a = await recordPayment(t);
    const res = await listPayments(t, `limit=5&sessionIds=${a.session}&foo=bar`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual([a]);
  });

  it('answers 200 for IDs that cannot exist (control characters) instead of failing', async () => {
    const a = await recordPayment(t);
    const res = await listPayments(t, `sessionIds=%00,${a.session},%07x`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual([a]);
    const none = await listPayments(t, 'sessionIds=%00');
    expect(none.statusCode).toBe(200);
    expect(none.body).toBe('[]');
  });

  it('answers a collected payment with its collectedAt in UTC', async () => {
    const a = await recordPayment(t, { recordedAt: '2025-01-02T07:00:00.5Z' });
    const collected = await t.app.inject({
      method: 'POST',
      url: `/payments/v1/session-payments/${a.id}/collect`,
      headers: { authorization: writer(t) },
      payload: { collectedAt: '2025-01-02T10:00:00+02:00' },
    });
    expect(collected.statusCode).toBe(200);
    const res = await listPayments(t, `sessionIds=${a.session}`);
    const [listed] = res.json() as SessionPayment[];
    expect(listed?.status).toBe('COLLECTED');
    expect(listed?.recordedAt).toBe('2025-01-02T07:00:00.500Z');
    expect(listed?.collectedAt).toBe('2025-01-02T08:00:00.000Z');
    expect(JSON.stringify(listed)).toBe(JSON.stringify(collected.json()));
  });
});

describe('limits', () => {
  it('accepts 100 distinct IDs', async () => {
    const a = await recordPayment(t);
    const list = [...ids(99), a.session];
    const res = await listPayments(t, `sessionIds=${list.join(',')}`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual([a]);
  });

  it('refuses 101 distinct IDs with too_big at ["sessionIds"]', async () => {
    const res = await listPayments(t, `sessionIds=${ids(101).join(',')}`);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual(validationError([{ code: 'too_big', path: ['sessionIds'] }]));
  });

  it('counts distinct IDs: 150 copies of a few IDs are fine, and so are 100 distinct plus repeats', async () => {
    const a = await recordPayment(t);
    const copies = Array.from({ length: 150 }, (_, i) => (i % 3 === 0 ? a.session : `dup${i % 3}`));
    const res = await listPayments(t, `sessionIds=${copies.join(',')}`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual([a]);
    const hundredPlus = [...ids(100), ...ids(50)];
    expect((await listPayments(t, `sessionIds=${hundredPlus.join(',')}`)).statusCode).toBe(200);
  });

  it('counts distinct IDs after trimming and across repeated parameters', async () => {
    const spaced = ids(100).map((id, i) => (i % 2 ? ` ${id} ` : id));
    expect((await listPayments(t, `sessionIds=${encodeURIComponent(spaced.join(','))}&sessionIds=x0,x1`)).statusCode).toBe(200);
    const res = await listPayments(t, `sessionIds=${ids(60).join(',')}&sessionIds=${ids(41, 'y').join(',')}`);
    expect(res.json()).toEqual(validationError([{ code: 'too_big', path: ['sessionIds'] }]));
  });

  it('accepts an ID of 128 characters and refuses 129 with too_big at ["sessionIds", i]', async () => {
    const a = await recordPayment(t, { session: `s${'x'.repeat(127)}` });
    const ok = await listPayments(t, `sessionIds=${a.session}`);
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toEqual([a]);
    const res = await listPayments(t, `sessionIds=a,b,c,${'y'.repeat(129)}`);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual(validationError([{ code: 'too_big', path: ['sessionIds', 3] }]));
  });

  it('counts characters, not UTF-16 units (128 astral characters are fine)', async () => {
    const res = await listPayments(t, `sessionIds=${encodeURIComponent('😀'.repeat(128))}`);
    expect(res.statusCode).toBe(200);
    const tooLong = await listPayments(t, `sessionIds=${encodeURIComponent('😀'.repeat(129))}`);
    expect(tooLong.json()).toEqual(validationError([{ code: 'too_big', path: ['sessionIds', 0] }]));
  });
});

describe('validation errors (400, exact bodies)', () => {
  it('missing sessionIds: invalid_type at ["sessionIds"]', async () => {
    const res = await listPayments(t, '');
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual(validationError([{ code: 'invalid_type', path: ['sessionIds'], message: 'sessionIds is required' }]));
  });

  it('empty sessionIds: too_small at ["sessionIds"]', async () => {
    for (const query of ['sessionIds=', 'sessionIds', 'sessionIds=%20%20']) {
      const res = await listPayments(t, query);
      expect(res.statusCode, query).toBe(400);
      expect(res.json(), query).toEqual(
        validationError([{ code: 'too_small', path: ['sessionIds'], message: 'sessionIds must list at least one session ID' }]),
      );
    }
  });

  it('a blank entry: too_small at ["sessionIds", i], one issue per blank entry', async () => {
    expect((await listPayments(t, 'sessionIds=a,b,c,,e')).json()).toEqual(
      validationError([{ code: 'too_small', path: ['sessionIds', 3], message: 'session ID must not be blank' }]),
    );
    expect((await listPayments(t, 'sessionIds=a,')).json()).toEqual(validationError([{ code: 'too_small', path: ['sessionIds', 1] }]));
    expect((await listPayments(t, 'sessionIds=,%20,a')).json()).toEqual(
      validationError([
        { code: 'too_small', path: ['sessionIds', 0] },
        { code: 'too_small', path: ['sessionIds', 1] },
      ]),
    );
  });

  it('indices count positions in the joined list of a repeated parameter', async () => {
    const res = await listPayments(t, `sessionIds=a,b&sessionIds=c,,${'z'.repeat(129)}`);
    expect(res.json()).toEqual(
      validationError([
        { code: 'too_small', path: ['sessionIds', 3] },
        { code: 'too_big', path: ['sessionIds', 4] },
      ]),
    );
  });

  it('reports every problem found: bad entries and the count together', async () => {
    const res = await listPayments(t, `sessionIds=${[...ids(101), '', 'q'.repeat(130)].join(',')}`);
    expect(res.json()).toEqual(
      validationError([
        { code: 'too_small', path: ['sessionIds', 101] },
        { code: 'too_big', path: ['sessionIds', 102] },
        { code: 'too_big', path: ['sessionIds'] },
      ]),
    );
    // A blank entry is not counted as one more ID.
    expect((await listPayments(t, `sessionIds=${[...ids(100), ''].join(',')}`)).json()).toEqual(
      validationError([{ code: 'too_small', path: ['sessionIds', 100] }]),
    );
  });
});

describe('IDs that array literals escape', () => {
  // The IDs travel to PostgreSQL as one text[] parameter, written as an array literal in which
  // quotes, backslashes, braces and commas are special: each must come back as the ID it was.
  it('finds sessions whose IDs hold quotes, backslashes, braces and NULL-like text, network-scoped or not', async () => {
    const odd = ['"q"', 'back\\slash', 'end\\', '{brace}', '}{', 'NULL', '\'single\'', '"{\\}"'].map((s) => uniqueId(`ses ${s}`));
    const recorded = [];
    for (const session of odd) recorded.push(await recordPayment(t, { session, network: 'net_odd' }));
    const query = `sessionIds=${[...odd, uniqueId('"none"')].map(encodeURIComponent).join(',')}`;
    for (const authorization of [reader(t), reader(t, 'net_odd')]) {
      const res = await listPayments(t, query, authorization);
      expect(res.statusCode).toBe(200);
      expect(sessions(res.json())).toEqual([...odd].sort());
    }
    expect((await listPayments(t, query, reader(t, 'net_other'))).body).toBe('[]');
    expect(recorded.map((p) => p.session)).toEqual(odd);
  });
});

describe('the answer on the wire', () => {
  // The list's headers and body as sent (Date aside, which changes every second): what a client
  // sees must not change when the path that produces it does.
  it('is the stored documents joined, with exactly these headers', async () => {
    const a = await recordPayment(t);
    const b = await recordPayment(t);
    const documents = [JSON.stringify(a), JSON.stringify(b)];
    const res = await listPayments(t, `sessionIds=${a.session},${b.session}`);
    expect(res.statusCode).toBe(200);
    expect([`[${documents.join(',')}]`, `[${[...documents].reverse().join(',')}]`]).toContain(res.body);
    const { 'x-request-id': requestId, date, ...headers } = res.headers;
    expect(requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(date).toEqual(expect.any(String));
    expect(headers).toEqual({ 'content-type': 'application/json; charset=utf-8', 'content-length': String(Buffer.byteLength(res.body)), connection: 'keep-alive' });
  });

  it('keeps a caller\'s request ID', async () => {
    const a = await recordPayment(t);
    const res = await t.app.inject({ method: 'GET', url: `/payments/v1/session-payments?sessionIds=${a.session}`, headers: { authorization: reader(t), 'x-request-id': 'trace-1.2:3' } });
    expect(res.headers['x-request-id']).toBe('trace-1.2:3');
  });
});

describe('network scope', () => {
  it('a network-scoped token sees only its network; a token without the claim sees all', async () => {
    const a = await recordPayment(t, { network: 'net_list_a' });
    const b = await recordPayment(t, { network: 'net_list_b' });
    const query = `sessionIds=${a.session},${b.session}`;
    expect((await listPayments(t, query, reader(t, 'net_list_a'))).json()).toEqual([a]);
    expect((await listPayments(t, query, t.bearer({ scopes: ['write:sessionpayment'], network: 'net_list_b' }))).json()).toEqual([b]);
    expect((await listPayments(t, query, reader(t, 'net_list_c'))).body).toBe('[]');
    expect(sessions((await listPayments(t, query, reader(t))).json())).toEqual([a.session, b.session].sort());
  });
});

// A call to the driver's query (pg: a config object or text; PGlite: text) that reads payments.
function readsPayments(args: unknown[]): boolean {
  const [first] = args;
  const text = typeof first === 'string' ? first : (first as { text?: unknown } | undefined)?.text;
  return typeof text === 'string' && text.includes('session_payments');
}

describe('database work', () => {
  it('answers any number of IDs with one SQL statement, network-scoped or not', async () => {
    const client = (t.database.db as unknown as { $client: { query: (...args: unknown[]) => Promise<unknown> } }).$client;
    const a = await recordPayment(t);
    for (const authorization of [reader(t), reader(t, 'net_a')]) {
      const query = `sessionIds=${[...ids(99), a.session].join(',')}`;
      await listPayments(t, query, authorization); // warm up: token keys, prepared statement
      const spy = vi.spyOn(client, 'query');
      try {
        const res = await listPayments(t, query, authorization);
        expect(res.json()).toEqual([a]);
        // The webhook delivery worker polls on the same pool meanwhile: only the payments' count.
        expect(spy.mock.calls.filter(readsPayments)).toHaveLength(1);
      } finally {
        spy.mockRestore();
      }
    }
  });

  it('an internal failure is 500 INTERNAL_SERVER_ERROR with a generic message', async () => {
    const client = (t.database.db as unknown as { $client: { query: (...args: unknown[]) => Promise<unknown> } }).$client;
    const query = client.query.bind(client);
    // Only the list's statement fails: the webhook delivery worker polls on the same pool meanwhile.
    const spy = vi
      .spyOn(client, 'query')
      .mockImplementation((...args: unknown[]) => (readsPayments(args) ? Promise.reject(new Error('connection to 10.0.0.7 lost')) : query(...args)));
    try {
      const res = await listPayments(t, 'sessionIds=a');
      expect(res.statusCode).toBe(500);
      expect(res.json()).toEqual({ code: 'INTERNAL_SERVER_ERROR', message: 'Internal server error', status: 500 });
    } finally {
      spy.mockRestore();
    }
  });

  it('every answer is in the payments shape', async () => {
    for (const query of ['', 'sessionIds=a', 'sessionIds=,']) expectPaymentsShape(await listPayments(t, query));
  });
});
