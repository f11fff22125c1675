import { createHmac, createPublicKey, generateKeyPairSync, randomBytes, randomUUID, sign } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSigner } from 'fast-jwt';
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { toPrincipal } from '../../src/auth/auth-plugin.js';
import { signingKeys } from '../../src/auth/auth-tables.js';
import { createDatabaseKeyResolver, createJwksKeyResolver, type KeyResolver } from '../../src/auth/key-resolver.js';
import { UnauthorizedError } from '../../src/kernel/errors.js';
import { ASSETS_PROBE, PAYMENTS_PROBE, createProbeApp, expectPaymentsDatabaseUnavailable, type ProbeApp } from '../helpers/probe-app.js';
import { createTestDatabase } from '../helpers/test-database.js';
import { countingDb } from '../helpers/counting-db.js';

const b64url = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
const now = () => Math.floor(Date.now() / 1000);

function freshEcKey() {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return {
    privatePem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    publicJwk: publicKey.export({ format: 'jwk' }) as Record<string, string>,
  };
}

function expectBearer401(res: LightMyRequestResponse) {
  expect(res.statusCode).toBe(401);
  const body = res.json() as Record<string, unknown>;
  expect(Object.keys(body)).toEqual(['message']);
  expect(typeof body.message).toBe('string');
  expect(body.message).not.toBe('');
  expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
}

describe('bearer token verification (embedded issuer)', () => {
  let t: ProbeApp;
  let kid: string;
  let alg: 'ES256' | 'RS256';
  let privatePem: string;
  let publicPem: string;

  beforeAll(async () => {
    t = await createProbeApp();
    ({ kid, alg, privatePem } = await t.signingKey());
    const jwks = (await t.app.inject({ url: '/.well-known/jwks.json' })).json() as { keys: Record<string, string>[] };
    const jwk = jwks.keys.find((k) => k.kid === kid)!;
    publicPem = createPublicKey({ key: jwk, format: 'jwk' }).export({ type: 'spki', format: 'pem' }).toString();
  });
  afterAll(async () => {
    await t.close();
  });

  const claims = (overrides: Record<string, unknown> = {}) => ({
    iss: t.config.auth.issuer,
    aud: t.config.auth.audience,
    sub: 'cli_attacker',
    client_id: 'cli_attacker',
    scope: 'read:sessionpayment',
    iat: now(),
    exp: now() + 300,
    ...overrides,
  });

  // Signs with the service's own key, so only the claims under test are wrong.
  const signWithServiceKey = (payload: Record<string, unknown>) =>
    createSigner({ key: privatePem, algorithm: alg, kid, header: { alg, typ: 'at+jwt' } })(payload);

  // Signs the payload text as given, so it may hold what JSON.stringify never writes (duplicate keys).
  const signRawPayload = (payloadText: string) => {
    const signingInput = `${b64url({ alg, typ: 'at+jwt', kid })}.${b64url(payloadText)}`;
    const signature = alg === 'ES256'
      ? sign('sha256', Buffer.from(signingInput), { key: privatePem, dsaEncoding: 'ieee-p1363' })
      : sign('sha256', Buffer.from(signingInput), privatePem);
    return `${signingInput}.${signature.toString('base64url')}`;
  };

  const probe = (authorization?: string, url = PAYMENTS_PROBE) =>
    t.app.inject({ method: 'GET', url, headers: authorization === undefined ? {} : { authorization } });

  it('accepts a token from the embedded issuer', async () => {
    const res = await probe(t.bearer({ scopes: ['read:sessionpayment'], network: 'net_a', clientId: 'cli_ok' }));
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      principal: { clientId: 'cli_ok', scopes: ['read:sessionpayment'], network: 'net_a', isAdmin: false },
    });
  });

  it('accepts a token that expired 10 s ago (inside the 30 s clock skew)', async () => {
    const res = await probe(`Bearer ${signWithServiceKey(claims({ iat: now() - 600, exp: now() - 10 }))}`);
    expect(res.statusCode).toBe(200);
  });

  it('refuses a token it accepted before once its exp and the 30 s clock skew have passed (the verified tokens\' cache holds no longer)', async () => {
    // Usable for at least 1 s more (exp is in whole seconds), refused after 3.1 s.
    const token = `Bearer ${signWithServiceKey(claims({ iat: now() - 600, exp: now() - 28 }))}`;
    expect((await probe(token)).statusCode).toBe(200);
    expect((await probe(token)).statusCode).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 3_100));
    expectBearer401(await probe(token));
  });

  it('accepts a hand-made token with the right claims (control for the forgeries below)', async () => {
    expect((await probe(`Bearer ${signWithServiceKey(claims())}`)).statusCode).toBe(200);
  });

  it('answers a missing Authorization header with 401 and an invalid_token Bearer challenge', async () => {
    const res = await probe(undefined);
    expectBearer401(res);
    // RFC 6750 §3.1 would send no error code without any authentication; the service sends
    // invalid_token on every 401 (docs/api.md, Authentication).
    expect(res.headers['www-authenticate']).toBe('Bearer error="invalid_token", error_description="Access token is missing"');
  });

  const attacks: [string, () => string][] = [
    ['a Basic header', () => 'Basic abc'],
    ['an empty Bearer', () => 'Bearer '],
    ['a three-part garbage token', () => 'Bearer abc.def.ghi'],
    ['a one-part garbage token', () => 'Bearer x'],
    ['a token with spaces and quotes', () => 'Bearer a.b.c "x"'],
    ['expired 120 s ago', () => `Bearer ${signWithServiceKey(claims({ iat: now() - 600, exp: now() - 120 }))}`],
    ['not valid until 120 s from now', () => `Bearer ${signWithServiceKey(claims({ nbf: now() + 120 }))}`],
    ['without exp', () => `Bearer ${signWithServiceKey(claims({ exp: undefined }))}`],
    ['from another issuer', () => `Bearer ${signWithServiceKey(claims({ iss: 'https://evil.example' }))}`],
    ['for another audience', () => `Bearer ${signWithServiceKey(claims({ aud: 'some-other-api' }))}`],
    [
      'alg none (unsigned, no kid)',
      () => `Bearer ${b64url({ alg: 'none', typ: 'JWT' })}.${b64url(claims())}.`,
    ],
    [
      'alg none carrying the service kid',
      () => `Bearer ${b64url({ alg: 'none', typ: 'at+jwt', kid })}.${b64url(claims())}.`,
    ],
    [
      'HS256 keyed with the service public key PEM',
      () => {
        const signingInput = `${b64url({ alg: 'HS256', typ: 'JWT', kid })}.${b64url(claims())}`;
        const mac = createHmac('sha256', publicPem).update(signingInput).digest('base64url');
        return `Bearer ${signingInput}.${mac}`;
      },
    ],
    [
      'an unknown kid (fresh ES256 key)',
      () => `Bearer ${createSigner({ key: freshEcKey().privatePem, algorithm: 'ES256', kid: randomUUID() })(claims())}`,
    ],
    [
      'an unknown key presenting the service kid',
      () => `Bearer ${createSigner({ key: freshEcKey().privatePem, algorithm: 'ES256', kid })(claims())}`,
    ],
    [
      'no kid at all (fresh key)',
      () => `Bearer ${createSigner({ key: freshEcKey().privatePem, algorithm: 'ES256' })(claims())}`,
    ],
    [
      'a payload swapped under a valid signature',
      () => {
        const [header, , signature] = signWithServiceKey(claims({ scope: 'read:asset' })).split('.');
        return `Bearer ${header}.${b64url(claims({ scope: 'read:sessionpayment write:sessionpayment' }))}.${signature}`;
      },
    ],
    ['a network claim that is not a string', () => `Bearer ${signWithServiceKey(claims({ network: 42 }))}`],
    ['an empty network claim', () => `Bearer ${signWithServiceKey(claims({ network: '' }))}`],
    // null must not read as "no claim", which would mean every network
    ['a null network claim', () => `Bearer ${signWithServiceKey(claims({ network: null }))}`],
    ['a network claim that is an array', () => `Bearer ${signWithServiceKey(claims({ network: ['net_a'] }))}`],
    ['a network claim that is an empty array', () => `Bearer ${signWithServiceKey(claims({ network: [] }))}`],
    ['a network claim that is an object', () => `Bearer ${signWithServiceKey(claims({ network: {} }))}`],
    ['a network claim that is false', () => `Bearer ${signWithServiceKey(claims({ network: false }))}`],
  ];

  it.each(attacks)('rejects %s with 401 { message }', async (_name, make) => {
    const authorization = make();
    expectBearer401(await probe(authorization));
    // same answer in the asset-management family: 401 is { message } there too
    expectBearer401(await probe(authorization, ASSETS_PROBE));
  });

  it('challenges a presented but invalid token with error="invalid_token" (RFC 6750 §3.1)', async () => {
    const res = await probe('Bearer abc.def.ghi');
    expect(res.headers['www-authenticate']).toMatch(/^Bearer error="invalid_token"/);
  });

  it('answers a flood of unknown kids with 401s, never a 500', async () => {
    for (let i = 0; i < 20; i++) {
      const token = createSigner({ key: freshEcKey().privatePem, algorithm: 'ES256', kid: randomUUID() })(claims());
      expectBearer401(await probe(`Bearer ${token}`));
    }
    // and the real key still works afterwards
    expect((await probe(`Bearer ${signWithServiceKey(claims())}`)).statusCode).toBe(200);
  });

  it('checks the token before the scope: 403 for a valid token without the scope, in each family shape', async () => {
    const payments = await probe(t.bearer({ scopes: ['read:asset'] }));
    expect(payments.statusCode).toBe(403);
    expect(payments.json()).toEqual({ code: 'FORBIDDEN', message: expect.any(String), status: 403 });

    const assets = await probe(t.bearer({ scopes: ['write:chargingstationmodel'], admin: false }), ASSETS_PROBE);
    expect(assets.statusCode).toBe(403);
    expect(Object.keys(assets.json() as object)).toEqual(['message']);

    const admin = await probe(t.bearer({ scopes: ['write:chargingstationmodel'], admin: true }), ASSETS_PROBE);
    expect(admin.statusCode).toBe(200);
    expect((admin.json() as { principal: { isAdmin: boolean } }).principal.isAdmin).toBe(true);
  });

  // Payload texts JSON.stringify never writes: JSON.parse keeps the last of duplicate keys and
  // makes "__proto__" an ordinary own key.
  it('reads a hand-written payload as JSON.parse does: the last duplicate decides, __proto__ grants nothing', async () => {
    const base = JSON.stringify(claims()).slice(0, -1);
    expectBearer401(await probe(`Bearer ${signRawPayload(`${base},"network":"net_a","network":null}`)}`));

    const lastIsString = await probe(`Bearer ${signRawPayload(`${base},"network":null,"network":"net_b"}`)}`);
    expect(lastIsString.statusCode).toBe(200);
    expect((lastIsString.json() as { principal: { network: string | null } }).principal.network).toBe('net_b');

    const proto = `${base},"__proto__":{"network":null,"roles":["admin"],"scope":"write:chargingstationmodel","scp":["write:chargingstationmodel"]}}`;
    const res = await probe(`Bearer ${signRawPayload(proto)}`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      principal: { clientId: 'cli_attacker', scopes: ['read:sessionpayment'], network: null, isAdmin: false },
    });
    expect((await probe(`Bearer ${signRawPayload(proto)}`, ASSETS_PROBE)).statusCode).toBe(403);
  });

  it('reads scopes from scp / permissions arrays too', async () => {
    const res = await probe(`Bearer ${signWithServiceKey(claims({ scope: undefined, scp: ['read:sessionpayment'] }))}`);
    expect(res.statusCode).toBe(200);
    const perms = await probe(`Bearer ${signWithServiceKey(claims({ scope: undefined, permissions: ['read:sessionpayment'] }))}`);
    expect(perms.statusCode).toBe(200);
  });
});

// Names that every plain object answers through Object.prototype.
const PROTOTYPE_NAMES = Object.getOwnPropertyNames(Object.prototype);

describe('claims are read as own properties (toPrincipal)', () => {
  const claimName = fc.constantFrom(...PROTOTYPE_NAMES, 'network', 'roles');
  // Payloads as the verifier produces them (JSON.parse of the token text, so "__proto__" is an own
  // key), holding none of the claims toPrincipal reads, but a "__proto__" object that names them.
  const unrelatedPayload = fc
    .record({
      claims: fc.dictionary(fc.constantFrom('iss', 'aud', 'jti', 'iat', 'tenant'), fc.jsonValue(), { maxKeys: 4 }),
      proto: fc.option(fc.constant({ network: null, roles: ['admin'], scope: 'write:asset', scp: ['write:asset'], client_id: 'cli_root' })),
    })
    .map(({ claims, proto }) => {
      const text = JSON.stringify(claims);
      return JSON.parse(proto ? `${text.slice(0, -1)}${text === '{}' ? '' : ','}"__proto__":${JSON.stringify(proto)}}` : text) as Record<string, unknown>;
    });

  it('reads an absent claim as absent whatever it is named: no network, no admin, no scopes', () => {
    fc.assert(
      fc.property(claimName, claimName, unrelatedPayload, (networkClaim, rolesClaim, payload) => {
        // with a "__proto__" key in the payload, a claim of that name is present, not absent
        fc.pre(networkClaim !== rolesClaim && !(Object.hasOwn(payload, '__proto__') && [networkClaim, rolesClaim].includes('__proto__')));
        expect(toPrincipal(payload, { networkClaim, rolesClaim })).toEqual({ clientId: 'unknown', scopes: new Set(), network: null, isAdmin: false });
      }),
      { numRuns: 300 },
    );
  });

  it('reads a present claim under any name: a non-empty string network scopes, any other value is 401', () => {
    fc.assert(
      fc.property(
        claimName,
        fc.oneof(fc.constant(null), fc.constant(''), fc.boolean(), fc.integer(), fc.array(fc.string()), fc.object()),
        (networkClaim, value) => {
          const payload = JSON.parse(`{"sub":"cli_1",${JSON.stringify(networkClaim)}:${JSON.stringify(value)}}`) as Record<string, unknown>;
          expect(() => toPrincipal(payload, { networkClaim, rolesClaim: 'roles' })).toThrow(UnauthorizedError);
        },
      ),
    );
    for (const name of PROTOTYPE_NAMES) {
      const payload = JSON.parse(`{"sub":"cli_1",${JSON.stringify(name)}:"net_a"}`) as Record<string, unknown>;
      expect(toPrincipal(payload, { networkClaim: name, rolesClaim: 'roles' }).network).toBe('net_a');
      const admin = JSON.parse(`{"sub":"cli_1",${JSON.stringify(name)}:["admin"]}`) as Record<string, unknown>;
      expect(toPrincipal(admin, { networkClaim: 'network', rolesClaim: name }).isAdmin).toBe(true);
    }
  });
});

describe('the network claim is read in the form networks are stored in (NFC)', () => {
  it('scopes a decomposed spelling to the composed network, so it matches the stored rows', () => {
    const decomposed = 'Re\u0301seau-1';
    const principal = toPrincipal({ sub: 'cli_1', network: decomposed }, { networkClaim: 'network', rolesClaim: 'roles' });
    expect(principal.network).toBe('R\u00e9seau-1');
    expect(principal.network).not.toBe(decomposed);
  });
});

describe('claim names that Object.prototype also answers (AUTH_NETWORK_CLAIM=__proto__, AUTH_ROLES_CLAIM=constructor)', () => {
  let t: ProbeApp;
  beforeAll(async () => {
    t = await createProbeApp({ env: { AUTH_NETWORK_CLAIM: '__proto__', AUTH_ROLES_CLAIM: 'constructor' } });
  });
  afterAll(async () => {
    await t.close();
  });

  const principal = async (authorization: string, url = PAYMENTS_PROBE) => {
    const res = await t.app.inject({ url, headers: { authorization } });
    expect(res.statusCode, res.body).toBe(200);
    return (res.json() as { principal: { network: string | null; isAdmin: boolean } }).principal;
  };

  it('keeps a network client scoped to its network: the embedded issuer writes the claim as an own key', async () => {
    expect(await principal(t.bearer({ scopes: ['read:sessionpayment'], network: 'net_a' }))).toMatchObject({ network: 'net_a', isAdmin: false });
  });

  it('reads a token without those claims as unscoped and not admin', async () => {
    expect(await principal(t.bearer({ scopes: ['read:sessionpayment'] }))).toMatchObject({ network: null, isAdmin: false });
    const notAdmin = await t.app.inject({ url: ASSETS_PROBE, headers: { authorization: t.bearer({ scopes: ['write:chargingstationmodel'] }) } });
    expect(notAdmin.statusCode).toBe(403);
  });

  it('still makes an admin client an admin', async () => {
    expect(await principal(t.bearer({ scopes: ['write:chargingstationmodel'], admin: true }), ASSETS_PROBE)).toMatchObject({ isAdmin: true });
  });
});

describe('a token whose signing key is withdrawn (the verified tokens\' cache)', () => {
  let t: ProbeApp;
  let kid: string;
  // Keys live 1 s, and an unknown kid may make them reload at any time.
  beforeAll(async () => {
    t = await createProbeApp({ env: { AUTH_JWKS_CACHE_TTL_SECONDS: '1', AUTH_JWKS_REFETCH_INTERVAL_SECONDS: '0' } });
    ({ kid } = await t.signingKey());
  });
  afterAll(async () => {
    await t.close();
  });
  const probe = (authorization: string) => t.app.inject({ url: PAYMENTS_PROBE, headers: { authorization } });
  const setRetired = (retiredAt: Date | null) => t.database.db.update(signingKeys).set({ retiredAt }).where(eq(signingKeys.kid, kid));
  afterEach(async () => {
    await setRetired(null);
  });

  it('is refused as soon as a reload for an unknown kid reads the keys without it', async () => {
    const token = t.bearer({ scopes: ['read:sessionpayment'] });
    expect((await probe(token)).statusCode).toBe(200);
    expect((await probe(token)).statusCode).toBe(200);
    await setRetired(new Date());
    const unknownKid = createSigner({ key: freshEcKey().privatePem, algorithm: 'ES256', kid: randomUUID() })({ exp: now() + 60 });
    expectBearer401(await probe(`Bearer ${unknownKid}`));
    expectBearer401(await probe(token));
  });

  it('is refused once the keys outlive their TTL and are read again without it', async () => {
    const token = t.bearer({ scopes: ['read:sessionpayment'] });
    expect((await probe(token)).statusCode).toBe(200);
    await setRetired(new Date());
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    expectBearer401(await probe(token));
  });

  it('is accepted again when its key comes back, and a token of a kept key never stops working', async () => {
    const token = t.bearer({ scopes: ['read:sessionpayment'] });
    await setRetired(new Date());
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    expectBearer401(await probe(token));
    await setRetired(null);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    for (let i = 0; i < 3; i++) expect((await probe(token)).statusCode).toBe(200);
  });
});

describe('database key resolver', () => {
  let t: ProbeApp;
  beforeAll(async () => {
    t = await createProbeApp();
  });
  afterAll(async () => {
    await t.close();
  });


  it('gives the keys a new version only when a reload reads other keys', async () => {
    const { kid } = await t.signingKey();
    const resolver = createDatabaseKeyResolver({ db: t.database.db, cacheTtlSeconds: 600, refetchIntervalSeconds: 0 });
    expect(resolver.version()).toBeNull();
    await resolver.refresh();
    const first = resolver.version();
    expect(first).not.toBeNull();
    await resolver.refresh();
    expect(resolver.version()).toBe(first);
    await t.database.db.update(signingKeys).set({ retiredAt: new Date() }).where(eq(signingKeys.kid, kid));
    try {
      await resolver.refresh();
      expect(resolver.version()).not.toBe(first);
      await expect(resolver.resolve({ kid, alg: 'ES256' })).rejects.toBeInstanceOf(UnauthorizedError);
    } finally {
      await t.database.db.update(signingKeys).set({ retiredAt: null }).where(eq(signingKeys.kid, kid));
    }
  });

  it('does not reload the keys for every unknown kid', async () => {
    const { kid } = await t.signingKey();
    const { db, counter } = countingDb(t.database.db);
    const resolver = createDatabaseKeyResolver({ db, cacheTtlSeconds: 600, refetchIntervalSeconds: 30 });
    await resolver.refresh();
    expect(counter.selects).toBe(1);

    await expect(resolver.resolve({ kid, alg: 'ES256' })).resolves.toMatch(/BEGIN PUBLIC KEY/);
    expect(counter.selects).toBe(1);

    for (let i = 0; i < 20; i++) {
      await expect(resolver.resolve({ kid: randomUUID(), alg: 'ES256' })).rejects.toBeInstanceOf(UnauthorizedError);
    }
    const sameUnknown = randomUUID();
    for (let i = 0; i < 20; i++) {
      await expect(resolver.resolve({ kid: sameUnknown, alg: 'ES256' })).rejects.toBeInstanceOf(UnauthorizedError);
    }
    // at most one reload for the whole flood, within the refetch interval
    expect(counter.selects).toBeLessThanOrEqual(2);
    await expect(resolver.resolve({ kid: undefined, alg: 'ES256' })).rejects.toBeInstanceOf(UnauthorizedError);
  });
});

describe('a database error while the signing keys reload', () => {
  it('is not a 401 (the token may be fine): it fails as the database error it is, in the family shape', async () => {
    const database = await createTestDatabase();
    const t = await createProbeApp({ database, env: { AUTH_JWKS_CACHE_TTL_SECONDS: '1' } });
    try {
      expect((await t.app.inject({ url: PAYMENTS_PROBE, headers: { authorization: t.bearer({ scopes: ['read:sessionpayment'] }) } })).statusCode).toBe(200);
      await database.close();
      // past the key cache's TTL, so the next verification reloads the keys from the closed database
      await new Promise((resolve) => setTimeout(resolve, 1100));
      // a fresh token, which fast-jwt's cache of verified tokens has not seen
      const res = await t.app.inject({ url: PAYMENTS_PROBE, headers: { authorization: t.bearer({ scopes: ['read:sessionpayment'] }) } });
      expectPaymentsDatabaseUnavailable(res);
    } finally {
      await t.close();
    }
  });
});

describe('JWKS key resolver (external identity provider)', () => {
  const signer = freshEcKey();
  const jwk = { ...signer.publicJwk, kid: 'key-1', alg: 'ES256', use: 'sig' };
  // a second published key, as during a provider's key rotation
  const rotated = freshEcKey();
  const jwk2 = { ...rotated.publicJwk, kid: 'key-2', alg: 'ES256', use: 'sig' };
  let server: Server;
  let jwksUrl: string;
  let hits = 0;
  let failWith500 = false;
  let published = [jwk, jwk2];

  beforeAll(async () => {
    server = createServer((req, res) => {
      hits++;
      if (failWith500) {
        res.writeHead(500, { 'content-type': 'text/plain' }).end('upstream exploded');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: published }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    jwksUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/tenant/jwks?v=1`;
  });
  afterEach(() => {
    hits = 0;
    failWith500 = false;
    published = [jwk, jwk2];
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  const resolver = (): KeyResolver => createJwksKeyResolver({ jwksUrl, cacheTtlSeconds: 600, refetchIntervalSeconds: 30 });

  it('gives the keys a new version only when the provider publishes other keys', async () => {
    const r = createJwksKeyResolver({ jwksUrl, cacheTtlSeconds: 600, refetchIntervalSeconds: 0 });
    expect(r.version()).toBeNull();
    await r.resolve({ kid: 'key-1', alg: 'ES256' });
    const first = r.version();
    expect(first).not.toBeNull();
    // An unknown kid refetches the same keys: tokens verified before stay cached.
    await expect(r.resolve({ kid: 'forged-kid', alg: 'ES256' })).rejects.toBeInstanceOf(UnauthorizedError);
    expect(hits).toBe(2);
    expect(r.version()).toBe(first);
    // The provider withdraws key-1: the refetch brings other keys, a new version.
    published = [jwk2];
    await expect(r.resolve({ kid: 'forged-kid-2', alg: 'ES256' })).rejects.toBeInstanceOf(UnauthorizedError);
    expect(hits).toBe(3);
    expect(r.version()).not.toBe(first);
    expect(r.version()).not.toBeNull();
    await expect(r.resolve({ kid: 'key-1', alg: 'ES256' })).rejects.toBeInstanceOf(UnauthorizedError);
  });

  it('never answers the old version once the new keys are in place, not even for a microtask', async () => {
    // fetch held by the test, so the reload's answer arrives while version() is read after every
    // microtask (jose installs the keys a few microtasks before its reload settles).
    const realFetch = globalThis.fetch;
    // An object, not a variable: the closure below sets it, which narrowing would not see.
    const pending: { answer?: (response: Response) => void } = {};
    let held = false;
    const body = () => JSON.stringify({ keys: published });
    globalThis.fetch = (async () =>
      held ? new Promise<Response>((resolve) => (pending.answer = resolve)) : new Response(body(), { status: 200 })) as typeof fetch;
    try {
      const r = createJwksKeyResolver({ jwksUrl: 'https://idp.example/jwks', cacheTtlSeconds: 600, refetchIntervalSeconds: 0 });
      await r.resolve({ kid: 'key-1', alg: 'ES256' });
      const before = r.version();
      expect(before).not.toBeNull();
      held = true;
      published = [jwk2];
      const reload = r.resolve({ kid: 'key-2-forged', alg: 'ES256' }).catch(() => undefined);
      while (pending.answer === undefined) await new Promise((resolve) => setImmediate(resolve));
      const seen: (number | null)[] = [r.version()];
      pending.answer(new Response(body(), { status: 200 }));
      for (let i = 0; i < 200; i++) {
        await null;
        seen.push(r.version());
      }
      await reload;
      expect(seen[0]).toBeNull();
      expect(seen).not.toContain(before);
      expect(seen.at(-1)).not.toBeNull();
    } finally {
      globalThis.fetch = realFetch;
    }
  });

  it('fetches the configured JWKS once and serves the key from its cache', async () => {
    const r = resolver();
    const expected = createPublicKey({ key: signer.publicJwk, format: 'jwk' }).export({ type: 'spki', format: 'pem' }).toString();
    const pem = await r.resolve({ kid: 'key-1', alg: 'ES256' });
    expect(createPublicKey(pem).export({ type: 'spki', format: 'pem' }).toString()).toBe(expected);
    for (let i = 0; i < 10; i++) await r.resolve({ kid: 'key-1', alg: 'ES256' });
    expect(hits).toBe(1);
  });

  it('resolves every published kid from one fetch, even right after an unknown kid used the refetch', async () => {
    const r = resolver();
    await expect(r.resolve({ kid: 'forged-kid', alg: 'ES256' })).rejects.toBeInstanceOf(UnauthorizedError);
    const pem1 = await r.resolve({ kid: 'key-1', alg: 'ES256' });
    const pem2 = await r.resolve({ kid: 'key-2', alg: 'ES256' });
    expect(pem2).not.toBe(pem1);
    expect(createPublicKey(pem2).export({ type: 'spki', format: 'pem' }).toString()).toBe(
      createPublicKey({ key: rotated.publicJwk, format: 'jwk' }).export({ type: 'spki', format: 'pem' }).toString(),
    );
    expect(hits).toBe(1);
  });

  it('refuses a token whose alg differs from the one its key is published for', async () => {
    const r = resolver();
    await expect(r.resolve({ kid: 'key-1', alg: 'RS256' })).rejects.toBeInstanceOf(UnauthorizedError);
  });

  it('fetches at most once for 20 different unknown kids within the refetch interval', async () => {
    const r = resolver();
    for (let i = 0; i < 20; i++) {
      await expect(r.resolve({ kid: randomBytes(8).toString('hex'), alg: 'ES256' })).rejects.toBeInstanceOf(UnauthorizedError);
    }
    expect(hits).toBeLessThanOrEqual(1);
  });

  it('fetches at most once for the same unknown kid repeated 20 times', async () => {
    const r = resolver();
    for (let i = 0; i < 20; i++) {
      await expect(r.resolve({ kid: 'forged-kid', alg: 'ES256' })).rejects.toBeInstanceOf(UnauthorizedError);
    }
    expect(hits).toBeLessThanOrEqual(1);
  });

  it('refuses a token header without kid or alg without fetching', async () => {
    const r = resolver();
    await expect(r.resolve({ alg: 'ES256' })).rejects.toBeInstanceOf(UnauthorizedError);
    await expect(r.resolve({ kid: 'key-1' })).rejects.toBeInstanceOf(UnauthorizedError);
    expect(hits).toBe(0);
  });

  it('turns a failing JWKS endpoint (500) into UnauthorizedError', async () => {
    failWith500 = true;
    const r = resolver();
    await expect(r.resolve({ kid: 'key-1', alg: 'ES256' })).rejects.toBeInstanceOf(UnauthorizedError);
    for (let i = 0; i < 10; i++) {
      await expect(r.resolve({ kid: 'key-1', alg: 'ES256' })).rejects.toBeInstanceOf(UnauthorizedError);
    }
    expect(hits).toBeLessThanOrEqual(1);
  });

  // An outage of the identity provider must not lock every client out: the keys fetched before
  // keep verifying the tokens they signed, past the cache TTL, while refreshes fail.
  it('keeps accepting tokens signed with a known key when the JWKS endpoint starts failing (500, then connection refused)', async () => {
    let failing = false;
    let fetches = 0;
    const idp = createServer((_req, res) => {
      fetches++;
      if (failing) res.writeHead(500).end('down');
      else res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((resolve) => idp.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(idp.address() as AddressInfo).port}/jwks`;
    // Each token differs (jti), so fast-jwt's cache of verified tokens cannot answer for the keys.
    const token = () =>
      `Bearer ${createSigner({ key: signer.privatePem, algorithm: 'ES256', kid: 'key-1', iss: 'https://idp.example', aud: 'api', expiresIn: 300_000 })({ scope: 'read:sessionpayment', jti: randomUUID() })}`;
    const app = await createProbeApp({
      env: { AUTH_JWKS_URL: url, AUTH_ISSUER: 'https://idp.example', AUTH_AUDIENCE: 'api', AUTH_JWKS_CACHE_TTL_SECONDS: '1', AUTH_JWKS_REFETCH_INTERVAL_SECONDS: '0' },
    });
    const probe = async () => (await app.app.inject({ url: PAYMENTS_PROBE, headers: { authorization: token() } })).statusCode;
    try {
      expect(await probe()).toBe(200);
      expect(fetches).toBe(1);
      failing = true;
      // past the TTL: the next verification refreshes the keys, and the refresh fails
      await new Promise((resolve) => setTimeout(resolve, 1100));
      expect(await probe()).toBe(200);
      expect(fetches).toBe(2);
      idp.closeAllConnections();
      await new Promise((resolve) => idp.close(resolve));
      expect(await probe()).toBe(200);
      // an unknown key is still refused while the keys cannot be refreshed
      const forged = createSigner({ key: signer.privatePem, algorithm: 'ES256', kid: 'key-9', iss: 'https://idp.example', aud: 'api', expiresIn: 300_000 });
      expectBearer401(await app.app.inject({ url: PAYMENTS_PROBE, headers: { authorization: `Bearer ${forged({ scope: 'read:sessionpayment' })}` } }));
    } finally {
      await app.close();
      if (idp.listening) await new Promise((resolve) => idp.close(resolve));
    }
  });

  it('answers 401 { message } over HTTP when the JWKS endpoint fails or is unreachable, never 500', async () => {
    const token = `Bearer ${createSigner({ key: signer.privatePem, algorithm: 'ES256', kid: 'key-1', iss: 'https://idp.example', aud: 'api', expiresIn: 300_000 })({ scope: 'read:sessionpayment' })}`;
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));

    for (const url of [jwksUrl, `http://127.0.0.1:${closedPort}/jwks`]) {
      failWith500 = true;
      const app = await createProbeApp({ env: { AUTH_JWKS_URL: url, AUTH_ISSUER: 'https://idp.example', AUTH_AUDIENCE: 'api' } });
      try {
        expectBearer401(await app.app.inject({ url: PAYMENTS_PROBE, headers: { authorization: token } }));
        expectBearer401(await app.app.inject({ url: PAYMENTS_PROBE, headers: { authorization: token } }));
      } finally {
        await app.close();
      }
    }

    // control: the same token passes once the JWKS endpoint answers
    failWith500 = false;
    const app = await createProbeApp({ env: { AUTH_JWKS_URL: jwksUrl, AUTH_ISSUER: 'https://idp.example', AUTH_AUDIENCE: 'api' } });
    try {
      expect((await app.app.inject({ url: PAYMENTS_PROBE, headers: { authorization: token } })).statusCode).toBe(200);
    } finally {
      await app.close();
    }
  });
});
