// Which slow password check a station login runs. A refused login costs at most one slow hash, so
// a login that could match more than one slow hash (both credentials of an open rotation, the
// retired one of a switch, a legacy 1.6 key's upper-case reading) runs one of them, and what a
// refused attempt tried is remembered per identity and address, so that the station's next
// attempt from there tries another. Fast (HMAC) checks are not chosen: a login runs all of them.
import { LRUCache } from 'lru-cache';
import type { Slot } from './rotation.js';

export interface SlowCandidate {
  // 'replaced': the credential the latest switch retired, never accepted, only reported.
  slot: Slot | 'replaced';
  // Stands for this hash and reading of the password: it changes when the stored hash does.
  id: string;
}

// At most one slow check per login, in this order of preference:
// 1. An accepting check (active or pending) this identity has not failed from this address. With
//    nothing remembered from the address, any of them, drawn at random: no one else's attempts can
//    steer a station to the wrong one, and a station whose address changes at every attempt still
//    gets in with a probability of one in the number of candidates at each.
// 2. The retired credential, when every accepting check has failed from here and `replacedAllowed`
//    (the report's budget): a station that failed with the current password and tries again most
//    likely holds the retired one.
// 3. Everything was tried: start over (`restart`: the caller forgets what it remembered).
// So a station that holds an accepted credential and retries from one address gets in within as
// many attempts as there are accepting slow checks (two while a rotation is open).
export function chooseSlowCheck<C extends SlowCandidate>(
  candidates: readonly C[],
  tried: ReadonlySet<string> | undefined,
  replacedAllowed: boolean,
  random: () => number,
): { check: C; restart: boolean } | undefined {
  const accepting = candidates.filter((c) => c.slot !== 'replaced');
  const replaced = replacedAllowed ? candidates.filter((c) => c.slot === 'replaced') : [];
  if (tried === undefined || tried.size === 0) {
    const drawn = Math.floor(random() * accepting.length);
    const check = accepting.length > 0 ? accepting[drawn >= 0 && drawn < accepting.length ? drawn : 0] : replaced[0];
    return check && { check, restart: false };
  }
  const next = accepting.find((c) => !tried.has(c.id)) ?? replaced.find((c) => !tried.has(c.id));
  if (next) return { check: next, restart: false };
  const again = chooseSlowCheck(candidates, undefined, replacedAllowed, random);
  return again && { check: again.check, restart: true };
}

export interface LoginMemoryLimits {
  // (identity, address) pairs remembered at most; past it the least recently used is forgotten.
  entries: number;
  // How long a failed attempt is remembered.
  rememberMs: number;
  // The retired credential's slow check runs at most once per identity in this long.
  replacedCheckEveryMs: number;
}

// 10,000 pairs (a few MB at most), forgotten after 10 minutes: a refused station retries within
// that. The retired credential's report is a diagnosis, worth one slow hash a minute per station.
export const LOGIN_MEMORY_LIMITS: LoginMemoryLimits = Object.freeze({ entries: 10_000, rememberMs: 10 * 60_000, replacedCheckEveryMs: 60_000 });

export interface LoginMemory {
  tried(identity: string, address: string): ReadonlySet<string> | undefined;
  failed(identity: string, address: string, id: string, restart: boolean): void;
  succeeded(identity: string, address: string): void;
  // Whether the retired credential's slow check may run now; taking it spends the budget.
  takeReplacedCheck(identity: string): boolean;
  replacedCheckAllowed(identity: string): boolean;
}

export function createLoginMemory(limits: LoginMemoryLimits, perf?: { now(): number }): LoginMemory {
  // Ages are read from the clock at every look-up (no cached time between look-ups).
  const clock = { ttlResolution: 0, ...(perf ? { perf } : {}) };
  const tried = new LRUCache<string, Set<string>>({ max: limits.entries, ttl: limits.rememberMs, ...clock });
  const replacedChecked = new LRUCache<string, true>({ max: limits.entries, ttl: limits.replacedCheckEveryMs, ...clock });
  // Identities match ID_PATTERN, which has no newline.
  const key = (identity: string, address: string) => `${identity}\n${address}`;
  return {
    tried: (identity, address) => tried.get(key(identity, address)),
    failed(identity, address, id, restart) {
      const k = key(identity, address);
      const set = restart ? new Set<string>() : (tried.get(k) ?? new Set<string>());
      set.add(id);
      tried.set(k, set);
    },
    succeeded(identity, address) {
      tried.delete(key(identity, address));
    },
    replacedCheckAllowed: (identity) => !replacedChecked.has(identity),
    takeReplacedCheck(identity) {
      if (replacedChecked.has(identity)) return false;
      replacedChecked.set(identity, true);
      return true;
    },
  };
}
