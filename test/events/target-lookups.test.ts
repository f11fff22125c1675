// The replica's host name lookups taking turns: FairSlots' rules for every sequence of arrivals,
// ends and withdrawals, and targetLookups' sharing and time limit over a resolver the test holds.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FairSlots, LookupTimedOut, targetLookups } from '../../src/events/target-lookups.js';
import type { ResolvedAddress } from '../../src/events/target-rules.js';

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

interface Held {
  key: string;
  n: number;
  finish(): void;
}

// FairSlots with tasks that end when the test says, and the order in which they started.
function heldSlots(slots: number, perKey: number) {
  const fair = new FairSlots(slots, perKey);
  const running: Held[] = [];
  const startedOrder: Array<{ key: string; n: number }> = [];
  // When each task was scheduled and started, on one clock.
  const scheduledAt = new Map<number, number>();
  const startedAt = new Map<number, number>();
  let clock = 0;
  let made = 0;
  const schedule = (key: string, options: { first?: boolean } = {}) => {
    const n = made++;
    scheduledAt.set(n, clock++);
    const scheduled = fair.schedule(
      key,
      () => {
        startedAt.set(n, clock++);
        startedOrder.push({ key, n });
        return new Promise<void>((resolve) => running.push({ key, n, finish: resolve }));
      },
      options,
    );
    void scheduled.result.catch(() => undefined);
    return { n, ...scheduled };
  };
  return { fair, running, startedOrder, scheduledAt, startedAt, schedule };
}

describe('FairSlots', () => {
  it('serves the keys in turn: a key that starts a task goes behind every key that waits', async () => {
    const { running, startedOrder, schedule } = heldSlots(1, 1);
    for (let i = 0; i < 4; i++) schedule('busy');
    schedule('quiet');
    schedule('third');
    schedule('quiet');
    await turn();
    const order = async () => {
      while (running.length > 0) {
        running.shift()!.finish();
        await turn();
      }
    };
    await order();
    // The first busy started at once and its second came before the others: then each in turn.
    expect(startedOrder.map((s) => s.key)).toEqual(['busy', 'busy', 'quiet', 'third', 'busy', 'quiet', 'busy']);
  });

  it('a key that comes back as soon as its task ends joins the end of the turns', async () => {
    const { running, startedOrder, schedule } = heldSlots(1, 1);
    schedule('again');
    for (let i = 0; i < 5; i++) {
      schedule('b');
      schedule('c');
    }
    await turn();
    for (let i = 0; i < 9; i++) {
      const ended = running.shift()!;
      ended.finish();
      // The key asks again the moment its task ends, before the next one starts.
      if (ended.key === 'again') schedule('again');
      await turn();
    }
    expect(startedOrder.map((s) => s.key[0]).join('')).toBe('abcabcabca');
  });

  it('puts a task scheduled first ahead of its key\'s others, not ahead of other keys', async () => {
    const { running, startedOrder, schedule } = heldSlots(1, 1);
    schedule('a');
    schedule('a');
    schedule('b');
    schedule('a', { first: true });
    await turn();
    while (running.length > 0) {
      running.shift()!.finish();
      await turn();
    }
    expect(startedOrder.map((s) => `${s.key}${s.n}`)).toEqual(['a0', 'a3', 'b2', 'a1']);
  });

  it('runs no more than its slots, nor a key more than its share, never leaves a slot idle that a waiting key may take, and starts a key\'s tasks in order, those scheduled first ahead', async () => {
    const keys = ['a', 'b', 'c', 'd'];
    const step = fc.oneof(
      fc.record({ op: fc.constant('schedule' as const), key: fc.constantFrom(...keys), first: fc.boolean() }),
      fc.record({ op: fc.constant('finish' as const), at: fc.nat() }),
      fc.record({ op: fc.constant('withdraw' as const), at: fc.nat() }),
    );
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 3 }), fc.array(step, { maxLength: 60 }), async (slots, perKey, steps) => {
        const { fair, running, startedOrder, scheduledAt, startedAt, schedule } = heldSlots(slots, perKey);
        const waiting: Array<ReturnType<typeof schedule> & { key: string }> = [];
        const withdrawn = new Set<number>();
        const scheduledOrder: Array<{ key: string; n: number; first: boolean }> = [];
        for (const s of steps) {
          if (s.op === 'schedule') {
            const scheduled = schedule(s.key, { first: s.first });
            waiting.push({ ...scheduled, key: s.key });
            scheduledOrder.push({ key: s.key, n: scheduled.n, first: s.first });
          } else if (s.op === 'finish' && running.length > 0) {
            running.splice(s.at % running.length, 1)[0]!.finish();
          } else if (s.op === 'withdraw' && waiting.length > 0) {
            const [w] = waiting.splice(s.at % waiting.length, 1);
            const started = startedOrder.some((x) => x.n === w!.n);
            expect(w!.withdraw()).toBe(!started);
            if (!started) withdrawn.add(w!.n);
          }
          await turn();
          const counts = fair.counts();
          expect(counts.running).toBe(running.length);
          expect(counts.running).toBeLessThanOrEqual(slots);
          for (const key of keys) expect(running.filter((r) => r.key === key).length).toBeLessThanOrEqual(perKey);
          // Work-conserving: a free slot means no waiting key may take it.
          const notStarted = scheduledOrder.filter((x) => !withdrawn.has(x.n) && !startedOrder.some((y) => y.n === x.n));
          expect(counts.waiting).toBe(notStarted.length);
          if (counts.running < slots) {
            for (const x of notStarted) expect(running.filter((r) => r.key === x.key).length).toBe(perKey);
          }
        }
        // Once everything running ends, every task not withdrawn starts.
        while (running.length > 0) {
          running.shift()!.finish();
          await turn();
        }
        expect(startedOrder.length + withdrawn.size).toBe(scheduledOrder.length);
        // Within a key and kind, tasks start in the order they came; a task scheduled first never
        // starts after one of its key's others that was waiting when it came.
        const firstOf = new Map(scheduledOrder.map((x) => [x.n, x.first]));
        for (const key of keys) {
          for (const kind of [true, false]) {
            const started = startedOrder.filter((x) => x.key === key && firstOf.get(x.n) === kind).map((x) => x.n);
            expect(started).toEqual([...started].sort((p, q) => p - q));
          }
        }
        for (const f of scheduledOrder.filter((x) => x.first && startedAt.has(x.n))) {
          for (const other of scheduledOrder.filter((x) => x.key === f.key && !x.first && startedAt.has(x.n))) {
            // `other` was waiting when `f` came: `f` goes first.
            if (scheduledAt.get(other.n)! < scheduledAt.get(f.n)! && startedAt.get(other.n)! > scheduledAt.get(f.n)!) {
              expect(startedAt.get(f.n)!).toBeLessThan(startedAt.get(other.n)!);
            }
          }
        }
      }),
      { numRuns: 200 },
    );
  });

  it('a task that throws or rejects gives its slot back', async () => {
    const fair = new FairSlots(1, 1);
    await expect(fair.schedule('a', () => { throw new Error('at once'); }).result).rejects.toThrow('at once');
    await expect(fair.schedule('a', () => Promise.reject(new Error('later'))).result).rejects.toThrow('later');
    await expect(fair.schedule('a', () => Promise.resolve(7)).result).resolves.toBe(7);
    expect(fair.counts()).toMatchObject({ running: 0, waiting: 0 });
  });
});

describe('targetLookups', () => {
  const address: ResolvedAddress[] = [{ address: '93.184.215.14', family: 4 }];

  // A resolver whose answers the test gives, and the names it was asked for.
  function heldResolver() {
    const started: string[] = [];
    const answers: Array<() => void> = [];
    const resolve = (hostname: string) => {
      started.push(hostname);
      return new Promise<ResolvedAddress[]>((done) => answers.push(() => done(address)));
    };
    return { started, answers, resolve };
  }

  it('lookups of one name at once share one within a network; another network looks it up in its own turn, never in the first one\'s queue', async () => {
    const { started, answers, resolve } = heldResolver();
    const lookups = targetLookups(resolve, { slots: 2, perNetwork: 1 });
    const one = lookups.forCheck('net_a', 5_000)('same.example.com');
    const two = lookups.forCheck('net_a', 5_000)('same.example.com');
    // net_a's slot is held and its next name waits; net_b's lookup of the same name goes at once.
    const queued = lookups.forCheck('net_a', 5_000)('other.example.com');
    const theirs = lookups.forCheck('net_b', 5_000)('same.example.com');
    await turn();
    expect(started).toEqual(['same.example.com', 'same.example.com']);
    answers.splice(0).forEach((answer) => answer());
    await expect(Promise.all([one, two, theirs])).resolves.toEqual([address, address, address]);
    await turn();
    answers.splice(0).forEach((answer) => answer());
    await expect(queued).resolves.toEqual(address);
    expect(started).toEqual(['same.example.com', 'same.example.com', 'other.example.com']);
  });

  it('a lookup past its time limit fails with LookupTimedOut, and one nobody waits for any more gives its turn up', async () => {
    const { started, answers, resolve } = heldResolver();
    const lookups = targetLookups(resolve, { slots: 1, perNetwork: 1 });
    const first = lookups.forCheck('net_a', 5_000)('first.example.com');
    // Waits behind first.example.com for the one slot, and gives up before its turn.
    await expect(lookups.forCheck('net_b', 50)('late.example.com')).rejects.toBeInstanceOf(LookupTimedOut);
    expect(lookups.counts()).toMatchObject({ running: 1, waiting: 0 });
    answers.shift()!();
    await expect(first).resolves.toEqual(address);
    expect(started).toEqual(['first.example.com']);
  });

  it('a network\'s checks go ahead of its deliveries\' lookups, in the order they came, and never join a delivery\'s lookup waiting for its turn', async () => {
    const { started, answers, resolve } = heldResolver();
    const lookups = targetLookups(resolve, { slots: 1, perNetwork: 1 });
    const asked = [
      lookups.forDeliveries('net_a', 5_000)('d0.example.com'),
      lookups.forDeliveries('net_a', 5_000)('d1.example.com'),
      lookups.forDeliveries('net_a', 5_000)('same.example.com'),
      lookups.forCheck('net_a', 5_000)('c1.example.com'),
      lookups.forCheck('net_a', 5_000)('c2.example.com'),
      lookups.forCheck('net_a', 5_000)('same.example.com'),
    ];
    for (let i = 0; i < asked.length; i++) {
      await turn();
      answers.shift()!();
    }
    await expect(Promise.all(asked)).resolves.toHaveLength(asked.length);
    expect(started).toEqual(['d0.example.com', 'c1.example.com', 'c2.example.com', 'same.example.com', 'd1.example.com', 'same.example.com']);
  });

  it('one network\'s many names never push another network\'s kept answers out', async () => {
    let asked = 0;
    const lookups = targetLookups(async () => {
      asked++;
      return address;
    });
    const quiet = lookups.forDeliveries('net_quiet', 5_000);
    await quiet('receiver.example.com');
    const busy = lookups.forDeliveries('net_busy', 5_000);
    for (let i = 0; i < 2_000; i++) await busy(`r${i}.example.com`);
    const before = asked;
    await quiet('receiver.example.com');
    expect(asked).toBe(before);
  });

  it('a delivery takes the answer its network had for the name within the last seconds; a check takes no kept answer', async () => {
    const { started, answers, resolve } = heldResolver();
    const lookups = targetLookups(resolve);
    const deliveries = lookups.forDeliveries('net_a', 5_000);
    const first = deliveries('kept.example.com');
    await turn();
    answers.shift()!();
    await expect(first).resolves.toEqual(address);
    await expect(deliveries('kept.example.com')).resolves.toEqual(address);
    expect(started).toEqual(['kept.example.com']);
    // Another network's answers are its own, and a check does not read them.
    const theirs = lookups.forDeliveries('net_b', 5_000)('kept.example.com');
    const check = lookups.forCheck('net_a', 5_000)('kept.example.com');
    await turn();
    answers.splice(0).forEach((answer) => answer());
    await expect(Promise.all([theirs, check])).resolves.toEqual([address, address]);
    expect(started).toEqual(['kept.example.com', 'kept.example.com', 'kept.example.com']);
  });
});
