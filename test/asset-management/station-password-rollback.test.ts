// The answer to an ignored rotation: a station answers the password command Accepted and keeps its
// old password, so it is refused at its next login; `{ id, rollback: true }` makes the password it
// kept the only one again, it logs in with it, and a later change can try again. The station is
// ocpp-rpc's RPCClient, both OCPP versions; a second app on the same database plays a second
// replica (PGlite: in-process; PostgreSQL: LISTEN/NOTIFY).
import type { AddressInfo } from 'node:net';
import { asc, eq, sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { assetPasswordChanges } from '../../src/asset-management/asset-management-tables.js';
import { recordReplacedLogin } from '../../src/asset-management/password-audit-service.js';
import { rowsOf } from '../../src/db/database.js';
import { subprotocolOf, type OcppVersion } from '../../src/kernel/ocpp-vocabulary.js';
import { ASSET_WRITER, familyError, siblingApp } from '../helpers/asset-factory.js';
import { eventually } from '../helpers/eventually.js';
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
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const t = useStationApp({ env: { OCPP_CALL_TIMEOUT_SECONDS: '1' } });

function post(payload: Record<string, unknown>) {
  return t.app.inject({ method: 'POST', url: URL_, headers: { authorization: t.bearer(ASSET_WRITER) }, payload });
}

async function rotation(id: string) {
  const res = await t.app.inject({ url: `/asset-management/v1/assets/${id}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data.rotation;
}

async function outcomes(id: string) {
  const rows = await t.database.db.select().from(assetPasswordChanges).where(eq(assetPasswordChanges.assetId, id)).orderBy(asc(assetPasswordChanges.changedAt));
  return rows.map((r) => r.outcome);
}

// The rotation ids of the asset's asset.password.ignored events, oldest first.
async function ignoredEvents(assetId: string): Promise<string[]> {
  const rows = await rowsOf<{ data: string }>(t.database.db, sql`SELECT data FROM events WHERE type = 'asset.password.ignored' AND (data::json)->>'assetId' = ${assetId} ORDER BY id`);
  return rows.map((r) => (JSON.parse(r.data) as { rotationId: string }).rotationId);
}

async function connect(s: ProvisionedStation, password: string, endpoint = t.endpoint): Promise<StationClient> {
  const client = stationClient(endpoint, { identity: s.id, password: wirePassword(s.ocppVersion, password), protocols: [subprotocolOf(s.ocppVersion)] });
  t.open.push(client);
  await client.connect();
  return client;
}

function login(s: ProvisionedStation, password: string, endpoint = t.endpoint): Promise<number> {
  return loginStatus(endpoint, { id: s.id, version: s.ocppVersion, password });
}

// A provisioned station, connected with its password, that answers every password command as
// `respond` says: what it answers is not what it does (it never changes the password it holds).
async function stationAnswering(version: OcppVersion, respond: (params: unknown) => unknown, password?: string) {
  const s = await provisionStation(t, { ocppVersion: version, ...(password !== undefined ? { password } : {}) });
  const client = await connect(s, s.password);
  const received: unknown[] = [];
  client.handle(PASSWORD_COMMAND[version], ({ params }: { params?: unknown }) => {
    received.push(params);
    return respond(params) as Promise<Record<string, unknown>>;
  });
  return { ...s, client, received };
}

const accepted = (version: OcppVersion) => (params: unknown) => passwordCommandAnswer(version, 'Accepted', params);

describe.each(['2.0.1', '1.6'] as const)('OCPP %s: a station that answers Accepted and keeps its old password', (version) => {
  it('is refused after the switch; after the rollback it logs in with the password it kept, the ignored one is refused; a later change switches again', async () => {
    const s = await stationAnswering(version, accepted(version));
    const changed = await post({ id: s.id });
    expect(changed.statusCode, changed.body).toBe(200);
    const ignored = changed.json().data.password as string;
    await s.client.close({ force: true });
    expect(await login(s, s.password)).toBe(401);
    expect(await rotation(s.id)).toMatchObject({ state: 'ACCEPTED', staleLoginAt: expect.stringMatching(ISO_MS) });

    const res = await post({ id: s.id, rollback: true });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ data: { id: s.id, passwordChangedAt: expect.stringMatching(ISO_MS) } });
    expect(await rotation(s.id)).toEqual({
      id: expect.stringMatching(/^apc_/),
      state: 'ROLLED_BACK',
      requestedAt: expect.stringMatching(ISO_MS),
      resolvedAt: expect.stringMatching(ISO_MS),
      staleLoginAt: null,
    });
    expect(await login(s, s.password)).toBe(101);
    expect(await login(s, ignored)).toBe(401);
    expect(await outcomes(s.id)).toEqual(['PROVISIONED', 'ACCEPTED', 'ROLLED_BACK']);

    // The station is back, connected, and this time takes the new password.
    const again = await connect(s, s.password);
    const received: unknown[] = [];
    again.handle(PASSWORD_COMMAND[version], async ({ params }: { params?: unknown }) => {
      received.push(params);
      return passwordCommandAnswer(version, 'Accepted', params);
    });
    const later = await post({ id: s.id });
    expect(later.statusCode, later.body).toBe(200);
    expect(received).toHaveLength(1);
    await again.close({ force: true });
    expect(await login(s, later.json().data.password)).toBe(101);
    // The password it had is the retired one again, and reported again.
    expect(await login(s, s.password)).toBe(401);
    expect(await rotation(s.id)).toMatchObject({ state: 'ACCEPTED', staleLoginAt: expect.stringMatching(ISO_MS) });
    expect(await outcomes(s.id)).toEqual(['PROVISIONED', 'ACCEPTED', 'ROLLED_BACK', 'ACCEPTED']);
  });
});

describe('rollback and the station', () => {
  it('supplied passwords (slow hashes): the one the station kept is reported at its second refused login, and it is in at its first login after the rollback', async () => {
    const kept = 'Kept:by-the-station-0001';
    const s = await stationAnswering('2.0.1', accepted('2.0.1'), kept);
    expect((await post({ id: s.id, password: 'Ignored:by-the-station-01' })).statusCode).toBe(200);
    await s.client.close({ force: true });
    // One slow check per login: the current password first, then, from the same address, the
    // retired one. This replica now remembers both as failed for the station.
    expect(await login(s, kept)).toBe(401);
    expect(await rotation(s.id)).toMatchObject({ staleLoginAt: null });
    expect(await login(s, kept)).toBe(401);
    expect(await rotation(s.id)).toMatchObject({ staleLoginAt: expect.stringMatching(ISO_MS) });
    expect((await post({ id: s.id, rollback: true })).statusCode).toBe(200);
    // What this replica remembers of the refused attempts does not keep the station out.
    expect(await login(s, kept)).toBe(101);
  });

  it('a station still connected on the socket it opened before the switch keeps it; its next login with the password it kept is let in', async () => {
    const s = await stationAnswering('2.0.1', accepted('2.0.1'));
    expect((await post({ id: s.id })).statusCode).toBe(200);
    expect((await post({ id: s.id, rollback: true })).statusCode).toBe(200);
    // Nothing was sent to it, and its socket still carries calls.
    expect(s.received).toHaveLength(1);
    await expect(s.client.call('Heartbeat', {})).resolves.toMatchObject({ currentTime: expect.any(String) });
    await s.client.close({ force: true });
    expect(await login(s, s.password)).toBe(101);
  });

  it('while a change waits for the station: 409 PASSWORD_CHANGE_IN_PROGRESS, nothing changes, and the change ends as the station says', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let commands = 0;
    const s = await stationAnswering('2.0.1', async (params) => {
      // The first command at once: a switch, so that there would be something to roll back.
      if (++commands > 1) await held;
      return passwordCommandAnswer('2.0.1', 'Accepted', params);
    });
    expect((await post({ id: s.id })).statusCode).toBe(200);
    const pending = post({ id: s.id });
    await eventually(() => expect(s.received).toHaveLength(2));
    const res = await post({ id: s.id, rollback: true });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toEqual(familyError('CONFLICT', 'PASSWORD_CHANGE_IN_PROGRESS'));
    expect(await rotation(s.id)).toMatchObject({ state: 'IN_FLIGHT' });
    release();
    const changed = await pending;
    expect(changed.statusCode, changed.body).toBe(200);
    expect(await outcomes(s.id)).toEqual(['PROVISIONED', 'ACCEPTED', 'ACCEPTED']);
  });

  it('an unconfirmed change: 409 PASSWORD_CHANGE_IN_PROGRESS (both passwords still work); once the station logs in with the old one, nothing to roll back', async () => {
    const s = await stationAnswering('2.0.1', () => new Promise(() => undefined));
    const res = await post({ id: s.id });
    expect(res.statusCode, res.body).toBe(202);
    const refused = await post({ id: s.id, rollback: true });
    expect(refused.statusCode).toBe(409);
    expect(refused.json()).toEqual(familyError('CONFLICT', 'PASSWORD_CHANGE_IN_PROGRESS'));
    expect(await rotation(s.id)).toMatchObject({ state: 'UNCONFIRMED' });
    await s.client.close({ force: true });
    expect(await login(s, s.password)).toBe(101);
    expect(await rotation(s.id)).toMatchObject({ state: 'DISCARDED' });
    const nothing = await post({ id: s.id, rollback: true });
    expect(nothing.statusCode).toBe(409);
    expect(nothing.json()).toEqual(familyError('CONFLICT', 'NOTHING_TO_ROLL_BACK'));
    expect(await login(s, s.password)).toBe(101);
  });

  it('after a refused change: 409 NOTHING_TO_ROLL_BACK, and the password the station has keeps working', async () => {
    const s = await stationAnswering('2.0.1', (params) => passwordCommandAnswer('2.0.1', 'Rejected', params));
    expect((await post({ id: s.id })).statusCode).toBe(409);
    const res = await post({ id: s.id, rollback: true });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toEqual(familyError('CONFLICT', 'NOTHING_TO_ROLL_BACK'));
    await s.client.close({ force: true });
    expect(await login(s, s.password)).toBe(101);
    expect(await outcomes(s.id)).toEqual(['PROVISIONED', 'REJECTED']);
  });

  it('a forced change of an offline station is undone the same way', async () => {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    const client = await connect(s, s.password);
    await client.close({ force: true });
    await eventually(async () => {
      const read = await t.app.inject({ url: `/asset-management/v1/assets/${s.id}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
      expect(read.json().data.station.connected).toBe(false);
    });
    const forced = await post({ id: s.id, force: true });
    expect(forced.statusCode, forced.body).toBe(200);
    expect(await login(s, s.password)).toBe(401);
    expect((await post({ id: s.id, rollback: true })).statusCode).toBe(200);
    expect(await login(s, s.password)).toBe(101);
    expect(await login(s, forced.json().data.password)).toBe(401);
    expect(await outcomes(s.id)).toEqual(['PROVISIONED', 'FORCED', 'ROLLED_BACK']);
  });

  it('a refused login with the retired password that is recorded after the rollback committed does not mark the rolled-back rotation', async () => {
    const s = await stationAnswering('2.0.1', accepted('2.0.1'));
    expect((await post({ id: s.id })).statusCode).toBe(200);
    const switched = (await rotation(s.id)).id as string;
    expect((await post({ id: s.id, rollback: true })).statusCode).toBe(200);
    // The login was checked against the switch just before the rollback; its record lands after.
    await t.database.db.transaction((tx) => recordReplacedLogin(tx, s.id, switched));
    expect(await rotation(s.id)).toMatchObject({ state: 'ROLLED_BACK', staleLoginAt: null });
    expect(await ignoredEvents(s.id)).toEqual([]);
  });

  it('nor does one recorded after a forced change committed: the forced change is a switch of its own, and the event would name it', async () => {
    const s = await stationAnswering('2.0.1', accepted('2.0.1'));
    expect((await post({ id: s.id })).statusCode).toBe(200);
    const ignored = (await rotation(s.id)).id as string;
    await s.client.close({ force: true });
    await eventually(async () => {
      const read = await t.app.inject({ url: `/asset-management/v1/assets/${s.id}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
      expect(read.json().data.station.connected).toBe(false);
    });
    expect((await post({ id: s.id, force: true })).statusCode).toBe(200);
    const forced = await rotation(s.id);
    expect(forced).toMatchObject({ state: 'FORCED' });
    // A login with the password the first switch retired, checked against that switch just
    // before the forced change committed; its record lands after.
    await t.database.db.transaction((tx) => recordReplacedLogin(tx, s.id, ignored));
    expect(await rotation(s.id)).toMatchObject({ id: forced.id, state: 'FORCED', staleLoginAt: null });
    expect(await ignoredEvents(s.id)).toEqual([]);
    // A login checked against the forced change itself is reported, naming it.
    await t.database.db.transaction((tx) => recordReplacedLogin(tx, s.id, forced.id as string));
    expect(await ignoredEvents(s.id)).toEqual([forced.id]);
  });
});

describe('two apps on one database (PGlite: in-process; PostgreSQL: LISTEN/NOTIFY)', () => {
  it('the switch through one app, the station refused by the other; the rollback through that other lets it in on both', async () => {
    const other = await siblingApp(t, { OCPP_MIN_SECURITY_PROFILE: '1', OCPP_CALL_TIMEOUT_SECONDS: '1' });
    try {
      await other.app.listen({ host: '127.0.0.1', port: 0 });
      const otherEndpoint = `ws://127.0.0.1:${(other.app.server.address() as AddressInfo).port}/ocpp`;
      const s = await stationAnswering('2.0.1', accepted('2.0.1'));
      expect((await post({ id: s.id })).statusCode).toBe(200);
      await s.client.close({ force: true });
      expect(await login(s, s.password, otherEndpoint)).toBe(401);
      const res = await other.app.inject({ method: 'POST', url: URL_, headers: { authorization: other.bearer(ASSET_WRITER) }, payload: { id: s.id, rollback: true } });
      expect(res.statusCode, res.body).toBe(200);
      expect(await login(s, s.password, otherEndpoint)).toBe(101);
      expect(await login(s, s.password)).toBe(101);
    } finally {
      await other.close();
    }
  });

  it('a rollback through one app and a change through the other, sent together: one order or the other, never a mix', async () => {
    const other = await siblingApp(t, { OCPP_MIN_SECURITY_PROFILE: '1', OCPP_CALL_TIMEOUT_SECONDS: '1' });
    try {
      for (let round = 0; round < 3; round++) {
        const s = await stationAnswering('2.0.1', accepted('2.0.1'));
        const switched = await post({ id: s.id });
        expect(switched.statusCode).toBe(200);
        const [rollback, change] = await Promise.all([
          other.app.inject({ method: 'POST', url: URL_, headers: { authorization: other.bearer(ASSET_WRITER) }, payload: { id: s.id, rollback: true } }),
          post({ id: s.id }),
        ]);
        expect(change.statusCode, change.body).toBe(200);
        const trail = await outcomes(s.id);
        let current = change.json().data.password as string;
        if (rollback.statusCode !== 200) {
          // The change was claimed first and the rollback met it in flight.
          expect(rollback.json()).toEqual(familyError('CONFLICT', 'PASSWORD_CHANGE_IN_PROGRESS'));
          expect(trail).toEqual(['PROVISIONED', 'ACCEPTED', 'ACCEPTED']);
        } else if (trail[2] === 'ROLLED_BACK') {
          // The rollback first: the change that followed switched from the restored password.
          expect(trail).toEqual(['PROVISIONED', 'ACCEPTED', 'ROLLED_BACK', 'ACCEPTED']);
        } else {
          // The change ended first, and the rollback undid it.
          expect(trail).toEqual(['PROVISIONED', 'ACCEPTED', 'ACCEPTED', 'ROLLED_BACK']);
          expect(await login(s, current)).toBe(401);
          current = switched.json().data.password;
        }
        await s.client.close({ force: true });
        expect(await login(s, current)).toBe(101);
      }
    } finally {
      await other.close();
    }
  });
});
