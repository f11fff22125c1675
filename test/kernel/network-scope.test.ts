import fc from 'fast-check';
import { eq } from 'drizzle-orm';
import { PgDialect, pgTable, text } from 'drizzle-orm/pg-core';
import { describe, expect, it } from 'vitest';
import { inNetwork } from '../../src/db/in-network.js';
import { coversNetwork } from '../../src/kernel/network-scope.js';

const things = pgTable('things', { id: text('id'), network: text('network') });
const dialect = new PgDialect();
function render(where: ReturnType<typeof inNetwork>) {
  if (where === undefined) return undefined;
  const { sql, params } = dialect.sqlToQuery(where);
  return { sql, params };
}

describe('coversNetwork', () => {
  it('a scope without a network covers every network; a scoped one only its own', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (own, other) => {
        expect(coversNetwork({ network: null }, other)).toBe(true);
        expect(coversNetwork({ network: own }, own)).toBe(true);
        expect(coversNetwork({ network: own }, other)).toBe(own === other);
      }),
    );
  });
});

describe('inNetwork', () => {
  it('adds the network to the conditions of a scoped caller, and nothing for an unscoped one', () => {
    expect(render(inNetwork(things.network, { network: null }, eq(things.id, 'a')))).toEqual({
      sql: '"things"."id" = $1',
      params: ['a'],
    });
    expect(render(inNetwork(things.network, { network: 'net_a' }, eq(things.id, 'a')))).toEqual({
      sql: '("things"."id" = $1 and "things"."network" = $2)',
      params: ['a', 'net_a'],
    });
  });

  it('with no condition, filters by the network alone, or not at all', () => {
    expect(render(inNetwork(things.network, { network: null }))).toBeUndefined();
    expect(render(inNetwork(things.network, { network: null }, undefined))).toBeUndefined();
    expect(render(inNetwork(things.network, { network: 'net_a' }, undefined))).toEqual({ sql: '"things"."network" = $1', params: ['net_a'] });
  });
});
