// Location on every 201, and ETag / If-None-Match on single-resource reads (issue 14).
import type { LightMyRequestResponse } from 'fastify';
import { describe, expect, it } from 'vitest';
import { etagOf } from '../../src/http/conditional-requests.js';
import { useTestApp } from '../helpers/test-app.js';
import { RECORD_URL, collectUrl, oneUrl, paymentBody, reader, writer } from '../helpers/payments-factory.js';
import { ASSET_WRITER, MODEL_ADMIN, createAsset, createModel, modelBody, uniqueNetwork } from '../helpers/asset-factory.js';

const t = useTestApp();

const MODELS_URL = '/asset-management/v1/charging-station-models';
const ASSETS_URL = '/asset-management/v1/assets';

const everyReader = () => t.bearer({ scopes: ['read:sessionpayment', 'read:chargingstationmodel', 'read:asset'] });

async function get(url: string, headers: Record<string, string> = {}, method: 'GET' | 'HEAD' = 'GET'): Promise<LightMyRequestResponse> {
  return await t.app.inject({ method, url, headers: { authorization: everyReader(), ...headers } });
}

describe('Location on every 201', () => {
  it.each([
    ['record payment', RECORD_URL, () => writer(t), () => paymentBody(), /^\/payments\/v1\/session-payments\/pmt_[0-9A-Z]+$/],
    ['create model', MODELS_URL, () => t.bearer(MODEL_ADMIN), () => modelBody(), /^\/asset-management\/v1\/charging-station-models\/csm_[0-9A-Z]+$/],
    ['create asset', ASSETS_URL, () => t.bearer(ASSET_WRITER), () => ({ network: uniqueNetwork(), id: 'CP:7.a' }), /^\/asset-management\/v1\/assets\/CP%3A7\.a$/],
  ])('%s: the absolute path of the new resource, where a GET reads it', async (_name, url, authorization, body, pattern) => {
    const created = await t.app.inject({ method: 'POST', url, headers: { authorization: authorization() }, payload: body() });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.headers.location).toMatch(pattern);
    const read = await get(created.headers.location as string);
    expect(read.statusCode, read.body).toBe(200);
    if (url === RECORD_URL) expect(read.body).toBe(created.body);
    else expect(read.json().data).toMatchObject({ id: created.json().data.id });
  });
});

describe('ETag and If-None-Match on single-resource reads', () => {
  async function expectConditional(url: string) {
    const first = await get(url);
    expect(first.statusCode).toBe(200);
    const etag = first.headers.etag as string;
    // A weak tag of the exact bytes sent, before any content coding.
    expect(etag).toMatch(/^W\/"[A-Za-z0-9_-]{22}"$/);
    expect(etag).toBe(etagOf(first.rawPayload));

    for (const condition of [etag, etag.slice(2), `"nope", ${etag}`, '*']) {
      const again = await get(url, { 'if-none-match': condition });
      expect(again.statusCode, condition).toBe(304);
      expect(again.rawPayload.length).toBe(0);
      expect(again.headers.etag).toBe(etag);
      expect(again.headers['content-type']).toBeUndefined();
    }
    const head = await get(url, { 'if-none-match': etag }, 'HEAD');
    expect(head.statusCode).toBe(304);
    expect(head.headers.etag).toBe(etag);

    const other = await get(url, { 'if-none-match': '"nope"' });
    expect(other.statusCode).toBe(200);
    expect(other.body).toBe(first.body);

    // A client that asks for compression gets the same tag, and its 304, for the same body.
    for (const encoding of ['gzip', 'br']) {
      const coded = await get(url, { 'accept-encoding': encoding });
      expect(coded.statusCode).toBe(200);
      expect(coded.headers.etag).toBe(etag);
      expect((await get(url, { 'accept-encoding': encoding, 'if-none-match': etag })).statusCode).toBe(304);
    }
    return etag;
  }

  it('a payment: 304 while unchanged; collected, it has a new tag and the old one gets the 200', async () => {
    const recorded = await t.app.inject({ method: 'POST', url: RECORD_URL, headers: { authorization: writer(t) }, payload: paymentBody() });
    const id = recorded.json().id as string;
    const etag = await expectConditional(oneUrl(id));
    expect((await t.app.inject({ method: 'POST', url: collectUrl(id), headers: { authorization: writer(t) } })).statusCode).toBe(200);
    const changed = await get(oneUrl(id), { 'if-none-match': etag });
    expect(changed.statusCode).toBe(200);
    expect(changed.json()).toMatchObject({ status: 'COLLECTED' });
    expect(changed.headers.etag).not.toBe(etag);
    expect(changed.headers.etag).toBe(etagOf(changed.rawPayload));
  });

  it('a model: archived, it has a new tag', async () => {
    const model = await createModel(t);
    const etag = await expectConditional(`${MODELS_URL}/${model.id}`);
    const archived = await t.app.inject({ method: 'POST', url: `${MODELS_URL}/${model.id}/archive`, headers: { authorization: t.bearer(MODEL_ADMIN) } });
    expect(archived.statusCode).toBe(200);
    const changed = await get(`${MODELS_URL}/${model.id}`, { 'if-none-match': etag });
    expect(changed.statusCode).toBe(200);
    expect(changed.headers.etag).not.toBe(etag);
  });

  it('a body large enough to be compressed: the same tag for every encoding, and its 304', async () => {
    const connectors = Array.from({ length: 32 }, (_, i) => ({ id: i + 1, maxAmperage: 32, maxVoltage: 400, maxPowerWatts: 22_000 }));
    const model = await createModel(t, { connectors });
    const url = `${MODELS_URL}/${model.id}`;
    const plain = await get(url);
    expect(plain.rawPayload.length).toBeGreaterThan(1024);
    expect(plain.headers['content-encoding']).toBeUndefined();
    for (const encoding of ['gzip', 'br']) {
      const coded = await get(url, { 'accept-encoding': encoding });
      expect(coded.headers['content-encoding']).toBe(encoding);
      expect(coded.headers.etag).toBe(plain.headers.etag);
      expect(coded.headers.vary).toMatch(/accept-encoding/i);
      const notModified = await get(url, { 'accept-encoding': encoding, 'if-none-match': plain.headers.etag as string });
      expect(notModified.statusCode).toBe(304);
      expect(notModified.rawPayload.length).toBe(0);
    }
  });

  it('an asset: after a password change, it has a new tag', async () => {
    const asset = await createAsset(t);
    const etag = await expectConditional(`${ASSETS_URL}/${asset.id}`);
    const changed = await t.app.inject({ method: 'POST', url: `${ASSETS_URL}/change-password`, headers: { authorization: t.bearer(ASSET_WRITER) }, payload: { id: asset.id } });
    expect(changed.statusCode, changed.body).toBe(200);
    const read = await get(`${ASSETS_URL}/${asset.id}`, { 'if-none-match': etag });
    expect(read.statusCode).toBe(200);
    expect(read.headers.etag).not.toBe(etag);
  });

  it('If-None-Match: * on a missing resource is its 404; errors and lists carry no tag', async () => {
    const missing = await get(oneUrl('pmt_missing'), { 'if-none-match': '*' });
    expect(missing.statusCode).toBe(404);
    expect(missing.headers.etag).toBeUndefined();
    const list = await t.app.inject({ method: 'GET', url: `${RECORD_URL}?sessionIds=ses_1`, headers: { authorization: reader(t) } });
    expect(list.statusCode).toBe(200);
    expect(list.headers.etag).toBeUndefined();
  });
});
