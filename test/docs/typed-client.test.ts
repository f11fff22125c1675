// A client generated from the API reference (openapi-typescript types, test/generated/openapi.ts,
// kept equal to the live document by openapi-document.test.ts) with openapi-fetch, against a
// listening server. `tsc --noEmit` compiles this file: a renamed schema, operation or member of
// the document breaks the build here.
import type { AddressInfo } from 'node:net';
import createFetchClient from 'openapi-fetch';
import { beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/auth/clients-service.js';
import { unique, uniqueAssetId, uniqueNetwork } from '../helpers/asset-factory.js';
import { uniqueId } from '../helpers/payments-factory.js';
import { useTestApp } from '../helpers/test-app.js';
import type { components, paths } from '../generated/openapi.js';

type SessionPayment = components['schemas']['SessionPayment'];
type ChargingStationModel = components['schemas']['ChargingStationModel'];
type Asset = components['schemas']['Asset'];
type RecordRequest = paths['/payments/v1/session-payments']['post']['requestBody']['content']['application/json'];

const t = useTestApp();
let baseUrl: string;
let api: ReturnType<typeof createFetchClient<paths>>;

beforeAll(async () => {
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  const client = await createClient(t.database.db, {
    name: 'typed-client',
    scopes: ['read:sessionpayment', 'write:sessionpayment', 'write:chargingstationmodel', 'write:asset', 'read:asset'],
    isAdmin: true,
  });
  // The token through the same typed client, as an integrator's code gets it.
  const tokens = createFetchClient<paths>({ baseUrl });
  const { data, response } = await tokens.POST('/oauth/token', {
    headers: {
      authorization: `Basic ${Buffer.from(`${client.clientId}:${client.clientSecret}`).toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: { grant_type: 'client_credentials' },
    bodySerializer: (body) => new URLSearchParams(body as Record<string, string>).toString(),
  });
  expect(response.status).toBe(200);
  api = createFetchClient<paths>({ baseUrl, headers: { authorization: `Bearer ${data!.access_token}` } });
});

describe('a generated client', () => {
  it('records and lists session payments', async () => {
    const body: RecordRequest = {
      network: uniqueNetwork(),
      session: uniqueId('ses'),
      sitePartners: [],
      location: 'loc_1',
      currency: 'EUR',
      paymentType: 'GUEST',
      costs: { energy: 1200, idle: 0, flat: 0, time: 0 },
      usages: { energy: 9000, time: 1800, idle: 0 },
      taxConfig: null,
      priceAdjustment: null,
    };
    const recorded = await api.POST('/payments/v1/session-payments', { body });
    expect(recorded.response.status).toBe(201);
    const payment: SessionPayment = recorded.data!;
    expect(payment).toMatchObject({ session: body.session, status: 'PENDING', billedAmount: 1200 });

    const listed = await api.GET('/payments/v1/session-payments', { params: { query: { sessionIds: `${body.session},${uniqueId('ses')}` } } });
    expect(listed.response.status).toBe(200);
    const payments: SessionPayment[] = listed.data!;
    expect(payments.map((p) => p.id)).toEqual([payment.id]);

    const missing = await api.GET('/payments/v1/session-payments', { params: { query: { sessionIds: ' ' } } });
    expect(missing.response.status).toBe(400);
    expect(missing.error).toMatchObject({ success: false, error: { name: 'ZodError' } });
  });

  it('creates a charging station model', async () => {
    const created = await api.POST('/asset-management/v1/charging-station-models', {
      body: { vendor: unique('Vendor'), model: unique('Model'), powerType: 'DC', connectors: [{ id: 1, maxAmperage: 200, maxVoltage: 920, maxPowerWatts: 150_000 }] },
    });
    expect(created.response.status).toBe(201);
    const model: ChargingStationModel = created.data!.data;
    expect(model).toMatchObject({ powerType: 'DC', isArchived: false, connectors: [{ id: 1, maxPowerWatts: 150_000 }] });
  });

  it('changes the password of an asset, and reads the 404 of an unknown one in the family\'s shape', async () => {
    const id = uniqueAssetId();
    const created = await api.POST('/asset-management/v1/assets', { body: { id, network: uniqueNetwork() } });
    expect(created.response.status).toBe(201);
    const asset: Asset = created.data!.data;
    expect(asset.passwordChangedAt).toBeNull();

    const changed = await api.POST('/asset-management/v1/assets/change-password', { body: { id } });
    expect(changed.response.status).toBe(200);
    expect(changed.response.headers.get('cache-control')).toBe('no-store');
    const data = changed.data!.data;
    expect('passwordChangedAt' in data && data.passwordChangedAt).toEqual(expect.any(String));
    expect(data.password).toEqual(expect.any(String));

    const unknown = await api.POST('/asset-management/v1/assets/change-password', { body: { id: uniqueAssetId() } });
    expect(unknown.response.status).toBe(404);
    expect(unknown.error).toMatchObject({ type: 'NOT_FOUND', code: 'ASSET_NOT_FOUND' });
  });
});
