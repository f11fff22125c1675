// The rules of station logins without a server: the fair queue's order, the throttle's bucket, the
// address a login counts against, and which slow check a login runs.
import type { IncomingMessage } from 'node:http';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FairQueue, type Queued } from '../../src/stations/fair-queue.js';
import { LOGIN_THROTTLE_LIMITS, MAX_DEBT_BURSTS, createLoginThrottle, loginAddress } from '../../src/stations/login-throttle.js';
import { LOGIN_MEMORY_LIMITS, chooseSlowCheck, createLoginMemory, type SlowCandidate } from '../../src/asset-management/credential-choice.js';
import { LOGIN_LIMITS } from '../../src/stations/login-gate.js';

interface Item extends Queued {
  n: number;
}

type Op = { kind: 'offer'; lane: number; owner: number } | { kind: 'take' } | { kind: 'finish'; pick: number } | { kind: 'remove'; pick: number };

const ops: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('offer' as const), lane: fc.nat(4), owner: fc.nat(7) }) },
  { weight: 3, arbitrary: fc.constant({ kind: 'take' as const }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('finish' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('remove' as const), pick: fc.nat() }) },
);

describe('FairQueue', () => {
  it('property: from the moment an item heads its lane until it is taken, at most one item of each other lane is taken; an owner never has two items; the caps hold', () => {
    fc.assert(
      fc.property(fc.array(ops, { maxLength: 200 }), fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 12 }), (script, perLane, total) => {
        const queue = new FairQueue<Item>({ perLane, total });
        const waiting: Item[] = [];
        const taken: Item[] = [];
        // For each item heading its lane: how many items of each other lane were taken since.
        const passedBy = new Map<Item, Map<string, number>>();
        const heads = () => {
          for (const item of waiting) {
            const head = waiting.find((w) => w.lane === item.lane) === item;
            if (head && !passedBy.has(item)) passedBy.set(item, new Map());
          }
        };
        let n = 0;
        for (const op of script) {
          if (op.kind === 'offer') {
            const item = { lane: `l${op.lane}`, owner: `o${op.owner}`, n: n++ };
            const offer = queue.offer(item);
            const ownerHas = [...waiting, ...taken].some((i) => i.owner === item.owner);
            if (ownerHas) expect(offer.kind).toBe('ownerBusy');
            else if (waiting.length >= total) expect(offer.kind).toBe('full');
            else if (waiting.filter((i) => i.lane === item.lane).length >= perLane) expect(offer.kind).toBe('laneFull');
            else {
              expect(offer.kind).toBe('queued');
              waiting.push(item);
            }
          } else if (op.kind === 'take') {
            const item = queue.take();
            if (waiting.length === 0) {
              expect(item).toBeUndefined();
              continue;
            }
            expect(item).toBeDefined();
            const counts = passedBy.get(item!)!;
            for (const count of counts.values()) expect(count).toBeLessThanOrEqual(1);
            passedBy.delete(item!);
            for (const [other, seen] of passedBy) if (other.lane !== item!.lane) seen.set(item!.lane, (seen.get(item!.lane) ?? 0) + 1);
            waiting.splice(waiting.indexOf(item!), 1);
            taken.push(item!);
          } else if (op.kind === 'finish' && taken.length > 0) {
            const [item] = taken.splice(op.pick % taken.length, 1);
            queue.finish(item!);
          } else if (op.kind === 'remove' && waiting.length > 0) {
            const item = waiting[op.pick % waiting.length]!;
            expect(queue.remove(item)).toBe(true);
            expect(queue.remove(item)).toBe(false);
            waiting.splice(waiting.indexOf(item), 1);
            passedBy.delete(item);
          }
          heads();
          for (const seen of passedBy.values()) for (const count of seen.values()) expect(count).toBeLessThanOrEqual(1);
          expect(queue.size).toBe(waiting.length);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('within a lane, items are taken in the order they came', () => {
    const queue = new FairQueue<Item>({ perLane: 10, total: 100 });
    for (let i = 0; i < 3; i++) queue.offer({ lane: 'a', owner: `a${i}`, n: i });
    queue.offer({ lane: 'b', owner: 'b0', n: 10 });
    expect([1, 2, 3, 4].map(() => queue.take()?.n)).toEqual([0, 10, 1, 2]);
  });
});

describe('the login throttle', () => {
  it('property: in any window, an address has at most burst + window / refill refusals let through, and a throttled one is told how long to wait', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 5000 }), { minLength: 1, maxLength: 200 }), fc.integer({ min: 1, max: 10 }), fc.integer({ min: 100, max: 5000 }), (gaps, burst, refill) => {
        let clock = 0;
        const throttle = createLoginThrottle({ refusalsBurst: burst, refusalRefillMs: refill, trackedAddresses: 10 }, () => clock);
        const through: number[] = [];
        for (const gap of gaps) {
          clock += gap;
          const wait = throttle.retryAfterSeconds('a');
          if (wait > 0) {
            // Waiting as told lets the next one through.
            expect(wait).toBeLessThanOrEqual(Math.ceil(refill / 1000));
            continue;
          }
          through.push(clock);
          throttle.refused('a');
        }
        for (let i = 0; i < through.length; i++) {
          for (let j = i; j < through.length; j++) {
            expect(j - i + 1).toBeLessThanOrEqual(burst + Math.floor((through[j]! - through[i]!) / refill) + 1);
          }
        }
      }),
    );
  });

  it('counts addresses apart, lets an address in again after Retry-After, and forgets the least recently refused address at its cap', () => {
    let clock = 0;
    const throttle = createLoginThrottle({ refusalsBurst: 3, refusalRefillMs: 2000, trackedAddresses: 2 }, () => clock);
    for (let i = 0; i < 3; i++) throttle.refused('a');
    expect(throttle.retryAfterSeconds('a')).toBe(2);
    expect(throttle.retryAfterSeconds('b')).toBe(0);
    clock += 1000;
    expect(throttle.retryAfterSeconds('a')).toBe(1);
    clock += 1000;
    expect(throttle.retryAfterSeconds('a')).toBe(0);
    throttle.refused('a');
    throttle.refused('b');
    throttle.refused('c');
    // At the cap of 2, 'a' was forgotten: it starts again with a full allowance.
    expect(throttle.size).toBe(2);
    for (let i = 0; i < 2; i++) throttle.refused('a');
    expect(throttle.retryAfterSeconds('a')).toBe(0);
  });

  it('forgets an address once its allowance has refilled', () => {
    let clock = 0;
    const throttle = createLoginThrottle({ refusalsBurst: 2, refusalRefillMs: 1000, trackedAddresses: 10 }, () => clock);
    throttle.refused('a');
    expect(throttle.size).toBe(1);
    clock += 1000;
    expect(throttle.retryAfterSeconds('a')).toBe(0);
    expect(throttle.size).toBe(0);
  });

  it('property: logins refused together put the address in debt, so a burst buys no more refusals over time than the same logins sent one by one (down to the debt floor)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 400 }), fc.integer({ min: 100, max: 5000 }), (burst, together, refill) => {
        let clock = 0;
        const throttle = createLoginThrottle({ refusalsBurst: burst, refusalRefillMs: refill, trackedAddresses: 10 }, () => clock);
        // All admitted at once (the allowance is read before any of them is refused), then all refused.
        expect(throttle.retryAfterSeconds('a')).toBe(0);
        for (let i = 0; i < together; i++) throttle.refused('a');
        const owed = Math.min(together, burst * (MAX_DEBT_BURSTS + 1));
        // The next refusal is allowed only once every refusal beyond the burst has been refilled.
        const waitMs = (owed - burst + 1) * refill;
        if (waitMs > 0) {
          clock = waitMs - 1;
          expect(throttle.retryAfterSeconds('a')).toBeGreaterThan(0);
        }
        clock = Math.max(waitMs, 0);
        expect(throttle.retryAfterSeconds('a')).toBe(0);
      }),
    );
  });

  it('has the numbers the operators’ documentation states', () => {
    expect(LOGIN_THROTTLE_LIMITS).toEqual({ refusalsBurst: 20, refusalRefillMs: 3000, trackedAddresses: 20_000 });
    expect(LOGIN_LIMITS).toMatchObject({ hashWaitMs: 5000, queuedPerAddress: 16, queuedTotal: 1000 });
    expect(LOGIN_MEMORY_LIMITS).toEqual({ entries: 10_000, rememberMs: 600_000, replacedCheckEveryMs: 60_000 });
  });
});

function request(remoteAddress: string | undefined, forwardedFor?: string): IncomingMessage {
  return { socket: { remoteAddress }, headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor } } as unknown as IncomingMessage;
}

describe('loginAddress', () => {
  it.each([
    ['127.0.0.2', undefined, false, '127.0.0.2'],
    ['::ffff:127.0.0.2', undefined, false, '127.0.0.2'],
    ['2001:db8:1:2:3:4:5:6', undefined, false, '2001:db8:1:2::'],
    ['2001:DB8:1:2:ffff::1', undefined, false, '2001:db8:1:2::'],
    [undefined, undefined, false, 'unknown'],
    // Without TRUST_PROXY the header is anyone's.
    ['10.0.0.1', '203.0.113.7', false, '10.0.0.1'],
    // With it: the last entry, the address the trusted proxy saw; what the client wrote before it does not count.
    ['10.0.0.1', '203.0.113.7', true, '203.0.113.7'],
    ['10.0.0.1', '198.51.100.1, 203.0.113.7', true, '203.0.113.7'],
    ['10.0.0.1', 'made-up, 2001:db8:9:9:1::1', true, '2001:db8:9:9::'],
    ['10.0.0.1', '203.0.113.7, not-an-address', true, '10.0.0.1'],
    ['10.0.0.1', '', true, '10.0.0.1'],
  ])('%s with X-Forwarded-For %j (trusted: %s) counts as %s', (remote, forwarded, trustProxy, expected) => {
    expect(loginAddress(request(remote, forwarded), trustProxy)).toBe(expected);
  });
});

interface Candidate extends SlowCandidate {
  holds: boolean;
}

describe('chooseSlowCheck', () => {
  it('property: a station holding an accepted credential and retrying from one address gets in within as many attempts as there are accepting slow checks, whatever other addresses try meanwhile', () => {
    const candidates = fc
      .record({ accepting: fc.integer({ min: 1, max: 3 }), replaced: fc.boolean(), holds: fc.nat() })
      .map(({ accepting, replaced, holds }) => {
        const list: Candidate[] = Array.from({ length: accepting }, (_, i) => ({ slot: i === 0 ? 'active' : 'pending', id: `c${i}`, holds: i === holds % accepting }));
        if (replaced) list.push({ slot: 'replaced', id: 'r', holds: false });
        return list;
      });
    fc.assert(
      fc.property(candidates, fc.array(fc.nat(), { maxLength: 10 }), fc.array(fc.double({ min: 0, max: 0.999, noNaN: true }), { minLength: 1, maxLength: 20 }), (list, others, draws) => {
        const memory = createLoginMemory(LOGIN_MEMORY_LIMITS);
        let d = 0;
        const random = () => draws[d++ % draws.length]!;
        const attempt = (address: string, holds: (c: Candidate) => boolean) => {
          const choice = chooseSlowCheck(list, memory.tried('A', address), memory.replacedCheckAllowed('A'), random)!;
          if (choice.check.slot === 'replaced') memory.takeReplacedCheck('A');
          const accepted = choice.check.slot !== 'replaced' && holds(choice.check);
          if (accepted) memory.succeeded('A', address);
          else memory.failed('A', address, choice.check.id, choice.restart);
          return accepted;
        };
        const accepting = list.filter((c) => c.slot !== 'replaced').length;
        for (let i = 1; i <= accepting; i++) {
          // Attackers from other addresses in between, with passwords nothing matches.
          for (const other of others) attempt(`x${other % 3}`, () => false);
          if (attempt('station', (c) => c.holds)) return true;
        }
        return false;
      }),
      { numRuns: 500 },
    );
  });

  it('tries the retired credential only after the current one failed from that address, and within its budget', () => {
    const list: SlowCandidate[] = [
      { slot: 'active', id: 'a' },
      { slot: 'replaced', id: 'r' },
    ];
    expect(chooseSlowCheck(list, undefined, true, () => 0.9)).toEqual({ check: list[0], restart: false });
    expect(chooseSlowCheck(list, new Set(['a']), true, () => 0)).toEqual({ check: list[1], restart: false });
    expect(chooseSlowCheck(list, new Set(['a']), false, () => 0)).toEqual({ check: list[0], restart: true });
    expect(chooseSlowCheck(list, new Set(['a', 'r']), true, () => 0)).toEqual({ check: list[0], restart: true });
    // Only the retired one is slow (the current one is HMAC and was checked for free).
    expect(chooseSlowCheck([list[1]!], undefined, true, () => 0)).toEqual({ check: list[1], restart: false });
    expect(chooseSlowCheck([list[1]!], undefined, false, () => 0)).toBeUndefined();
    expect(chooseSlowCheck([], undefined, true, () => 0)).toBeUndefined();
  });

  it('the retired credential’s slow check is allowed once per identity per interval', () => {
    // lru-cache reads a start time of 0 as "no expiry": the clock starts later, as performance.now() does.
    let now = 1000;
    const memory = createLoginMemory({ entries: 10, rememberMs: 1000, replacedCheckEveryMs: 60_000 }, { now: () => now });
    expect(memory.takeReplacedCheck('A')).toBe(true);
    expect(memory.replacedCheckAllowed('A')).toBe(false);
    expect(memory.replacedCheckAllowed('B')).toBe(true);
    now += 59_999;
    expect(memory.takeReplacedCheck('A')).toBe(false);
    now += 2;
    expect(memory.takeReplacedCheck('A')).toBe(true);
  });
});
