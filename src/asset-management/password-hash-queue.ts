import { availableParallelism } from 'node:os';
import pLimit, { type LimitFunction } from 'p-limit';

// libuv's default thread pool size (UV_THREADPOOL_SIZE): scrypt, file system calls, dns.lookup
// and zlib all share it.
const LIBUV_POOL_SIZE = 4;

// How many password hashes (argon2id, ~30 ms of CPU each; ~100 ms for a scrypt hash stored
// before it) may run at once. A hash runs on a libuv thread, off the event loop but not off the
// machine's cores, so unbounded it took every core from the rest of the API: 16 concurrent
// password changes cut the session list's throughput by 63 %. Half the cores, so that the event loop and a PostgreSQL on the same machine keep the
// other half whatever arrives; at most one thread short of libuv's pool, so a burst never leaves
// file system calls and DNS lookups waiting behind hashes; at least one. A 2-core machine hashes
// one password at a time (about 13 per second); more arrive and wait their turn, in order.
export function hashConcurrency(cores: number): number {
  return Math.max(1, Math.min(Math.floor(cores / 2), LIBUV_POOL_SIZE - 1));
}

export const HASH_CONCURRENCY = hashConcurrency(availableParallelism());

// The one queue every slow hash of the process goes through: hashing a new password and verifying
// one alike (station logins too), so a burst of either waits instead of spreading. Nothing is
// refused for a long queue here: API callers wait. Station logins wait in a fair queue of their own
// first (stations/login-hash-queue.ts), with a bound on the wait, and hold at most HASH_CONCURRENCY
// places here, so a password change waits behind at most one round of them.
export const passwordHashQueue: LimitFunction = pLimit(HASH_CONCURRENCY);
