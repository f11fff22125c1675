import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { RETRY_DELAYS_MS, isDelivered, retryDelayMs } from '../../src/events/delivery-schedule.js';

const HOUR = 3_600_000;

describe('the retry schedule', () => {
  it('retries first within 10 s, with growing waits, for at least 24 hours, then gives up', () => {
    fc.assert(
      fc.property(fc.array(fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), { minLength: RETRY_DELAYS_MS.length, maxLength: RETRY_DELAYS_MS.length }), (randoms) => {
        const waits = randoms.map((r, i) => retryDelayMs(i + 1, RETRY_DELAYS_MS, () => r)!);
        expect(waits[0]).toBeLessThanOrEqual(10_000);
        for (let i = 1; i < waits.length; i++) expect(RETRY_DELAYS_MS[i]!).toBeGreaterThanOrEqual(RETRY_DELAYS_MS[i - 1]!);
        expect(waits.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(24 * HOUR);
        expect(retryDelayMs(RETRY_DELAYS_MS.length + 1, RETRY_DELAYS_MS, () => randoms[0]!)).toBeNull();
      }),
    );
  });

  it('spreads retries: the jitter only lengthens a wait, by up to a quarter', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: RETRY_DELAYS_MS.length }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (attempts, r) => {
        const base = RETRY_DELAYS_MS[attempts - 1]!;
        const wait = retryDelayMs(attempts, RETRY_DELAYS_MS, () => r)!;
        expect(wait).toBeGreaterThanOrEqual(base);
        expect(wait).toBeLessThanOrEqual(base * 1.25);
      }),
    );
  });

  it('counts a 2xx as delivered, anything else as not', () => {
    expect([200, 201, 204, 299].every(isDelivered)).toBe(true);
    expect([undefined, 100, 301, 302, 400, 410, 500].some(isDelivered)).toBe(false);
  });
});
