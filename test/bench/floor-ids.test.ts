import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { floorSessionIds } from '../../bench/floor-server.js';
import { hasForbiddenCharacter } from '../../src/kernel/identifiers.js';
import { listQuerySchema } from '../../src/payments/payments-schemas.js';

// What the service's list sends PostgreSQL for a sessionIds value, or null for its 400.
function serviceIds(raw: unknown): string[] | null {
  const parsed = listQuerySchema.safeParse({ sessionIds: raw });
  return parsed.success ? parsed.data.sessionIds.filter((id) => !hasForbiddenCharacter(id)) : null;
}

describe('the floor reads sessionIds the service\'s way', () => {
  const piece = fc.oneof(
    fc.constantFrom('ses_1', ' ses_1 ', 'ses_"q"', 'ses_\\b', 'ses_{x}', 'e\u0301', '\u00e9', '', ' ', 'a\u0000b', 'ses_\u200b'),
    fc.string({ maxLength: 6 }),
    fc.string({ minLength: 127, maxLength: 130 }),
  );

  it('sends the same IDs, or refuses the same lists', () => {
    fc.assert(
      fc.property(fc.array(piece, { minLength: 0, maxLength: 8 }), (pieces) => {
        const raw = pieces.join(',');
        expect(floorSessionIds(raw)).toEqual(serviceIds(raw));
      }),
    );
  });

  it('joins a repeated parameter, counts distinct IDs, and refuses more than 100', () => {
    expect(floorSessionIds(['a,b', 'a', ' c'])).toEqual(serviceIds(['a,b', 'a', ' c']));
    const hundred = Array.from({ length: 100 }, (_, i) => `s${i}`);
    expect(floorSessionIds([...hundred, 's1'].join(','))).toEqual(hundred);
    expect(floorSessionIds([...hundred, 's100'].join(','))).toBeNull();
    expect(serviceIds([...hundred, 's100'].join(','))).toBeNull();
    expect(floorSessionIds(undefined)).toBeNull();
  });
});
