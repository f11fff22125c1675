import fastifyJwt from '@fastify/jwt';
import fp from 'fastify-plugin';
import type { FastifyInstance, FastifyRequest, onRequestHookHandler } from 'fastify';
import type { AppConfig } from '../kernel/config.js';
import type { Database } from '../db/database.js';
import { ForbiddenError, UnauthorizedError } from '../kernel/errors.js';
import { canonicalText } from '../kernel/identifiers.js';
import { createBootstrapClientIfNone, type CreatedClient } from './clients-service.js';
import { createDatabaseKeyResolver, createJwksKeyResolver, type KeyResolver } from './key-resolver.js';
import { OAUTH_ERROR_FAMILY } from './oauth-error-family.js';
import type { Principal } from './principal.js';
import { createRevocationList, type RevocationList } from './revocation-list.js';
import type { Scope } from './scopes.js';
import { ensureSigningKey } from './signing-keys-service.js';
import { createTokenService, type TokenService } from './token-service.js';
import { createVerifiedTokens } from './verified-tokens.js';
import './principal.js';

// Asymmetric algorithms only: with HMAC allowed, a public key could be replayed as a shared secret.
const ALGORITHMS = ['ES256', 'ES384', 'ES512', 'RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'EdDSA'] as const;
// 30 s of clock skew, in milliseconds as fast-jwt takes it.
const CLOCK_TOLERANCE_MS = 30_000;
// Verified tokens are remembered (by fast-jwt, and as principals) until they expire, at most this long.
const TOKEN_CACHE_ENTRIES = 10_000;
const TOKEN_CACHE_MS = 600_000;

export interface AuthPluginOptions {
  auth: AppConfig['auth'];
  database: Database;
}

export interface AuthServices {
  // The embedded issuer's; null with an external identity provider.
  tokens: TokenService | null;
  // The embedded issuer's first start: creates the bootstrap admin client when the database has
  // no client (null otherwise). The server calls it only once it listens, so a start that fails
  // before (port taken, bad HOST) keeps no client whose secret nobody was shown.
  createBootstrapClient(): Promise<CreatedClient | null>;
  // The principal of the request's bearer token once it is verified (signature, claims, not
  // revoked); rejects with UnauthorizedError for a missing, invalid, expired or revoked token.
  // Verified once per request: the rate limiter keys on it before the authentication hook runs,
  // and that hook reuses the outcome. Errors that say nothing about the token (the database
  // while keys reload) are thrown as they are.
  verify(request: FastifyRequest): Promise<Principal>;
  // The same, null without a usable token.
  verifiedPrincipal(request: FastifyRequest): Promise<Principal | null>;
}

declare module 'fastify' {
  interface FastifyInstance {
    auth: AuthServices;
  }
}

// Everything about who calls: the embedded issuer (signing key, tokens, bootstrap client,
// revocations) or the external provider's keys, and the verification of a request's bearer token.
// The root hook that demands one is the authentication plugin's, registered after the rate
// limiter's; the token endpoint is oauth-routes.ts's.
async function authPlugin(app: FastifyInstance, opts: AuthPluginOptions) {
  const { auth, database } = opts;
  const embedded = auth.mode === 'embedded';
  // Several replicas may start at once: one signing key and one bootstrap client between them.
  const signingKey = embedded ? await database.withStartupLock((db) => ensureSigningKey(db, auth.signingAlg)) : null;

  let keyResolver: KeyResolver;
  let tokens: TokenService | null = null;
  // Revocation concerns the embedded issuer's clients only; an external provider revokes its own.
  let revocations: RevocationList | null = null;
  if (!signingKey) {
    keyResolver = createJwksKeyResolver({
      jwksUrl: auth.jwksUrl!,
      cacheTtlSeconds: auth.jwksCacheTtlSeconds,
      refetchIntervalSeconds: auth.jwksRefetchIntervalSeconds,
    });
  } else {
    const resolver = createDatabaseKeyResolver({
      db: database.db,
      cacheTtlSeconds: auth.jwksCacheTtlSeconds,
      refetchIntervalSeconds: auth.jwksRefetchIntervalSeconds,
    });
    await resolver.refresh();
    keyResolver = resolver;
    tokens = createTokenService({ db: database.db, auth, key: signingKey });
    revocations = createRevocationList({ db: database.db, refreshSeconds: auth.revocationRefreshSeconds });
  }
  const createBootstrapClient = async () => (embedded ? database.withStartupLock((db) => createBootstrapClientIfNone(db)) : null);

  const verifiedTokens = createVerifiedTokens({ maxEntries: TOKEN_CACHE_ENTRIES, maxAgeMs: TOKEN_CACHE_MS, clockToleranceMs: CLOCK_TOLERANCE_MS });
  // A token this process verified before, with the keys it has now, skips the decode and the
  // key lookup (verified-tokens.ts); any other goes through @fastify/jwt.
  const principalOf = async (request: FastifyRequest): Promise<Principal> => {
    const token = bearerToken(request.headers.authorization);
    // Read before verifying: a reload during the verification makes the entry stale, never newer.
    const keysVersion = keyResolver.version();
    if (token !== undefined) {
      const cached = verifiedTokens.get(token, keysVersion);
      if (cached) return cached;
    }
    // Only a header that passed authenticate's full check gets its token remembered.
    const { principal, claims } = await authenticate(request, auth);
    if (token !== undefined && keysVersion !== null) verifiedTokens.set(token, keysVersion, claims, principal);
    return principal;
  };

  const verifications = new WeakMap<FastifyRequest, Promise<Principal>>();
  // Rejects with UnauthorizedError for a missing, invalid, expired or revoked token.
  const verify = (request: FastifyRequest): Promise<Principal> => {
    let verification = verifications.get(request);
    if (!verification) {
      verification = (async () => {
        const principal = await principalOf(request);
        // After the caches of verified tokens, so a cached token of a revoked client is refused too.
        if (revocations && (await revocations.isRevoked(principal.clientId))) {
          request.log.info({ clientId: principal.clientId }, 'access token of a revoked client');
          throw new UnauthorizedError('Access token belongs to a revoked client');
        }
        // Known from here on, also to a request the rate limiter refuses before authentication
        // completes: its log line still names the client.
        request.principal = principal;
        return principal;
      })();
      verifications.set(request, verification);
    }
    return verification;
  };
  const verifiedPrincipal = (request: FastifyRequest): Promise<Principal | null> =>
    verify(request).catch((error: unknown) => {
      if (error instanceof UnauthorizedError) return null;
      throw error;
    });
  app.decorate('auth', { tokens, createBootstrapClient, verify, verifiedPrincipal });

  await app.register(fastifyJwt, {
    secret: async (_request: FastifyRequest, token: unknown) => {
      const header = (token as { header?: { kid?: string; alg?: string } }).header ?? {};
      return keyResolver.resolve(header);
    },
    decode: { complete: true },
    verify: {
      algorithms: [...ALGORITHMS],
      allowedIss: auth.issuer,
      allowedAud: auth.audience,
      clockTolerance: CLOCK_TOLERANCE_MS,
      requiredClaims: ['exp'],
      // A repeated token skips the signature check until it expires or the TTL passes.
      cache: TOKEN_CACHE_ENTRIES,
      cacheTTL: TOKEN_CACHE_MS,
    },
  });

  app.decorateRequest('principal', null as unknown as Principal);

  // Answers under /oauth/ take RFC 6749's bodies with an external provider too (no route serves them then).
  app.errorFamilies.register(OAUTH_ERROR_FAMILY);
}

async function authenticate(request: FastifyRequest, auth: AppConfig['auth']): Promise<{ principal: Principal; claims: Record<string, unknown> }> {
  const header = request.headers.authorization;
  if (!header) throw new UnauthorizedError('Access token is missing');
  // The scheme is case-insensitive (RFC 7235 §2.1); the token is RFC 6750's b64token.
  if (!/^Bearer [A-Za-z0-9\-._~+/]+=*$/i.test(header)) {
    throw new UnauthorizedError('Authorization header must be "Bearer <access token>"');
  }
  let payload: Record<string, unknown>;
  try {
    const verified = (await request.jwtVerify()) as { payload?: Record<string, unknown> } | Record<string, unknown>;
    payload = ('payload' in verified && verified.payload ? verified.payload : verified) as Record<string, unknown>;
  } catch (error) {
    // Only a token that failed verification is a 401. Anything else (a database error while the
    // keys reload) says nothing about the token and must not tell a valid client to go away.
    if (!isVerificationFailure(error)) throw error;
    request.log.info({ reason: (error as { code?: string }).code ?? (error as Error).message }, 'access token rejected');
    if (error instanceof UnauthorizedError) throw error;
    throw new UnauthorizedError('Access token is invalid or expired');
  }
  return { principal: toPrincipal(payload, auth), claims: payload };
}

// The token of a Bearer Authorization header (the scheme in any case, RFC 7235 §2.1), so that
// spellings of the scheme share one entry of the verified tokens' cache; undefined otherwise.
function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined || header.length <= 7 || header.charCodeAt(6) !== 32) return undefined;
  return header.slice(0, 6).toLowerCase() === 'bearer' ? header.slice(7) : undefined;
}

// Our key resolvers throw UnauthorizedError; fast-jwt throws FAST_JWT_* TokenErrors (malformed,
// expired, bad signature…), which @fastify/jwt passes on or rewraps as FST_JWT_* errors.
function isVerificationFailure(error: unknown): boolean {
  if (error instanceof UnauthorizedError) return true;
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('FAST_JWT_') || code.startsWith('FST_JWT_'));
}

// Own properties only: with a claim named e.g. "constructor" or "toString", an absent claim would
// otherwise be answered by Object.prototype.
function ownClaim(payload: Record<string, unknown>, name: string): unknown {
  return Object.getOwnPropertyDescriptor(payload, name)?.value;
}

export function toPrincipal(payload: Record<string, unknown>, auth: Pick<AppConfig['auth'], 'networkClaim' | 'rolesClaim'>): Principal {
  const scopes = new Set<string>();
  const scope = ownClaim(payload, 'scope');
  if (typeof scope === 'string') for (const s of scope.split(' ')) if (s) scopes.add(s);
  for (const claim of ['scp', 'permissions']) {
    const v = ownClaim(payload, claim);
    if (Array.isArray(v)) for (const s of v) if (typeof s === 'string') scopes.add(s);
    if (typeof v === 'string') for (const s of v.split(' ')) if (s) scopes.add(s);
  }
  // Only an absent claim means every network: null, "" or any other non-string must not widen.
  const rawNetwork = ownClaim(payload, auth.networkClaim);
  if (Object.hasOwn(payload, auth.networkClaim) && (typeof rawNetwork !== 'string' || rawNetwork.length === 0)) {
    throw new UnauthorizedError('Access token has an unreadable network claim');
  }
  const roles = ownClaim(payload, auth.rolesClaim);
  const clientId = ['client_id', 'azp', 'sub'].map((c) => ownClaim(payload, c)).find((v): v is string => typeof v === 'string') ?? 'unknown';
  return {
    clientId,
    scopes,
    // Networks are stored in NFC: an identity provider spelling the claim decomposed means the same one.
    network: typeof rawNetwork === 'string' ? canonicalText(rawNetwork) : null,
    isAdmin: Array.isArray(roles) && roles.includes('admin'),
  };
}

// What a route's access hooks demand, read by the API reference: the hooks are the one source of
// who may call an operation, and the document says the same.
export interface AccessRule {
  // any one of these scopes suffices
  scopes?: readonly Scope[];
  admin?: { allNetworks: boolean };
}
const accessRules = new WeakMap<object, AccessRule>();

export function accessRuleOf(hook: unknown): AccessRule | undefined {
  return typeof hook === 'function' ? accessRules.get(hook) : undefined;
}

// Synchronous hooks: an async one costs every request a promise and a microtask turn.
export function requireScope(...anyOf: Scope[]): onRequestHookHandler {
  const hook: onRequestHookHandler = (request, _reply, done) => {
    if (anyOf.some((s) => request.principal.scopes.has(s))) {
      done();
      return;
    }
    done(new ForbiddenError(anyOf.length === 1 ? `Access token lacks the scope ${anyOf[0]}` : `Access token needs one of the scopes ${anyOf.join(', ')}`));
  };
  accessRules.set(hook, { scopes: anyOf });
  return hook;
}

// allNetworks: the operation changes what every network shares (the station model catalogue), so
// an admin whose token is scoped to one network may not perform it.
export function requireAdmin(options: { allNetworks?: boolean } = {}): onRequestHookHandler {
  const hook: onRequestHookHandler = (request, _reply, done) => {
    if (!request.principal.isAdmin) {
      done(new ForbiddenError('Only admins may perform this operation'));
    } else if (options.allNetworks && request.principal.network !== null) {
      done(new ForbiddenError('Only admins without a network claim may perform this operation: it affects every network'));
    } else {
      done();
    }
  };
  accessRules.set(hook, { admin: { allNetworks: options.allNetworks ?? false } });
  return hook;
}

// Its start-up work reads the signing keys: the database is migrated first.
export default fp(authPlugin, { name: 'auth', dependencies: ['error-handler', 'database'] });
