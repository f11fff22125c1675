// The pure rules of Idempotency-Key: what a key is, when two requests are the same, and what a
// stored key means for the next request with it.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  IDEMPOTENCY_KEY_TTL_MS,
  canonicalJson,
  decide,
  inFlightLeaseMs,
  isReplayable,
  parseIdempotencyKey,
  requestFingerprint,
  type StoredKey,
} from '../../../src/http/idempotency/idempotency-rules.js';

// Any value JSON.parse can give, with keys that look like the ones that trip canonicalisation up.
const jsonValue = fc.jsonValue({ maxDepth: 4 });

// The same value with every object's keys in another order.
function shuffled(value: unknown, seed: number): unknown {
  if (Array.isArray(value)) return value.map((v, i) => shuffled(v, seed + i));
  if (value === null || typeof value !== 'object') return value;
  const keys = Object.keys(value);
  const order = keys.map((k, i) => ({ k, w: (i * 7919 + seed * 104729) % (keys.length + 13) })).sort((a, b) => a.w - b.w || (a.k < b.k ? 1 : -1));
  return Object.fromEntries(order.map(({ k }) => [k, shuffled((value as Record<string, unknown>)[k], seed + 1)]));
}

describe('canonicalJson', () => {
  it('is one text for one value, whatever the key order or spacing it arrived in', () => {
    fc.assert(
      fc.property(jsonValue, fc.nat(), fc.constantFrom(0, 2, '\t'), (value, seed, space) => {
        const arrived = JSON.parse(JSON.stringify(shuffled(value, seed), null, space)) as unknown;
        expect(canonicalJson(arrived)).toBe(canonicalJson(value));
      }),
    );
  });

  it('keeps the value: parsing the canonical text gives it back, so different values never share a text', () => {
    fc.assert(
      fc.property(jsonValue, (value) => {
        const text = canonicalJson(value);
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(value)));
        // no whitespace outside strings: the text is already its own canonical form
        expect(canonicalJson(JSON.parse(text))).toBe(text);
      }),
    );
  });

  it('orders keys by UTF-16 code units and writes no whitespace (RFC 8785)', () => {
    expect(canonicalJson({ b: 1, a: [true, null, 'x'], é: { z: 0, '1': -0 }, A: 1e21 })).toBe('{"A":1e+21,"a":[true,null,"x"],"b":1,"é":{"1":0,"z":0}}');
    expect(canonicalJson(undefined)).toBe('null');
  });
});

describe('requestFingerprint', () => {
  const base = { method: 'POST', route: '/payments/v1/session-payments/:id/collect', params: { id: 'pmt_1' }, query: {}, body: { collectedAt: '2026-01-01T00:00:00Z' } };

  it('is the same for the same request, whatever the order of the body keys', () => {
    fc.assert(
      fc.property(jsonValue, fc.nat(), (body, seed) => {
        expect(requestFingerprint({ ...base, body: shuffled(body, seed) })).toBe(requestFingerprint({ ...base, body }));
      }),
    );
  });

  it('differs when the method, the route, a parameter or the body differs', () => {
    const fingerprint = requestFingerprint(base);
    expect(requestFingerprint({ ...base, method: 'PUT' })).not.toBe(fingerprint);
    expect(requestFingerprint({ ...base, route: '/payments/v1/session-payments' })).not.toBe(fingerprint);
    expect(requestFingerprint({ ...base, params: { id: 'pmt_2' } })).not.toBe(fingerprint);
    expect(requestFingerprint({ ...base, body: { collectedAt: '2026-01-01T00:00:00.000Z' } })).not.toBe(fingerprint);
    expect(requestFingerprint({ ...base, body: undefined })).not.toBe(fingerprint);
    fc.assert(
      fc.property(jsonValue, jsonValue, (a, b) => {
        fc.pre(canonicalJson(a) !== canonicalJson(b));
        expect(requestFingerprint({ ...base, body: a })).not.toBe(requestFingerprint({ ...base, body: b }));
      }),
    );
  });
});

describe('parseIdempotencyKey', () => {
  it.each([
    ['8e03978e-40d5-43e8-bc93-6894a57f9324', '8e03978e-40d5-43e8-bc93-6894a57f9324'],
    ['"8e03978e-40d5-43e8-bc93-6894a57f9324"', '8e03978e-40d5-43e8-bc93-6894a57f9324'],
    ['"with \\"quotes\\", a comma and \\\\"', 'with "quotes", a comma and \\'],
    ['order 42/retry #1', 'order 42/retry #1'],
    ['k'.repeat(255), 'k'.repeat(255)],
  ])('%s is the key %s', (raw, key) => {
    expect(parseIdempotencyKey(raw)).toBe(key);
  });

  it.each([
    ['empty', ''],
    ['an empty quoted string', '""'],
    ['256 characters', 'k'.repeat(256)],
    ['a repeated header (joined with a comma)', 'a, b'],
    ['two quoted strings', '"a", "b"'],
    ['an unterminated quoted string', '"abc'],
    ['a bad escape', '"a\\b"'],
    ['non-ASCII', 'clé'],
    ['a control character', 'a\tb'],
  ])('%s is not a key', (_name, raw) => {
    expect(parseIdempotencyKey(raw)).toBeNull();
  });

  it('accepts exactly the printable ASCII strings of 1 to 255 characters without a comma, bare', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.integer({ min: 0, max: 0x7f }).map((c) => String.fromCharCode(c)), minLength: 0, maxLength: 300 }), (raw) => {
        fc.pre(!raw.startsWith('"'));
        const valid = raw.length >= 1 && raw.length <= 255 && /^[\x20-\x7E]+$/.test(raw) && !raw.includes(',');
        expect(parseIdempotencyKey(raw) !== null).toBe(valid);
      }),
    );
  });
});

describe('decide', () => {
  const now = new Date('2026-06-01T12:00:00Z');
  const later = (ms: number) => new Date(now.getTime() + ms);
  const response = { status: 201, headers: { location: '/x' }, body: '{}' };
  const completed: StoredKey = { state: 'COMPLETED', fingerprint: 'f', expiresAt: later(1), response };
  const inFlight: StoredKey = { state: 'IN_FLIGHT', fingerprint: 'f', expiresAt: later(IDEMPOTENCY_KEY_TTL_MS), lockedUntil: later(1) };

  it('runs a request whose key is unknown, expired, or held by an abandoned claim', () => {
    expect(decide(undefined, 'f', now)).toEqual({ kind: 'run' });
    expect(decide({ ...completed, expiresAt: now }, 'f', now)).toEqual({ kind: 'run' });
    expect(decide({ ...completed, expiresAt: now, fingerprint: 'other' }, 'f', now)).toEqual({ kind: 'run' });
    expect(decide({ ...inFlight, lockedUntil: now }, 'f', now)).toEqual({ kind: 'run' });
  });

  it('replays a completed key for the same request, refuses another request, and waits for one in flight', () => {
    expect(decide(completed, 'f', now)).toEqual({ kind: 'replay', response });
    expect(decide(completed, 'g', now)).toEqual({ kind: 'mismatch' });
    expect(decide(inFlight, 'f', now)).toEqual({ kind: 'in_flight' });
    expect(decide(inFlight, 'g', now)).toEqual({ kind: 'mismatch' });
  });

  it('stores every answer but a 5xx', () => {
    expect([200, 201, 400, 403, 404, 409, 422].every(isReplayable)).toBe(true);
    expect([500, 502, 503].some(isReplayable)).toBe(false);
  });

  it('holds a claim longer than the database time limits let a request run', () => {
    expect(inFlightLeaseMs({ statementTimeoutMs: 5000, acquireTimeoutMs: 5000 })).toBe(60_000);
    expect(inFlightLeaseMs({ statementTimeoutMs: 60_000, acquireTimeoutMs: 5000 })).toBe(260_000);
  });
});
