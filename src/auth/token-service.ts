import { createPrivateKey, randomUUID } from 'node:crypto';
import { createSigner } from 'fast-jwt';
import type { AppConfig } from '../kernel/config.js';
import type { Db } from '../db/database.js';
import { authenticateClient } from './clients-service.js';
import { OAuthError } from './oauth-error.js';
import { isScope, parseScopeList } from './scopes.js';
import { tokenParameter } from './token-parameters.js';
import type { SigningKeyRow } from './signing-keys-repository.js';

export interface TokenClaims {
  clientId: string;
  scopes: string[];
  network?: string | null | undefined;
  isAdmin?: boolean | undefined;
  audience?: string | undefined;
}

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  scope: string;
}

// A client credentials request whose parameters passed the route's schema (token-parameters.ts).
export interface TokenRequest {
  scope?: string | undefined;
  audience?: string | undefined;
  // client credentials as presented, by Basic header (still to be checked) or in the body
  basic: { clientId: string; clientSecret: string } | null;
  bodyClientId?: string | undefined;
  bodyClientSecret?: string | undefined;
}

export type TokenService = ReturnType<typeof createTokenService>;

export function createTokenService(deps: { db: Db; auth: AppConfig['auth']; key: SigningKeyRow }) {
  const { auth, key } = deps;
  const privatePem = createPrivateKey({ key: deps.key.privateJwk, format: 'jwk' }).export({ type: 'pkcs8', format: 'pem' }).toString();
  const sign = createSigner({
    key: privatePem,
    algorithm: key.alg as 'ES256' | 'RS256',
    kid: key.kid,
    header: { alg: key.alg, typ: 'at+jwt' },
    iss: auth.issuer,
    expiresIn: auth.tokenTtlSeconds * 1000,
  });

  function issue(claims: TokenClaims): TokenResponse {
    // RFC 9068 access token claims; network and roles use the configured claim names so that
    // tokens from this issuer and from an external one read the same.
    const payload: Record<string, unknown> = {
      sub: claims.clientId,
      client_id: claims.clientId,
      aud: claims.audience ?? auth.audience,
      jti: randomUUID(),
      scope: claims.scopes.join(' '),
    };
    // Defined, not assigned: assigning to a claim named "__proto__" would silently drop it, and a
    // network client's token would then read as unscoped.
    if (claims.network) Object.defineProperty(payload, auth.networkClaim, { value: claims.network, enumerable: true });
    if (claims.isAdmin) Object.defineProperty(payload, auth.rolesClaim, { value: ['admin'], enumerable: true });
    return {
      access_token: sign(payload),
      token_type: 'Bearer',
      expires_in: auth.tokenTtlSeconds,
      scope: claims.scopes.join(' '),
    };
  }

  async function clientCredentialsGrant(req: TokenRequest): Promise<TokenResponse> {
    // The Basic credentials follow the body parameters' rule, checked before anything is acted on,
    // so nothing malformed reaches the database.
    const { bodyClientId: bodyId, bodyClientSecret: bodySecret, scope: scopeParam, audience } = req;
    const basicId = req.basic ? tokenParameter(req.basic.clientId, 'client_id') : undefined;
    const basicSecret = req.basic ? tokenParameter(req.basic.clientSecret, 'client_secret') : undefined;
    if (req.basic && (bodyId !== undefined || bodySecret !== undefined)) {
      throw new OAuthError('invalid_request', 'use exactly one client authentication method', true);
    }
    const clientId = req.basic ? basicId : bodyId;
    const clientSecret = req.basic ? basicSecret : bodySecret;
    if (!clientId || !clientSecret) {
      throw new OAuthError('invalid_client', 'client authentication is required', req.basic !== null || bodyId === undefined);
    }
    if (audience !== undefined && audience !== auth.audience) {
      throw new OAuthError('invalid_request', `audience must be ${auth.audience}`);
    }
    const client = await authenticateClient(deps.db, clientId, clientSecret);
    if (!client) throw new OAuthError('invalid_client', 'client authentication failed', req.basic !== null);

    let scopes = client.scopes;
    if (scopeParam !== undefined && scopeParam.trim() !== '') {
      const requested = parseScopeList(scopeParam);
      const unknown = requested.filter((s) => !isScope(s));
      if (unknown.length > 0) throw new OAuthError('invalid_scope', `unknown scope: ${unknown.join(' ')}`);
      const notAllowed = requested.filter((s) => !client.scopes.includes(s));
      if (notAllowed.length > 0) throw new OAuthError('invalid_scope', `scope not allowed for this client: ${notAllowed.join(' ')}`);
      scopes = requested;
    }
    return issue({ clientId: client.id, scopes, network: client.network, isAdmin: client.isAdmin, audience });
  }

  return { issue, clientCredentialsGrant };
}

export function parseBasicAuthorization(header: string | undefined): { clientId: string; clientSecret: string } | null | 'malformed' {
  if (!header || !/^basic /i.test(header)) return null;
  const decoded = Buffer.from(header.slice(6).trim(), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return 'malformed';
  try {
    // RFC 6749 §2.3.1: id and secret are form-urlencoded before being joined.
    return {
      clientId: decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' ')),
      clientSecret: decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, ' ')),
    };
  } catch {
    return 'malformed';
  }
}
