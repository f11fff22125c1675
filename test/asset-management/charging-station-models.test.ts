import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/test-app.js';
import { BAD_REQUEST, MODEL_ADMIN, createModel, familyError, modelBody, siblingApp, unique } from '../helpers/asset-factory.js';

const URL_ = '/asset-management/v1/charging-station-models';
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const CONNECTOR = { id: 1, maxAmperage: 32, maxVoltage: 400, maxPowerWatts: 22_000 };

let t: TestApp;
let admin: string;

beforeAll(async () => {
  t = await createTestApp();
  admin = t.bearer(MODEL_ADMIN);
});
afterAll(async () => {
  await t.close();
});

function post(payload: unknown, authorization: string | null = admin) {
  return t.app.inject({
    method: 'POST',
    url: URL_,
    headers: authorization === null ? {} : { authorization },
    payload: payload as Record<string, unknown>,
  });
}

function postRaw(raw: string, authorization = admin) {
  return t.app.inject({ method: 'POST', url: URL_, headers: { authorization, 'content-type': 'application/json' }, payload: raw });
}

async function expectBadRequest(payload: unknown, field: string) {
  const res = await post(payload);
  expect(res.statusCode, res.body).toBe(400);
  const body = res.json();
  expect(body).toEqual(BAD_REQUEST);
  expect(body.message).toContain(field);
  return body.message as string;
}

describe('POST /charging-station-models: success', () => {
  it('answers 201 with the model in the published field order, defaults filled in', async () => {
    const body = modelBody();
    const res = await post(body);
    expect(res.statusCode).toBe(201);
    const { data } = res.json();
    expect(Object.keys(res.json())).toEqual(['data']);
    expect(Object.keys(data)).toEqual([
      'id',
      'vendor',
      'model',
      'powerType',
      'connectors',
      'configurationKeys',
      'isArchived',
      'createdAt',
      'updatedAt',
      'friendlyName',
    ]);
    expect(data).toEqual({
      id: expect.stringMatching(/^csm_[0-9A-HJKMNP-TV-Z]{26}$/),
      vendor: body.vendor,
      model: body.model,
      powerType: 'AC_3_PHASE',
      connectors: [CONNECTOR],
      configurationKeys: {},
      isArchived: false,
      createdAt: expect.stringMatching(ISO_MS),
      updatedAt: expect.stringMatching(ISO_MS),
      friendlyName: `${body.vendor} ${body.model}`,
    });
    expect(data.updatedAt).toBe(data.createdAt);
  });

  it('carries every optional field, connector extensions in the published order', async () => {
    const body = modelBody({
      powerType: 'DC',
      connectors: [
        { maxPowerWatts: 150_000, maxVoltage: 920, maxAmperage: 200, id: 2, format: 'CABLE', connectionType: 'IEC_62196_T2_COMBO' },
        { id: 1, maxAmperage: 125, maxVoltage: 500, maxPowerWatts: 62_500.5, connectionType: 'CHADEMO' },
        { id: 3, maxAmperage: 0.5, maxVoltage: 230, maxPowerWatts: 115, format: 'SOCKET' },
      ],
      configurationKeys: { ocppUrl: 'wss://ocpp.example.com/ocpp/v201' },
      friendlyName: 'Terra 184',
      imageUrl: 'https://img.example.com/terra.png',
    });
    const res = await post(body);
    expect(res.statusCode, res.body).toBe(201);
    const { data } = res.json();
    expect(Object.keys(data).slice(-2)).toEqual(['friendlyName', 'imageUrl']);
    expect(data.connectors).toEqual([
      { id: 2, connectionType: 'IEC_62196_T2_COMBO', format: 'CABLE', maxAmperage: 200, maxVoltage: 920, maxPowerWatts: 150_000 },
      { id: 1, connectionType: 'CHADEMO', maxAmperage: 125, maxVoltage: 500, maxPowerWatts: 62_500.5 },
      { id: 3, format: 'SOCKET', maxAmperage: 0.5, maxVoltage: 230, maxPowerWatts: 115 },
    ]);
    expect(Object.keys(data.connectors[0])).toEqual(['id', 'connectionType', 'format', 'maxAmperage', 'maxVoltage', 'maxPowerWatts']);
    expect(data.configurationKeys).toEqual({ ocppUrl: 'wss://ocpp.example.com/ocpp/v201' });
    expect(data.friendlyName).toBe('Terra 184');
    expect(data.imageUrl).toBe('https://img.example.com/terra.png');
    // what was answered is what is stored
    const again = await t.app.inject({ url: `${URL_}/${data.id}`, headers: { authorization: admin } });
    expect(again.json()).toEqual({ data });
  });

  it('accepts every OCPI connector type and format', async () => {
    const types = ['CHAOJI', 'DOMESTIC_L', 'GBT_AC', 'IEC_60309_2_single_16', 'IEC_62196_T3C', 'NEMA_14_50', 'PANTOGRAPH_TOP_DOWN', 'TESLA_S'];
    const res = await post(
      modelBody({ connectors: types.map((connectionType, i) => ({ ...CONNECTOR, id: i + 1, connectionType, format: i % 2 ? 'SOCKET' : 'CABLE' })) }),
    );
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().data.connectors.map((c: { connectionType: string }) => c.connectionType)).toEqual(types);
  });

  it('trims strings before storing and before checking the length', async () => {
    const vendor = unique('Trim');
    const res = await post(
      modelBody({
        vendor: `  ${vendor}\t`,
        model: ` ${'m'.repeat(200)} `,
        friendlyName: '\n Name ',
        imageUrl: ' https://x.example/a.png ',
        configurationKeys: { ocppUrl: ' wss://h.example/ ' },
      }),
    );
    expect(res.statusCode, res.body).toBe(201);
    const { data } = res.json();
    expect(data.vendor).toBe(vendor);
    expect(data.model).toBe('m'.repeat(200));
    expect(data.friendlyName).toBe('Name');
    expect(data.imageUrl).toBe('https://x.example/a.png');
    expect(data.configurationKeys.ocppUrl).toBe('wss://h.example/');
  });

  it('keeps a default friendlyName within 200 characters', async () => {
    const vendor = unique('V').padEnd(200, 'v');
    const res = await post(modelBody({ vendor, model: 'M'.repeat(200) }));
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().data.friendlyName).toBe(`${vendor}`);
  });

  it.each([
    ['vendor', 200],
    ['model', 200],
    ['friendlyName', 200],
  ])('accepts %s of %i characters and refuses one more', async (field, max) => {
    const ok = await post(modelBody({ [field]: unique('x').padEnd(max, 'a') }));
    expect(ok.statusCode, ok.body).toBe(201);
    expect(ok.json().data[field]).toHaveLength(max);
    await expectBadRequest(modelBody({ [field]: unique('x').padEnd(max + 1, 'a') }), field);
  });

  it('counts characters, not UTF-16 units', async () => {
    const ok = await post(modelBody({ friendlyName: '🔌'.repeat(200) }));
    expect(ok.statusCode, ok.body).toBe(201);
    await expectBadRequest(modelBody({ friendlyName: '🔌'.repeat(201) }), 'friendlyName');
  });

  it('accepts imageUrl of 500 characters and refuses 501', async () => {
    const base = 'https://img.example.com/';
    const ok = await post(modelBody({ imageUrl: base.padEnd(500, 'a') }));
    expect(ok.statusCode, ok.body).toBe(201);
    expect(ok.json().data.imageUrl).toHaveLength(500);
    await expectBadRequest(modelBody({ imageUrl: base.padEnd(501, 'a') }), 'imageUrl');
  });

  it('accepts configurationKeys.ocppUrl of 500 characters and refuses 501', async () => {
    const base = 'wss://ocpp.example.com/';
    const ok = await post(modelBody({ configurationKeys: { ocppUrl: base.padEnd(500, 'a') } }));
    expect(ok.statusCode, ok.body).toBe(201);
    await expectBadRequest(modelBody({ configurationKeys: { ocppUrl: base.padEnd(501, 'a') } }), 'configurationKeys.ocppUrl');
  });

  it('accepts 1 and 32 connectors', async () => {
    for (const n of [1, 32]) {
      const res = await post(modelBody({ connectors: Array.from({ length: n }, (_, i) => ({ ...CONNECTOR, id: i + 1 })) }));
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json().data.connectors).toHaveLength(n);
    }
  });

  it('accepts configurationKeys {} and answers it as {}', async () => {
    const res = await post(modelBody({ configurationKeys: {} }));
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().data.configurationKeys).toEqual({});
  });
});

describe('POST /charging-station-models: 401 and 403', () => {
  it('401 { message } without a token, even with an invalid body', async () => {
    const res = await post({ vendor: 1 }, null);
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ message: expect.any(String) });
  });

  it.each(['Bearer garbage', 'Bearer a.b.c', 'Basic Zm9vOmJhcg==', 'garbage'])('401 { message } for %s', async (authorization) => {
    const res = await post(modelBody(), authorization);
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ message: expect.any(String) });
  });

  it.each([
    ['a non-admin with the scope', { scopes: ['write:chargingstationmodel'] }],
    ['an admin without the scope', { scopes: ['write:asset'], admin: true }],
    ['an admin with only the read scope', { scopes: ['read:chargingstationmodel'], admin: true }],
    ['a token with a wrong scope', { scopes: ['read:sessionpayment'] }],
    ['a token without scopes', { scopes: [] }],
  ])('403 { message } for %s, before validation', async (_name, token) => {
    for (const body of [modelBody(), { nonsense: true }]) {
      const res = await post(body, t.bearer(token));
      expect(res.statusCode).toBe(403);
      expect(res.json()).toEqual({ message: expect.any(String) });
    }
  });
});

describe('POST /charging-station-models: 400 per invalid field', () => {
  const cases: [string, Record<string, unknown>, string][] = [
    ['vendor missing', { vendor: undefined }, 'vendor'],
    ['vendor empty', { vendor: '' }, 'vendor'],
    ['vendor blank', { vendor: '   ' }, 'vendor'],
    ['vendor not a string', { vendor: 42 }, 'vendor'],
    ['vendor null', { vendor: null }, 'vendor'],
    ['model missing', { model: undefined }, 'model'],
    ['model empty', { model: '' }, 'model'],
    ['model an array', { model: ['x'] }, 'model'],
    ['powerType missing', { powerType: undefined }, 'powerType'],
    ['powerType unknown', { powerType: 'AC' }, 'powerType'],
    ['powerType lower case', { powerType: 'dc' }, 'powerType'],
    ['connectors missing', { connectors: undefined }, 'connectors'],
    ['connectors empty', { connectors: [] }, 'connectors'],
    ['connectors 33', { connectors: Array.from({ length: 33 }, (_, i) => ({ ...CONNECTOR, id: i + 1 })) }, 'connectors'],
    ['connectors an object', { connectors: CONNECTOR }, 'connectors'],
    ['connector null', { connectors: [null] }, 'connectors.0'],
    ['connector ids repeated', { connectors: [CONNECTOR, { ...CONNECTOR, maxAmperage: 16 }] }, 'connectors.1.id'],
    ['connector id 0', { connectors: [{ ...CONNECTOR, id: 0 }] }, 'connectors.0.id'],
    ['connector id negative', { connectors: [{ ...CONNECTOR, id: -1 }] }, 'connectors.0.id'],
    ['connector id fractional', { connectors: [{ ...CONNECTOR, id: 1.5 }] }, 'connectors.0.id'],
    ['connector id a string', { connectors: [{ ...CONNECTOR, id: '1' }] }, 'connectors.0.id'],
    ['connector id missing', { connectors: [{ ...CONNECTOR, id: undefined }] }, 'connectors.0.id'],
    ['maxAmperage 0', { connectors: [{ ...CONNECTOR, maxAmperage: 0 }] }, 'connectors.0.maxAmperage'],
    ['maxAmperage negative', { connectors: [{ ...CONNECTOR, maxAmperage: -32 }] }, 'connectors.0.maxAmperage'],
    ['maxVoltage 0', { connectors: [{ ...CONNECTOR, maxVoltage: 0 }] }, 'connectors.0.maxVoltage'],
    ['maxVoltage a string', { connectors: [{ ...CONNECTOR, maxVoltage: '400' }] }, 'connectors.0.maxVoltage'],
    ['maxPowerWatts negative', { connectors: [{ ...CONNECTOR, maxPowerWatts: -1 }] }, 'connectors.0.maxPowerWatts'],
    ['maxPowerWatts missing', { connectors: [{ ...CONNECTOR, maxPowerWatts: undefined }] }, 'connectors.0.maxPowerWatts'],
    ['connectionType unknown', { connectors: [{ ...CONNECTOR, connectionType: 'TYPE_2' }] }, 'connectors.0.connectionType'],
    ['format unknown', { connectors: [{ ...CONNECTOR, format: 'PLUG' }] }, 'connectors.0.format'],
    ['unknown connector field', { connectors: [{ ...CONNECTOR, maxKw: 22 }] }, 'maxKw'],
    ['configurationKeys not an object', { configurationKeys: 'wss://x.example' }, 'configurationKeys'],
    ['ocppUrl http', { configurationKeys: { ocppUrl: 'https://x.example/ocpp' } }, 'configurationKeys.ocppUrl'],
    ['ocppUrl relative', { configurationKeys: { ocppUrl: '/ocpp' } }, 'configurationKeys.ocppUrl'],
    ['ocppUrl without slashes', { configurationKeys: { ocppUrl: 'wss:x.example' } }, 'configurationKeys.ocppUrl'],
    ['ocppUrl without host', { configurationKeys: { ocppUrl: 'wss://' } }, 'configurationKeys.ocppUrl'],
    ['ocppUrl with a space', { configurationKeys: { ocppUrl: 'wss://x.example/a b' } }, 'configurationKeys.ocppUrl'],
    ['ocppUrl empty', { configurationKeys: { ocppUrl: '' } }, 'configurationKeys.ocppUrl'],
    ['unknown configurationKeys field', { configurationKeys: { ocppURL: 'wss://x.example' } }, 'ocppURL'],
    ['friendlyName empty', { friendlyName: ' ' }, 'friendlyName'],
    ['friendlyName null', { friendlyName: null }, 'friendlyName'],
    ['imageUrl ftp', { imageUrl: 'ftp://x.example/a.png' }, 'imageUrl'],
    ['imageUrl relative', { imageUrl: 'images/a.png' }, 'imageUrl'],
    ['imageUrl javascript', { imageUrl: 'javascript:alert(1)' }, 'imageUrl'],
    ['unknown field', { vendorName: 'ABB' }, 'vendorName'],
    ['id supplied', { id: 'csm_mine' }, 'id'],
  ];

  it.each(cases)('%s', async (_name, overrides, field) => {
    await expectBadRequest(modelBody(overrides), field);
  });

  it.each(['\u0000', '\u0007', '\n', '\r', '\u001b', '\u007f', '\u0085', '\u009f'])('refuses the control character %j inside text', async (c) => {
    for (const field of ['vendor', 'model', 'friendlyName']) {
      const message = await expectBadRequest(modelBody({ [field]: `AB${c}B` }), field);
      expect(message).toMatch(/control characters/);
    }
  });

  it('refuses an unpaired surrogate', async () => {
    await expectBadRequest(modelBody({ vendor: 'AB\ud800C' }), 'vendor');
  });

  it('refuses infinite and huge ratings written in JSON', async () => {
    for (const field of ['maxAmperage', 'maxVoltage', 'maxPowerWatts']) {
      const raw = JSON.stringify(modelBody()).replace(`"${field}":`, `"${field}":1e400,"x${field}":`);
      const res = await postRaw(raw);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toEqual(BAD_REQUEST);
      expect(res.json().message).toContain(`connectors.0.${field}`);
    }
  });

  it('names every offending field at once', async () => {
    const message = await expectBadRequest({ vendor: '', powerType: 'X', connectors: [] }, 'vendor');
    expect(message).toContain('model');
    expect(message).toContain('powerType');
    expect(message).toContain('connectors');
  });

  it('400 for a body that is not an object', async () => {
    for (const raw of ['[]', '"x"', '42', 'null', 'true']) {
      const res = await postRaw(raw);
      expect(res.statusCode, raw).toBe(400);
      expect(res.json()).toEqual(BAD_REQUEST);
    }
  });
});

describe('POST /charging-station-models: 409', () => {
  it('vendor + model already taken, compared trimmed and case-insensitively', async () => {
    const vendor = unique('ABB');
    const model = unique('Terra');
    const first = await post(modelBody({ vendor: `  ${vendor.toUpperCase()}  `, model }));
    expect(first.statusCode, first.body).toBe(201);
    for (const variant of [
      { vendor: vendor.toLowerCase(), model },
      { vendor, model: `${model.toUpperCase()} ` },
      { vendor: ` ${vendor}`, model: `\t${model.toLowerCase()}` },
    ]) {
      const res = await post(modelBody({ ...variant, powerType: 'DC' }));
      expect(res.statusCode, res.body).toBe(409);
      expect(res.json()).toEqual(familyError('CONFLICT', 'CHARGING_STATION_MODEL_ALREADY_EXISTS'));
    }
    const otherModel = await post(modelBody({ vendor, model: `${model}-2` }));
    expect(otherModel.statusCode).toBe(201);
  });

  it('ws:// ocppUrl while the minimum security profile is 2', async () => {
    for (const ocppUrl of ['ws://ocpp.example.com/ocpp', 'WS://OCPP.example.com/']) {
      const res = await post(modelBody({ configurationKeys: { ocppUrl } }));
      expect(res.statusCode, res.body).toBe(409);
      const body = res.json();
      expect(body).toEqual(familyError('CONFLICT', 'CONFLICTING_SECURITY_PROFILE_STATE'));
      expect(body.message).toMatch(/security profile 2/);
      expect(body.message).toMatch(/wss:\/\//);
    }
    const secure = await post(modelBody({ configurationKeys: { ocppUrl: 'WSS://ocpp.example.com/' } }));
    expect(secure.statusCode).toBe(201);
  });

  it('exactly one of ten concurrent identical creates succeeds', async () => {
    const body = modelBody();
    const results = await Promise.all(Array.from({ length: 10 }, () => post(body)));
    const statuses = results.map((r) => r.statusCode).sort();
    expect(statuses).toEqual([201, ...Array(9).fill(409)]);
    for (const r of results.filter((r) => r.statusCode === 409)) {
      expect(r.json()).toEqual(familyError('CONFLICT', 'CHARGING_STATION_MODEL_ALREADY_EXISTS'));
    }
  });
});

describe('security profile 1 and 3 networks', () => {
  it('accepts ws:// when the minimum profile is 1, refuses it with the profile named when it is 3', async () => {
    for (const [min, status] of [
      ['1', 201],
      ['3', 409],
    ] as const) {
      const other = await siblingApp(t, { OCPP_MIN_SECURITY_PROFILE: min });
      try {
        const res = await other.app.inject({
          method: 'POST',
          url: URL_,
          headers: { authorization: other.bearer(MODEL_ADMIN) },
          payload: modelBody({ configurationKeys: { ocppUrl: 'ws://plain.example/ocpp' } }),
        });
        expect(res.statusCode, res.body).toBe(status);
        if (status === 201) expect(res.json().data.configurationKeys).toEqual({ ocppUrl: 'ws://plain.example/ocpp' });
        else expect(res.json().message).toMatch(/security profile 3/);
      } finally {
        await other.close();
      }
    }
  });
});

describe('GET /charging-station-models and /{id}', () => {
  it('reads one model with either scope; 404 for an unknown id; 400 for a malformed one', async () => {
    const created = await createModel(t);
    for (const scopes of [['read:chargingstationmodel'], ['write:chargingstationmodel']]) {
      const res = await t.app.inject({ url: `${URL_}/${created.id}`, headers: { authorization: t.bearer({ scopes }) } });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ data: created });
    }
    const missing = await t.app.inject({ url: `${URL_}/csm_00000000000000000000000000`, headers: { authorization: admin } });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toEqual(familyError('NOT_FOUND', 'CHARGING_STATION_MODEL_NOT_FOUND'));
    const malformed = await t.app.inject({ url: `${URL_}/a%00b`, headers: { authorization: admin } });
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json()).toEqual(BAD_REQUEST);
  });

  it('403 without a model scope, 401 without a token', async () => {
    const noScope = await t.app.inject({ url: URL_, headers: { authorization: t.bearer({ scopes: ['read:asset'], admin: true }) } });
    expect(noScope.statusCode).toBe(403);
    expect(noScope.json()).toEqual({ message: expect.any(String) });
    const noToken = await t.app.inject({ url: URL_ });
    expect(noToken.statusCode).toBe(401);
    expect(noToken.json()).toEqual({ message: expect.any(String) });
  });

  it('pages in id order with startingAfter and hasMore', async () => {
    const mine = [await createModel(t), await createModel(t), await createModel(t)];
    const reader = t.bearer({ scopes: ['read:chargingstationmodel'] });
    const seen: string[] = [];
    let startingAfter: string | undefined;
    for (let i = 0; i < 100; i++) {
      const qs = new URLSearchParams({ limit: '7', ...(startingAfter ? { startingAfter } : {}) });
      const res = await t.app.inject({ url: `${URL_}?${qs}`, headers: { authorization: reader } });
      expect(res.statusCode, res.body).toBe(200);
      const { data } = res.json();
      expect(Object.keys(data)).toEqual(['items', 'hasMore']);
      expect(data.items.length).toBeLessThanOrEqual(7);
      seen.push(...data.items.map((m: { id: string }) => m.id));
      if (!data.hasMore) break;
      expect(data.items).toHaveLength(7);
      startingAfter = data.items.at(-1).id;
    }
    expect(new Set(seen).size).toBe(seen.length);
    expect([...seen].sort()).toEqual(seen);
    const positions = mine.map((m) => seen.indexOf(m.id));
    expect(positions.every((p) => p >= 0)).toBe(true);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);

    const afterFirst = await t.app.inject({ url: `${URL_}?limit=2&startingAfter=${mine[0]!.id}`, headers: { authorization: reader } });
    expect(afterFirst.json().data.items.map((m: { id: string }) => m.id)).toEqual([mine[1]!.id, mine[2]!.id]);
  });

  it('defaults to 20 items', async () => {
    for (let i = 0; i < 21; i++) await createModel(t);
    const res = await t.app.inject({ url: URL_, headers: { authorization: admin } });
    expect(res.json().data.items).toHaveLength(20);
    expect(res.json().data.hasMore).toBe(true);
  });

  it.each(['limit=0', 'limit=101', 'limit=abc', 'limit=1.5', 'limit=', 'startingAfter=', 'includeArchived=yes', 'limit=1&limit=2', 'sort=id'])(
    '400 for the query %s',
    async (qs) => {
      const res = await t.app.inject({ url: `${URL_}?${qs}`, headers: { authorization: admin } });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toEqual(BAD_REQUEST);
    },
  );

  it('accepts limit=100', async () => {
    const res = await t.app.inject({ url: `${URL_}?limit=100`, headers: { authorization: admin } });
    expect(res.statusCode).toBe(200);
  });
});

describe('POST /charging-station-models/{id}/archive', () => {
  it('archives once; repeating answers the same model; archived ones are listed only on request', async () => {
    const created = await createModel(t);
    const url = `${URL_}/${created.id}/archive`;
    const first = await t.app.inject({ method: 'POST', url, headers: { authorization: admin } });
    expect(first.statusCode, first.body).toBe(200);
    const archived = first.json().data;
    expect(archived).toEqual({ ...created, isArchived: true, updatedAt: expect.stringMatching(ISO_MS) });
    expect(Date.parse(archived.updatedAt)).toBeGreaterThanOrEqual(Date.parse(created.updatedAt as string));

    const again = await t.app.inject({ method: 'POST', url, headers: { authorization: admin }, payload: {} });
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual({ data: archived });

    const one = await t.app.inject({ url: `${URL_}/${created.id}`, headers: { authorization: admin } });
    expect(one.json().data.isArchived).toBe(true);

    const listed = async (qs: string) => {
      const res = await t.app.inject({ url: `${URL_}?limit=1&startingAfter=${created.id.slice(0, -1)}${qs}`, headers: { authorization: admin } });
      return res.json().data.items.map((m: { id: string }) => m.id) as string[];
    };
    expect(await listed('')).not.toContain(created.id);
    expect(await listed('&includeArchived=false')).not.toContain(created.id);
    expect(await listed('&includeArchived=true')).toEqual([created.id]);
  });

  it('403 for a non-admin, 404 for an unknown id, 400 for a body with fields', async () => {
    const created = await createModel(t);
    const url = `${URL_}/${created.id}/archive`;
    const nonAdmin = await t.app.inject({ method: 'POST', url, headers: { authorization: t.bearer({ scopes: ['write:chargingstationmodel'] }) } });
    expect(nonAdmin.statusCode).toBe(403);
    expect(nonAdmin.json()).toEqual({ message: expect.any(String) });
    const missing = await t.app.inject({ method: 'POST', url: `${URL_}/csm_nope/archive`, headers: { authorization: admin } });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toEqual(familyError('NOT_FOUND', 'CHARGING_STATION_MODEL_NOT_FOUND'));
    const withBody = await t.app.inject({ method: 'POST', url, headers: { authorization: admin }, payload: { archived: true } });
    expect(withBody.statusCode).toBe(400);
    expect(withBody.json()).toEqual(BAD_REQUEST);
    const still = await t.app.inject({ url: `${URL_}/${created.id}`, headers: { authorization: admin } });
    expect(still.json().data.isArchived).toBe(false);
  });
});
