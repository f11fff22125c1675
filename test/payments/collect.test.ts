// POST /payments/v1/session-payments/{id}/collect (docs/api.md, "Session payments").
import { describe, expect, it } from 'vitest';
import type { SessionPayment } from '../../src/payments/payments-schemas.js';
import { useTestApp } from '../helpers/test-app.js';
import {
  collectUrl,
  expectPaymentsShape,
  listPayments,
  oneUrl,
  reader,
  recordPayment,
  validationError,
  writer,
} from '../helpers/payments-factory.js';

const t = useTestApp();

function collect(id: string, options: { payload?: unknown; contentType?: string; authorization?: string } = {}) {
  const headers: Record<string, string> = { authorization: options.authorization ?? writer(t) };
  if (options.contentType) headers['content-type'] = options.contentType;
  return t.app.inject({
    method: 'POST',
    url: collectUrl(id),
    headers,
    ...(options.payload === undefined ? {} : { payload: options.payload as string }),
  });
}

const RECORDED_AT = '2025-05-01T10:00:00.000Z';

describe('collect', () => {
  it('record → list → collect → list: PENDING becomes COLLECTED with collectedAt', async () => {
    const recorded = await recordPayment(t, { recordedAt: RECORDED_AT });
    const pending = (await listPayments(t, `sessionIds=${recorded.session}`)).json() as SessionPayment[];
    expect(pending).toEqual([recorded]);
    expect(recorded.collectedAt).toBeNull();

    const res = await collect(recorded.id, { payload: { collectedAt: '2025-05-01T12:30:00.25+02:00' } });
    expect(res.statusCode).toBe(200);
    const collected = res.json() as SessionPayment;
    expect(collected).toEqual({
      ...recorded,
      status: 'COLLECTED',
      collectedAt: '2025-05-01T10:30:00.250Z',
      updatedAt: expect.stringMatching(/Z$/),
    });
    expect(Date.parse(collected.updatedAt)).toBeGreaterThanOrEqual(Date.parse(recorded.updatedAt));
    expect(Object.keys(collected)).toEqual(Object.keys(recorded));

    const listed = (await listPayments(t, `sessionIds=${recorded.session}`)).json() as SessionPayment[];
    expect(JSON.stringify(listed[0])).toBe(JSON.stringify(collected));
    const one = await t.app.inject({ url: oneUrl(recorded.id), headers: { authorization: reader(t) } });
    expect(one.json()).toEqual(collected);
  });

  it('the body is optional: none, empty with a JSON content type, {} and null all collect now', async () => {
    const variants: Parameters<typeof collect>[1][] = [
      {},
      { payload: '', contentType: 'application/json' },
      { payload: {} },
      { payload: 'null', contentType: 'application/json' },
    ];
    for (const options of variants) {
      const recorded = await recordPayment(t);
      const before = Date.now();
      const res = await collect(recorded.id, options);
      expect(res.statusCode, JSON.stringify(options)).toBe(200);
      const collectedAt = Date.parse((res.json() as SessionPayment).collectedAt ?? '');
      expect(collectedAt).toBeGreaterThanOrEqual(before - 1000);
      expect(collectedAt).toBeLessThanOrEqual(Date.now() + 1000);
    }
  });

  it('without a collectedAt a payment recorded slightly in the future is collected at its recordedAt', async () => {
    const recordedAt = new Date(Date.now() + 120_000).toISOString();
    const recorded = await recordPayment(t, { recordedAt });
    const res = await collect(recorded.id);
    expect(res.statusCode).toBe(200);
    expect((res.json() as SessionPayment).collectedAt).toBe(recordedAt);
  });

  it('collecting a COLLECTED payment is 409 CONFLICT', async () => {
    const recorded = await recordPayment(t);
    expect((await collect(recorded.id)).statusCode).toBe(200);
    const again = await collect(recorded.id);
    expect(again.statusCode).toBe(409);
    expect(again.json()).toEqual({ code: 'CONFLICT', message: `Session payment ${recorded.id} is already collected`, status: 409 });
  });

  it('20 concurrent collects of one payment: exactly one 200, the others 409', async () => {
    const recorded = await recordPayment(t);
    const answers = await Promise.all(Array.from({ length: 20 }, () => collect(recorded.id)));
    expect(answers.map((r) => r.statusCode).sort()).toEqual([200, ...Array<number>(19).fill(409)]);
    for (const r of answers) expectPaymentsShape(r);
  });

  it('an unknown ID is 404 NOT_FOUND', async () => {
    const res = await collect('pmt_does_not_exist');
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ code: 'NOT_FOUND', message: 'No session payment pmt_does_not_exist', status: 404 });
  });

  it("another network's payment is 404 (and stays PENDING); its own network and no claim may collect", async () => {
    const b1 = await recordPayment(t, { network: 'net_col_b' });
    const hidden = await collect(b1.id, { authorization: writer(t, 'net_col_a') });
    expect(hidden.statusCode).toBe(404);
    expect(hidden.json()).toEqual({ code: 'NOT_FOUND', message: `No session payment ${b1.id}`, status: 404 });
    expect(((await t.app.inject({ url: oneUrl(b1.id), headers: { authorization: reader(t) } })).json() as SessionPayment).status).toBe('PENDING');
    expect((await collect(b1.id, { authorization: writer(t, 'net_col_b') })).statusCode).toBe(200);
    // Collected, but still invisible to network A: 404, not 409.
    expect((await collect(b1.id, { authorization: writer(t, 'net_col_a') })).statusCode).toBe(404);
    const b2 = await recordPayment(t, { network: 'net_col_b' });
    expect((await collect(b2.id, { authorization: writer(t) })).statusCode).toBe(200);
  });
});

describe('validation', () => {
  it('collectedAt before recordedAt is 400 at ["collectedAt"]; equal is fine', async () => {
    const recorded = await recordPayment(t, { recordedAt: RECORDED_AT });
    const early = await collect(recorded.id, { payload: { collectedAt: '2025-05-01T09:59:59.999Z' } });
    expect(early.statusCode).toBe(400);
    expect(early.json()).toEqual(
      validationError([{ code: 'too_small', path: ['collectedAt'], message: `collectedAt must not precede the payment's recordedAt (${RECORDED_AT})` }]),
    );
    const same = await collect(recorded.id, { payload: { collectedAt: RECORDED_AT } });
    expect(same.statusCode).toBe(200);
    expect((same.json() as SessionPayment).collectedAt).toBe(RECORDED_AT);
  });

  it.each([
    ['not a date-time', { collectedAt: 'now' }, [{ code: 'invalid_format', path: ['collectedAt'] }]],
    ['not a string', { collectedAt: 1735689600000 }, [{ code: 'invalid_type', path: ['collectedAt'] }]],
    ['in the future', { collectedAt: '2999-01-01T00:00:00Z' }, [{ code: 'too_big', path: ['collectedAt'] }]],
    ['unknown field', { collectedAt: RECORDED_AT, by: 'me' }, [{ code: 'unrecognized_keys', path: [] }]],
    ['an array', [], [{ code: 'invalid_type', path: [] }]],
  ])('%s → 400', async (_name, payload, issues) => {
    const recorded = await recordPayment(t);
    const res = await collect(recorded.id, { payload: JSON.stringify(payload), contentType: 'application/json' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual(validationError(issues));
  });

  it('malformed JSON, text/plain and an oversized body are 400 in the ZodError shape', async () => {
    const recorded = await recordPayment(t);
    const answers = [
      await collect(recorded.id, { payload: '{"collectedAt"', contentType: 'application/json' }),
      await collect(recorded.id, { payload: 'collect it', contentType: 'text/plain' }),
      await collect(recorded.id, { payload: JSON.stringify({ collectedAt: 'x'.repeat(70_000) }), contentType: 'application/json' }),
    ];
    for (const res of answers) {
      expect(res.statusCode, res.body).toBe(400);
      expectPaymentsShape(res);
    }
    expect(answers[0]?.json()).toEqual(validationError([{ code: 'custom', path: [], message: 'Request body is not valid JSON' }]));
    expect(answers[2]?.json()).toEqual(validationError([{ code: 'custom', path: [], message: 'Request body is larger than 64 KiB' }]));
    // None of them touched the payment.
    expect(((await t.app.inject({ url: oneUrl(recorded.id), headers: { authorization: reader(t) } })).json() as SessionPayment).status).toBe('PENDING');
  });

  it('an ID with control characters is 400 at ["id"]', async () => {
    const res = await collect('pmt_\u0007');
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual(validationError([{ code: 'invalid_format', path: ['id'] }]));
  });
});
