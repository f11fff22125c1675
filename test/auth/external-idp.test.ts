import { OAuth2Server, type MutableToken } from 'oauth2-mock-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ASSETS_PROBE, PAYMENTS_PROBE, createProbeApp, type ProbeApp } from '../helpers/probe-app.js';

const AUDIENCE = 'charging-network-api-test';

// A real third-party OAuth 2.0 server on loopback (oauth2-mock-server): the service fetches its
// JWKS over HTTP and verifies the RS256 tokens it issues.
describe('external identity provider (AUTH_JWKS_URL)', () => {
  let idp: OAuth2Server;
  let issuer: string;
  let t: ProbeApp;

  beforeAll(async () => {
    idp = new OAuth2Server();
    await idp.issuer.keys.generate('RS256');
    await idp.start(0, '127.0.0.1');
    issuer = idp.issuer.url!;
    t = await createProbeApp({
      env: { AUTH_JWKS_URL: `${issuer}/jwks`, AUTH_ISSUER: issuer, AUTH_AUDIENCE: AUDIENCE },
    });
  });
  afterAll(async () => {
    await t?.close();
    await idp?.stop();
  });

  // Gets a token from the provider's token endpoint; shape() edits the claims before signing.
  async function tokenFromIdp(shape: (token: MutableToken) => void): Promise<string> {
    idp.service.once('beforeTokenSigning', (token: MutableToken) => {
      token.payload.aud = AUDIENCE;
      token.payload.azp = 'idp-client-1';
      shape(token);
    });
    const res = await fetch(`${issuer}/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from('idp-client-1:idp-secret').toString('base64')}`,
      },
      body: new URLSearchParams({ grant_type: 'client_credentials', scope: 'read:sessionpayment' }).toString(),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { access_token: string; token_type: string };
    expect(body.token_type).toBe('Bearer');
    return body.access_token;
  }

  const probe = (token: string, url = PAYMENTS_PROBE) => t.app.inject({ url, headers: { authorization: `Bearer ${token}` } });

  function expect401(res: Awaited<ReturnType<typeof probe>>) {
    expect(res.statusCode).toBe(401);
    expect(Object.keys(res.json() as object)).toEqual(['message']);
    expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
  }

  it('accepts a token issued by the provider, with its scope and network', async () => {
    const token = await tokenFromIdp((tok) => {
      tok.payload.scope = 'read:sessionpayment';
      tok.payload.network = 'net_a';
    });
    expect(JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString())).toMatchObject({ alg: 'RS256' });
    const res = await probe(token);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      principal: { clientId: 'idp-client-1', scopes: ['read:sessionpayment'], network: 'net_a', isAdmin: false },
    });
  });

  it('reads roles from the provider token (admin route)', async () => {
    const token = await tokenFromIdp((tok) => {
      tok.payload.scope = 'write:chargingstationmodel';
      tok.payload.roles = ['admin'];
    });
    const res = await probe(token, ASSETS_PROBE);
    expect(res.statusCode).toBe(200);
    expect((res.json() as { principal: { isAdmin: boolean; network: string | null } }).principal).toMatchObject({ isAdmin: true, network: null });
  });

  // A provider that writes the claim as null (or anything but a name) must not get every network.
  it.each([null, '', 5, [], ['net_a'], {}])('rejects a provider token whose network claim is %j', async (network) => {
    const token = await tokenFromIdp((tok) => {
      tok.payload.scope = 'read:sessionpayment';
      tok.payload.network = network;
    });
    expect(JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString())).toHaveProperty('network', network);
    expect401(await probe(token));
  });

  it('answers 403 for a provider token without the scope', async () => {
    const token = await tokenFromIdp((tok) => {
      tok.payload.scope = 'read:asset';
    });
    const res = await probe(token);
    expect(res.statusCode).toBe(403);
    expect(res.json()).toEqual({ code: 'FORBIDDEN', message: expect.any(String), status: 403 });
  });

  it('rejects a token whose payload was tampered with', async () => {
    const token = await tokenFromIdp((tok) => {
      tok.payload.scope = 'read:asset';
      tok.payload.network = 'net_a';
    });
    const [header, payload, signature] = token.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<string, unknown>;
    claims.scope = 'read:sessionpayment';
    delete claims.network;
    expect401(await probe(`${header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${signature}`));
  });

  it('rejects a token whose signature was altered', async () => {
    const token = await tokenFromIdp((tok) => {
      tok.payload.scope = 'read:sessionpayment';
    });
    const [header, payload, signature] = token.split('.') as [string, string, string];
    const bytes = Buffer.from(signature, 'base64url');
    bytes[10] = bytes[10]! ^ 0x01;
    expect401(await probe(`${header}.${payload}.${bytes.toString('base64url')}`));
  });

  it('rejects a provider token for another audience', async () => {
    const token = await tokenFromIdp((tok) => {
      tok.payload.scope = 'read:sessionpayment';
      tok.payload.aud = 'some-other-api';
    });
    expect401(await probe(token));
  });

  it('rejects a provider-signed token that names another issuer', async () => {
    const token = await tokenFromIdp((tok) => {
      tok.payload.scope = 'read:sessionpayment';
      tok.payload.iss = 'https://evil.example';
    });
    expect401(await probe(token));
  });

  it('rejects an expired provider token', async () => {
    const token = await tokenFromIdp((tok) => {
      tok.payload.scope = 'read:sessionpayment';
      tok.payload.iat = Math.floor(Date.now() / 1000) - 3600;
      tok.payload.exp = Math.floor(Date.now() / 1000) - 120;
    });
    expect401(await probe(token));
  });

  it('has no embedded token endpoint or JWKS in external mode', async () => {
    const token = await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'grant_type=client_credentials&client_id=x&client_secret=y',
    });
    expect(token.statusCode).toBe(404);
    expect(Object.keys(token.json() as object)).toEqual(['message']);
    expect((await t.app.inject({ url: '/.well-known/jwks.json' })).statusCode).toBe(404);
    expect((await t.app.inject({ url: '/.well-known/oauth-authorization-server' })).statusCode).toBe(404);
    expect(t.app.auth.tokens).toBeNull();
  });
});
