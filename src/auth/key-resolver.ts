import { createPublicKey, type JsonWebKey } from 'node:crypto';
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
  // Any fetch, whatever caused it, counts: the keys it brought are as fresh as a refetch's.
  note(now = Date.now()): void {
    this.last = Math.max(this.last, now);
  }
}

interface PublishedKey {
  pem: string;
  alg?: string | undefined;
}

// Caches the provider's whole key set, not one key per lookup: after one fetch every published
// kid resolves, so a second signing key (rotation overlap) is never refused by the refetch throttle.
export function createJwksKeyResolver(options: {
  jwksUrl: string;
  cacheTtlSeconds: number;
  refetchIntervalSeconds: number;
  fetchTimeoutMs?: number;
}): KeyResolver {
  const ttlMs = options.cacheTtlSeconds * 1000;
  const retryMs = options.refetchIntervalSeconds * 1000;
  const throttle = new RefetchThrottle(retryMs);
  let keys = new Map<string, PublishedKey>();
  let fetchedAt = Number.NEGATIVE_INFINITY;
  let inFlight: Promise<void> | null = null;

  async function fetchKeys(): Promise<void> {
    // The address is the configured one, never one named by a token (its iss or jku).
    const response = await fetch(options.jwksUrl, {
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(options.fetchTimeoutMs ?? 5000),
    });
    if (!response.ok) throw new Error(`JWKS answered HTTP ${response.status}`);
    const body = (await response.json()) as { keys?: unknown };
    if (!Array.isArray(body.keys)) throw new Error('JWKS document has no keys array');
    const next = new Map<string, PublishedKey>();
    for (const jwk of body.keys as Record<string, unknown>[]) {
      if (typeof jwk?.kid !== 'string' || (jwk.use !== undefined && jwk.use !== 'sig')) continue;
      try {
        const pem = createPublicKey({ key: jwk as JsonWebKey, format: 'jwk' }).export({ type: 'spki', format: 'pem' }).toString();
        next.set(jwk.kid, { pem, alg: typeof jwk.alg === 'string' ? jwk.alg : undefined });
      } catch {
        // A key we cannot read (unknown kty/curve) cannot have signed a token we accept.
      }
    }
    keys = next;
    fetchedAt = Date.now();
  }

  function refresh(): Promise<void> {
    throttle.note();
    inFlight ??= fetchKeys()
      .catch((error: unknown) => {
        // Keep serving the keys we have, and wait a refetch interval before asking again.
        fetchedAt = Math.max(fetchedAt, Date.now() - ttlMs + retryMs);
        throw error;
      })
      .finally(() => {
        inFlight = null;
      });
    return inFlight;
  }

  return {
    async resolve(header) {
      const { kid, alg } = header;
      if (!kid || !alg) throw new UnauthorizedError('Access token header has no key id');
      const expired = Date.now() - fetchedAt > ttlMs;
      if (expired || (!keys.has(kid) && throttle.tryAcquire())) {
        try {
          await refresh();
        } catch (cause) {
          if (!keys.has(kid)) throw new UnauthorizedError('Access token is signed with an unknown key', { cause });
        }
      }
      const key = keys.get(kid);
      if (!key) throw new UnauthorizedError('Access token is signed with an unknown key');
      if (key.alg && alg && key.alg !== alg) throw new UnauthorizedError('Access token algorithm does not match its key');
      return key.pem;
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
    throttle.note();
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
