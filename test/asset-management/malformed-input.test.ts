import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/test-app.js';
import { ASSET_WRITER, BAD_REQUEST, MODEL_ADMIN, createAsset, modelBody } from '../helpers/asset-factory.js';

const MODELS = '/asset-management/v1/charging-station-models';
const ASSETS = '/asset-management/v1/assets';
const CHANGE_PASSWORD = '/asset-management/v1/assets/change-password';
const RUNS = 150;

let t: TestApp;
let tokens: Record<string, string>;
let assetId: string;

beforeAll(async () => {
  t = await createTestApp();
  tokens = {
    [MODELS]: t.bearer(MODEL_ADMIN),
    [ASSETS]: t.bearer(ASSET_WRITER),
    [CHANGE_PASSWORD]: t.bearer(ASSET_WRITER),
  };
  assetId = (await createAsset(t)).id;
});
afterAll(async () => {
  await t.close();
});

function send(url: string, raw: string | undefined, contentType = 'application/json', authorization: string | null = tokens[url]!) {
  return t.app.inject({
    method: 'POST',
    url,
    headers: {
      ...(authorization !== null ? { authorization } : {}),
      ...(raw !== undefined ? { 'content-type': contentType } : {}),
    },
    ...(raw !== undefined ? { payload: raw } : {}),
  });
}

// Codes each status may carry in this family; anything else (or any 5xx) fails the property.
const CODES: Record<number, { type: string; codes: string[] }> = {
  400: { type: 'BAD_REQUEST', codes: ['INVALID_REQUEST_PARAMETERS'] },
  404: { type: 'NOT_FOUND', codes: ['ASSET_NOT_FOUND', 'CHARGING_STATION_MODEL_NOT_FOUND'] },
  409: { type: 'CONFLICT', codes: ['CONFLICTING_SECURITY_PROFILE_STATE', 'CHARGING_STATION_MODEL_ALREADY_EXISTS', 'ASSET_ALREADY_EXISTS'] },
};

function expectFamilyAnswer(res: LightMyRequestResponse, success: number) {
  expect(res.statusCode, res.body).toBeLessThan(500);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  const body = res.json();
  if (res.statusCode === success) {
    expect(Object.keys(body)).toEqual(['data']);
    return;
  }
  const expected = CODES[res.statusCode];
  expect(expected, `unexpected status ${res.statusCode}: ${res.body}`).toBeDefined();
  expect(Object.keys(body).sort()).toEqual(['code', 'message', 'type']);
  expect(body.type).toBe(expected!.type);
  expect(expected!.codes).toContain(body.code);
  expect(typeof body.message).toBe('string');
  expect(body.message).not.toMatch(/\n\s+at /);
}

type Json = unknown;

// Paths into a valid body; a mutation replaces, removes or adds a member.
function mutate(base: Record<string, Json>, mutations: { op: 'set' | 'delete' | 'add'; path: string[]; value: Json }[]): Json {
  const body = structuredClone(base) as Record<string, Json>;
  for (const { op, path, value } of mutations) {
    let target: Record<string, Json> = body;
    for (const key of path.slice(0, -1)) {
      const next = target[key];
      if (typeof next !== 'object' || next === null) break;
      target = next as Record<string, Json>;
    }
    const last = path.at(-1)!;
    if (op === 'delete') delete target[last];
    else if (op === 'add') target[`${last}${String(value).slice(0, 8)}`] = value;
    else target[last] = value;
  }
  return body;
}

// Values near the rules, so that some mutants pass validation and reach the 404/409 paths.
const plausible = fc.constantFrom<Json>(
  'DC',
  'AC_1_PHASE',
  'CHADEMO',
  'CABLE',
  'ws://plain.example/ocpp',
  'wss://tls.example/ocpp',
  'https://img.example/a.png',
  'Same vendor',
  ' same VENDOR ',
  '1.6',
  '2.0.1',
  'no-such-asset',
  'csm_00000000000000000000000000',
  'Valid.password-16',
  'a'.repeat(34),
  'a'.repeat(201),
  '  ',
  'x\u0000y',
  1,
  2,
  3,
  0,
  -1,
  1.5,
  1e308,
  [],
  {},
);

function mutations(paths: string[][]) {
  return fc.array(
    fc.record({
      op: fc.constantFrom<'set' | 'delete' | 'add'>('set', 'set', 'delete', 'add'),
      path: fc.constantFrom(...paths),
      value: fc.oneof(
        { weight: 4, arbitrary: plausible },
        { weight: 1, arbitrary: fc.stringMatching(/^[A-Za-z0-9._:-]{1,12}$/) },
        { weight: 2, arbitrary: fc.oneof(fc.jsonValue(), fc.string(), fc.integer(), fc.double(), fc.constant(null)) },
      ),
    }),
    { minLength: 1, maxLength: 2 },
  );
}

// Random JSON, random mutations of a valid body, and raw text that is mostly not JSON.
function payloads(validBody: () => Record<string, Json>, paths: string[][]) {
  return fc.oneof(
    fc.anything().map((v) => JSON.stringify(v)),
    fc.jsonValue().map((v) => JSON.stringify(v)),
    { weight: 3, arbitrary: mutations(paths).map((m) => JSON.stringify(mutate(validBody(), m))) },
    fc.string({ maxLength: 64 }),
    fc.json(),
  );
}

const endpoints = [
  {
    url: MODELS,
    success: 201,
    // A fixed vendor and model, so that valid mutants also meet the duplicate rule.
    body: () =>
      modelBody({ vendor: 'Fuzz', model: 'Fuzz', configurationKeys: { ocppUrl: 'wss://x.example/' }, imageUrl: 'https://x.example/i.png', friendlyName: 'F' }),
    paths: [
      ['vendor'],
      ['model'],
      ['powerType'],
      ['connectors'],
      ['connectors', '0'],
      ['connectors', '0', 'id'],
      ['connectors', '0', 'maxAmperage'],
      ['connectors', '0', 'maxVoltage'],
      ['connectors', '0', 'maxPowerWatts'],
      ['connectors', '0', 'connectionType'],
      ['connectors', '0', 'format'],
      ['configurationKeys'],
      ['configurationKeys', 'ocppUrl'],
      ['friendlyName'],
      ['imageUrl'],
    ],
  },
  {
    url: ASSETS,
    success: 201,
    body: () => ({ network: 'fuzz', name: 'n', ocppVersion: '1.6', securityProfile: 2 }),
    paths: [['id'], ['network'], ['name'], ['chargingStationModelId'], ['ocppVersion'], ['securityProfile']],
  },
  {
    url: CHANGE_PASSWORD,
    success: 200,
    body: () => ({ id: assetId, password: 'Valid.password-16' }),
    paths: [['id'], ['password']],
  },
];

describe.each(endpoints)('POST $url with malformed input', ({ url, success, body, paths }) => {
  it('never answers 5xx or a body outside the family', async () => {
    await fc.assert(
      fc.asyncProperty(payloads(body, paths), async (raw) => {
        const res = await send(url, raw);
        expectFamilyAnswer(res, success);
      }),
      { numRuns: RUNS },
    );
  });

  it.each([
    ['malformed JSON', '{"id": ', 'application/json'],
    ['a trailing comma', '{"id": "x",}', 'application/json'],
    ['an empty body declared as JSON', '', 'application/json'],
    ['text/plain', JSON.stringify(body()), 'text/plain'],
    ['a form body', 'id=x&password=y', 'application/x-www-form-urlencoded'],
    ['a prototype-pollution key', '{"__proto__": {"isAdmin": true}}', 'application/json'],
    ['a body over 64 KiB', JSON.stringify({ ...body(), padding: 'x'.repeat(65 * 1024) }), 'application/json'],
    ['a lone surrogate escape', '{"id": "\\ud800"}', 'application/json'],
  ])('400 in the family shape for %s', async (_name, raw, contentType) => {
    const res = await send(url, raw, contentType);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual(BAD_REQUEST);
  });

  it('checks the token before reading the body', async () => {
    const res = await send(url, '{"broken', 'application/json', null);
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ message: expect.any(String) });
  });
});
