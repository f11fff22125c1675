import { setTimeout as sleep } from 'node:timers/promises';
import { asc, eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { assetPasswordChanges, assets } from '../../src/asset-management/asset-management-tables.js';
import { updateAssetPassword } from '../../src/asset-management/assets-repository.js';
import { changeAssetPassword } from '../../src/asset-management/password-rotation-service.js';
import { HASH_CONCURRENCY, passwordHashQueue } from '../../src/asset-management/password-hash-queue.js';
import { DEFAULT_ARGON2_PARAMS, verifyPassword } from '../../src/asset-management/password-hashing.js';
import { PASSWORD_RULES } from '../../src/asset-management/password-rules.js';
import { createTestApp, type TestApp } from '../helpers/test-app.js';
import { BAD_REQUEST, createAsset, familyError, uniqueNetwork } from '../helpers/asset-factory.js';
import { CHEAP_HASH } from '../helpers/password-hash-params.js';

const URL_ = '/asset-management/v1/assets/change-password';
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const ALPHABET_201 = /^[A-Za-z0-9*\-_=:+|@.]{40}$/;

let t: TestApp;
let writer: string;

// The HTTP tests hash with a cheap argon2id cost; one test below keeps the production cost.

beforeAll(async () => {
  t = await createTestApp({ captureLogs: true, passwordHashParams: CHEAP_HASH });
  writer = t.bearer({ scopes: ['write:asset'], clientId: 'cli_writer' });
});
afterAll(async () => {
  await t.close();
});

function change(payload: unknown, authorization: string | null = writer) {
  return t.app.inject({
    method: 'POST',
    url: URL_,
    headers: authorization === null ? {} : { authorization },
    payload: payload as Record<string, unknown>,
  });
}

// Distinct per call, so a search of logs or rows cannot match another test's password.
let counter = 0;
function password201(length: number): string {
  const stem = `Pw.${Date.now().toString(36)}-${(counter++).toString(36)}:`;
  return stem.padEnd(length, 'Zz9*|@+=_').slice(0, length);
}
function passwordHex(length: number): string {
  const stem = `${Date.now().toString(16)}${(counter++).toString(16).padStart(4, '0')}`;
  return stem.padEnd(length, 'aB3f').slice(0, length);
}

async function row(id: string) {
  const [r] = await t.database.db.select().from(assets).where(eq(assets.id, id));
  return r!;
}

// Whether the asset's stored hash is a hash of this password.
async function storedPasswordIs(id: string, password: string): Promise<boolean> {
  const { passwordHash } = await row(id);
  return passwordHash !== null && (await verifyPassword(password, passwordHash));
}

async function audits(id: string) {
  return t.database.db.select().from(assetPasswordChanges).where(eq(assetPasswordChanges.assetId, id)).orderBy(asc(assetPasswordChanges.changedAt));
}

describe('change-password: supplied password', () => {
  it('200 { data: { id, passwordChangedAt } } without the password; the hash verifies it; the change is audited', async () => {
    const asset = await createAsset(t);
    expect((await row(asset.id)).passwordHash).toBeNull();
    const password = password201(24);
    const res = await change({ id: asset.id, password });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.json()).toEqual({ data: { id: asset.id, passwordChangedAt: expect.stringMatching(ISO_MS) } });
    expect(Object.keys(res.json().data)).toEqual(['id', 'passwordChangedAt']);
    const { passwordChangedAt } = res.json().data;

    expect(await storedPasswordIs(asset.id, password)).toBe(true);
    expect(await storedPasswordIs(asset.id, `${password}x`)).toBe(false);

    const read = await t.app.inject({ url: `/asset-management/v1/assets/${asset.id}`, headers: { authorization: writer } });
    expect(read.json().data).toMatchObject({ passwordChangedAt, updatedAt: passwordChangedAt });
    expect(read.body).not.toMatch(/argon2id|hmac-sha256|scrypt/);

    const stored = await row(asset.id);
    expect(stored.passwordHash).toMatch(/^argon2id\$v=19,m=64,t=1,p=1\$/);
    expect(JSON.stringify(stored)).not.toContain(password);

    const trail = await audits(asset.id);
    expect(trail).toEqual([
      { id: expect.stringMatching(/^apc_/), assetId: asset.id, network: asset.network, actorClientId: 'cli_writer', generated: false, changedAt: new Date(passwordChangedAt), outcome: 'PROVISIONED', resolution: null, resolvedAt: null },
    ]);
  });

  it('without an injected cost the service hashes with the production parameters', async () => {
    const asset = await createAsset(t);
    const password = password201(24);
    await changeAssetPassword(t.database.db, { stations: t.app.stations }, { clientId: 'cli_writer', network: null }, { id: asset.id, password });
    const { memoryKiB, iterations, parallelism } = DEFAULT_ARGON2_PARAMS;
    expect((await row(asset.id)).passwordHash).toMatch(new RegExp(`^argon2id\\$v=19,m=${memoryKiB},t=${iterations},p=${parallelism}\\$`));
    expect(memoryKiB).toBeGreaterThanOrEqual(19 * 1024);
    expect(await storedPasswordIs(asset.id, password)).toBe(true);
  });

  it('the new password replaces the old one', async () => {
    const asset = await createAsset(t);
    const first = password201(16);
    const second = password201(16);
    expect((await change({ id: asset.id, password: first })).statusCode).toBe(200);
    const res = await change({ id: asset.id, password: second });
    expect(res.statusCode).toBe(200);
    expect(await storedPasswordIs(asset.id, second)).toBe(true);
    expect(await storedPasswordIs(asset.id, first)).toBe(false);
    const trail = await audits(asset.id);
    expect(trail.map((a) => a.generated)).toEqual([false, false]);
    expect(trail[1]!.changedAt.toISOString()).toBe(res.json().data.passwordChangedAt);
  });

  it.each([
    ['2.0.1', 16, 200],
    ['2.0.1', 40, 200],
    ['2.0.1', 15, 400],
    ['2.0.1', 41, 400],
    ['1.6', 32, 200],
    ['1.6', 40, 200],
    ['1.6', 31, 400],
    ['1.6', 41, 400],
    ['1.6', 42, 400],
    ['1.6', 34, 200],
  ] as const)('OCPP %s: %i characters → %i', async (ocppVersion, length, status) => {
    const asset = await createAsset(t, { ocppVersion });
    const password = ocppVersion === '1.6' ? passwordHex(length) : password201(length);
    expect(password).toHaveLength(length);
    const res = await change({ id: asset.id, password });
    expect(res.statusCode, res.body).toBe(status);
    if (status === 400) {
      expect(res.json()).toEqual({ type: 'BAD_REQUEST', code: 'INVALID_REQUEST_PARAMETERS', message: `password: ${PASSWORD_RULES[ocppVersion]}` });
      expect((await row(asset.id)).passwordHash).toBeNull();
    } else {
      expect(await storedPasswordIs(asset.id, password)).toBe(true);
    }
  });

  it.each([
    ['2.0.1', 'with space inside ok'],
    ['2.0.1', 'hash#is-not-allowed'],
    ['2.0.1', 'ümlautsAreNotAllowed'],
    ['2.0.1', 'trailing-newline-16\n'],
    ['2.0.1', ''],
    ['1.6', 'g'.repeat(32)],
    ['1.6', 'Abcdefgh12345678Abcdefgh12345678'],
    ['1.6', `${'a'.repeat(32)} `],
  ] as const)('OCPP %s: refuses %j with the rule, never echoing it', async (ocppVersion, password) => {
    const asset = await createAsset(t, { ocppVersion });
    const res = await change({ id: asset.id, password });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ type: 'BAD_REQUEST', code: 'INVALID_REQUEST_PARAMETERS', message: `password: ${PASSWORD_RULES[ocppVersion]}` });
  });
});

describe('change-password: generated password', () => {
  it.each([
    ['2.0.1', ALPHABET_201],
    ['1.6', /^[0-9a-f]{40}$/],
  ] as const)('OCPP %s: 40 characters of the version alphabet, answered once, audited as generated', async (ocppVersion, pattern) => {
    const asset = await createAsset(t, { ocppVersion });
    const res = await change({ id: asset.id });
    expect(res.statusCode, res.body).toBe(200);
    const { data } = res.json();
    expect(Object.keys(data)).toEqual(['id', 'passwordChangedAt', 'password']);
    expect(data.id).toBe(asset.id);
    expect(data.password).toMatch(pattern);
    expect(await storedPasswordIs(asset.id, data.password)).toBe(true);
    // Generated: a fast salted HMAC, never the argon2id a person's password gets (docs/rotation.md).
    expect((await row(asset.id)).passwordHash).toMatch(/^hmac-sha256\$/);
    const trail = await audits(asset.id);
    expect(trail).toHaveLength(1);
    expect(trail[0]).toMatchObject({ generated: true, actorClientId: 'cli_writer', changedAt: new Date(data.passwordChangedAt) });
    expect(JSON.stringify(await row(asset.id))).not.toContain(data.password);
  });
});

describe('change-password: secrecy', () => {
  it('neither a supplied, a refused nor a generated password reaches a log line', async () => {
    const asset = await createAsset(t);
    const supplied = password201(32);
    const refused = `${password201(20)}#`;
    expect((await change({ id: asset.id, password: supplied })).statusCode).toBe(200);
    expect((await change({ id: asset.id, password: refused })).statusCode).toBe(400);
    const generated = (await change({ id: asset.id })).json().data.password as string;
    expect(generated).toHaveLength(40);
    const lines = t.logLines();
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.some((l) => l.includes(URL_))).toBe(true);
    for (const secret of [supplied, refused, generated]) {
      expect(lines.filter((l) => l.includes(secret))).toEqual([]);
    }
  });
});

describe('change-password: errors', () => {
  it('404 ASSET_NOT_FOUND for an unknown id', async () => {
    const res = await change({ id: 'no-such-asset', password: password201(20) });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual(familyError('NOT_FOUND', 'ASSET_NOT_FOUND'));
  });

  it('a network-scoped token gets the same 404 for another network\'s asset, which stays unchanged', async () => {
    const asset = await createAsset(t);
    const stranger = t.bearer({ scopes: ['write:asset'], network: uniqueNetwork() });
    for (const body of [{ id: asset.id, password: password201(20) }, { id: asset.id }]) {
      const res = await change(body, stranger);
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual(familyError('NOT_FOUND', 'ASSET_NOT_FOUND'));
    }
    expect((await row(asset.id)).passwordHash).toBeNull();
    expect(await audits(asset.id)).toEqual([]);
    const owner = t.bearer({ scopes: ['write:asset'], network: asset.network });
    expect((await change({ id: asset.id }, owner)).statusCode).toBe(200);
  });

  it('409 CONFLICTING_SECURITY_PROFILE_STATE for a profile 3 asset, supplied or generated', async () => {
    const asset = await createAsset(t, { securityProfile: 3 });
    for (const body of [{ id: asset.id, password: password201(20) }, { id: asset.id }, { id: asset.id, password: 'short' }]) {
      const res = await change(body);
      expect(res.statusCode).toBe(409);
      expect(res.json()).toEqual(familyError('CONFLICT', 'CONFLICTING_SECURITY_PROFILE_STATE'));
      expect(res.json().message).toMatch(/security profile 3/);
    }
    expect((await row(asset.id)).passwordHash).toBeNull();
  });

  it.each([
    ['a misspelt password field', (id: string) => ({ id, pasword: 'aaaaaaaaaaaaaaaaaaaa' }), 'pasword'],
    ['an extra field', (id: string) => ({ id, generate: true }), 'generate'],
    ['a null password', (id: string) => ({ id, password: null }), 'password'],
    ['a numeric password', (id: string) => ({ id, password: 1234567890123456 }), 'password'],
    ['an array password', (id: string) => ({ id, password: ['aaaaaaaaaaaaaaaa'] }), 'password'],
    ['no id', () => ({ password: 'aaaaaaaaaaaaaaaa' }), 'id'],
    ['a numeric id', () => ({ id: 42 }), 'id'],
    ['an empty id', () => ({ id: '' }), 'id'],
    ['an id with a NUL', (id: string) => ({ id: `${id}\u0000` }), 'id'],
    ['an id of 129 characters', () => ({ id: 'a'.repeat(129) }), 'id'],
  ])('400 for %s, and nothing is generated', async (_name, body, field) => {
    const asset = await createAsset(t);
    const res = await change(body(asset.id));
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual(BAD_REQUEST);
    expect(res.json().message).toContain(field);
    expect(res.json().message).not.toContain('aaaaaaaaaaaaaaaa');
    expect((await row(asset.id)).passwordHash).toBeNull();
  });

  it('400 for an empty or non-object body', async () => {
    for (const payload of [undefined, '[]', 'null', '"x"']) {
      const res = await t.app.inject({
        method: 'POST',
        url: URL_,
        headers: { authorization: writer, ...(payload !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(payload !== undefined ? { payload } : {}),
      });
      expect(res.statusCode, String(payload)).toBe(400);
      expect(res.json()).toEqual(BAD_REQUEST);
    }
  });

  it('401 { message } without a token or with a garbage one', async () => {
    for (const authorization of [null, 'Bearer x.y.z', 'Token abc']) {
      const res = await change({ id: 'x' }, authorization);
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ message: expect.any(String) });
    }
  });

  it('403 { message } without write:asset, before validation and before the lookup', async () => {
    const asset = await createAsset(t);
    for (const scopes of [['read:asset'], ['write:chargingstationmodel'], []]) {
      for (const body of [{ id: asset.id }, { pasword: 'x' }, { id: 'no-such-asset' }]) {
        const res = await change(body, t.bearer({ scopes, admin: true }));
        expect(res.statusCode).toBe(403);
        expect(res.json()).toEqual({ message: expect.any(String) });
      }
    }
    expect((await row(asset.id)).passwordHash).toBeNull();
  });
});

describe('change-password: concurrency', () => {
  it('two racing changes both succeed and the stored hash is the later one', async () => {
    const asset = await createAsset(t);
    const passwords = [password201(30), password201(30)];
    const answers = await Promise.all(passwords.map((password) => change({ id: asset.id, password })));
    for (const a of answers) expect(a.statusCode, a.body).toBe(200);
    const times = answers.map((a) => Date.parse(a.json().data.passwordChangedAt));
    expect(times[0]).not.toBe(times[1]);
    const later = times[0]! > times[1]! ? 0 : 1;
    const earlier = 1 - later;
    expect(await storedPasswordIs(asset.id, passwords[later]!)).toBe(true);
    expect(await storedPasswordIs(asset.id, passwords[earlier]!)).toBe(false);
    const stored = await row(asset.id);
    expect(stored.passwordChangedAt!.getTime()).toBe(times[later]);
    const trail = await audits(asset.id);
    expect(trail.map((a) => a.changedAt.getTime())).toEqual([times[earlier], times[later]]);
  });

  it('8 concurrent changes queue for hashing behind a full queue, none is refused, and all succeed', async () => {
    const assets = await Promise.all(Array.from({ length: 8 }, () => createAsset(t)));
    const passwords = assets.map(() => password201(32));
    // Every place in the hashing queue taken, as by a burst of logins.
    const holders = Array.from({ length: HASH_CONCURRENCY }, () => {
      let open!: () => void;
      const opened = new Promise<void>((resolve) => (open = resolve));
      return { open, held: passwordHashQueue(() => opened) };
    });
    let answered = 0;
    const requests = assets.map((asset, i) => change({ id: asset.id, password: passwords[i] }).finally(() => answered++));
    await vi.waitFor(() => expect(passwordHashQueue.pendingCount).toBe(8), { timeout: 20_000, interval: 5 });
    expect(answered).toBe(0);
    for (const h of holders) h.open();
    await Promise.all(holders.map((h) => h.held));
    const answers = await Promise.all(requests);
    for (const [i, a] of answers.entries()) {
      expect(a.statusCode, a.body).toBe(200);
      expect(a.json().data.id).toBe(assets[i]!.id);
    }
    for (const [i, asset] of assets.entries()) expect(await storedPasswordIs(asset.id, passwords[i]!)).toBe(true);
  });

  // Needs two connections, so it exists only in the PostgreSQL run: PGlite runs one transaction at
  // a time, so the interleaving this checks cannot happen there (CI runs the suite on both).
  const onServer = process.env.DATABASE_URL ? it : undefined;
  onServer?.('a change whose transaction began earlier but wrote later still gets the later time', async () => {
    const asset = await createAsset(t);
    const db = t.database.db;
    const target = { id: asset.id, network: asset.network };
    let secondBegan!: () => void;
    let firstLocked!: () => void;
    const secondHasBegun = new Promise<void>((resolve) => (secondBegan = resolve));
    const firstHoldsLock = new Promise<void>((resolve) => (firstLocked = resolve));

    const second = db.transaction(async (tx) => {
      // now() is fixed at the first statement: this transaction's clock is now the earlier one
      await tx.execute(sql`select now()`);
      secondBegan();
      await firstHoldsLock;
      return updateAssetPassword(tx, { ...target, passwordHash: 'second', rotationId: 'apc_second', state: 'PROVISIONED' });
    });
    await secondHasBegun;
    await sleep(20);
    const first = db.transaction(async (tx) => {
      const result = await updateAssetPassword(tx, { ...target, passwordHash: 'first', rotationId: 'apc_first', state: 'PROVISIONED' });
      firstLocked();
      // the second update now waits for this row lock
      await sleep(100);
      return result;
    });
    const [a, b] = await Promise.all([first, second]);
    expect(b!.passwordChangedAt.getTime()).toBeGreaterThan(a!.passwordChangedAt.getTime());
    const stored = await row(asset.id);
    expect(stored.passwordHash).toBe('second');
    expect(stored.passwordChangedAt).toEqual(b!.passwordChangedAt);
  });
});
