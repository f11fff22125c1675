// The cache of verified tokens' principals (src/auth/verified-tokens.ts), on its own clock; the
// way requests use it is in token-attacks.test.ts ("a token whose signing key is withdrawn").
import { describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/principal.js';
import { createVerifiedTokens } from '../../src/auth/verified-tokens.js';

const principal = (clientId: string): Principal => ({ clientId, scopes: new Set(['read:sessionpayment']), network: null, isAdmin: false });

function cache(maxEntries = 3) {
  const clock = { now: 1_000_000_000 };
  const tokens = createVerifiedTokens({ maxEntries, maxAgeMs: 600_000, clockToleranceMs: 30_000, now: () => clock.now });
  return { clock, tokens };
}

describe('verified tokens', () => {
  it('answers a token for the key version it was verified with, and for no other', () => {
    const { clock, tokens } = cache();
    tokens.set('Bearer a', 7, { exp: clock.now / 1000 + 300 }, principal('a'));
    expect(tokens.get('Bearer a', 7)).toEqual(principal('a'));
    expect(tokens.get('Bearer b', 7)).toBeUndefined();
    // Keys reloaded: verified again, even if the keys came back the same.
    expect(tokens.get('Bearer a', 8)).toBeUndefined();
    expect(tokens.get('Bearer a', 7)).toBeUndefined();
  });

  it('answers nothing while the keys are past their TTL (version null)', () => {
    const { clock, tokens } = cache();
    tokens.set('Bearer a', 1, { exp: clock.now / 1000 + 300 }, principal('a'));
    expect(tokens.get('Bearer a', null)).toBeUndefined();
  });

  it('holds only while exp allows, with the clock tolerance', () => {
    const { clock, tokens } = cache();
    tokens.set('Bearer a', 1, { exp: clock.now / 1000 + 60 }, principal('a'));
    clock.now += 90_000;
    expect(tokens.get('Bearer a', 1)).toEqual(principal('a'));
    clock.now += 1;
    expect(tokens.get('Bearer a', 1)).toBeUndefined();
  });

  it('holds only from nbf on, with the clock tolerance', () => {
    const { clock, tokens } = cache();
    tokens.set('Bearer a', 1, { nbf: clock.now / 1000 + 40, exp: clock.now / 1000 + 300 }, principal('a'));
    expect(tokens.get('Bearer a', 1)).toBeUndefined();
    tokens.set('Bearer a', 1, { nbf: clock.now / 1000 + 40, exp: clock.now / 1000 + 300 }, principal('a'));
    clock.now += 10_000;
    expect(tokens.get('Bearer a', 1)).toEqual(principal('a'));
  });

  it('holds at most ten minutes however long the token lives', () => {
    const { clock, tokens } = cache();
    tokens.set('Bearer a', 1, { exp: clock.now / 1000 + 86_400 }, principal('a'));
    clock.now += 600_000;
    expect(tokens.get('Bearer a', 1)).toEqual(principal('a'));
    clock.now += 1;
    expect(tokens.get('Bearer a', 1)).toBeUndefined();
  });

  it('keeps nothing for a token without a numeric exp', () => {
    const { clock, tokens } = cache();
    tokens.set('Bearer a', 1, { exp: String(clock.now / 1000 + 300) }, principal('a'));
    tokens.set('Bearer b', 1, {}, principal('b'));
    expect(tokens.get('Bearer a', 1)).toBeUndefined();
    expect(tokens.get('Bearer b', 1)).toBeUndefined();
  });

  it('lets the oldest entry go beyond maxEntries', () => {
    const { clock, tokens } = cache(3);
    for (const name of ['a', 'b', 'c', 'd']) tokens.set(`Bearer ${name}`, 1, { exp: clock.now / 1000 + 300 }, principal(name));
    expect(tokens.get('Bearer a', 1)).toBeUndefined();
    for (const name of ['b', 'c', 'd']) expect(tokens.get(`Bearer ${name}`, 1)).toEqual(principal(name));
  });
});
