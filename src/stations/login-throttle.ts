// Refused station logins, counted per peer address, so that an address that keeps failing is
// answered 429 before its login costs a database read or a password hash.
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { normalizeIP } from '@fastify/rate-limit';
import { LRUCache } from 'lru-cache';

export interface LoginThrottleLimits {
  // Refused logins an address may have in a row before it is throttled.
  refusalsBurst: number;
  // One more refused login is allowed per this many milliseconds (the allowance refills).
  refusalRefillMs: number;
  // Addresses remembered at most; past it the least recently refused one is forgotten.
  trackedAddresses: number;
}

// 20 refusals at once, then one every 3 s (20 a minute): a station with a wrong password retries
// far slower than that, a guesser gets 20 guesses a minute per address, each a few bytes of memory.
export const LOGIN_THROTTLE_LIMITS: LoginThrottleLimits = Object.freeze({
  refusalsBurst: 20,
  refusalRefillMs: 3000,
  trackedAddresses: 20_000,
});

// The address a login counts against. IPv6 counts per /64, the block one host is usually given
// (and can pick any address in); an IPv4-mapped IPv6 address is its IPv4 address. Behind a trusted
// proxy it is the last X-Forwarded-For entry: the address that proxy saw. The entries before it
// are whatever the client wrote (a proxy appends to what it received), so a station could choose
// them and get a fresh allowance for every login.
export function loginAddress(request: IncomingMessage, trustProxy: boolean): string {
  let address = request.socket.remoteAddress;
  if (trustProxy) {
    const header = request.headers['x-forwarded-for'];
    const last = (Array.isArray(header) ? header.join(',') : (header ?? '')).split(',').pop()?.trim() ?? '';
    if (isIP(last) !== 0) address = last;
  }
  // A socket already closed has no address; its login is answered to nobody.
  if (address === undefined) return 'unknown';
  try {
    return normalizeIP(address);
  } catch {
    return address.toLowerCase();
  }
}

interface Allowance {
  // Refusals still allowed at `at` (fractional while it refills).
  tokens: number;
  at: number;
}

export interface LoginThrottle {
  // 0 when the address may try; otherwise the whole seconds until it may (Retry-After).
  retryAfterSeconds(address: string): number;
  // A login from the address was refused.
  refused(address: string): void;
  // Addresses remembered now.
  readonly size: number;
}

// A token bucket per address: `refusalsBurst` tokens, one refilled every `refusalRefillMs`, one
// taken by each refused login; an address without a token is throttled. The bucket may go into
// debt (down to -MAX_DEBT_BURSTS bursts): logins sent together all pass while one token is left,
// since each is counted only once it is refused, and the debt makes the address wait for every
// one of them, so a burst buys no more than the same logins sent one by one. A correct login is
// never counted, so stations behind one address (a NAT, a proxy) log in together freely. An
// address whose bucket has refilled is forgotten, so only addresses refused recently take memory.
export const MAX_DEBT_BURSTS = 10;

export function createLoginThrottle(limits: LoginThrottleLimits, now: () => number = Date.now): LoginThrottle {
  const buckets = new LRUCache<string, Allowance>({ max: limits.trackedAddresses });
  const floor = -MAX_DEBT_BURSTS * limits.refusalsBurst;

  function tokensOf(address: string, at: number): number {
    const bucket = buckets.get(address);
    if (!bucket) return limits.refusalsBurst;
    // A clock set back (an NTP step, BuildOptions.clock moved back) would stop the refill until it
    // caught up with the bucket's time, holding a throttled address, and every correct login from
    // it, back that much longer: the refill goes on from the new time instead.
    if (at < bucket.at) bucket.at = at;
    const tokens = Math.min(limits.refusalsBurst, bucket.tokens + Math.max(0, at - bucket.at) / limits.refusalRefillMs);
    if (tokens >= limits.refusalsBurst) buckets.delete(address);
    return tokens;
  }

  return {
    retryAfterSeconds(address) {
      const tokens = tokensOf(address, now());
      return tokens >= 1 ? 0 : Math.max(1, Math.ceil(((1 - tokens) * limits.refusalRefillMs) / 1000));
    },
    refused(address) {
      const at = now();
      buckets.set(address, { tokens: Math.max(floor, tokensOf(address, at) - 1), at });
    },
    get size() {
      return buckets.size;
    },
  };
}
