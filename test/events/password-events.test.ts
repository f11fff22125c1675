// The events of a station's password (docs/rotation.md, "Events"): `asset.password.changed` for every
// outcome a change records, for each later resolution of an UNCONFIRMED change, and for a rollback;
// `asset.password.ignored` when a station first logs in with the password its latest switch
// retired. Each is written in the transaction of the change it reports: a refused request leaves
// none. Driven through the API and a real OCPP-J station (ocpp-rpc); the outbox is read as the
// delivery worker reads it, and once as a subscriber receives it.
import { sql } from 'drizzle-orm';
import { describe, expect, it, vi } from 'vitest';
import { hashAssetPassword } from '../../src/asset-management/password-hashing.js';
import { settleAbandonedRotations } from '../../src/asset-management/password-rotation-service.js';
import { rowsOf } from '../../src/db/database.js';
import { passwordChangedDataSchema, passwordIgnoredDataSchema } from '../../src/events/event-types.js';
import { subprotocolOf, type OcppVersion } from '../../src/kernel/ocpp-vocabulary.js';
import { ASSET_WRITER, createAsset, familyError, inFlightChange, uniqueNetwork } from '../helpers/asset-factory.js';
import { CHEAP_HASH } from '../helpers/password-hash-params.js';
import { startReceiver, verified } from '../helpers/webhook-receiver.js';
import {
  PASSWORD_COMMAND,
  loginStatus,
  passwordCommandAnswer,
  provisionStation,
  stationClient,
  useStationApp,
  wirePassword,
  type ProvisionedStation,
  type StationClient,
} from '../helpers/station-factory.js';

const URL_ = '/asset-management/v1/assets/change-password';

// The sweep that records changes whose waiting replica died never runs here, so that the tests of
// such changes see what a login or a forced change records of them; the sweep has its own below.
const t = useStationApp({ env: { OCPP_CALL_TIMEOUT_SECONDS: '1', WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true' }, abandonedRotationsSweepMs: 3_600_000 });

type PasswordEvent = { type: string; network: string; data: { assetId: string; network: string; rotationId: string; outcome?: string; at: string } };

// The asset's password events in the outbox, oldest first, each checked against its type's data
// schema with nothing more (so no password, hash or secret can ride along).
async function eventsOf(assetId: string): Promise<PasswordEvent[]> {
  const rows = await rowsOf<{ type: string; network: string; data: string }>(
    t.database.db,
    sql`SELECT type, network, data FROM events WHERE type LIKE 'asset.password.%' AND (data::json)->>'assetId' = ${assetId} ORDER BY created_at, id`,
  );
  return rows.map((row) => {
    const data = JSON.parse(row.data) as unknown;
    const schema = row.type === 'asset.password.ignored' ? passwordIgnoredDataSchema : passwordChangedDataSchema;
    expect(schema.strict().safeParse(data).success, row.data).toBe(true);
    return { type: row.type, network: row.network, data: data as PasswordEvent['data'] };
  });
}

// What each event says, in the order written: [type, outcome].
async function outcomesOf(assetId: string): Promise<Array<[string, string | undefined]>> {
  return (await eventsOf(assetId)).map((event) => [event.type, event.data.outcome]);
}

function post(payload: Record<string, unknown>) {
  return t.app.inject({ method: 'POST', url: URL_, headers: { authorization: t.bearer(ASSET_WRITER) }, payload });
}

async function rotation(id: string) {
  const res = await t.app.inject({ url: `/asset-management/v1/assets/${id}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data.rotation as { id: string; state: string; resolvedAt: string | null };
}

async function connect(s: ProvisionedStation, password: string): Promise<StationClient> {
  const client = stationClient(t.endpoint, { identity: s.id, password: wirePassword(s.ocppVersion, password), protocols: [subprotocolOf(s.ocppVersion)] });
  t.open.push(client);
  await client.connect();
  return client;
}

function login(s: ProvisionedStation, password: string): Promise<number> {
  return loginStatus(t.endpoint, { id: s.id, version: s.ocppVersion, password });
}

// A provisioned station, connected, answering the password command as `respond` says (and never
// changing the password it holds).
async function stationAnswering(version: OcppVersion, respond: (params: unknown, client: StationClient) => unknown) {
  const s = await provisionStation(t, { ocppVersion: version });
  const client = await connect(s, s.password);
  client.handle(PASSWORD_COMMAND[version], ({ params }: { params?: unknown }) => respond(params, client) as Promise<Record<string, unknown>>);
  return { ...s, client };
}

const silent = () => new Promise(() => undefined);

async function disconnect(s: ProvisionedStation & { client: StationClient }): Promise<void> {
  await s.client.close({ force: true });
  await vi.waitFor(() => expect(t.app.stations.isConnectedHere(s.id)).toBe(false));
  await vi.waitFor(async () => {
    const read = await t.app.inject({ url: `/asset-management/v1/assets/${s.id}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
    expect(read.json().data.station.connected).toBe(false);
  });
}

describe.each(['2.0.1', '1.6'] as const)('OCPP %s: asset.password.changed', (version) => {
  it('PROVISIONED, then ACCEPTED: each dated with the change the answer reports, under the change’s id, in the asset’s network', async () => {
    const s = await stationAnswering(version, (params) => passwordCommandAnswer(version, 'Accepted', params));
    const provisioned = (await eventsOf(s.id))[0]!;
    const res = await post({ id: s.id });
    expect(res.statusCode, res.body).toBe(200);
    const events = await eventsOf(s.id);
    expect(events).toEqual([
      provisioned,
      {
        type: 'asset.password.changed',
        network: s.network,
        data: { assetId: s.id, network: s.network, rotationId: (await rotation(s.id)).id, outcome: 'ACCEPTED', at: res.json().data.passwordChangedAt },
      },
    ]);
    expect(provisioned.data).toMatchObject({ outcome: 'PROVISIONED', network: s.network });
    const password = res.json().data.password as string;
    for (const event of events) expect(JSON.stringify(event)).not.toContain(password);
  });

  it('REJECTED: the refusal is an outcome of its own', async () => {
    const s = await stationAnswering(version, (params) => passwordCommandAnswer(version, 'Rejected', params));
    const res = await post({ id: s.id });
    expect(res.json()).toEqual(familyError('CONFLICT', 'STATION_REJECTED'));
    expect(await outcomesOf(s.id)).toEqual([
      ['asset.password.changed', 'PROVISIONED'],
      ['asset.password.changed', 'REJECTED'],
    ]);
  });

  it('UNCONFIRMED, then its resolution by a login with the new password (NEW_USED), as an event of its own under the same change', async () => {
    const s = await stationAnswering(version, silent);
    const res = await post({ id: s.id });
    expect(res.statusCode, res.body).toBe(202);
    const { id: rotationId } = await rotation(s.id);
    await s.client.close({ force: true });
    expect(await login(s, res.json().data.password)).toBe(101);
    const events = await eventsOf(s.id);
    expect(events.map((event) => [event.data.outcome, event.data.rotationId])).toEqual([
      ['PROVISIONED', expect.not.stringMatching(rotationId)],
      ['UNCONFIRMED', rotationId],
      ['NEW_USED', rotationId],
    ]);
    // Dated with the switch, as the asset shows it.
    const asset = await t.app.inject({ url: `/asset-management/v1/assets/${s.id}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
    expect(events[2]!.data.at).toBe(asset.json().data.passwordChangedAt);
  });

  it('UNCONFIRMED, then a login with the old password (OLD_USED)', async () => {
    const s = await stationAnswering(version, silent);
    expect((await post({ id: s.id })).statusCode).toBe(202);
    await s.client.close({ force: true });
    expect(await login(s, s.password)).toBe(101);
    const events = await eventsOf(s.id);
    expect(events.map((event) => event.data.outcome)).toEqual(['PROVISIONED', 'UNCONFIRMED', 'OLD_USED']);
    // Nothing switched: dated with the resolution, as the asset's rotation shows it.
    expect(events[2]!.data.at).toBe((await rotation(s.id)).resolvedAt);
  });
});

// What a replica that died while it waited for the station's answer leaves behind: the change
// claimed (IN_FLIGHT, the new password pending, its audit row without an outcome) and its deadline
// passed, with nobody to record the outcome.
async function abandonedChange(s: ProvisionedStation, password: string): Promise<string> {
  const pendingPasswordHash = await hashAssetPassword(s.ocppVersion, password, { generated: false, passwordHashParams: CHEAP_HASH });
  // Past the sweep's margin too, for the test that runs the sweep.
  return inFlightChange(t.database.db, s, { deadlineMs: -60_000, pendingPasswordHash, generated: false });
}

describe('asset.password.changed: a change whose waiting replica died', () => {
  const password = 'Replica-Died-9f3Kq2';

  it('the sweep records its UNCONFIRMED outcome once, and a later login its resolution', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    const rotationId = await abandonedChange(s, password);
    expect(await outcomesOf(s.id)).toEqual([['asset.password.changed', 'PROVISIONED']]);
    // Other tests' changes may be swept too: at least this one.
    expect(await settleAbandonedRotations(t.database.db, 1_000)).toBeGreaterThanOrEqual(1);
    expect(await settleAbandonedRotations(t.database.db, 1_000)).toBe(0);
    expect((await rotation(s.id)).state).toBe('UNCONFIRMED');
    expect(await login(s, password)).toBe(101);
    const events = await eventsOf(s.id);
    expect(events.map((event) => [event.data.outcome, event.data.rotationId])).toEqual([
      ['PROVISIONED', expect.not.stringMatching(rotationId)],
      ['UNCONFIRMED', rotationId],
      ['NEW_USED', rotationId],
    ]);
  });

  it('a login before the sweep: UNCONFIRMED is recorded first, then the resolution (OLD_USED, NEW_USED)', async () => {
    for (const [used, resolution] of [
      ['old', 'OLD_USED'],
      ['new', 'NEW_USED'],
    ] as const) {
      const s = await provisionStation(t, { ocppVersion: '2.0.1' });
      const rotationId = await abandonedChange(s, password);
      expect(await login(s, used === 'old' ? s.password : password)).toBe(101);
      // Written by one transaction: no order between them (docs/events.md).
      const events = await eventsOf(s.id);
      expect(events.slice(1).map((event) => [event.data.outcome, event.data.rotationId]).sort()).toEqual(
        [
          ['UNCONFIRMED', rotationId],
          [resolution, rotationId],
        ].sort(),
      );
      expect((await rotation(s.id)).state).toBe(used === 'old' ? 'DISCARDED' : 'CONFIRMED');
    }
  });

  it('a forced change before the sweep: UNCONFIRMED, its resolution FORCED, and the new change FORCED', async () => {
    // The station took the command's connection down with it: it is offline, as a forced change needs.
    const s = await stationAnswering('2.0.1', silent);
    await disconnect(s);
    const abandoned = await abandonedChange(s, password);
    const res = await post({ id: s.id, force: true });
    expect(res.statusCode, res.body).toBe(200);
    const forced = (await rotation(s.id)).id;
    const events = await eventsOf(s.id);
    expect(events.slice(1).map((event) => [event.data.outcome, event.data.rotationId]).sort()).toEqual(
      [
        ['UNCONFIRMED', abandoned],
        ['FORCED', abandoned],
        ['FORCED', forced],
      ].sort(),
    );
  });
});

describe('asset.password.changed: forced changes and refusals', () => {
  it('a forced change over an UNCONFIRMED one: its resolution (FORCED) under the old change, and the new change FORCED', async () => {
    const s = await stationAnswering('2.0.1', silent);
    expect((await post({ id: s.id })).statusCode).toBe(202);
    const unconfirmed = (await rotation(s.id)).id;
    await disconnect(s);
    const res = await post({ id: s.id, force: true });
    expect(res.statusCode, res.body).toBe(200);
    const forced = await rotation(s.id);
    const events = await eventsOf(s.id);
    expect(events.slice(2).map((event) => [event.data.rotationId, event.data.outcome]).sort()).toEqual(
      [
        [unconfirmed, 'FORCED'],
        [forced.id, 'FORCED'],
      ].sort(),
    );
    expect(events.find((event) => event.data.rotationId === forced.id)?.data.at).toBe(res.json().data.passwordChangedAt);
  });

  it('a refused request leaves no event: offline without force, a change in progress, nothing to roll back', async () => {
    const s = await stationAnswering('2.0.1', silent);
    await disconnect({ ...s, client: s.client });
    expect((await post({ id: s.id })).json()).toEqual(familyError('CONFLICT', 'STATION_OFFLINE'));
    expect((await post({ id: s.id, rollback: true })).json()).toEqual(familyError('CONFLICT', 'NOTHING_TO_ROLL_BACK'));
    expect(await outcomesOf(s.id)).toEqual([['asset.password.changed', 'PROVISIONED']]);

    const connected = await stationAnswering('2.0.1', silent);
    expect((await post({ id: connected.id })).statusCode).toBe(202);
    expect((await post({ id: connected.id })).json()).toEqual(familyError('CONFLICT', 'PASSWORD_CHANGE_IN_PROGRESS'));
    expect((await outcomesOf(connected.id)).map(([, outcome]) => outcome)).toEqual(['PROVISIONED', 'UNCONFIRMED']);
  });
});

describe('a station that answers Accepted and keeps its old password', () => {
  it('asset.password.ignored on its first login with the retired password (not on every retry); the rollback is ROLLED_BACK', async () => {
    const s = await stationAnswering('2.0.1', (params) => passwordCommandAnswer('2.0.1', 'Accepted', params));
    const res = await post({ id: s.id });
    expect(res.statusCode, res.body).toBe(200);
    const switched = await rotation(s.id);
    await s.client.close({ force: true });
    expect(await login(s, s.password)).toBe(401);
    expect(await login(s, s.password)).toBe(401);
    const ignored = (await eventsOf(s.id)).filter((event) => event.type === 'asset.password.ignored');
    expect(ignored).toEqual([
      { type: 'asset.password.ignored', network: s.network, data: { assetId: s.id, network: s.network, rotationId: switched.id, at: expect.any(String) } },
    ]);

    const rolledBack = await post({ id: s.id, rollback: true });
    expect(rolledBack.statusCode, rolledBack.body).toBe(200);
    expect(await login(s, s.password)).toBe(101);
    const events = await eventsOf(s.id);
    expect(events.map((event) => [event.type, event.data.outcome])).toEqual([
      ['asset.password.changed', 'PROVISIONED'],
      ['asset.password.changed', 'ACCEPTED'],
      ['asset.password.ignored', undefined],
      ['asset.password.changed', 'ROLLED_BACK'],
    ]);
    expect(events[3]!.data).toEqual({ assetId: s.id, network: s.network, rotationId: (await rotation(s.id)).id, outcome: 'ROLLED_BACK', at: rolledBack.json().data.passwordChangedAt });

    // The next switch that the station ignores is reported again.
    const again = await connect(s, s.password);
    again.handle(PASSWORD_COMMAND['2.0.1'], async ({ params }: { params?: unknown }) => passwordCommandAnswer('2.0.1', 'Accepted', params));
    expect((await post({ id: s.id })).statusCode).toBe(200);
    await again.close({ force: true });
    expect(await login(s, s.password)).toBe(401);
    expect((await eventsOf(s.id)).filter((event) => event.type === 'asset.password.ignored').map((event) => event.data.rotationId)).toEqual([
      switched.id,
      (await rotation(s.id)).id,
    ]);
  });

  it('logins with the retired password at once raise one event', async () => {
    const s = await stationAnswering('2.0.1', (params) => passwordCommandAnswer('2.0.1', 'Accepted', params));
    expect((await post({ id: s.id })).statusCode).toBe(200);
    await s.client.close({ force: true });
    const statuses = await Promise.all(Array.from({ length: 6 }, () => login(s, s.password)));
    expect(statuses.filter((status) => status === 101)).toEqual([]);
    await vi.waitFor(async () => expect((await rotation(s.id)) as unknown).toMatchObject({ staleLoginAt: expect.any(String) }));
    expect((await eventsOf(s.id)).filter((event) => event.type === 'asset.password.ignored')).toHaveLength(1);
  });
});

describe('delivered', () => {
  it('a subscriber of the network receives the rotation’s events signed, as the outbox holds them', async () => {
    const receiver = await startReceiver();
    try {
      const network = uniqueNetwork();
      const subscribed = await t.app.inject({
        method: 'POST',
        url: '/webhooks/v1/subscriptions',
        headers: { authorization: t.bearer({ scopes: ['write:webhooks'], network }) },
        payload: { url: receiver.url, events: ['asset.password.changed', 'asset.password.ignored'] },
      });
      expect(subscribed.statusCode, subscribed.body).toBe(201);
      const asset = await createAsset(t, { network, securityProfile: 1 });
      const provisioned = await post({ id: asset.id });
      expect(provisioned.statusCode, provisioned.body).toBe(200);
      const s: ProvisionedStation = { id: asset.id, network, ocppVersion: asset.ocppVersion, password: provisioned.json().data.password as string };
      const client = await connect(s, s.password);
      client.handle(PASSWORD_COMMAND[s.ocppVersion], async ({ params }: { params?: unknown }) => passwordCommandAnswer(s.ocppVersion, 'Accepted', params));
      const res = await post({ id: s.id });
      expect(res.statusCode, res.body).toBe(200);
      await client.close({ force: true });
      expect(await login(s, s.password)).toBe(401);

      const received = await receiver.waitFor(3);
      const key = (event: { type: string; data: unknown }) => JSON.stringify([event.type, event.data]);
      const delivered = received.map((webhook) => verified(subscribed.json().data.secret as string, webhook)).map(key).sort();
      const outbox = await eventsOf(s.id);
      expect(outbox.map((event) => [event.type, event.data.outcome])).toEqual([
        ['asset.password.changed', 'PROVISIONED'],
        ['asset.password.changed', 'ACCEPTED'],
        ['asset.password.ignored', undefined],
      ]);
      expect(delivered).toEqual(outbox.map(key).sort());
      for (const webhook of received) {
        for (const password of [s.password, res.json().data.password as string]) expect(webhook.body).not.toContain(password);
      }
    } finally {
      await receiver.close();
    }
  });
});
