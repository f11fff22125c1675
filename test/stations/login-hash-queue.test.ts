// The queue station logins wait in for their slow hash: in front of the process's hashing queue,
// fair across addresses, one place per identity, and a bounded wait.
import { setImmediate as tick } from 'node:timers/promises';
import { describe, expect, it, vi } from 'vitest';
import { HASH_CONCURRENCY, passwordHashQueue } from '../../src/asset-management/password-hash-queue.js';
import { hashSuppliedPassword, verifyPassword } from '../../src/asset-management/password-hashing.js';
import type { SlowCheck } from '../../src/asset-management/station-credentials-service.js';
import { LOGIN_QUEUE_LIMITS, createLoginHashQueue } from '../../src/stations/login-hash-queue.js';
import { CHEAP_HASH } from '../helpers/password-hash-params.js';
import { eventually } from '../helpers/eventually.js';

// Holds every place of the process's hashing queue until released.
function holdHashing() {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const blockers = Array.from({ length: HASH_CONCURRENCY }, () => passwordHashQueue(() => held));
  return async () => {
    release();
    await Promise.all(blockers);
  };
}

function work(address: string, identity: string, verify: SlowCheck['verify'] = async () => false, abandoned = () => false): SlowCheck {
  return { address, identity, abandoned, verify };
}

describe('the login hash queue', () => {
  it('a storm of slow-hash logins waits in its own queue: a password change joins the hashing queue behind at most one round of them', async () => {
    const password = 'Storm-Password-123456';
    const encoded = await hashSuppliedPassword(password, CHEAP_HASH);
    const queue = createLoginHashQueue(LOGIN_QUEUE_LIMITS);
    const release = holdHashing();
    const storm = Array.from({ length: HASH_CONCURRENCY * 5 }, (_, i) =>
      queue.check(work(`10.0.0.${i % 3}`, `CP-${i}`, (run) => verifyPassword(i === 0 ? password : `${password}${i}`, encoded, run))),
    );
    await eventually(() => expect(passwordHashQueue.pendingCount).toBe(HASH_CONCURRENCY), 1);
    // One turn per place asked of the hashing queue; the storm waits in the login queue.
    expect(queue.waiting).toBe(HASH_CONCURRENCY * 5);
    const change = hashSuppliedPassword('Api-Change-Password-1', CHEAP_HASH);
    await tick();
    expect(passwordHashQueue.pendingCount).toBe(HASH_CONCURRENCY + 1);
    await release();
    await change;
    const results = await Promise.all(storm);
    expect(results.filter((r) => r.kind === 'checked' && r.matched)).toHaveLength(1);
    expect(results[0]).toEqual({ kind: 'checked', matched: true });
    expect(queue.waiting + queue.running).toBe(0);
  });

  it('a login that gets no turn within hashWaitMs is answered timeout, without hashing; its identity may queue again', async () => {
    const queue = createLoginHashQueue({ ...LOGIN_QUEUE_LIMITS, hashWaitMs: 100 });
    const release = holdHashing();
    const verify = vi.fn(async () => true);
    // The wait on a clock the test moves: answered at 100 ms, not before, whatever the machine's
    // load (a wall-clock bound raced it).
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    let answer: unknown;
    try {
      const answered = queue.check(work('10.0.0.1', 'CP-1', verify)).then((a) => (answer = a));
      await vi.advanceTimersByTimeAsync(99);
      expect(answer).toBeUndefined();
      await vi.advanceTimersByTimeAsync(1);
      await answered;
    } finally {
      vi.useRealTimers();
    }
    expect(answer).toEqual({ kind: 'timeout' });
    expect(queue.waiting).toBe(0);
    const again = queue.check(work('10.0.0.1', 'CP-1', verify));
    await release();
    expect(await again).toEqual({ kind: 'checked', matched: true });
    expect(verify).toHaveBeenCalledTimes(1);
  });

  it('a login whose station hung up is dropped when its turn comes, and gives its place to the identity’s next login', async () => {
    const queue = createLoginHashQueue(LOGIN_QUEUE_LIMITS);
    const release = holdHashing();
    let gone = false;
    const verify = vi.fn(async () => true);
    const first = queue.check(work('10.0.0.1', 'CP-1', verify, () => gone));
    const second = queue.check(work('10.0.0.2', 'CP-2', verify, () => gone));
    gone = true;
    // CP-1 hung up: its next login takes the place instead of being refused as busy.
    const retry = queue.check(work('10.0.0.1', 'CP-1', verify));
    expect(await first).toEqual({ kind: 'abandoned' });
    await release();
    expect(await second).toEqual({ kind: 'abandoned' });
    expect(await retry).toEqual({ kind: 'checked', matched: true });
    expect(verify).toHaveBeenCalledTimes(1);
  });

  it('a second login of an identity while one waits is refused at once: "busy", saying whether it came from the same address', async () => {
    const queue = createLoginHashQueue(LOGIN_QUEUE_LIMITS);
    const release = holdHashing();
    const first = queue.check(work('10.0.0.1', 'CP-1'));
    expect(await queue.check(work('10.0.0.1', 'CP-1'))).toEqual({ kind: 'busy', sameAddress: true });
    expect(await queue.check(work('10.0.0.9', 'CP-1'))).toEqual({ kind: 'busy', sameAddress: false });
    await release();
    expect(await first).toEqual({ kind: 'checked', matched: false });
  });

  it('an address past its share of the queue, or a full queue, is refused at once', async () => {
    const queue = createLoginHashQueue({ hashWaitMs: 5000, queuedPerAddress: 2, queuedTotal: 3 });
    const release = holdHashing();
    const queued = [queue.check(work('a', 'CP-1')), queue.check(work('a', 'CP-2'))];
    expect(await queue.check(work('a', 'CP-3'))).toEqual({ kind: 'full' });
    queued.push(queue.check(work('b', 'CP-4')));
    expect(await queue.check(work('c', 'CP-5'))).toEqual({ kind: 'full' });
    await release();
    expect((await Promise.all(queued)).map((r) => r.kind)).toEqual(['checked', 'checked', 'checked']);
  });

  it('takes turns across addresses: a login from a quiet address runs after at most one of a busy address', async () => {
    const queue = createLoginHashQueue(LOGIN_QUEUE_LIMITS);
    const release = holdHashing();
    const order: string[] = [];
    const record = (name: string) => async () => {
      order.push(name);
      return false;
    };
    const busy = Array.from({ length: 10 }, (_, i) => queue.check(work('busy', `CP-busy-${i}`, record(`busy-${i}`))));
    const quiet = queue.check(work('quiet', 'CP-quiet', record('quiet')));
    await release();
    await Promise.all([...busy, quiet]);
    expect(order.indexOf('quiet')).toBeLessThanOrEqual(1);
  });
});
