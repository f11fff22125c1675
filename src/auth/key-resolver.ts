import { createPublicKey } from 'node:crypto';
import buildGetJwks from 'get-jwks';
import { UnauthorizedError } from '../errors.js';
import type { Db } from '../db/database.js';
import { listVerificationKeys } from './signing-keys-repository.js';

export interface JwtHeader {
  kid?: string;
  alg?: string;
}

export interface KeyResolver {
  resolve(header: JwtHeader): Promise<string>;
}

// Unknown key ids are the cheap attack: without a throttle every forged token would trigger a fetch.
class RefetchThrottle {
  private last = Number.NEGATIVE_INFINITY;
  constructor(private readonly intervalMs: number) {}
  tryAcquire(now = Date.now()): boolean {
    if (now - this.last < this.intervalMs) return false;
    this.last = now;
    return true;
  }
}

export function createJwksKeyResolver(options: {
  jwksUrl: string;
  cacheTtlSeconds: number;
  refetchIntervalSeconds: number;
}): KeyResolver {
  // get-jwks builds the JWKS address from a "domain" and a path; we split the configured URL so
  // the address never comes from the token (its iss), which would let a token pick our fetch target.
  const url = new URL(options.jwksUrl);
  const domain = `${url.origin}/`;
  const jwksPath = `${url.pathname.replace(/^\//, '')}${url.search}`;
  const jwks = buildGetJwks({ jwksPath, ttl: options.cacheTtlSeconds * 1000, max: 100 });
  const throttle = new RefetchThrottle(options.refetchIntervalSeconds * 1000);
  return {
    async resolve(header) {
      const { kid, alg } = header;
      if (!kid || !alg) throw new UnauthorizedError('Access token header has no key id');
      const cacheKey = jwks.generateCacheKey(alg, kid, domain);
      if (jwks.cache.get(cacheKey) === undefined && jwks.staleCache.get(cacheKey) === undefined && !throttle.tryAcquire()) {
        throw new UnauthorizedError('Access token is signed with an unknown key');
      }
      try {
        return await jwks.getPublicKey({ domain, alg, kid });
      } catch (cause) {
        // get-jwks reports unknown kids and fetch failures alike; to the client both are an
        // unusable token, never a 500.
        throw new UnauthorizedError('Access token is signed with an unknown key', true, { cause });
      }
    },
  };
}

export function createDatabaseKeyResolver(options: {
  db: Db;
  cacheTtlSeconds: number;
  refetchIntervalSeconds: number;
}): KeyResolver & { refresh(): Promise<void> } {
  let keys = new Map<string, string>();
  let loadedAt = Number.NEGATIVE_INFINITY;
  let inFlight: Promise<void> | null = null;
  const throttle = new RefetchThrottle(options.refetchIntervalSeconds * 1000);

  async function load(): Promise<void> {
    inFlight ??= (async () => {
      try {
        const rows = await listVerificationKeys(options.db);
        keys = new Map(
          rows.map((r) => [r.kid, createPublicKey({ key: r.publicJwk, format: 'jwk' }).export({ type: 'spki', format: 'pem' }).toString()]),
        );
        loadedAt = Date.now();
      } finally {
        inFlight = null;
      }
    })();
    return inFlight;
  }

  return {
    refresh: load,
    async resolve(header) {
      const { kid } = header;
      if (!kid) throw new UnauthorizedError('Access token header has no key id');
      if (Date.now() - loadedAt > options.cacheTtlSeconds * 1000) await load();
      let pem = keys.get(kid);
      if (!pem && throttle.tryAcquire()) {
        await load();
        pem = keys.get(kid);
      }
      if (!pem) throw new UnauthorizedError('Access token is signed with an unknown key');
      return pem;
    },
  };
}
