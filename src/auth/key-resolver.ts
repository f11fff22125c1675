import { KeyObject, createPublicKey, type webcrypto } from 'node:crypto';
import { createRemoteJWKSet, errors } from 'jose';
import { UnauthorizedError } from '../kernel/errors.js';
import type { Db } from '../db/database.js';
import { listVerificationKeys } from './signing-keys-repository.js';

export interface JwtHeader {
  kid?: string;
  alg?: string;
}

export interface KeyResolver {
  resolve(header: JwtHeader): Promise<string>;
  // Which keys resolve() answers from: a number that changes whenever a load brings other keys
  // than the last, or null when they are older than their TTL (the next resolve() reloads them)
  // or being reloaded. A verified token's cached principal holds only for the version it was
  // verified with (verified-tokens.ts).
  version(): number | null;
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
  // Any fetch, whatever caused it, counts: the keys it brought are as fresh as a refetch's.
  note(now = Date.now()): void {
    this.last = Math.max(this.last, now);
  }
}

// Caches the provider's whole key set, not one key per lookup: after one fetch every published
// kid resolves, so a second signing key (rotation overlap) is never refused by the refetch throttle.
// jose fetches (with a timeout, one fetch for concurrent callers), checks the document and picks the
// key by kid, alg, kty and use. Its own refetching is off (both durations infinite): it would throw
// once the keys are older than cacheMaxAge whenever the provider cannot answer, and refetch for
// unknown kids after a failed fetch. Here the TTL and the refetch throttle decide when to fetch, and
// a failed fetch keeps the last good keys: an outage of the provider does not turn every request
// into a 401, and tokens signed with the keys it published before keep working.
export function createJwksKeyResolver(options: {
  jwksUrl: string;
  cacheTtlSeconds: number;
  refetchIntervalSeconds: number;
  fetchTimeoutMs?: number;
}): KeyResolver {
  const ttlMs = options.cacheTtlSeconds * 1000;
  const throttle = new RefetchThrottle(options.refetchIntervalSeconds * 1000);
  // The address is the configured one, never one named by a token (its iss or jku).
  const remote = createRemoteJWKSet(new URL(options.jwksUrl), {
    cacheMaxAge: Number.POSITIVE_INFINITY,
    cooldownDuration: Number.POSITIVE_INFINITY,
    timeoutDuration: options.fetchTimeoutMs ?? 5000,
  });
  // fast-jwt takes PEM; jose hands out the same key object until the set is refetched.
  const pems = new WeakMap<object, string>();
  let loadedAt = Number.NEGATIVE_INFINITY;
  let loads = 0;
  // jose puts the new keys in place a few microtasks before its reload settles and this counts
  // it: until then version() answers null, never the old version with the new keys in use.
  let refreshing = 0;
  let published = '';

  async function refresh(): Promise<void> {
    throttle.note();
    refreshing++;
    try {
      // Joins a fetch already in flight.
      await remote.reload();
      loadedAt = Date.now();
      // A new version only when the provider's keys changed: a reload forced by a token with an
      // unknown kid then costs the cached tokens nothing.
      const now = JSON.stringify(remote.jwks() ?? null);
      if (now !== published) loads++;
      published = now;
    } catch {
      // Keep serving the keys we have; the throttle spaces the next attempt.
    } finally {
      refreshing--;
    }
  }

  async function pemFor(header: Required<JwtHeader>): Promise<string> {
    const key = await remote({ alg: header.alg, kid: header.kid });
    let pem = pems.get(key);
    if (pem === undefined) {
      pem = KeyObject.from(key as unknown as webcrypto.CryptoKey).export({ type: 'spki', format: 'pem' }).toString();
      pems.set(key, pem);
    }
    return pem;
  }

  return {
    version: () => (loadedAt !== Number.NEGATIVE_INFINITY && refreshing === 0 && !remote.reloading && Date.now() - loadedAt <= ttlMs ? loads : null),
    async resolve(header) {
      const { kid, alg } = header;
      if (!kid || !alg) throw new UnauthorizedError('Access token header has no key id');
      const stale = Date.now() - loadedAt > ttlMs;
      if (remote.reloading || (stale && throttle.tryAcquire())) await refresh();
      if (loadedAt === Number.NEGATIVE_INFINITY) throw new UnauthorizedError('Access token is signed with an unknown key');
      try {
        return await pemFor({ kid, alg });
      } catch (error) {
        // A key that does not match (unknown kid, or an alg it is not published for) may be a new
        // one; a key we cannot read cannot have signed a token we accept.
        if (!(error instanceof errors.JWKSNoMatchingKey) || !throttle.tryAcquire()) {
          throw new UnauthorizedError('Access token is signed with an unknown key', { cause: error });
        }
      }
      await refresh();
      try {
        return await pemFor({ kid, alg });
      } catch (cause) {
        throw new UnauthorizedError('Access token is signed with an unknown key', { cause });
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
  let loads = 0;
  let inFlight: Promise<void> | null = null;
  const throttle = new RefetchThrottle(options.refetchIntervalSeconds * 1000);

  async function load(): Promise<void> {
    throttle.note();
    inFlight ??= (async () => {
      try {
        const rows = await listVerificationKeys(options.db);
        const next = new Map(
          rows.map((r) => [r.kid, createPublicKey({ key: r.publicJwk, format: 'jwk' }).export({ type: 'spki', format: 'pem' }).toString()]),
        );
        // A new version only when the keys changed (see the JWKS resolver).
        if (next.size !== keys.size || [...next].some(([kid, pem]) => keys.get(kid) !== pem)) loads++;
        keys = next;
        loadedAt = Date.now();
      } finally {
        inFlight = null;
      }
    })();
    return inFlight;
  }

  return {
    refresh: load,
    version: () => (inFlight === null && Date.now() - loadedAt <= options.cacheTtlSeconds * 1000 ? loads : null),
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
