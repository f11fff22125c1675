// No input, however malformed, produces a 500 (docs/api.md, "Errors"): random query strings, random JSON
// and mutated valid bodies get a 2xx or a 4xx in the payments shape.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/test-app.js';
import {
  LIST_URL,
  RECORD_URL,
  READ,
  WRITE,
  collectUrl,
  expectPaymentsShape,
  paymentBody,
  recordPayment,
  uniqueId,
  type RecordPaymentBody,
} from '../helpers/payments-factory.js';

const RUNS = { numRuns: 200 };

let t: TestApp;
let token: string;
let scopedToken: string;
beforeAll(async () => {
  t = await createTestApp();
  token = t.bearer({ scopes: [READ, WRITE] });
  scopedToken = t.bearer({ scopes: [READ, WRITE], network: 'net_a' });
});
afterAll(async () => {
  await t.close();
});

// Raw pieces of a query string, deliberately including broken percent-escapes, NUL, overlong
// UTF-8 and lone surrogates once decoded.
const rawPiece = fc.oneof(
  fc.constantFrom('%', '%0', '%00', '%ED%A0%80', '%FF', '%C3', '%C0%AF', '+', ',', ' ', '%2C', ',,', '&', '=', '%20,%20', '[]', '%5B%5D'),
  fc.string({ maxLength: 20 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }).map(encodeURIComponent),
  fc.integer({ min: 120, max: 140 }).map((n) => 'x'.repeat(n)),
);
const idList = fc
  .array(fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom('', ' ', 'ses_a', 'ses_a ')), { maxLength: 130 })
  .map((ids) => ids.map(encodeURIComponent).join(','));
const queryValue = fc.oneof(idList, fc.array(rawPiece, { maxLength: 6 }).map((pieces) => pieces.join('')));
const queryKey = fc.constantFrom('sessionIds', 'sessionIds', 'sessionids', 'sessionIds[]', 'sessionIds[0]', '%73essionIds', 'x', '');
const queryString = fc
  .array(fc.tuple(queryKey, fc.option(queryValue, { nil: undefined })), { maxLength: 4 })
  .map((pairs) => pairs.map(([k, v]) => (v === undefined ? k : `${k}=${v}`)).join('&'));

const jsonText = fc.oneof(
  fc.jsonValue().map((v) => JSON.stringify(v)),
  fc.anything().map((v) => JSON.stringify(v) ?? 'null'),
  fc.string(),
  fc.constantFrom('', ' ', '{', '[1,', '{"a":1}{', 'nul', '1e400', '-0', '{"__proto__":{"polluted":1}}', '{"constructor":{"prototype":{}}}'),
);

type Mutation = (body: Record<string, unknown>) => void;
const PATHS = [
  ['network'], ['session'], ['sitePartners'], ['sitePartners', 0], ['location'], ['currency'], ['paymentType'], ['costs'], ['costs', 'energy'],
  ['costs', 'time'], ['usages'], ['usages', 'energy'], ['taxConfig'], ['taxConfig', 'totalPercentSalesTax'], ['taxConfig', 'energyPerKwhExciseTax'],
  ['priceAdjustment'], ['priceAdjustment', 'amount'], ['priceAdjustment', 'maxAdjustment'], ['priceAdjustment', 'id'], ['additionalFee'], ['recordedAt'],
] as const;
const oddValue = fc.oneof(
  fc.jsonValue(),
  fc.constantFrom(-1, -0, 0.5, 1e308, 5e-324, 2147483647, 2147483648, Number.MAX_SAFE_INTEGER + 2, '', '\u0000', '\ud800', 'x'.repeat(129), null, [], {}),
  fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
);
const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.tuple(fc.constantFrom(...PATHS), oddValue).map(([path, value]): Mutation => (body) => setPath(body, path, value)),
  fc.constantFrom(...PATHS).map((path): Mutation => (body) => setPath(body, path, undefined)),
  fc.tuple(fc.string({ maxLength: 10 }), oddValue).map(([key, value]): Mutation => (body) => void (body[key] = value)),
);

function setPath(body: Record<string, unknown>, path: readonly (string | number)[], value: unknown): void {
  let target = body as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) {
    const next = target[key];
    if (next === null || typeof next !== 'object') return;
    target = next as Record<string | number, unknown>;
  }
  const last = path[path.length - 1]!;
  if (value === undefined) delete target[last];
  else target[last] = value;
}

const validBody = (): Record<string, unknown> =>
  paymentBody({ priceAdjustment: { id: 'padj_f', amount: 15, maxAdjustment: null }, additionalFee: 40 }) as unknown as Record<string, unknown>;

describe('no 500s', () => {
  it('list: random query strings → 200 or 400', async () => {
    await fc.assert(
      fc.asyncProperty(queryString, fc.boolean(), async (query, scoped) => {
        const res = await t.app.inject({ method: 'GET', url: `${LIST_URL}?${query}`, headers: { authorization: scoped ? scopedToken : token } });
        expect([200, 400], `${query}: ${res.body}`).toContain(res.statusCode);
        expectPaymentsShape(res);
      }),
      RUNS,
    );
  });

  it('record: random JSON and text → 4xx in the payments shape', async () => {
    await fc.assert(
      fc.asyncProperty(jsonText, fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain'), async (payload, contentType) => {
        const res = await t.app.inject({ method: 'POST', url: RECORD_URL, headers: { authorization: token, 'content-type': contentType }, payload });
        expect([400, 409], `${payload}: ${res.body}`).toContain(res.statusCode);
        expectPaymentsShape(res);
      }),
      RUNS,
    );
  });

  it('record: mutated valid bodies → 201, 400, 403 or 409 in the payments shape', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(mutation, { minLength: 1, maxLength: 3 }), fc.boolean(), async (mutations, scoped) => {
        const body = validBody();
        for (const mutate of mutations) mutate(body);
        const res = await t.app.inject({ method: 'POST', url: RECORD_URL, headers: { authorization: scoped ? scopedToken : token }, payload: body });
        expect([201, 400, 403, 409], `${JSON.stringify(body)}: ${res.body}`).toContain(res.statusCode);
        expectPaymentsShape(res);
      }),
      RUNS,
    );
  });

  it('the unmutated body of the properties above is valid (so mutations test what they claim)', async () => {
    await recordPayment(t, validBody() as unknown as Partial<RecordPaymentBody>);
  });

  it('collect: random bodies and IDs → 200, 400, 404 or 409 in the payments shape', async () => {
    const pending = await recordPayment(t, { recordedAt: '2020-01-01T00:00:00Z' });
    const collectBody = fc.oneof(
      jsonText,
      fc.oneof(oddValue, fc.date({ noInvalidDate: true }).map((d) => d.toISOString())).map((collectedAt) => JSON.stringify({ collectedAt })),
    );
    const id = fc.oneof(fc.constant(pending.id), fc.constant(uniqueId('pmt')), fc.string({ minLength: 1, maxLength: 40 }));
    await fc.assert(
      fc.asyncProperty(id, collectBody, fc.boolean(), async (paymentId, payload, scoped) => {
        const res = await t.app.inject({
          method: 'POST',
          url: collectUrl(paymentId),
          headers: { authorization: scoped ? scopedToken : token, 'content-type': 'application/json' },
          payload,
        });
        // An ID of "." or ".." is a path segment the URL resolves away: POST then reaches the
        // GET-only /session-payments/{id} ("collect" as the id), a 405 in the payments shape.
        expect([200, 400, 404, 405, 409], `${paymentId} ${payload}: ${res.body}`).toContain(res.statusCode);
        if (res.statusCode === 405) expect(res.json()).toEqual({ code: 'METHOD_NOT_ALLOWED', message: expect.any(String), status: 405 });
        // An ID longer than the router's parameter limit matches no route: the unknown-route 404.
        else if (res.statusCode === 404 && !('code' in res.json())) expect(res.json()).toEqual({ message: expect.stringMatching(/^Route POST /) });
        else expectPaymentsShape(res);
      }),
      RUNS,
    );
  });
});
