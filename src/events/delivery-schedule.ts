// When a webhook delivery is tried again, and when it is given up (docs/events.md, "Delivery and
// retries"). Pure: no I/O, no clock of its own.

// The waits after each failed attempt: the first retry within 10 s, then growing, for about 27.5
// hours in all (at least 24 h whatever the jitter, which only lengthens them). After the last
// wait's attempt fails, the delivery is FAILED: 8 attempts in all.
export const RETRY_DELAYS_MS: readonly number[] = [5_000, 5 * 60_000, 30 * 60_000, 2 * 3_600_000, 5 * 3_600_000, 10 * 3_600_000, 10 * 3_600_000];

// Each wait is lengthened by up to this share, so receivers that failed together are not all
// retried in the same second.
export const JITTER = 0.25;

// An attempt in flight holds its delivery this long (the attempt's 10 s limit, with room): when
// the replica making it dies, another (or the same, restarted) makes it again once this passes.
export const ATTEMPT_LEASE_MS = 30_000;

// After `attemptsMade` attempts, all failed: the wait before the next one, or null to give up.
export function retryDelayMs(attemptsMade: number, delays: readonly number[] = RETRY_DELAYS_MS, random: () => number = Math.random): number | null {
  const base = delays[attemptsMade - 1];
  if (base === undefined) return null;
  return Math.round(base * (1 + JITTER * random()));
}

// A 2xx answer is a success; anything else (another status, no answer, a timeout) is retried.
export function isDelivered(status: number | undefined): boolean {
  return status !== undefined && status >= 200 && status < 300;
}
