// Password hashing runs with bounded concurrency (docs/rotation.md): every slow hash of the process,
// hashing and verification alike, takes its turn in one queue.
import { availableParallelism } from 'node:os';
import { setImmediate as tick } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { HASH_CONCURRENCY, hashConcurrency, passwordHashQueue } from '../../src/asset-management/password-hash-queue.js';
import { hashScryptPassword, hashSuppliedPassword, verifyPassword } from '../../src/asset-management/password-hashing.js';
import { CHEAP_HASH } from '../helpers/password-hash-params.js';

// A task that holds its place in the queue until released.
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

describe('hashConcurrency', () => {
  it('half the cores, at least 1, at most one short of the libuv pool', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8, 16, 64].map(hashConcurrency)).toEqual([1, 1, 1, 2, 2, 3, 3, 3, 3, 3]);
    expect(HASH_CONCURRENCY).toBe(hashConcurrency(availableParallelism()));
    expect(passwordHashQueue.concurrency).toBe(HASH_CONCURRENCY);
  });
});

describe('the password hashing queue', () => {
  it('runs at most HASH_CONCURRENCY tasks at once, in arrival order, and every task runs', async () => {
    const count = HASH_CONCURRENCY * 3 + 2;
    const gates = Array.from({ length: count }, gate);
    let running = 0;
    let most = 0;
    const started: number[] = [];
    const done = gates.map((g, i) =>
      passwordHashQueue(async () => {
        started.push(i);
        running++;
        most = Math.max(most, running);
        await g.opened;
        running--;
        return i;
      }),
    );
    await tick();
    expect(started).toEqual(Array.from({ length: HASH_CONCURRENCY }, (_, i) => i));
    expect(passwordHashQueue.pendingCount).toBe(count - HASH_CONCURRENCY);
    // Release them one by one; each release lets exactly the next waiting task in.
    for (const g of gates) {
      g.open();
      await tick();
      expect(running).toBeLessThanOrEqual(HASH_CONCURRENCY);
    }
    expect(await Promise.all(done)).toEqual(gates.map((_, i) => i));
    expect(started).toEqual(gates.map((_, i) => i));
    expect(most).toBe(HASH_CONCURRENCY);
  });

  it('hashing and verifying wait for a free place: neither runs beside a full queue', async () => {
    const password = 'Queued-Password-1234';
    const encoded = await hashSuppliedPassword(password, CHEAP_HASH);
    const legacy = await hashScryptPassword(password, { N: 1024, r: 8, p: 1, keyLength: 32, saltLength: 16 });
    const holders = Array.from({ length: HASH_CONCURRENCY }, gate);
    const held = holders.map((g) => passwordHashQueue(() => g.opened));
    await tick();
    expect(passwordHashQueue.activeCount).toBe(HASH_CONCURRENCY);

    const hashing = hashSuppliedPassword(password, CHEAP_HASH);
    const verifying = verifyPassword(password, encoded);
    const verifyingLegacy = verifyPassword(password, legacy);
    await tick();
    expect(passwordHashQueue.pendingCount).toBe(3);
    expect(passwordHashQueue.activeCount).toBe(HASH_CONCURRENCY);

    for (const g of holders) g.open();
    await Promise.all(held);
    await expect(verifying).resolves.toBe(true);
    await expect(verifyingLegacy).resolves.toBe(true);
    await expect(verifyPassword(password, await hashing)).resolves.toBe(true);
    expect(passwordHashQueue.activeCount + passwordHashQueue.pendingCount).toBe(0);
  });

  it('a malformed stored hash is refused without queueing', async () => {
    const holders = Array.from({ length: HASH_CONCURRENCY }, gate);
    const held = holders.map((g) => passwordHashQueue(() => g.opened));
    await tick();
    // With every place taken, an answer can only come from outside the queue.
    await expect(verifyPassword('whatever-password', 'scrypt$N=1000,r=8,p=1$AAAA$AAAA')).resolves.toBe(false);
    await expect(verifyPassword('whatever-password', 'argon2id$v=19,m=4,t=1,p=1$AAAA$AAAA')).resolves.toBe(false);
    expect(passwordHashQueue.pendingCount).toBe(0);
    for (const g of holders) g.open();
    await Promise.all(held);
  });
});
