// Identifier and name rules of the asset-management family (docs/api.md): Cc/Cf, NFC, commas.
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/test-app.js';
import { ASSET_WRITER, BAD_REQUEST, MODEL_ADMIN, createAsset, familyError, modelBody, unique, uniqueNetwork } from '../helpers/asset-factory.js';

const MODELS = '/asset-management/v1/charging-station-models';
const ASSETS = '/asset-management/v1/assets';

const t = useTestApp();

function post(url: string, payload: Record<string, unknown>, authorization = t.bearer(url === MODELS ? MODEL_ADMIN : ASSET_WRITER)) {
  return t.app.inject({ method: 'POST', url, headers: { authorization }, payload });
}

async function expectBadRequest(url: string, payload: Record<string, unknown>, field: string) {
  const res = await post(url, payload);
  expect(res.statusCode, res.body).toBe(400);
  expect(res.json()).toEqual(BAD_REQUEST);
  expect(res.json().message).toMatch(new RegExp(`^${field.replace('.', '\\.')}: `));
}

async function listAssets(query: string) {
  const res = await t.app.inject({ method: 'GET', url: `${ASSETS}?limit=100&${query}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json().data.items as { id: string }[]).map((a) => a.id);
}

const NFC_E = '\u00e9';
const NFD_E = 'e\u0301';

const FORMAT_CHARACTERS = [
  ['zero-width space', '\u200b'],
  ['right-to-left override', '\u202e'],
  ['byte order mark', '\ufeff'],
  ['soft hyphen', '\u00ad'],
] as const;

describe('format characters (Cf)', () => {
  it.each(FORMAT_CHARACTERS)('a %s is refused in model vendor, model and friendlyName', async (_name, c) => {
    for (const field of ['vendor', 'model', 'friendlyName']) {
      await expectBadRequest(MODELS, modelBody({ [field]: `AB${c}B` }), field);
    }
  });

  it.each(FORMAT_CHARACTERS)('a %s is refused in an asset name and network', async (_name, c) => {
    await expectBadRequest(ASSETS, { network: uniqueNetwork(), name: `Bay${c} 1` }, 'name');
    await expectBadRequest(ASSETS, { network: `${uniqueNetwork()}${c}` }, 'network');
  });

  it('a format character at the end of a text is refused, not trimmed away', async () => {
    await expectBadRequest(MODELS, modelBody({ vendor: `${unique('V')}\ufeff` }), 'vendor');
  });

  it('"ABB" and "ABB\\u200b" are not two models: the second is a 400', async () => {
    const vendor = unique('ABB');
    const model = unique('Terra');
    expect((await post(MODELS, modelBody({ vendor, model }))).statusCode).toBe(201);
    await expectBadRequest(MODELS, modelBody({ vendor: `${vendor}\u200b`, model }), 'vendor');
  });

  it('the network filter of the asset list refuses a format character', async () => {
    const res = await t.app.inject({ method: 'GET', url: `${ASSETS}?network=net%E2%80%8Ba`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toMatch(/^network: /);
  });
});

describe('NFC', () => {
  it('stores and answers vendor, model and friendlyName in NFC', async () => {
    const suffix = unique('');
    const res = await post(MODELS, modelBody({ vendor: `Soci${NFD_E}t${NFD_E}${suffix}`, model: `Caf${NFD_E}${suffix}`, friendlyName: ` Caf${NFD_E} ` }));
    expect(res.statusCode, res.body).toBe(201);
    const { data } = res.json();
    expect(data).toMatchObject({ vendor: `Soci${NFC_E}t${NFC_E}${suffix}`, model: `Caf${NFC_E}${suffix}`, friendlyName: `Caf${NFC_E}` });
    const read = await t.app.inject({ method: 'GET', url: `${MODELS}/${data.id}`, headers: { authorization: t.bearer({ scopes: ['read:chargingstationmodel'] }) } });
    expect(read.json().data).toEqual(data);
  });

  it('the default friendlyName is built from the NFC forms', async () => {
    const suffix = unique('');
    const res = await post(MODELS, modelBody({ vendor: `V${NFD_E}${suffix}`, model: `M${NFD_E}` }));
    expect(res.json().data.friendlyName).toBe(`V${NFC_E}${suffix} M${NFC_E}`);
  });

  it('the NFC and NFD spellings of one vendor are one model: 409 CHARGING_STATION_MODEL_ALREADY_EXISTS', async () => {
    const suffix = unique('');
    const model = unique('M');
    expect((await post(MODELS, modelBody({ vendor: `Soci${NFC_E}t${NFC_E}${suffix}`, model }))).statusCode).toBe(201);
    const res = await post(MODELS, modelBody({ vendor: `Soci${NFD_E}t${NFD_E}${suffix}`, model }));
    expect(res.statusCode, res.body).toBe(409);
    expect(res.json()).toEqual(familyError('CONFLICT', 'CHARGING_STATION_MODEL_ALREADY_EXISTS'));
  });

  it('compares the NFC form case-insensitively', async () => {
    const suffix = unique('').toLowerCase();
    const model = unique('m').toLowerCase();
    expect((await post(MODELS, modelBody({ vendor: `soci${NFC_E}t${NFC_E}${suffix}`, model }))).statusCode).toBe(201);
    // ASCII letters change case (any database locale folds those); é is spelt decomposed.
    const res = await post(MODELS, modelBody({ vendor: ` SOCI${NFD_E}T${NFD_E}${suffix.toUpperCase()} `, model: model.toUpperCase() }));
    expect(res.statusCode, res.body).toBe(409);
    expect(res.json()).toEqual(familyError('CONFLICT', 'CHARGING_STATION_MODEL_ALREADY_EXISTS'));
  });

  it('counts lengths in code points after normalisation: 200 decomposed é are a 200-character vendor', async () => {
    const res = await post(MODELS, modelBody({ vendor: NFD_E.repeat(200), model: unique('M') }));
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().data.vendor).toBe(NFC_E.repeat(200));
    await expectBadRequest(MODELS, modelBody({ vendor: NFD_E.repeat(201) }), 'vendor');
  });

  it('an asset network and name are stored in NFC, and the network filter finds it by either spelling', async () => {
    const network = `${uniqueNetwork()}-r${NFD_E}seau`;
    const asset = await createAsset(t, { network, name: `Caf${NFD_E} bay` });
    expect(asset.network).toBe(network.normalize('NFC'));
    expect(asset.name).toBe(`Caf${NFC_E} bay`);
    expect(await listAssets(`network=${encodeURIComponent(network.normalize('NFC'))}`)).toEqual([asset.id]);
    expect(await listAssets(`network=${encodeURIComponent(network)}`)).toEqual([asset.id]);
  });
});

describe('asset network: the same rules as the payments network', () => {
  it('a network with a comma is refused on create and in the list filter', async () => {
    const network = 'net_a,net_b';
    await expectBadRequest(ASSETS, { network }, 'network');
    const res = await t.app.inject({ method: 'GET', url: `${ASSETS}?network=${encodeURIComponent(network)}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toMatch(/^network: /);
  });
});
