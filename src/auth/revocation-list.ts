import type { Executor } from '../db/database.js';
import { listRevokedClientIds } from './clients-repository.js';

export interface RevocationList {
  isRevoked(clientId: string): Promise<boolean>;
}

// The embedded issuer's tokens outlive their client by up to AUTH_TOKEN_TTL_SECONDS, and fast-jwt
// skips the signature check for tokens it has verified before; so every request, after that cache,
// asks this list. It holds the ids of all revoked clients (few, and never un-revoked), read in one
// query at most every refreshSeconds: no database round trip per request, and a revocation by any
// process on the shared database is seen within refreshSeconds. A failed refresh is not swallowed:
// the request fails with the database error, and the next request tries again.
export function createRevocationList(options: { db: Executor; refreshSeconds: number; now?: () => number }): RevocationList {
  const now = options.now ?? Date.now;
  const refreshMs = options.refreshSeconds * 1000;
  let revoked = new Set<string>();
  // When the query behind `revoked` started: a revocation committed before then is in it.
  let loadedAt = Number.NEGATIVE_INFINITY;
  let inFlight: Promise<void> | null = null;

  function refresh(): Promise<void> {
    inFlight ??= (async () => {
      const startedAt = now();
      try {
        revoked = new Set(await listRevokedClientIds(options.db));
        loadedAt = startedAt;
      } finally {
        inFlight = null;
      }
    })();
    return inFlight;
  }

  return {
    async isRevoked(clientId) {
      if (now() - loadedAt >= refreshMs) await refresh();
      return revoked.has(clientId);
    },
  };
}
