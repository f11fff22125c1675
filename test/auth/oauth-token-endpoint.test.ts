import fc from 'fast-check';
import * as client from 'openid-client';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientInputError, createClient, listClients, revokeClient, type CreatedClient } from '../../src/auth/clients-service.js';
import type { Database } from '../../src/db/database.js';
import { tokenParameter } from '../../src/auth/token-parameters.js';
import { createTestDatabase } from '../helpers/test-database.js';
import { embeddedIssuerToken } from '../helpers/test-app.js';
import { ASSETS_PROBE, PAYMENTS_PROBE, createProbeApp, freePort, type ProbeApp } from '../helpers/probe-app.js';

const PRIVATE_JWK_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

const decodePart = (token: string, index: 0 | 1) =>
  JSON.parse(Buffer.from(token.split('.')[index]!, 'base64url').toString('utf8')) as Record<string, unknown>;

const basic = (id: string, secret: string) =>
  `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;

function expectOAuthError(res: LightMyRequestResponse, status: number, error: string) {
  expect(res.statusCode).toBe(status);
  const body = res.json() as Record<string, unknown>;
  expect(Object.keys(body).sort()).toEqual(['error', 'error_description']);
  expect(body.error).toBe(error);
  expect(typeof body.error_description).toBe('string');
  expect(res.headers['cache-control']).toBe('no-store');
  if (status === 401) expect(res.headers['www-authenticate']).toBeTruthy();
}

// The embedded authorization server, driven over real HTTP by a certified OAuth client library.
describe('embedded OAuth 2.0 token endpoint', () => {
  let t: ProbeApp;
  let issuer: string;
  let reader: CreatedClient;
  let networked: CreatedClient;
  let admin: CreatedClient;

  beforeAll(async () => {
    const port = await freePort();
    issuer = `http://127.0.0.1:${port}`;
    t = await createProbeApp({ env: { PORT: String(port), AUTH_ISSUER: issuer } });
    await t.app.listen({ port, host: '127.0.0.1' });
    const db = t.app.database.db;
    reader = await createClient(db, { name: 'reader', scopes: ['read:sessionpayment', 'write:sessionpayment', 'read:asset'] });
    networked = await createClient(db, { name: 'net-a operator', scopes: ['read:sessionpayment'], network: 'net_a' });
    admin = await createClient(db, { name: 'admin', scopes: ['write:chargingstationmodel', 'read:chargingstationmodel'], isAdmin: true });
  });
  afterAll(async () => {
    await t?.close();
  });

  const discover = (id: string, auth: client.ClientAuth) =>
    client.discovery(new URL(issuer), id, undefined, auth, { algorithm: 'oauth2', execute: [client.allowInsecureRequests] });

  const tokenRequest = (payload: string | Record<string, unknown>, headers: Record<string, string> = {}) =>
    t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: {
        'content-type': typeof payload === 'string' ? 'application/x-www-form-urlencoded' : 'application/json',
        ...headers,
      },
      payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
    });

  describe('with openid-client over HTTP', () => {
    it('discovers the server through RFC 8414 metadata', async () => {
      const config = await discover(reader.clientId, client.ClientSecretBasic(reader.clientSecret));
      const metadata = config.serverMetadata();
      expect(metadata.issuer).toBe(issuer);
      expect(metadata.token_endpoint).toBe(`${issuer}/oauth/token`);
      expect(metadata.jwks_uri).toBe(`${issuer}/.well-known/jwks.json`);
    });

    it('gets a token with client_secret_basic, and the token opens the API', async () => {
      const config = await discover(reader.clientId, client.ClientSecretBasic(reader.clientSecret));
      const tokens = await client.clientCredentialsGrant(config, { scope: 'read:sessionpayment' });
      expect(tokens.token_type.toLowerCase()).toBe('bearer');
      expect(tokens.expires_in).toBe(3600);
      expect(tokens.scope).toBe('read:sessionpayment');

      const res = await fetch(`${issuer}${PAYMENTS_PROBE}`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { principal: unknown }).principal).toEqual({
        clientId: reader.clientId,
        scopes: ['read:sessionpayment'],
        network: null,
        isAdmin: false,
      });
    });

    it('gets a token with client_secret_post', async () => {
      const config = await discover(networked.clientId, client.ClientSecretPost(networked.clientSecret));
      const tokens = await client.clientCredentialsGrant(config);
      expect(tokens.scope).toBe('read:sessionpayment');
      const res = await fetch(`${issuer}${PAYMENTS_PROBE}`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { principal: { network: string } }).principal.network).toBe('net_a');
    });

    it('surfaces invalid_client to the library for a wrong secret', async () => {
      const config = await discover(reader.clientId, client.ClientSecretBasic('not-the-secret'));
      const failure = await client.clientCredentialsGrant(config).then(
        () => null,
        (error: unknown) => error,
      );
      // a 401 with a WWW-Authenticate challenge is reported as such by the library
      expect(failure).toBeInstanceOf(client.WWWAuthenticateChallengeError);
      const challenge = failure as client.WWWAuthenticateChallengeError;
      expect(challenge.status).toBe(401);
      expect(challenge.cause.map((c) => c.scheme)).toEqual(['basic']);
      expect(((await challenge.response.json()) as { error: string }).error).toBe('invalid_client');
    });
  });

  describe('request formats', () => {
    it('answers the standard form-urlencoded request with { access_token, token_type, expires_in, scope } and no-store', async () => {
      const res = await tokenRequest('grant_type=client_credentials', { authorization: basic(reader.clientId, reader.clientSecret) });
      expect(res.statusCode).toBe(200);
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      const body = res.json() as Record<string, unknown>;
      expect(Object.keys(body).sort()).toEqual(['access_token', 'expires_in', 'scope', 'token_type']);
      expect(body).toMatchObject({ token_type: 'Bearer', expires_in: 3600 });
      // no scope requested: every scope of the client
      expect(String(body.scope).split(' ').sort()).toEqual(['read:asset', 'read:sessionpayment', 'write:sessionpayment']);
    });

    it('accepts client_secret_post in a form body', async () => {
      const form = new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: reader.clientId,
        client_secret: reader.clientSecret,
        scope: 'read:asset',
      });
      const res = await tokenRequest(form.toString());
      expect(res.statusCode).toBe(200);
      expect((res.json() as { scope: string }).scope).toBe('read:asset');
    });

    it('accepts a JSON body (client_secret_post and client_secret_basic)', async () => {
      const post = await tokenRequest({
        grant_type: 'client_credentials',
        client_id: reader.clientId,
        client_secret: reader.clientSecret,
        scope: 'read:sessionpayment write:sessionpayment',
      });
      expect(post.statusCode).toBe(200);
      expect((post.json() as { scope: string }).scope).toBe('read:sessionpayment write:sessionpayment');

      const viaBasic = await tokenRequest({ grant_type: 'client_credentials' }, { authorization: basic(reader.clientId, reader.clientSecret) });
      expect(viaBasic.statusCode).toBe(200);
    });

    it('accepts the audience parameter when it names this API', async () => {
      const res = await tokenRequest(
        new URLSearchParams({ grant_type: 'client_credentials', audience: t.config.auth.audience }).toString(),
        { authorization: basic(reader.clientId, reader.clientSecret) },
      );
      expect(res.statusCode).toBe(200);
    });
  });

  describe('RFC 6749 §5.2 errors', () => {
    it('401 invalid_client for a wrong secret (Basic challenge when Basic was used)', async () => {
      const res = await tokenRequest('grant_type=client_credentials', { authorization: basic(reader.clientId, 'wrong') });
      expectOAuthError(res, 401, 'invalid_client');
      expect(res.headers['www-authenticate']).toMatch(/^Basic/);
    });

    it('401 invalid_client for a wrong secret in the body', async () => {
      const res = await tokenRequest(
        new URLSearchParams({ grant_type: 'client_credentials', client_id: reader.clientId, client_secret: 'wrong' }).toString(),
      );
      expectOAuthError(res, 401, 'invalid_client');
    });

    it('401 invalid_client for an unknown client', async () => {
      expectOAuthError(
        await tokenRequest('grant_type=client_credentials', { authorization: basic('cli_does_not_exist', 'whatever') }),
        401,
        'invalid_client',
      );
      expectOAuthError(
        await tokenRequest({ grant_type: 'client_credentials', client_id: 'cli_does_not_exist', client_secret: 'whatever' }),
        401,
        'invalid_client',
      );
    });

    it('401 invalid_client without any client authentication', async () => {
      expectOAuthError(await tokenRequest('grant_type=client_credentials'), 401, 'invalid_client');
    });

    it('401 invalid_client for a malformed Basic header', async () => {
      const res = await tokenRequest('grant_type=client_credentials', { authorization: `Basic ${Buffer.from('no-colon').toString('base64')}` });
      expectOAuthError(res, 401, 'invalid_client');
    });

    it('400 unsupported_grant_type for the password grant', async () => {
      const res = await tokenRequest('grant_type=password&username=a&password=b', { authorization: basic(reader.clientId, reader.clientSecret) });
      expectOAuthError(res, 400, 'unsupported_grant_type');
    });

    it('400 invalid_request without grant_type', async () => {
      expectOAuthError(await tokenRequest('scope=read:asset', { authorization: basic(reader.clientId, reader.clientSecret) }), 400, 'invalid_request');
      expectOAuthError(await tokenRequest({}, { authorization: basic(reader.clientId, reader.clientSecret) }), 400, 'invalid_request');
    });

    it('400 invalid_request for two authentication methods at once', async () => {
      const res = await tokenRequest(
        new URLSearchParams({ grant_type: 'client_credentials', client_id: reader.clientId, client_secret: reader.clientSecret }).toString(),
        { authorization: basic(reader.clientId, reader.clientSecret) },
      );
      expectOAuthError(res, 400, 'invalid_request');
    });

    it('400 invalid_request for malformed JSON, non-string fields and a foreign audience', async () => {
      const auth = { authorization: basic(reader.clientId, reader.clientSecret) };
      const malformed = await t.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { 'content-type': 'application/json', ...auth },
        payload: '{"grant_type": "client_credentials"',
      });
      expectOAuthError(malformed, 400, 'invalid_request');
      expectOAuthError(await tokenRequest({ grant_type: 'client_credentials', scope: ['read:asset'] }, auth), 400, 'invalid_request');
      expectOAuthError(await tokenRequest({ grant_type: 'client_credentials', audience: 'another-api' }, auth), 400, 'invalid_request');
    });

    // The route's Zod schema validates every parameter; its issues map to RFC 6749 §5.2 codes.
    it('400 unsupported_grant_type only when the grant type is the one problem; invalid_request for anything malformed', async () => {
      const auth = { authorization: basic(reader.clientId, reader.clientSecret) };
      expectOAuthError(await tokenRequest('grant_type=authorization_code&code=x', auth), 400, 'unsupported_grant_type');
      expectOAuthError(await tokenRequest({ grant_type: 'refresh_token', refresh_token: 'x' }, auth), 400, 'unsupported_grant_type');
      for (const payload of ['grant_type=', 'grant_type=password&scope=a%01b', 'grant_type=password&scope=a&scope=b']) {
        expectOAuthError(await tokenRequest(payload, auth), 400, 'invalid_request');
      }
      for (const payload of [[], 'client_credentials', { grant_type: 5 }, { grant_type: 'password', audience: { x: 1 } }]) {
        expectOAuthError(await tokenRequest(JSON.stringify(payload), { ...auth, 'content-type': 'application/json' }), 400, 'invalid_request');
      }
      const res = await tokenRequest('grant_type=password', auth);
      expect(res.json()).toEqual({ error: 'unsupported_grant_type', error_description: 'only the client_credentials grant is supported' });
    });

    // RFC 6749 §3.2: no parameter repeats, those the endpoint ignores included.
    it('400 invalid_request for a repeated or non-string parameter the endpoint does not use', async () => {
      const auth = { authorization: basic(reader.clientId, reader.clientSecret) };
      expectOAuthError(await tokenRequest('grant_type=client_credentials&resource=a&resource=b', auth), 400, 'invalid_request');
      expectOAuthError(await tokenRequest({ grant_type: 'client_credentials', resource: ['a'] }, auth), 400, 'invalid_request');
      expectOAuthError(await tokenRequest(`grant_type=client_credentials&resource=${'a'.repeat(1025)}`, auth), 400, 'invalid_request');
      // control: an ignored parameter that is one short string is ignored
      expect((await tokenRequest('grant_type=client_credentials&resource=a', auth)).statusCode).toBe(200);
    });

    it('400 invalid_scope for a scope the client lacks and for an unknown scope', async () => {
      const auth = { authorization: basic(reader.clientId, reader.clientSecret) };
      expectOAuthError(await tokenRequest('grant_type=client_credentials&scope=write%3Aasset', auth), 400, 'invalid_scope');
      expectOAuthError(await tokenRequest('grant_type=client_credentials&scope=read%3Aeverything', auth), 400, 'invalid_scope');
      expectOAuthError(await tokenRequest('grant_type=client_credentials&scope=read%3Aasset+admin', auth), 400, 'invalid_scope');
    });

    it('401 invalid_client once the client is revoked', async () => {
      const db = t.app.database.db;
      const doomed = await createClient(db, { name: 'doomed', scopes: ['read:asset'] });
      const before = await tokenRequest('grant_type=client_credentials', { authorization: basic(doomed.clientId, doomed.clientSecret) });
      expect(before.statusCode).toBe(200);
      expect(await revokeClient(db, doomed.clientId)).toBe(true);
      const after = await tokenRequest('grant_type=client_credentials', { authorization: basic(doomed.clientId, doomed.clientSecret) });
      expectOAuthError(after, 401, 'invalid_client');
    });
  });

  describe('issued tokens (RFC 9068)', () => {
    async function issue(c: CreatedClient, scope?: string) {
      const form = new URLSearchParams({ grant_type: 'client_credentials', ...(scope ? { scope } : {}) });
      const res = await tokenRequest(form.toString(), { authorization: basic(c.clientId, c.clientSecret) });
      expect(res.statusCode).toBe(200);
      return (res.json() as { access_token: string }).access_token;
    }

    it('has typ at+jwt, an asymmetric alg and a kid from the JWKS', async () => {
      const token = await issue(reader, 'read:sessionpayment');
      const header = decodePart(token, 0);
      expect(header.typ).toBe('at+jwt');
      expect(header.alg).toBe(t.config.auth.signingAlg);
      const jwks = (await t.app.inject({ url: '/.well-known/jwks.json' })).json() as { keys: { kid: string }[] };
      expect(jwks.keys.map((k) => k.kid)).toContain(header.kid);
    });

    it('carries iss, sub, aud, exp, iat, jti, client_id and scope', async () => {
      const first = decodePart(await issue(reader, 'read:sessionpayment read:asset'), 1);
      const second = decodePart(await issue(reader, 'read:sessionpayment read:asset'), 1);
      expect(first).toMatchObject({
        iss: issuer,
        sub: reader.clientId,
        client_id: reader.clientId,
        aud: t.config.auth.audience,
        scope: 'read:sessionpayment read:asset',
      });
      expect(typeof first.jti).toBe('string');
      expect(first.jti).not.toBe(second.jti);
      expect(Number(first.exp) - Number(first.iat)).toBe(3600);
      expect(Math.abs(Number(first.iat) - Date.now() / 1000)).toBeLessThan(120);
      expect(first).not.toHaveProperty('network');
      expect(first).not.toHaveProperty('roles');
    });

    it('carries the network claim for a network client and roles [admin] for an admin client', async () => {
      expect(decodePart(await issue(networked), 1)).toMatchObject({ network: 'net_a', scope: 'read:sessionpayment' });
      const adminToken = await issue(admin, 'write:chargingstationmodel');
      expect(decodePart(adminToken, 1)).toMatchObject({ roles: ['admin'] });
      const res = await t.app.inject({ url: ASSETS_PROBE, headers: { authorization: `Bearer ${adminToken}` } });
      expect(res.statusCode).toBe(200);
    });
  });

  describe('published metadata', () => {
    it('publishes public keys only, each with kid, alg and use', async () => {
      const res = await t.app.inject({ url: '/.well-known/jwks.json' });
      expect(res.statusCode).toBe(200);
      const { keys } = res.json() as { keys: Record<string, unknown>[] };
      expect(keys.length).toBeGreaterThan(0);
      for (const key of keys) {
        expect(key).toMatchObject({ kid: expect.any(String), alg: expect.any(String), use: 'sig' });
        for (const member of PRIVATE_JWK_MEMBERS) expect(key).not.toHaveProperty(member);
      }
    });

    it('publishes RFC 8414 authorization server metadata', async () => {
      const res = await t.app.inject({ url: '/.well-known/oauth-authorization-server' });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({
        issuer,
        token_endpoint: `${issuer}/oauth/token`,
        jwks_uri: `${issuer}/.well-known/jwks.json`,
        grant_types_supported: ['client_credentials'],
        token_endpoint_auth_methods_supported: expect.arrayContaining(['client_secret_basic', 'client_secret_post']),
      });
    });
  });
});

describe('embedded issuer with RS256', () => {
  let t: ProbeApp;
  beforeAll(async () => {
    t = await createProbeApp({ env: { AUTH_SIGNING_ALG: 'RS256' } });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('publishes an RSA public key without private members and its tokens verify', async () => {
    const { keys } = (await t.app.inject({ url: '/.well-known/jwks.json' })).json() as { keys: Record<string, unknown>[] };
    const rsa = keys.find((k) => k.alg === 'RS256');
    expect(rsa).toMatchObject({ kty: 'RSA', use: 'sig', kid: expect.any(String), n: expect.any(String), e: expect.any(String) });
    for (const member of PRIVATE_JWK_MEMBERS) expect(rsa).not.toHaveProperty(member);

    const c = await createClient(t.database.db, { name: 'rsa-reader', scopes: ['read:sessionpayment'] });
    const res = await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(c.clientId, c.clientSecret) },
      payload: 'grant_type=client_credentials',
    });
    expect(res.statusCode).toBe(200);
    const token = (res.json() as { access_token: string }).access_token;
    expect(decodePart(token, 0)).toMatchObject({ alg: 'RS256', typ: 'at+jwt' });
    expect((await t.app.inject({ url: PAYMENTS_PROBE, headers: { authorization: `Bearer ${token}` } })).statusCode).toBe(200);
  });
});

// Whatever bytes a token request carries, the answer is an RFC 6749 400 invalid_request
// or 401 invalid_client, never a 500 (PostgreSQL refuses NUL in text, so it must not get there).
describe('token requests carrying control characters, wrong types or overlong values', () => {
  let t: ProbeApp;
  let c: CreatedClient;
  beforeAll(async () => {
    t = await createProbeApp({ captureLogs: true });
    c = await createClient(t.database.db, { name: 'nul-target', scopes: ['read:sessionpayment'] });
  });
  afterAll(async () => {
    await t?.close();
  });

  type Field = 'client_id' | 'client_secret' | 'scope' | 'audience' | 'grant_type';
  type Transport = 'basic' | 'basic, percent-encoded' | 'form' | 'json';
  const FIELDS: Field[] = ['client_id', 'client_secret', 'scope', 'audience', 'grant_type'];
  const TRANSPORTS: Transport[] = ['basic', 'basic, percent-encoded', 'form', 'json'];
  const CONTROLS = ['\u0000', '\u0001', '\u0007', '\t', '\n', '\r\n', '\u001b[31m', '\u007f', '\u0085', '\u009f'];

  function request(transport: Transport, fields: Record<Field, unknown>) {
    const { client_id, client_secret, ...rest } = fields;
    const params = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined));
    if (transport === 'json') {
      return t.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify({ ...params, client_id, client_secret }),
      });
    }
    if (transport === 'form') {
      return t.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ ...(params as Record<string, string>), client_id: String(client_id), client_secret: String(client_secret) }).toString(),
      });
    }
    const encode = transport === 'basic' ? String : (v: unknown) => encodeURIComponent(String(v));
    return t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${encode(client_id)}:${encode(client_secret)}`).toString('base64')}`,
      },
      payload: new URLSearchParams(params as Record<string, string>).toString(),
    });
  }

  const valid = (): Record<Field, unknown> => ({
    client_id: c.clientId,
    client_secret: c.clientSecret,
    scope: 'read:sessionpayment',
    audience: t.config.auth.audience,
    grant_type: 'client_credentials',
  });

  function expectRefused(res: LightMyRequestResponse, label: string) {
    expect([400, 401], `${label}: ${res.statusCode} ${res.body}`).toContain(res.statusCode);
    expectOAuthError(res, res.statusCode, res.statusCode === 400 ? 'invalid_request' : 'invalid_client');
  }

  // No 500 (which logs the error at level 50) and no line with the secret in it.
  function expectCleanLog() {
    const lines = t.logLines();
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) {
      expect(line).not.toContain(c.clientSecret);
      expect(JSON.parse(line)).not.toMatchObject({ level: 50 });
    }
  }

  it('tokenParameter refuses every string with a control character and passes every other short string', () => {
    const control = fc.integer({ min: 0, max: 0x9f }).filter((n) => n < 0x20 || n >= 0x7f).map((n) => String.fromCharCode(n));
    fc.assert(
      fc.property(fc.string({ maxLength: 50 }), control, fc.string({ maxLength: 50 }), (before, ctl, after) => {
        expect(() => tokenParameter(`${before}${ctl}${after}`, 'scope')).toThrow(expect.objectContaining({ error: 'invalid_request' }));
      }),
    );
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 100 }).filter((v) => !/\p{Cc}/u.test(v)), (value) => {
        expect(tokenParameter(value, 'scope')).toBe(value);
      }),
    );
  });

  it('control for the cases below: the unaltered request gets a token in every transport', async () => {
    for (const transport of TRANSPORTS) expect((await request(transport, valid())).statusCode, transport).toBe(200);
  });

  it('answers 400 invalid_request or 401 invalid_client for a control character in any field, in any transport', async () => {
    for (const transport of TRANSPORTS) {
      for (const field of FIELDS) {
        for (const control of CONTROLS) {
          for (const place of ['start', 'end', 'alone'] as const) {
            const fields = valid();
            const value = String(fields[field]);
            fields[field] = place === 'alone' ? control : place === 'start' ? `${control}${value}` : `${value}${control}`;
            expectRefused(await request(transport, fields), `${transport} ${field} ${JSON.stringify(fields[field])}`);
          }
        }
      }
    }
    expectCleanLog();
  });

  it('answers 400 or 401 for overlong values, and for arrays, objects, numbers and booleans in a JSON body', async () => {
    for (const transport of TRANSPORTS) {
      for (const field of FIELDS) {
        const fields = valid();
        fields[field] = 'x'.repeat(transport.startsWith('basic') || transport === 'form' ? 3000 : 20_000);
        expectRefused(await request(transport, fields), `${transport} ${field} overlong`);
      }
    }
    for (const field of FIELDS) {
      for (const value of [[valid()[field]], [], { value: valid()[field] }, {}, 1, true]) {
        const fields = valid();
        fields[field] = value;
        expectRefused(await request('json', fields), `json ${field} ${JSON.stringify(value)}`);
      }
    }
    expectCleanLog();
  });

  it('refuses control characters in parameters it does not use, and a repeated parameter', async () => {
    const auth = { authorization: basic(c.clientId, c.clientSecret), 'content-type': 'application/x-www-form-urlencoded' };
    for (const payload of ['grant_type=client_credentials&resource=a%00b', 'grant_type=client_credentials&x%00y=1', 'grant_type=client_credentials&grant_type=client_credentials']) {
      expectRefused(await t.app.inject({ method: 'POST', url: '/oauth/token', headers: auth, payload }), payload);
    }
    expectRefused(await t.app.inject({ method: 'POST', url: '/oauth/token?x=%00', headers: auth, payload: 'grant_type=client_credentials' }), 'query');
    expectCleanLog();
  });
});

describe('clients create --network (the CLI path)', () => {
  let database: Database;
  beforeAll(async () => {
    database = await createTestDatabase();
    await database.migrate();
  });
  afterAll(async () => {
    await database?.close();
  });

  it('refuses a network no payment or asset could be recorded with, and stores nothing', async () => {
    for (const network of ['', ' net_a', 'net_a ', 'net,a', 'net\u200ba', 'net\u202ea', 'net\u0000a', 'n'.repeat(129)]) {
      await expect(createClient(database.db, { name: 'x', scopes: ['read:sessionpayment'], network }), JSON.stringify(network)).rejects.toThrow(ClientInputError);
    }
    expect(await listClients(database.db)).toEqual([]);
  });

  it('stores the network in NFC, as payments and assets store theirs', async () => {
    const created = await createClient(database.db, { name: 'x', scopes: ['read:sessionpayment'], network: 'Re\u0301seau' });
    expect(created.network).toBe('R\u00e9seau');
    expect((await listClients(database.db)).map((c) => c.network)).toEqual(['R\u00e9seau']);
  });
});

describe('embedded issuer at PUBLIC_URL', () => {
  it('signs with PUBLIC_URL as the address clients use, spelt as they compare it, and publishes its metadata under it', async () => {
    const t = await createProbeApp({ env: { PUBLIC_URL: 'HTTPS://Charging.Example.test/' } });
    try {
      const issuer = 'https://charging.example.test';
      const metadata = await t.app.inject({ url: '/.well-known/oauth-authorization-server' });
      expect(metadata.statusCode).toBe(200);
      expect(metadata.json()).toMatchObject({ issuer, token_endpoint: `${issuer}/oauth/token`, jwks_uri: `${issuer}/.well-known/jwks.json` });
      const client = await createClient(t.database.db, { name: 'public-url', scopes: ['read:sessionpayment'] });
      const accessToken = await embeddedIssuerToken(t.app, client);
      expect(JSON.parse(Buffer.from(accessToken.split('.')[1]!, 'base64url').toString())).toMatchObject({ iss: issuer });
      // The service takes its own token: the iss it checks is the one it signs with.
      const list = await t.app.inject({ url: PAYMENTS_PROBE, headers: { authorization: `Bearer ${accessToken}` } });
      expect(list.statusCode, list.body).toBe(200);
    } finally {
      await t.close();
    }
  });
});

describe('embedded issuer whose AUTH_ISSUER ends in a slash', () => {
  it('the metadata keeps the issuer as configured (iss must match it exactly) and puts the token endpoint and the keys under it without a double slash', async () => {
    const t = await createProbeApp({ env: { AUTH_ISSUER: 'https://payments.example.test/' } });
    try {
      const res = await t.app.inject({ url: '/.well-known/oauth-authorization-server' });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({
        issuer: 'https://payments.example.test/',
        token_endpoint: 'https://payments.example.test/oauth/token',
        jwks_uri: 'https://payments.example.test/.well-known/jwks.json',
      });
    } finally {
      await t.close();
    }
  });
});

