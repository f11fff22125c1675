import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/test-app.js';
import {
  ASSET_WRITER,
  BAD_REQUEST,
  MODEL_ADMIN,
  createAsset,
  createModel,
  familyError,
  modelBody,
  siblingApp,
  uniqueAssetId,
  uniqueNetwork,
} from '../helpers/asset-factory.js';

const URL_ = '/asset-management/v1/assets';
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const ASSET_KEYS = ['id', 'network', 'name', 'chargingStationModelId', 'ocppVersion', 'securityProfile', 'passwordChangedAt', 'createdAt', 'updatedAt', 'station', 'rotation'];

let t: TestApp;
let writer: string;

beforeAll(async () => {
  t = await createTestApp();
  writer = t.bearer(ASSET_WRITER);
});
afterAll(async () => {
  await t.close();
});

function post(payload: unknown, authorization: string | null = writer) {
  return t.app.inject({
    method: 'POST',
    url: URL_,
    headers: authorization === null ? {} : { authorization },
    payload: payload as Record<string, unknown>,
  });
}

function get(url: string, authorization: string | null = writer) {
  return t.app.inject({ url, headers: authorization === null ? {} : { authorization } });
}

async function expectBadRequest(payload: unknown, field: string) {
  const res = await post(payload);
  expect(res.statusCode, res.body).toBe(400);
  expect(res.json()).toEqual(BAD_REQUEST);
  expect(res.json().message).toContain(field);
}

describe('POST /assets', () => {
  it('creates with defaults: generated id, OCPP 2.0.1, the configured minimum profile, no password', async () => {
    const network = uniqueNetwork();
    const res = await post({ network });
    expect(res.statusCode, res.body).toBe(201);
    const { data } = res.json();
    expect(Object.keys(data)).toEqual(ASSET_KEYS);
    expect(data).toEqual({
      id: expect.stringMatching(/^ast_[0-9A-HJKMNP-TV-Z]{26}$/),
      network,
      name: null,
      chargingStationModelId: null,
      ocppVersion: '2.0.1',
      securityProfile: 2,
      passwordChangedAt: null,
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: expect.stringMatching(ISO_MS),
      station: null,
      rotation: null,
    });
  });

  it('takes every field', async () => {
    const model = await createModel(t);
    const id = `CP-001.a:b_${uniqueAssetId()}`;
    const res = await post({ id, network: 'net-1', name: '  Depot bay 3 ', chargingStationModelId: model.id, ocppVersion: '1.6', securityProfile: 3 });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().data).toMatchObject({ id, network: 'net-1', name: 'Depot bay 3', chargingStationModelId: model.id, ocppVersion: '1.6', securityProfile: 3 });
    const read = await get(`${URL_}/${id}`);
    expect(read.json()).toEqual(res.json());
  });

  it('accepts an id of 128 characters and refuses 129', async () => {
    const id = uniqueAssetId().padEnd(128, 'x');
    expect((await post({ id, network: 'n' })).statusCode).toBe(201);
    await expectBadRequest({ id: uniqueAssetId().padEnd(129, 'x'), network: 'n' }, 'id');
  });

  it('409 ASSET_ALREADY_EXISTS for a taken id, whichever network', async () => {
    const asset = await createAsset(t);
    for (const network of [asset.network, uniqueNetwork()]) {
      const res = await post({ id: asset.id, network });
      expect(res.statusCode).toBe(409);
      expect(res.json()).toEqual(familyError('CONFLICT', 'ASSET_ALREADY_EXISTS'));
    }
  });

  it('409 CONFLICTING_SECURITY_PROFILE_STATE for a profile below the configured minimum', async () => {
    const res = await post({ network: uniqueNetwork(), securityProfile: 1 });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toEqual(familyError('CONFLICT', 'CONFLICTING_SECURITY_PROFILE_STATE'));
    expect(res.json().message).toMatch(/minimum OCPP security profile 2/);
  });

  it('409 CONFLICTING_SECURITY_PROFILE_STATE for a TLS profile on a ws:// model', async () => {
    const lax = await siblingApp(t, { OCPP_MIN_SECURITY_PROFILE: '1' });
    try {
      const created = await lax.app.inject({
        method: 'POST',
        url: '/asset-management/v1/charging-station-models',
        headers: { authorization: lax.bearer(MODEL_ADMIN) },
        payload: modelBody({ configurationKeys: { ocppUrl: 'ws://plain.example/ocpp' } }),
      });
      expect(created.statusCode).toBe(201);
      const modelId = created.json().data.id;
      const tls = await lax.app.inject({
        method: 'POST',
        url: URL_,
        headers: { authorization: lax.bearer(ASSET_WRITER) },
        payload: { network: 'n', chargingStationModelId: modelId, securityProfile: 2 },
      });
      expect(tls.statusCode).toBe(409);
      expect(tls.json()).toEqual(familyError('CONFLICT', 'CONFLICTING_SECURITY_PROFILE_STATE'));
      const plain = await lax.app.inject({
        method: 'POST',
        url: URL_,
        headers: { authorization: lax.bearer(ASSET_WRITER) },
        payload: { network: 'n', chargingStationModelId: modelId, securityProfile: 1 },
      });
      expect(plain.statusCode, plain.body).toBe(201);
      expect(plain.json().data.securityProfile).toBe(1);
    } finally {
      await lax.close();
    }
  });

  it('400 naming chargingStationModelId when the model does not exist or is archived, before any 409', async () => {
    await expectBadRequest({ network: 'n', chargingStationModelId: 'csm_00000000000000000000000000' }, 'chargingStationModelId');
    await expectBadRequest({ network: 'n', chargingStationModelId: 'csm_00000000000000000000000000', securityProfile: 1 }, 'chargingStationModelId');
    const model = await createModel(t);
    const archived = await t.app.inject({
      method: 'POST',
      url: `/asset-management/v1/charging-station-models/${model.id}/archive`,
      headers: { authorization: t.bearer(MODEL_ADMIN) },
    });
    expect(archived.statusCode).toBe(200);
    await expectBadRequest({ network: 'n', chargingStationModelId: model.id }, 'chargingStationModelId');
  });

  it.each([
    ['network missing', {}, 'network'],
    ['network empty', { network: '' }, 'network'],
    ['network padded', { network: ' n ' }, 'network'],
    ['network too long', { network: 'n'.repeat(129) }, 'network'],
    ['network with a control character', { network: 'n\u0000' }, 'network'],
    ['network a number', { network: 7 }, 'network'],
    ['id empty', { network: 'n', id: '' }, 'id'],
    ['id with a space', { network: 'n', id: 'CP 1' }, 'id'],
    ['id with a slash', { network: 'n', id: 'CP/1' }, 'id'],
    ['id non-ASCII', { network: 'n', id: 'CPé' }, 'id'],
    ['id a number', { network: 'n', id: 1 }, 'id'],
    ['name empty', { network: 'n', name: '  ' }, 'name'],
    ['name too long', { network: 'n', name: 'a'.repeat(201) }, 'name'],
    ['name null', { network: 'n', name: null }, 'name'],
    ['chargingStationModelId malformed', { network: 'n', chargingStationModelId: 'csm 1' }, 'chargingStationModelId'],
    ['ocppVersion unknown', { network: 'n', ocppVersion: '2.0' }, 'ocppVersion'],
    ['ocppVersion a number', { network: 'n', ocppVersion: 1.6 }, 'ocppVersion'],
    ['securityProfile 0', { network: 'n', securityProfile: 0 }, 'securityProfile'],
    ['securityProfile 4', { network: 'n', securityProfile: 4 }, 'securityProfile'],
    ['securityProfile a string', { network: 'n', securityProfile: '2' }, 'securityProfile'],
    ['securityProfile fractional', { network: 'n', securityProfile: 2.5 }, 'securityProfile'],
    ['password on create', { network: 'n', password: 'aaaaaaaaaaaaaaaa' }, 'password'],
    ['unknown field', { network: 'n', vendor: 'ABB' }, 'vendor'],
  ])('400 for %s', async (_name, body, field) => {
    await expectBadRequest(body, field);
  });

  it('accepts a name of 200 characters', async () => {
    const res = await post({ network: 'n', name: 'a'.repeat(200) });
    expect(res.statusCode).toBe(201);
  });

  it('401 { message } without or with a garbage token', async () => {
    for (const authorization of [null, 'Bearer nope']) {
      const res = await post({ network: 'n' }, authorization);
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ message: expect.any(String) });
    }
  });

  it('403 { message } without write:asset, before validation', async () => {
    for (const scopes of [['read:asset'], ['write:chargingstationmodel'], []]) {
      for (const body of [{ network: 'n' }, { bogus: 1 }]) {
        const res = await post(body, t.bearer({ scopes, admin: true }));
        expect(res.statusCode).toBe(403);
        expect(res.json()).toEqual({ message: expect.any(String) });
      }
    }
  });

  it('a network-scoped token creates in its own network and gets 403 { message } for another', async () => {
    const network = uniqueNetwork();
    const scoped = t.bearer({ scopes: ['write:asset'], network });
    const own = await post({ network }, scoped);
    expect(own.statusCode).toBe(201);
    const other = await post({ network: uniqueNetwork() }, scoped);
    expect(other.statusCode).toBe(403);
    expect(other.json()).toEqual({ message: expect.any(String) });
  });
});

describe('GET /assets/{id}', () => {
  it('answers with read:asset or write:asset', async () => {
    const asset = await createAsset(t);
    for (const scopes of [['read:asset'], ['write:asset']]) {
      const res = await get(`${URL_}/${asset.id}`, t.bearer({ scopes }));
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ data: asset });
    }
  });

  it('404 ASSET_NOT_FOUND for an unknown id and, identically, for another network\'s asset', async () => {
    const asset = await createAsset(t);
    const unknown = await get(`${URL_}/no-such-asset`);
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toEqual(familyError('NOT_FOUND', 'ASSET_NOT_FOUND'));
    const foreign = await get(`${URL_}/${asset.id}`, t.bearer({ scopes: ['read:asset'], network: uniqueNetwork() }));
    expect(foreign.statusCode).toBe(404);
    expect(foreign.json()).toEqual({ ...unknown.json(), message: unknown.json().message.replace('no-such-asset', asset.id) });
    const own = await get(`${URL_}/${asset.id}`, t.bearer({ scopes: ['read:asset'], network: asset.network }));
    expect(own.statusCode).toBe(200);
  });

  it('403 without an asset scope, 400 for a malformed id', async () => {
    const res = await get(`${URL_}/x`, t.bearer({ scopes: ['read:chargingstationmodel'] }));
    expect(res.statusCode).toBe(403);
    expect(res.json()).toEqual({ message: expect.any(String) });
    const malformed = await get(`${URL_}/a%20b`);
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json()).toEqual(BAD_REQUEST);
  });
});

describe('GET /assets', () => {
  async function listAll(authorization: string, extra = ''): Promise<string[]> {
    const ids: string[] = [];
    let startingAfter: string | undefined;
    for (let i = 0; i < 200; i++) {
      const res = await get(`${URL_}?limit=3${startingAfter ? `&startingAfter=${startingAfter}` : ''}${extra}`, authorization);
      expect(res.statusCode, res.body).toBe(200);
      const { items, hasMore } = res.json().data;
      ids.push(...items.map((a: { id: string }) => a.id));
      if (!hasMore) return ids;
      expect(items).toHaveLength(3);
      startingAfter = items.at(-1).id;
    }
    throw new Error('paging did not end');
  }

  it('a network-scoped token lists only its network, page by page without repeats', async () => {
    const a = uniqueNetwork();
    const b = uniqueNetwork();
    const inA = [];
    for (let i = 0; i < 7; i++) inA.push((await createAsset(t, { network: a })).id);
    const inB = [(await createAsset(t, { network: b })).id];
    const seen = await listAll(t.bearer({ scopes: ['read:asset'], network: a }));
    expect([...seen].sort()).toEqual([...inA].sort());
    const seenB = await listAll(t.bearer({ scopes: ['read:asset'], network: b }));
    expect(seenB).toEqual(inB);
    // the network filter narrows an unscoped token and cannot widen a scoped one
    expect([...(await listAll(writer, `&network=${a}`))].sort()).toEqual([...inA].sort());
    expect(await listAll(t.bearer({ scopes: ['read:asset'], network: a }), `&network=${b}`)).toEqual([]);
  });

  it('an unscoped token sees every network; answers never carry a password hash', async () => {
    const x = await createAsset(t);
    const y = await createAsset(t);
    const res = await get(`${URL_}?limit=100`);
    const body = res.body;
    expect(body).not.toMatch(/scrypt|hash/i);
    const all = await listAll(writer);
    expect(all).toEqual(expect.arrayContaining([x.id, y.id]));
    expect(new Set(all).size).toBe(all.length);
  });

  it.each(['limit=0', 'limit=101', 'limit=x', 'startingAfter=a%20b', 'network=', 'networks=a'])('400 for the query %s', async (qs) => {
    const res = await get(`${URL_}?${qs}`);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual(BAD_REQUEST);
  });

  it('403 without an asset scope', async () => {
    const res = await get(URL_, t.bearer({ scopes: ['write:chargingstationmodel'], admin: true }));
    expect(res.statusCode).toBe(403);
  });
});

describe('OpenAPI', () => {
  it('documents every asset-management operation with its tag, summary and schemas', async () => {
    const res = await t.app.inject({ url: '/openapi.json' });
    expect(res.statusCode).toBe(200);
    const paths = res.json().paths as Record<string, Record<string, { tags: string[]; summary: string; responses: Record<string, unknown>; requestBody?: unknown; parameters?: unknown[] }>>;
    const operations: [string, string, string][] = [
      ['post', '/asset-management/v1/charging-station-models', '201'],
      ['get', '/asset-management/v1/charging-station-models', '200'],
      ['get', '/asset-management/v1/charging-station-models/{id}', '200'],
      ['post', '/asset-management/v1/charging-station-models/{id}/archive', '200'],
      ['post', '/asset-management/v1/assets', '201'],
      ['get', '/asset-management/v1/assets', '200'],
      ['get', '/asset-management/v1/assets/{id}', '200'],
      ['post', '/asset-management/v1/assets/change-password', '200'],
    ];
    for (const [method, path, success] of operations) {
      const op = paths[path]?.[method];
      expect(op, `${method} ${path}`).toBeDefined();
      expect(op!.tags).toEqual(['asset-management']);
      expect(op!.summary).toMatch(/\S/);
      expect(Object.keys(op!.responses)).toEqual(expect.arrayContaining([success, '400', '401', '403']));
      if (method === 'post') expect(op!.requestBody).toBeDefined();
    }
    expect(JSON.stringify(paths['/asset-management/v1/assets'])).not.toMatch(/passwordHash/);
  });
});
