import * as client from 'openid-client';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, revokeClient, type CreatedClient } from '../../src/auth/clients-service.js';
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
    const db = t.app.services.database.db;
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

    it('400 invalid_scope for a scope the client lacks and for an unknown scope', async () => {
      const auth = { authorization: basic(reader.clientId, reader.clientSecret) };
      expectOAuthError(await tokenRequest('grant_type=client_credentials&scope=write%3Aasset', auth), 400, 'invalid_scope');
      expectOAuthError(await tokenRequest('grant_type=client_credentials&scope=read%3Aeverything', auth), 400, 'invalid_scope');
      expectOAuthError(await tokenRequest('grant_type=client_credentials&scope=read%3Aasset+admin', auth), 400, 'invalid_scope');
    });

    it('401 invalid_client once the client is revoked', async () => {
      const db = t.app.services.database.db;
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
