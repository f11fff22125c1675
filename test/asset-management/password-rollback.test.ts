// change-password with `{ id, rollback: true }` through the HTTP interface, for assets whose
// station has never logged in (each change is stored at once): what it restores, what it records,
// when there is nothing to roll back, and how it refuses what it must not take. The station's side
// (a station that acknowledged a change and kept its old password) is test/asset-management/station-password-rollback.test.ts.
import { asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assetPasswordChanges, assets } from '../../src/asset-management/asset-management-tables.js';
import { verifyPassword } from '../../src/asset-management/password-hashing.js';
import { createTestApp, type TestApp } from '../helpers/test-app.js';
import { BAD_REQUEST, createAsset, familyError, uniqueAssetId, uniqueNetwork, type CreatedAsset } from '../helpers/asset-factory.js';
import { CHEAP_HASH } from '../helpers/password-hash-params.js';

const URL_ = '/asset-management/v1/assets/change-password';
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

let t: TestApp;
let writer: string;

beforeAll(async () => {
  t = await createTestApp({ passwordHashParams: CHEAP_HASH });
  writer = t.bearer({ scopes: ['write:asset'], clientId: 'cli_rollback' });
});
afterAll(async () => {
  await t.close();
});

function post(payload: unknown, headers: Record<string, string> = { authorization: writer }) {
  return t.app.inject({ method: 'POST', url: URL_, headers, payload: payload as Record<string, unknown> });
}

let counter = 0;
function supplied(): string {
  return `Kept:${Date.now().toString(36)}-${(counter++).toString(36)}`.padEnd(24, 'x');
}

async function row(id: string) {
  const [r] = await t.database.db.select().from(assets).where(eq(assets.id, id));
  return r!;
}

async function audits(id: string) {
  return t.database.db.select().from(assetPasswordChanges).where(eq(assetPasswordChanges.assetId, id)).orderBy(asc(assetPasswordChanges.changedAt));
}

async function storedPasswordIs(id: string, password: string): Promise<boolean> {
  const { passwordHash } = await row(id);
  return passwordHash !== null && (await verifyPassword(password, passwordHash));
}

async function rotationOf(id: string) {
  const res = await t.app.inject({ url: `/asset-management/v1/assets/${id}`, headers: { authorization: writer } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data.rotation;
}

// An asset provisioned with `first`, then provisioned again with a generated password: the second
// change replaced `first` (an operator who changed the password of a station configured by hand).
async function provisionedTwice(body: Parameters<typeof createAsset>[1] = {}): Promise<{ asset: CreatedAsset; first: string; second: string; changedAt: string }> {
  const asset = await createAsset(t, body);
  const first = supplied();
  expect((await post({ id: asset.id, password: first })).statusCode).toBe(200);
  const res = await post({ id: asset.id });
  expect(res.statusCode, res.body).toBe(200);
  return { asset, first, second: res.json().data.password, changedAt: res.json().data.passwordChangedAt };
}

// Everything a refused request must leave as it was.
async function snapshot(id: string) {
  return { row: await row(id), audits: await audits(id) };
}

describe('rollback: true', () => {
  it('makes the password the latest change replaced the only one again: 200 { id, passwordChangedAt }, no password, audited as ROLLED_BACK', async () => {
    const { asset, first, second, changedAt } = await provisionedTwice();
    const res = await post({ id: asset.id, rollback: true });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.json()).toEqual({ data: { id: asset.id, passwordChangedAt: expect.stringMatching(ISO_MS) } });
    expect(Object.keys(res.json().data)).toEqual(['id', 'passwordChangedAt']);
    const { passwordChangedAt } = res.json().data;
    expect(Date.parse(passwordChangedAt)).toBeGreaterThan(Date.parse(changedAt));

    expect(await storedPasswordIs(asset.id, first)).toBe(true);
    expect(await storedPasswordIs(asset.id, second)).toBe(false);
    // The undone password is forgotten, not kept to be recognised or restored.
    const stored = await row(asset.id);
    expect(stored).toMatchObject({ pendingPasswordHash: null, replacedPasswordHash: null, rotationState: 'ROLLED_BACK', staleLoginAt: null });

    const rotation = await rotationOf(asset.id);
    expect(rotation).toEqual({ id: expect.stringMatching(/^apc_/), state: 'ROLLED_BACK', requestedAt: expect.stringMatching(ISO_MS), resolvedAt: expect.stringMatching(ISO_MS), staleLoginAt: null });
    const read = await t.app.inject({ url: `/asset-management/v1/assets/${asset.id}`, headers: { authorization: writer } });
    expect(read.json().data.passwordChangedAt).toBe(passwordChangedAt);

    const trail = await audits(asset.id);
    expect(trail.map((a) => a.outcome)).toEqual(['PROVISIONED', 'PROVISIONED', 'ROLLED_BACK']);
    // The rollback is a change of its own: its id is the rotation's, it names who made it, and it
    // neither generated nor took a password.
    expect(trail[2]).toMatchObject({ id: rotation.id, actorClientId: 'cli_rollback', generated: null, network: asset.network, resolution: null });
    expect(trail[2]!.changedAt.toISOString()).toBe(passwordChangedAt);
  });

  it('undoes one change only: a second rollback is 409 NOTHING_TO_ROLL_BACK and changes nothing; a later change can be rolled back again', async () => {
    const { asset, first } = await provisionedTwice();
    expect((await post({ id: asset.id, rollback: true })).statusCode).toBe(200);
    const before = await snapshot(asset.id);
    const again = await post({ id: asset.id, rollback: true });
    expect(again.statusCode).toBe(409);
    expect(again.json()).toEqual(familyError('CONFLICT', 'NOTHING_TO_ROLL_BACK'));
    expect(again.json().message).toContain(asset.id);
    expect(await snapshot(asset.id)).toEqual(before);

    const third = supplied();
    const changed = await post({ id: asset.id, password: third });
    expect(changed.statusCode, changed.body).toBe(200);
    expect(await storedPasswordIs(asset.id, third)).toBe(true);
    expect((await rotationOf(asset.id)).state).toBe('PROVISIONED');
    expect((await post({ id: asset.id, rollback: true })).statusCode).toBe(200);
    expect(await storedPasswordIs(asset.id, first)).toBe(true);
    expect((await audits(asset.id)).map((a) => a.outcome)).toEqual(['PROVISIONED', 'PROVISIONED', 'ROLLED_BACK', 'PROVISIONED', 'ROLLED_BACK']);
  });

  it.each([
    ['an asset without a password', 0],
    ['an asset whose only change set its first password', 1],
  ])('%s: 409 NOTHING_TO_ROLL_BACK, nothing changed', async (_name, changes) => {
    const asset = await createAsset(t);
    if (changes === 1) expect((await post({ id: asset.id })).statusCode).toBe(200);
    const before = await snapshot(asset.id);
    const res = await post({ id: asset.id, rollback: true });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toEqual(familyError('CONFLICT', 'NOTHING_TO_ROLL_BACK'));
    expect(await snapshot(asset.id)).toEqual(before);
  });

  it('security profile 3 (client certificates, no password): 409 CONFLICTING_SECURITY_PROFILE_STATE, as for a change', async () => {
    const asset = await createAsset(t, { securityProfile: 3 });
    const before = await snapshot(asset.id);
    const res = await post({ id: asset.id, rollback: true });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toEqual(familyError('CONFLICT', 'CONFLICTING_SECURITY_PROFILE_STATE'));
    expect(await snapshot(asset.id)).toEqual(before);
  });

  it('rollbacks sent together: one is 200, the others 409 NOTHING_TO_ROLL_BACK, and one ROLLED_BACK is recorded', async () => {
    const { asset, first } = await provisionedTwice();
    const results = await Promise.all(Array.from({ length: 5 }, () => post({ id: asset.id, rollback: true })));
    expect(results.map((r) => r.statusCode).sort()).toEqual([200, 409, 409, 409, 409]);
    for (const r of results.filter((r) => r.statusCode === 409)) expect(r.json()).toEqual(familyError('CONFLICT', 'NOTHING_TO_ROLL_BACK'));
    expect((await audits(asset.id)).map((a) => a.outcome)).toEqual(['PROVISIONED', 'PROVISIONED', 'ROLLED_BACK']);
    expect(await storedPasswordIs(asset.id, first)).toBe(true);
  });
});

describe('rollback: who may, and which asset', () => {
  it("another network's asset is 404 ASSET_NOT_FOUND to a network-scoped token, worded as for an unknown id, and nothing changes; its own network's token may", async () => {
    const { asset, first } = await provisionedTwice();
    const before = await snapshot(asset.id);
    const stranger = t.bearer({ scopes: ['write:asset'], network: uniqueNetwork() });
    const res = await post({ id: asset.id, rollback: true }, { authorization: stranger });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual(familyError('NOT_FOUND', 'ASSET_NOT_FOUND'));
    const unknownId = uniqueAssetId();
    const unknown = await post({ id: unknownId, rollback: true }, { authorization: stranger });
    expect(unknown.statusCode).toBe(404);
    expect(res.json().message.replace(asset.id, '<id>')).toBe(unknown.json().message.replace(unknownId, '<id>'));
    expect(await snapshot(asset.id)).toEqual(before);

    const owner = t.bearer({ scopes: ['write:asset'], network: asset.network });
    expect((await post({ id: asset.id, rollback: true }, { authorization: owner })).statusCode).toBe(200);
    expect(await storedPasswordIs(asset.id, first)).toBe(true);
  });

  it('the scopes of change-password: read:asset alone is 403, no token is 401; nothing changes', async () => {
    const { asset } = await provisionedTwice();
    const before = await snapshot(asset.id);
    const reader = await post({ id: asset.id, rollback: true }, { authorization: t.bearer({ scopes: ['read:asset'] }) });
    expect(reader.statusCode).toBe(403);
    expect(reader.json()).toEqual({ message: expect.any(String) });
    const anonymous = await post({ id: asset.id, rollback: true }, {});
    expect(anonymous.statusCode).toBe(401);
    expect(await snapshot(asset.id)).toEqual(before);
  });

  it('an Idempotency-Key is a 400, as for every request of this operation; nothing changes', async () => {
    const { asset } = await provisionedTwice();
    const before = await snapshot(asset.id);
    const res = await post({ id: asset.id, rollback: true }, { authorization: writer, 'idempotency-key': 'rollback-once' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual(BAD_REQUEST);
    expect(res.json().message).toMatch(/idempotency-key/i);
    expect(await snapshot(asset.id)).toEqual(before);
  });
});

describe('rollback: the request body', () => {
  it.each([
    ['with a password', { rollback: true, password: 'Supplied:password-0001' }, /^password: not allowed with rollback: true/],
    ['with force', { rollback: true, force: true }, /^force: not allowed with rollback: true/],
    ['with force: false', { rollback: true, force: false }, /^force: not allowed with rollback: true/],
    ['with both', { rollback: true, password: 'Supplied:password-0001', force: true }, /^password: not allowed .*; force: not allowed/],
    ['with an unknown field', { rollback: true, reason: 'ignored' }, /reason/],
    ['rollback as a string', { rollback: 'true' }, /^rollback: .*expected boolean/],
    ['rollback null', { rollback: null }, /^rollback: .*expected boolean/],
    ['rollback 1', { rollback: 1 }, /^rollback: .*expected boolean/],
  ])('%s: 400 INVALID_REQUEST_PARAMETERS naming it, nothing changes', async (_name, body, message) => {
    const { asset } = await provisionedTwice();
    const before = await snapshot(asset.id);
    const res = await post({ id: asset.id, ...body });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual(BAD_REQUEST);
    expect(res.json().message).toMatch(message);
    // A supplied password is never echoed, not even in a refusal.
    expect(res.body).not.toContain('Supplied:password-0001');
    expect(await snapshot(asset.id)).toEqual(before);
  });

  it('without an id: 400 naming id', async () => {
    const res = await post({ rollback: true });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual(BAD_REQUEST);
    expect(res.json().message).toMatch(/^id: /);
  });

  it('rollback: false is a change, as if absent: a password is generated when none is given, or the one given is stored', async () => {
    const asset = await createAsset(t);
    const generated = await post({ id: asset.id, rollback: false });
    expect(generated.statusCode, generated.body).toBe(200);
    expect(generated.json()).toEqual({ data: { id: asset.id, passwordChangedAt: expect.stringMatching(ISO_MS), password: expect.any(String) } });
    expect(await storedPasswordIs(asset.id, generated.json().data.password)).toBe(true);
    const password = supplied();
    const given = await post({ id: asset.id, password, rollback: false });
    expect(given.statusCode, given.body).toBe(200);
    expect(await storedPasswordIs(asset.id, password)).toBe(true);
    // And a typo stays a 400 beside it.
    const typo = await post({ id: asset.id, pasword: supplied(), rollback: false });
    expect(typo.statusCode).toBe(400);
    expect(typo.json().message).toMatch(/pasword/);
  });
});

describe('rollback in the API reference', () => {
  it('documents the rollback field, a rollback request example, the 409 NOTHING_TO_ROLL_BACK with an example, and ROLLED_BACK among the rotation states', async () => {
    const doc = (await t.app.inject({ url: '/openapi.json' })).json();
    const operation = doc.paths[URL_].post;
    const media = operation.requestBody.content['application/json'];
    expect(media.schema.properties.rollback).toMatchObject({ type: 'boolean', description: expect.stringContaining('takes no password or force') });
    expect(media.schema.required).toEqual(['id']);
    expect(Object.values(media.examples).map((e) => (e as { value: unknown }).value)).toContainEqual({ id: 'CP-1', rollback: true });
    const conflict = operation.responses['409'].content['application/json'];
    expect(conflict.schema.properties.code.enum).toContain('NOTHING_TO_ROLL_BACK');
    expect(Object.values(conflict.examples).map((e) => (e as { value: { code: string } }).value.code)).toContain('NOTHING_TO_ROLL_BACK');
    expect(doc.components.schemas.Asset.properties.rotation.anyOf[0].properties.state.enum).toContain('ROLLED_BACK');
  });
});
