import type { Principal } from './principal.js';

// The principals of bearer tokens this process has verified, by the token's text (docs/operations.md,
// "Deployment model"). A hit skips the header's syntax check, the token's decode, the key lookup
// and fast-jwt's own cache; it stays as strict as they are:
// - an entry belongs to one version of the verification keys: when a reload (their TTL passed, an
//   unknown kid made them refetch) brings other keys, every entry made with the old ones is
//   verified anew, so a token whose key is gone is refused as soon as the keys without it are
//   read; while the keys are past their TTL or being reloaded, no entry is used;
// - it is used only while the token's nbf and exp allow (with the same clock tolerance), and at
//   most `maxAgeMs` after it was made;
// - revocation is not cached here: it is asked after a hit as after a verification.
// Only verified tokens enter, so a flood of forged tokens cannot fill it; at `maxEntries` the
// oldest entry leaves. A client can enter one token in a few spellings (base64url lets the last
// character of a signature vary in its unused bits, and the verification accepts those): its own
// tokens then push older entries out, which costs their holders a full verification, no more.

export interface VerifiedTokensOptions {
  maxEntries: number;
  maxAgeMs: number;
  clockToleranceMs: number;
  now?: () => number;
}

export interface VerifiedTokens {
  // The principal while the entry holds for this version of the keys, else undefined.
  get(token: string, keysVersion: number | null): Principal | undefined;
  set(token: string, keysVersion: number, claims: { nbf?: unknown; exp?: unknown }, principal: Principal): void;
}

interface Entry {
  principal: Principal;
  keysVersion: number;
  usableFrom: number;
  usableUntil: number;
}

export function createVerifiedTokens(options: VerifiedTokensOptions): VerifiedTokens {
  const now = options.now ?? Date.now;
  const entries = new Map<string, Entry>();
  return {
    get(token, keysVersion) {
      const entry = entries.get(token);
      if (entry === undefined) return undefined;
      const at = now();
      if (entry.keysVersion !== keysVersion || at < entry.usableFrom || at > entry.usableUntil) {
        entries.delete(token);
        return undefined;
      }
      return entry.principal;
    },
    set(token, keysVersion, claims, principal) {
      // fast-jwt requires exp and checks both as numbers; anything else never gets here.
      if (typeof claims.exp !== 'number') return;
      const at = now();
      const usableFrom = typeof claims.nbf === 'number' ? claims.nbf * 1000 - options.clockToleranceMs : Number.NEGATIVE_INFINITY;
      const usableUntil = Math.min(claims.exp * 1000 + options.clockToleranceMs, at + options.maxAgeMs);
      entries.delete(token);
      entries.set(token, { principal, keysVersion, usableFrom, usableUntil });
      if (entries.size > options.maxEntries) entries.delete(entries.keys().next().value!);
    },
  };
}
