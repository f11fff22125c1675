// Every JSON body has a nesting limit, checked on the raw text before anything walks the parsed
// value: a few kilobytes of brackets once ran the idempotency fingerprint out of stack (a 500).
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { beforeAll, describe, expect, it } from 'vitest';
import { createClient, type CreatedClient } from '../../src/auth/clients-service.js';
import { MAX_JSON_DEPTH, jsonNestingDepth, nestsDeeperThan, openingBrackets } from '../../src/http/json-depth.js';
import { ASSET_WRITER, BAD_REQUEST, MODEL_ADMIN, createAsset, createModel, modelBody, uniqueAssetId, uniqueNetwork } from '../helpers/asset-factory.js';
import { CHEAP_HASH } from '../helpers/password-hash-params.js';
import { RECORD_URL, collectUrl, listPayments, oneUrl, paymentBody, reader, recordPayment, validationError, writer } from '../helpers/payments-factory.js';
import { useTestApp } from '../helpers/test-app.js';

const t = useTestApp({ passwordHashParams: CHEAP_HASH });

const MODELS = '/asset-management/v1/charging-station-models';
const ASSETS = '/asset-management/v1/assets';
const CHANGE_PASSWORD = '/asset-management/v1/assets/change-password';
const DEEP = 5000;
const TOO_DEEP_MESSAGE = `Request body nests objects and arrays deeper than ${MAX_JSON_DEPTH} levels`;

// The JSON text of a value `depth` containers deep, written as text: building it as a value and
// stringifying it would recurse too. `shape` says, level by level, an array or an object.
function nested(depth: number, shape: (level: number) => 'array' | 'object' = () => 'array'): string {
  let open = '';
  let close = '';
  for (let level = 0; level < depth; level++) {
    if (shape(level) === 'array') {
      open += '[';
      close = `]${close}`;
    } else {
      open += '{"k":';
      close = `}${close}`;
    }
  }
  return `${open}1${close}`;
}

// A JSON object's text with `member` set to the raw JSON `raw`.
function withMember(body: Record<string, unknown>, member: string, raw: string): string {
  return `${JSON.stringify(body).slice(0, -1)},${JSON.stringify(member)}:${raw}}`;
}

function post(url: string, payload: string, headers: Record<string, string>) {
  return t.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json', ...headers }, payload });
}

const tooDeepPayments = validationError([{ code: 'custom', path: [], message: TOO_DEEP_MESSAGE }]);
const tooDeepAssets = { ...BAD_REQUEST, message: TOO_DEEP_MESSAGE };
const tooDeepToken = { error: 'invalid_request', error_description: TOO_DEEP_MESSAGE };

function expectTooDeep(res: LightMyRequestResponse, body: unknown) {
  expect(res.statusCode, res.body).toBe(400);
  expect(res.json()).toEqual(body);
}

let client: CreatedClient;
beforeAll(async () => {
  client = await createClient(t.app.database.db, { name: 'deep', scopes: ['read:asset'] });
});

// The reference: the depth of the parsed value, by recursion (fast-check's values are shallow).
const depthOf = (value: unknown): number => (value !== null && typeof value === 'object' ? 1 + Math.max(0, ...Object.values(value as object).map(depthOf)) : 0);
const brackety = fc.string({ unit: fc.constantFrom('[', ']', '{', '}', '"', '\\', 'a', ' ', '\u2028') });
const anyJson = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, brackety, fc.integer(), fc.constant(null), tie('array'), tie('object')),
  array: fc.array(tie('value'), { maxLength: 4 }),
  object: fc.dictionary(brackety, tie('value'), { maxKeys: 4 }),
})).value;

describe('jsonNestingDepth', () => {
  it('is the nesting of the parsed value for any JSON text, strings full of brackets, quotes and escapes included', () => {
    fc.assert(
      fc.property(anyJson, fc.integer({ min: 0, max: 12 }), fc.boolean(), (value, limit, spaced) => {
        const text = JSON.stringify(value, null, spaced ? 2 : undefined);
        expect(jsonNestingDepth(text, limit)).toBe(Math.min(depthOf(value), limit + 1));
      }),
      { numRuns: 500 },
    );
  });

  it('counts a body far deeper than the stack allows, and stops at the first level past the limit', () => {
    expect(jsonNestingDepth(nested(100_000), 1_000_000)).toBe(100_000);
    expect(jsonNestingDepth(nested(100_000), MAX_JSON_DEPTH)).toBe(MAX_JSON_DEPTH + 1);
    expect(jsonNestingDepth(nested(MAX_JSON_DEPTH, (l) => (l % 2 ? 'array' : 'object')), MAX_JSON_DEPTH)).toBe(MAX_JSON_DEPTH);
  });
});

describe('nestsDeeperThan: the opening brackets bound the nesting, counted before any scan', () => {
  it('property: openingBrackets counts every [ and { of a text (strings included) up to the cap, as text or as its UTF-8 bytes', () => {
    fc.assert(
      fc.property(anyJson, fc.integer({ min: 0, max: 40 }), (value, cap) => {
        const text = JSON.stringify(value);
        const all = [...text].filter((c) => c === '[' || c === '{').length;
        expect(openingBrackets(text, cap)).toBe(Math.min(all, cap));
        expect(openingBrackets(Buffer.from(text), cap)).toBe(Math.min(all, cap));
        // So the nesting is never deeper than the count: a text with few is not scanned.
        expect(depthOf(value)).toBeLessThanOrEqual(all);
      }),
      { numRuns: 500 },
    );
  });

  it('property: nestsDeeperThan is the scan\'s answer for any JSON text, as text or as bytes', () => {
    fc.assert(
      fc.property(anyJson, fc.integer({ min: 0, max: 12 }), (value, limit) => {
        const text = JSON.stringify(value);
        expect(nestsDeeperThan(text, limit)).toBe(depthOf(value) > limit);
        expect(nestsDeeperThan(Buffer.from(text), limit)).toBe(depthOf(value) > limit);
      }),
      { numRuns: 500 },
    );
    expect(nestsDeeperThan(nested(100_000), MAX_JSON_DEPTH)).toBe(true);
    // Brackets in strings count for the bound, never for the answer.
    expect(nestsDeeperThan(JSON.stringify({ k: '['.repeat(100) }), MAX_JSON_DEPTH)).toBe(false);
  });
});

describe(`a JSON body nested ${DEEP} deep is a 400 in the family's shape, and nothing is stored`, () => {
  it('payments: record, with an Idempotency-Key', async () => {
    const body = paymentBody();
    const res = await post(RECORD_URL, withMember(body, 'priceAdjustment', nested(DEEP)), { authorization: writer(t), 'idempotency-key': 'deep-record' });
    expectTooDeep(res, tooDeepPayments);
    expect((await listPayments(t, `sessionIds=${body.session}`)).json()).toEqual([]);
  });

  it('payments: collect, with an Idempotency-Key', async () => {
    const payment = await recordPayment(t);
    const res = await post(collectUrl(payment.id), withMember({}, 'collectedAt', nested(DEEP, () => 'object')), {
      authorization: writer(t),
      'idempotency-key': 'deep-collect',
    });
    expectTooDeep(res, tooDeepPayments);
    const after = await t.app.inject({ url: oneUrl(payment.id), headers: { authorization: reader(t) } });
    expect(after.json()).toMatchObject({ status: 'PENDING', collectedAt: null });
  });

  it('asset management: create a model, with an Idempotency-Key', async () => {
    const body = modelBody();
    const res = await post(MODELS, withMember(body, 'configurationKeys', nested(DEEP)), { authorization: t.bearer(MODEL_ADMIN), 'idempotency-key': 'deep-model' });
    expectTooDeep(res, tooDeepAssets);
    // The same vendor and model are still free.
    await createModel(t, { vendor: body.vendor, model: body.model });
  });

  it('asset management: create an asset, with an Idempotency-Key', async () => {
    const id = uniqueAssetId();
    const res = await post(ASSETS, withMember({ id, network: uniqueNetwork() }, 'name', nested(DEEP)), {
      authorization: t.bearer(ASSET_WRITER),
      'idempotency-key': 'deep-asset',
    });
    expectTooDeep(res, tooDeepAssets);
    const read = await t.app.inject({ url: `${ASSETS}/${id}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
    expect(read.statusCode).toBe(404);
  });

  it('asset management: change a password', async () => {
    const asset = await createAsset(t);
    const res = await post(CHANGE_PASSWORD, withMember({ id: asset.id, password: 'a-valid-password-20ch' }, 'force', nested(DEEP)), {
      authorization: t.bearer(ASSET_WRITER),
    });
    expectTooDeep(res, tooDeepAssets);
    const read = await t.app.inject({ url: `${ASSETS}/${asset.id}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
    expect(read.json().data).toMatchObject({ passwordChangedAt: null, rotation: null });
  });

  it('asset management: archive a model', async () => {
    const model = await createModel(t);
    const res = await post(`${MODELS}/${model.id}/archive`, withMember({}, 'x', nested(DEEP)), { authorization: t.bearer(MODEL_ADMIN) });
    expectTooDeep(res, tooDeepAssets);
    const read = await t.app.inject({ url: `${MODELS}/${model.id}`, headers: { authorization: t.bearer({ scopes: ['read:chargingstationmodel'] }) } });
    expect(read.json().data.isArchived).toBe(false);
  });

  it('the token endpoint: a JSON token request (RFC 6749 §5.2 body), no token issued', async () => {
    const body = { grant_type: 'client_credentials', client_id: client.clientId, client_secret: client.clientSecret };
    const res = await post('/oauth/token', withMember(body, 'audience', nested(DEEP)), {});
    expectTooDeep(res, tooDeepToken);
    expect(res.headers['cache-control']).toBe('no-store');
    // The same request without the deep member gets its token.
    expect((await post('/oauth/token', JSON.stringify(body), {})).statusCode).toBe(200);
  });
});

// The routes that take a JSON body, each with a valid body, its Idempotency-Key header where it
// honours one, and the shape of a 400 that names the depth.
const ROUTES = [
  { name: 'record', url: RECORD_URL, body: () => paymentBody(), member: 'priceAdjustment', key: true, tooDeep: tooDeepPayments },
  { name: 'model', url: MODELS, body: () => modelBody(), member: 'configurationKeys', key: true, tooDeep: tooDeepAssets },
  { name: 'asset', url: ASSETS, body: () => ({ id: uniqueAssetId(), network: uniqueNetwork() }), member: 'name', key: true, tooDeep: tooDeepAssets },
  { name: 'change-password', url: CHANGE_PASSWORD, body: () => ({ id: 'CP-nowhere' }), member: 'force', key: false, tooDeep: tooDeepAssets },
  { name: 'token', url: '/oauth/token', body: () => ({ grant_type: 'client_credentials' }), member: 'audience', key: false, tooDeep: tooDeepToken },
] as const;

function authorizationOf(route: (typeof ROUTES)[number]['name']): Record<string, string> {
  if (route === 'record') return { authorization: writer(t) };
  if (route === 'model') return { authorization: t.bearer(MODEL_ADMIN) };
  if (route === 'token') return { authorization: `Basic ${Buffer.from(`${client.clientId}:${client.clientSecret}`).toString('base64')}` };
  return { authorization: t.bearer(ASSET_WRITER) };
}

describe('the limit, for all nestings', () => {
  const shape = fc.array(fc.constantFrom('array' as const, 'object' as const), { minLength: 1, maxLength: 64 });

  it(`any body nested deeper than ${MAX_JSON_DEPTH} levels is the family's 400 on every route`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...ROUTES), fc.integer({ min: MAX_JSON_DEPTH, max: DEEP }), shape, fc.nat(), async (route, depth, kinds, n) => {
        // The member's own nesting starts one level inside the body's object.
        const payload = withMember(route.body(), route.member, nested(depth, (l) => kinds[l % kinds.length]!));
        const headers = { ...authorizationOf(route.name), ...(route.key ? { 'idempotency-key': `deep-${n}-${depth}` } : {}) };
        expectTooDeep(await post(route.url, payload, headers), route.tooDeep);
      }),
      { numRuns: 60 },
    );
  });

  it(`a body within ${MAX_JSON_DEPTH} levels is answered by the route itself`, async () => {
    // A valid asset whose name is made of brackets and quotes: none of them counts.
    const name = fc.string({ unit: fc.constantFrom('[', ']', '{', '}', '"', '\\', 'a'), minLength: 1, maxLength: 120 });
    await fc.assert(
      fc.asyncProperty(name, async (text) => {
        const res = await post(ASSETS, JSON.stringify({ id: uniqueAssetId(), network: uniqueNetwork(), name: text }), authorizationOf('asset'));
        expect(res.statusCode, res.body).toBe(201);
        expect(res.json().data.name).toBe(text);
      }),
      { numRuns: 25 },
    );
    // An unknown member nested up to the limit reaches validation: the answer is the one for the
    // same member one level deep.
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...ROUTES), fc.integer({ min: 1, max: MAX_JSON_DEPTH - 1 }), shape, async (route, depth, kinds) => {
        const body = route.body();
        const res = await post(route.url, withMember(body, 'unexpected', nested(depth, (l) => kinds[l % kinds.length]!)), authorizationOf(route.name));
        const shallow = await post(route.url, withMember(body, 'unexpected', nested(1)), authorizationOf(route.name));
        expect(res.statusCode, res.body).toBe(400);
        expect(res.json()).toEqual(shallow.json());
        expect(res.body).not.toContain(TOO_DEEP_MESSAGE);
      }),
      { numRuns: 60 },
    );
  });
});

// Form bodies and query strings are parsed flat (fast-querystring): `a[b][c]=1` is one parameter
// named "a[b][c]", never an object, so bracketed names cannot nest anything.
describe('bracketed parameter names (qs-style nesting) in forms and query strings', () => {
  const name = (depth: number) => `a${'[b]'.repeat(depth)}`;

  it('stay one flat string parameter of the token endpoint, in the body and in the query', async () => {
    const form = `grant_type=client_credentials&${name(1000)}=x`;
    const res = await t.app.inject({
      method: 'POST',
      url: `/oauth/token?${name(1000)}=y`,
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...authorizationOf('token') },
      payload: form,
    });
    expect(res.statusCode, res.body).toBe(200);
  });

  it('are unknown query parameters of the API routes: ignored by the payments list, a 400 in asset management', async () => {
    const payments = await listPayments(t, `sessionIds=ses_x&${name(1000)}=1`);
    expect(payments.statusCode).toBe(200);
    expect(payments.json()).toEqual([]);
    const assets = await t.app.inject({ url: `${ASSETS}?${name(1000)}=1`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
    expect(assets.statusCode).toBe(400);
    expect(assets.json()).toEqual(BAD_REQUEST);
  });
});
