// What stands between a station's login and its password hash: the throttle of refused logins per
// address (login-throttle.ts), the fair queue with its wait bound (login-hash-queue.ts), and the
// memory of which slow check an identity failed from an address (asset management's
// credential-choice.ts). One per replica's endpoint; everything in memory, bounded.
import { LOGIN_MEMORY_LIMITS, createLoginMemory, type CheckDeferred, type LoginMemory } from '../asset-management/station-credentials-service.js';
import { LOGIN_QUEUE_LIMITS, createLoginHashQueue, type LoginHashQueue, type LoginQueueLimits } from './login-hash-queue.js';
import { LOGIN_THROTTLE_LIMITS, createLoginThrottle, type LoginThrottleLimits } from './login-throttle.js';

export type LoginLimits = LoginThrottleLimits & LoginQueueLimits;

export const LOGIN_LIMITS: LoginLimits = Object.freeze({ ...LOGIN_THROTTLE_LIMITS, ...LOGIN_QUEUE_LIMITS });

export interface LoginRefusal {
  status: 429 | 503;
  reason: string;
  retryAfterSeconds: number;
}

export interface LoginGate {
  readonly hashQueue: LoginHashQueue;
  readonly memory: LoginMemory;
  // Before the database and any hash: a 429 for an address with too many refused logins.
  admit(address: string): (LoginRefusal & { status: 429 }) | null;
  // A login from the address was refused for its credentials (401, 404): it counts.
  refused(address: string): void;
  // The answer to a login whose password check did not run.
  deferred(why: Exclude<CheckDeferred, 'abandoned'>, address: string): LoginRefusal & { status: 503 };
}

export function createLoginGate(
  limits: Partial<LoginLimits> = {},
  events: { onThrottled?: (() => void) | undefined; onHashTimeout?: (() => void) | undefined } = {},
  now: () => number = Date.now,
): LoginGate {
  const all: LoginLimits = { ...LOGIN_LIMITS, ...limits };
  const throttle = createLoginThrottle(all, now);
  // A 503 from the queue says: try again once a wait bound has passed.
  const retryAfterSeconds = Math.max(1, Math.ceil(all.hashWaitMs / 1000));
  return {
    hashQueue: createLoginHashQueue(all),
    memory: createLoginMemory(LOGIN_MEMORY_LIMITS),
    admit(address) {
      const wait = throttle.retryAfterSeconds(address);
      if (wait === 0) return null;
      events.onThrottled?.();
      return { status: 429, reason: 'too many refused logins from this address', retryAfterSeconds: wait };
    },
    refused: (address) => throttle.refused(address),
    deferred(why, address) {
      switch (why) {
        case 'hashWaitTimeout':
          // The queue was busy, not the station wrong: it does not count.
          events.onHashTimeout?.();
          return { status: 503, reason: 'no password check was free within the wait bound', retryAfterSeconds };
        // These three count against the address like a refusal: otherwise many addresses trying
        // one identity, or one address flooding its own lane, would each cost a database read for
        // ever, never throttled. A real station retries far slower than the throttle's refill, so
        // these never throttle it.
        case 'duplicate':
          throttle.refused(address);
          return { status: 503, reason: 'another login of this station from this address is being checked', retryAfterSeconds };
        case 'identityBusy':
          throttle.refused(address);
          return { status: 503, reason: 'another login of this station is being checked', retryAfterSeconds };
        case 'queueFull':
          throttle.refused(address);
          return { status: 503, reason: 'the password check queue is full', retryAfterSeconds };
      }
    },
  };
}
