// Change-password reaches the station (docs/rotation.md): the stored credential switches only on the
// station's Accepted, any other answer changes nothing, an unknown outcome keeps both until the
// station logs in with one. The station is ocpp-rpc's RPCClient, both OCPP versions.
import { asc, eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { createRPCError } from 'ocpp-rpc';
import { assetPasswordChanges, assets } from '../../src/asset-management/asset-management-tables.js';
import { ASSET_WRITER, familyError, siblingApp } from '../helpers/asset-factory.js';
import { provisionStation, refusedWith, stationClient, useStationApp, type ProvisionedStation, type StationClient } from '../helpers/station-factory.js';
import { eventually } from '../helpers/eventually.js';

const URL_ = '/asset-management/v1/assets/change-password';
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const t = useStationApp({ env: { OCPP_CALL_TIMEOUT_SECONDS: '1' } });

type Version = '1.6' | '2.0.1';
const PROTOCOL = { '1.6': 'ocpp1.6', '2.0.1': 'ocpp2.0.1' } as const;
const METHOD = { '1.6': 'ChangeConfiguration', '2.0.1': 'SetVariables' } as const;

// What the station sends as its Basic Auth password: 1.6 the key's raw bytes (OCPP-J 1.6 §6.2.2).
function wire(version: Version, password: string): string | Buffer {
  return version === '1.6' ? Buffer.from(password, 'hex') : password;
}

// The station's answer for a status, in its version's shape.
function answer(version: Version, status: string, params: unknown) {
  if (version === '1.6') return { status };
  const data = (params as { setVariableData: Array<{ component: unknown; variable: unknown }> }).setVariableData[0]!;
  return { setVariableResult: [{ attributeStatus: status, component: data.component, variable: data.variable }] };
}

async function connect(version: Version, id: string, password: string): Promise<StationClient> {
  const client = stationClient(t.endpoint, { identity: id, password: wire(version, password), protocols: [PROTOCOL[version]] });
  t.open.push(client);
  await client.connect();
  return client;
}

async function canLogIn(version: Version, id: string, password: string): Promise<boolean> {
  const client = stationClient(t.endpoint, { identity: id, password: wire(version, password), protocols: [PROTOCOL[version]] });
  try {
    await client.connect();
  } catch {
    return false;
  }
  await client.close({ force: true });
  return true;
}

function change(payload: Record<string, unknown>) {
  return t.app.inject({ method: 'POST', url: URL_, headers: { authorization: t.bearer(ASSET_WRITER) }, payload });
}

async function rotation(id: string) {
  const res = await t.app.inject({ url: `/asset-management/v1/assets/${id}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data.rotation;
}

async function audits(id: string) {
  return t.database.db.select().from(assetPasswordChanges).where(eq(assetPasswordChanges.assetId, id)).orderBy(asc(assetPasswordChanges.changedAt));
}

async function row(id: string) {
  const [r] = await t.database.db.select().from(assets).where(eq(assets.id, id));
  return r!;
}

// A provisioned station, connected, answering the password command with `respond`.
async function stationAnswering(version: Version, respond: (params: unknown, client: StationClient) => unknown): Promise<ProvisionedStation & { client: StationClient; received: unknown[] }> {
  const s = await provisionStation(t, { ocppVersion: version });
  const client = await connect(version, s.id, s.password);
  const received: unknown[] = [];
  client.handle(METHOD[version], ({ params }: { params?: unknown }) => {
    received.push(params);
    return respond(params, client) as Promise<Record<string, unknown>>;
  });
  return { ...s, client, received };
}

// A fresh password of the version, as a caller would supply it.
let counter = 0;
function supplied(version: Version): string {
  counter++;
  return version === '1.6' ? `${Date.now().toString(16)}${counter.toString(16).padStart(4, '0')}`.padEnd(40, 'ab').slice(0, 40) : `Supplied:${Date.now().toString(36)}-${counter}`.padEnd(24, 'x');
}

describe.each(['2.0.1', '1.6'] as const)('OCPP %s station', (version) => {
  it('Accepted: 200, the command carries the password as the version wants it, the old one is refused and the new one logs in', async () => {
    const s = await stationAnswering(version, (params) => answer(version, 'Accepted', params));
    const res = await change({ id: s.id });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const { data } = res.json();
    expect(data).toEqual({ id: s.id, passwordChangedAt: expect.stringMatching(ISO_MS), password: expect.any(String) });
    expect(s.received).toEqual([
      version === '1.6'
        ? { key: 'AuthorizationKey', value: data.password }
        : { setVariableData: [{ component: { name: 'SecurityCtrlr' }, variable: { name: 'BasicAuthPassword' }, attributeValue: data.password }] },
    ]);
    expect(await canLogIn(version, s.id, data.password)).toBe(true);
    expect(await rotation(s.id)).toEqual({ id: expect.stringMatching(/^apc_/), state: 'ACCEPTED', requestedAt: expect.stringMatching(ISO_MS), resolvedAt: expect.stringMatching(ISO_MS), staleLoginAt: null });
    expect((await audits(s.id)).map((a) => a.outcome)).toEqual(['PROVISIONED', 'ACCEPTED']);
  });

  it.each([
    ['Rejected', 'Rejected'],
    ['NotSupported', version === '1.6' ? 'NotSupported' : 'NotSupportedAttributeType'],
    ['a CALLERROR', null],
  ])('%s: 409 STATION_REJECTED naming the answer; the old password keeps working, the new one never does', async (_name, status) => {
    const s = await stationAnswering(version, (params) => {
      if (status === null) throw createRPCError('InternalError', 'cannot store it');
      return answer(version, status, params);
    });
    const password = supplied(version);
    const res = await change({ id: s.id, password });
    expect(res.statusCode, res.body).toBe(409);
    expect(res.json()).toEqual(familyError('CONFLICT', 'STATION_REJECTED'));
    expect(res.json().message).toContain(status ?? 'InternalError');
    expect(await canLogIn(version, s.id, s.password)).toBe(true);
    expect(await canLogIn(version, s.id, password)).toBe(false);
    expect(await rotation(s.id)).toMatchObject({ state: 'REJECTED', resolvedAt: expect.stringMatching(ISO_MS) });
    expect((await audits(s.id)).map((a) => a.outcome)).toEqual(['PROVISIONED', 'REJECTED']);
    expect((await row(s.id)).pendingPasswordHash).toBeNull();
  });

  it.each([
    ['no answer within OCPP_CALL_TIMEOUT_SECONDS', 'silent'],
    ['RebootRequired', 'reboot'],
    ['the socket dropped mid-call', 'drop'],
  ] as const)('%s: 202 UNCONFIRMED; both passwords log in until one is used, and a login with the new one makes it the only one', async (_name, behaviour) => {
    const s = await stationAnswering(version, (params, client) => {
      if (behaviour === 'reboot') return answer(version, 'RebootRequired', params);
      if (behaviour === 'drop') void client.close({ force: true });
      return new Promise(() => undefined);
    });
    const res = await change({ id: s.id });
    expect(res.statusCode, res.body).toBe(202);
    const { data } = res.json();
    expect(data).toEqual({ id: s.id, status: 'UNCONFIRMED', password: expect.any(String) });
    expect(await rotation(s.id)).toMatchObject({ state: 'UNCONFIRMED', resolvedAt: null });
    expect((await audits(s.id)).map((a) => a.outcome)).toEqual(['PROVISIONED', 'UNCONFIRMED']);
    // While unconfirmed, a second change waits.
    expect((await change({ id: s.id })).json()).toEqual(familyError('CONFLICT', 'PASSWORD_CHANGE_IN_PROGRESS'));
    await s.client.close({ force: true });

    expect(await canLogIn(version, s.id, data.password)).toBe(true);
    expect(await rotation(s.id)).toMatchObject({ state: 'CONFIRMED', resolvedAt: expect.stringMatching(ISO_MS) });
    expect(await canLogIn(version, s.id, s.password)).toBe(false);
    expect(await canLogIn(version, s.id, data.password)).toBe(true);
    expect((await audits(s.id))[1]).toMatchObject({ outcome: 'UNCONFIRMED', resolution: 'NEW_USED', resolvedAt: expect.any(Date) });
  });

  it('no answer, then a login with the old password discards the new one', async () => {
    const s = await stationAnswering(version, () => new Promise(() => undefined));
    const password = supplied(version);
    const res = await change({ id: s.id, password });
    expect(res.statusCode, res.body).toBe(202);
    // A supplied password is never echoed.
    expect(res.json()).toEqual({ data: { id: s.id, status: 'UNCONFIRMED' } });
    await s.client.close({ force: true });
    expect(await canLogIn(version, s.id, s.password)).toBe(true);
    expect(await rotation(s.id)).toMatchObject({ state: 'DISCARDED' });
    expect(await canLogIn(version, s.id, password)).toBe(false);
    expect((await audits(s.id))[1]).toMatchObject({ outcome: 'UNCONFIRMED', resolution: 'OLD_USED' });
  });

  it('offline after having logged in: 409 STATION_OFFLINE and nothing changes; force: true stores it at once (200 FORCED)', async () => {
    const s = await provisionStation(t, { ocppVersion: version });
    const client = await connect(version, s.id, s.password);
    await client.close({ force: true });
    await eventually(() => expect(t.app.stations.isConnectedHere(s.id)).toBe(false));
    await eventually(async () => {
      const read = await t.app.inject({ url: `/asset-management/v1/assets/${s.id}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
      expect(read.json().data.station.connected).toBe(false);
    });
    const password = supplied(version);
    const refused = await change({ id: s.id, password });
    expect(refused.statusCode).toBe(409);
    expect(refused.json()).toEqual(familyError('CONFLICT', 'STATION_OFFLINE'));
    expect(await canLogIn(version, s.id, s.password)).toBe(true);
    await eventually(() => expect(t.app.stations.isConnectedHere(s.id)).toBe(false));
    await eventually(async () => expect((await t.app.inject({ url: `/asset-management/v1/assets/${s.id}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } })).json().data.station.connected).toBe(false));

    const forced = await change({ id: s.id, password, force: true });
    expect(forced.statusCode, forced.body).toBe(200);
    expect(forced.json()).toEqual({ data: { id: s.id, passwordChangedAt: expect.stringMatching(ISO_MS) } });
    expect(await rotation(s.id)).toMatchObject({ state: 'FORCED' });
    expect(await canLogIn(version, s.id, password)).toBe(true);
    expect(await canLogIn(version, s.id, s.password)).toBe(false);
    expect((await audits(s.id)).map((a) => a.outcome)).toEqual(['PROVISIONED', 'FORCED']);
  });

  it('a change while one is in flight is 409 PASSWORD_CHANGE_IN_PROGRESS; the first ends as the station says', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const s = await stationAnswering(version, async (params) => {
      await held;
      return answer(version, 'Accepted', params);
    });
    const first = change({ id: s.id });
    await eventually(() => expect(s.received).toHaveLength(1));
    const second = await change({ id: s.id, password: supplied(version) });
    expect(second.statusCode).toBe(409);
    expect(second.json()).toEqual(familyError('CONFLICT', 'PASSWORD_CHANGE_IN_PROGRESS'));
    expect(await rotation(s.id)).toMatchObject({ state: 'IN_FLIGHT', resolvedAt: null });
    release();
    const res = await first;
    expect(res.statusCode, res.body).toBe(200);
    expect(s.received).toHaveLength(1);
    expect(await canLogIn(version, s.id, res.json().data.password)).toBe(true);
  });
});

describe('a station that answers Accepted and keeps its old password', () => {
  it('is refused (A01.FR.03), and says so: a warning naming station and rotation, a counter in /metrics, and the rotation shows when it last tried', async () => {
    const s = await stationAnswering('2.0.1', (params) => answer('2.0.1', 'Accepted', params));
    const res = await change({ id: s.id });
    expect(res.statusCode, res.body).toBe(200);
    const { id: rotationId } = await rotation(s.id);
    await s.client.close({ force: true });
    expect(await refusedWith(stationClient(t.endpoint, { identity: s.id, password: s.password, protocols: ['ocpp2.0.1'] }))).toBe(401);
    const warning = t.logLines().find((l) => l.includes('keeps using the password its latest rotation replaced') && l.includes(s.id));
    expect(warning).toBeDefined();
    expect(JSON.parse(warning!)).toMatchObject({ level: 40, station: s.id, rotation: rotationId });
    const metrics = await t.app.inject({ url: '/metrics' });
    expect(metrics.body).toMatch(/^ocpp_replaced_password_logins_total [1-9]/m);
    const view = await rotation(s.id);
    expect(view).toMatchObject({ state: 'ACCEPTED', staleLoginAt: expect.stringMatching(ISO_MS) });
    for (const key of Object.keys(view)) expect(key).not.toMatch(/pass|secret|credential|hash|salt/i);
  });
});

describe('never logged in', () => {
  it('stores at once (PROVISIONED), as before stations connected', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    expect(await rotation(s.id)).toMatchObject({ state: 'PROVISIONED', resolvedAt: expect.stringMatching(ISO_MS), staleLoginAt: null });
    expect((await audits(s.id)).map((a) => a.outcome)).toEqual(['PROVISIONED']);
  });
});

describe('two apps on one database (PGlite: in-process; PostgreSQL: LISTEN/NOTIFY)', () => {
  it('the station on one app, the change through the other: the answer comes back', async () => {
    const other = await siblingApp(t, { OCPP_MIN_SECURITY_PROFILE: '1', OCPP_CALL_TIMEOUT_SECONDS: '1' });
    try {
      const s = await stationAnswering('2.0.1', (params) => answer('2.0.1', 'Accepted', params));
      const res = await other.app.inject({ method: 'POST', url: URL_, headers: { authorization: other.bearer(ASSET_WRITER) }, payload: { id: s.id } });
      expect(res.statusCode, res.body).toBe(200);
      expect(s.received).toHaveLength(1);
      expect(await canLogIn('2.0.1', s.id, res.json().data.password)).toBe(true);
    } finally {
      await other.close();
    }
  });
});

describe('OpenAPI', () => {
  it('describes the 200, 202 and 409 answers of change-password, with examples, and the force field', async () => {
    const doc = (await t.app.inject({ url: '/openapi.json' })).json();
    const operation = doc.paths['/asset-management/v1/assets/change-password'].post;
    const schemaOf = (status: string) => operation.responses[status].content['application/json'].schema;
    expect(operation.requestBody.content['application/json'].schema.properties.force).toMatchObject({ type: 'boolean' });
    expect(schemaOf('200').properties.data.examples).toEqual([expect.objectContaining({ passwordChangedAt: expect.any(String) })]);
    expect(schemaOf('202').properties.data.properties.status).toMatchObject({ enum: ['UNCONFIRMED'] });
    expect(schemaOf('202').properties.data.examples).toEqual([{ id: 'CP-1', status: 'UNCONFIRMED' }]);
    const conflicts = Object.values(operation.responses['409'].content['application/json'].examples) as Array<{ value: { code: string } }>;
    expect(conflicts.map((e) => e.value.code)).toEqual(['STATION_REJECTED', 'STATION_OFFLINE', 'PASSWORD_CHANGE_IN_PROGRESS', 'NOTHING_TO_ROLL_BACK']);
    const data = doc.paths['/asset-management/v1/assets/{id}'].get.responses['200'].content['application/json'].schema.properties.data;
    expect(data).toEqual({ $ref: '#/components/schemas/Asset' });
    const asset = doc.components.schemas.Asset;
    expect(Object.keys(asset.properties.rotation.anyOf[0].properties)).toEqual(['id', 'state', 'requestedAt', 'resolvedAt', 'staleLoginAt']);
  });
});

describe('the command itself', () => {
  it('is never sent past its deadline', async () => {
    const s = await stationAnswering('2.0.1', (params) => answer('2.0.1', 'Accepted', params));
    expect(await t.app.stations.sendPasswordChange({ assetId: s.id, password: 'Never:sent-password-1', deadline: Date.now() - 1 })).toEqual({ kind: 'notSent' });
    // The station answers calls in order: a Heartbeat round trip after it shows nothing came first.
    await s.client.call('Heartbeat', {});
    expect(s.received).toEqual([]);
  });
});
