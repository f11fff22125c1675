import { availableParallelism } from 'node:os';
import pLimit, { type LimitFunction } from 'p-limit';

// libuv's default thread pool size (UV_THREADPOOL_SIZE): scrypt, file system calls, dns.lookup
// and zlib all share it.
const LIBUV_POOL_SIZE = 4;

// How many password hashes (scrypt, ~75-100 ms of CPU each) may run at once. A hash runs on a
// libuv thread, off the event loop but not off the machine's cores, so unbounded it took every
// core from the rest of the API: 16 concurrent password changes cut the session list's throughput
// by 63 %. Half the cores, so that the event loop and a PostgreSQL on the same machine keep the
// other half whatever arrives; at most one thread short of libuv's pool, so a burst never leaves
// file system calls and DNS lookups waiting behind hashes; at least one. A 2-core machine hashes
// one password at a time (about 13 per second); more arrive and wait their turn, in order.
export function hashConcurrency(cores: number): number {
  return Math.max(1, Math.min(Math.floor(cores / 2), LIBUV_POOL_SIZE - 1));
}

export const HASH_CONCURRENCY = hashConcurrency(availableParallelism());

// The one queue every scrypt run of the process goes through: hashing a new password and
// verifying one alike (station logins too), so a burst of either waits instead of spreading.
// Nothing is refused for a long queue (contract §4 has no status for it): callers wait.
export const passwordHashQueue: LimitFunction = pLimit(HASH_CONCURRENCY);

// Station logins checked with scrypt wait here first, and at most HASH_CONCURRENCY of them are in
// the queue above at once: a reconnect storm of a thousand stations queues here, and a password
// change from the API waits behind at most one round of them (~100 ms), never behind the storm.
export const stationLoginQueue: LimitFunction = pLimit(HASH_CONCURRENCY);
