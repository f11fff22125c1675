// The batcher that gathers the stations' statements (src/stations/batching.ts), as a pure rule: whatever
// the pushes, keys, sizes and timings, every item gets its own result, batches respect their
// bounds, and equal keys keep their order.
import fc from 'fast-check';
import pLimit from 'p-limit';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { createBatcher, rounds } from '../../src/stations/batching.js';

interface Item {
  id: number;
  key: string;
}

describe('rounds', () => {
  it('puts the n-th item of each key in round n, keeping the order within a round', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom('a', 'b', 'c', 'd'), { maxLength: 40 }), (keys) => {
        const items = keys.map((key, id) => ({ id, key }));
        const result = rounds(items, (i) => i.key);
        expect(result.flat().map((i) => i.id).sort((a, b) => a - b)).toEqual(items.map((i) => i.id));
        for (const round of result) {
          expect(new Set(round.map((i) => i.key)).size).toBe(round.length);
          expect(round.map((i) => i.id)).toEqual([...round.map((i) => i.id)].sort((a, b) => a - b));
        }
        for (const key of new Set(keys)) {
          const positions = result.map((round) => round.find((i) => i.key === key)?.id).filter((id) => id !== undefined);
          expect(positions).toEqual(items.filter((i) => i.key === key).map((i) => i.id));
        }
      }),
    );
  });
});

describe('createBatcher', () => {
  it('for any pushes and timings: every item gets its result, batches stay within maxSize, never hold a key twice, never overlap, and equal keys run in order', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 6 }),
        fc.array(fc.record({ key: fc.constantFrom('a', 'b', 'c', 'd', 'e'), gap: fc.integer({ min: 0, max: 3 }) }), { minLength: 1, maxLength: 40 }),
        fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 10 }),
        async (maxSize, pushes, delays) => {
          const runs: Item[][] = [];
          let running = 0;
          let overlapped = false;
          const batcher = createBatcher<Item, string>({
            maxSize,
            key: (i) => i.key,
            run: async (items) => {
              running += 1;
              overlapped ||= running > 1;
              runs.push(items);
              await sleep(delays[runs.length % delays.length]!);
              running -= 1;
              return items.map((i) => `result-${i.id}`);
            },
          });
          const results: Array<Promise<string>> = [];
          for (const [id, push] of pushes.entries()) {
            results.push(batcher.push({ id, key: push.key }));
            if (push.gap > 0) await sleep(push.gap);
          }
          expect(await Promise.all(results)).toEqual(pushes.map((_, id) => `result-${id}`));
          expect(overlapped).toBe(false);
          for (const run of runs) {
            expect(run.length).toBeGreaterThan(0);
            expect(run.length).toBeLessThanOrEqual(maxSize);
            expect(new Set(run.map((i) => i.key)).size).toBe(run.length);
          }
          // Run order: each key's items in the order they were pushed.
          const order = runs.flat();
          for (const key of new Set(pushes.map((p) => p.key))) {
            const ids = order.filter((i) => i.key === key).map((i) => i.id);
            expect(ids).toEqual([...ids].sort((a, b) => a - b));
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('sends a lone item at once and alone, and gathers what arrives during a batch into the next', async () => {
    const runs: number[][] = [];
    let release: () => void = () => undefined;
    const batcher = createBatcher<number, number>({
      maxSize: 500,
      run: async (items) => {
        runs.push(items);
        if (runs.length === 1) await new Promise<void>((r) => (release = r));
        return items.map((i) => i * 2);
      },
    });
    const first = batcher.push(1);
    await sleep(0);
    expect(runs).toEqual([[1]]);
    const burst = Array.from({ length: 100 }, (_, i) => batcher.push(i + 2));
    await sleep(0);
    expect(runs).toHaveLength(1);
    release();
    expect(await first).toBe(2);
    expect(await Promise.all(burst)).toEqual(Array.from({ length: 100 }, (_, i) => (i + 2) * 2));
    expect(runs.map((r) => r.length)).toEqual([1, 100]);
  });

  it('a failed batch rejects its own items only; the batches after it run', async () => {
    const batcher = createBatcher<number, number>({
      maxSize: 2,
      run: async (items) => {
        if (items.includes(3)) throw new Error('statement failed');
        return items;
      },
    });
    // 1 goes alone; 2 and 3 share the batch that fails; 4 and 5 go after it.
    const settled = await Promise.allSettled([1, 2, 3, 4, 5].map((i) => batcher.push(i)));
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'fulfilled', 'fulfilled']);
    expect((settled[2] as PromiseRejectedResult).reason).toEqual(new Error('statement failed'));
  });

  it('a run that returns the wrong number of results rejects its items instead of misassigning them', async () => {
    const batcher = createBatcher<number, number>({ maxSize: 10, run: async (items) => items.slice(1) });
    await expect(batcher.push(1)).rejects.toThrow('a batch of 1 returned 0 results');
  });

  it('batchers sharing a schedule take turns, and a batch takes its items when its turn comes', async () => {
    const turn = pLimit(1);
    let running = 0;
    let most = 0;
    const sizes: Record<string, number[]> = { a: [], b: [] };
    const make = (name: 'a' | 'b') =>
      createBatcher<number, number>({
        maxSize: 100,
        schedule: turn,
        run: async (items) => {
          running += 1;
          most = Math.max(most, running);
          sizes[name]!.push(items.length);
          await sleep(5);
          running -= 1;
          return items;
        },
      });
    const a = make('a');
    const b = make('b');
    const first = [a.push(0), b.push(0)];
    // Pushed while a's first batch runs and b's waits for its turn: b's batch takes them too.
    await sleep(1);
    const more = Array.from({ length: 20 }, (_, i) => b.push(i + 1));
    await Promise.all([...first, ...more]);
    expect(most).toBe(1);
    expect(sizes).toEqual({ a: [1], b: [21] });
  });

  it('refuses a maxSize below 1', () => {
    expect(() => createBatcher({ maxSize: 0, run: async (items: number[]) => items })).toThrow(RangeError);
  });
});
