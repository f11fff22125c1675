import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { paginate, rowsToFetch } from '../../src/asset-management/paging.js';

describe('paginate', () => {
  it('of the rows fetched for a page, answers at most limit items, in order, and hasMore exactly when a row was left over', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 100 }), fc.nat({ max: 101 }), (limit, available) => {
        // What a repository returns when asked for rowsToFetch rows and `available` exist.
        const rows = Array.from({ length: Math.min(available, rowsToFetch({ limit })) }, (_, i) => i);
        const page = paginate(rows, limit, (row) => `item ${row}`);
        expect(page.items).toEqual(rows.slice(0, limit).map((row) => `item ${row}`));
        expect(page.hasMore).toBe(available > limit);
      }),
    );
  });
});
