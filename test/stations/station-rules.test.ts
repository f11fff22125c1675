import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ID_PATTERN } from '../../src/asset-management/asset-management-schemas.js';
import { readCredentials } from '../../src/stations/ocpp/ocpp-adapter.js';
import { forwardedOverTls, ocppIdentity, profileProblem, releaseRetryDelayMs, stationTimings, storableText } from '../../src/stations/station-rules.js';
import { loadConfig } from '../../src/kernel/config.js';

describe('profileProblem', () => {
  it('property: profile 3 never, profile 2 only over TLS, profile 1 anywhere; the network minimum counts', () => {
    fc.assert(
      fc.property(fc.constantFrom(1, 2, 3), fc.constantFrom(1 as const, 2 as const, 3 as const), fc.boolean(), (asset, min, tls) => {
        const required = Math.max(asset, min);
        const allowed = profileProblem(asset, min, tls) === null;
        return allowed === (required === 1 || (required === 2 && tls));
      }),
    );
  });
});

describe('forwardedOverTls', () => {
  it.each([
    ['https', true],
    ['wss', true],
    ['HTTPS', true],
    ['https, wss', true],
    ['http', false],
    ['ws', false],
    ['http, https', false],
    ['https, http', false],
    ['', false],
    [undefined, false],
  ])('%j → %s', (value, expected) => {
    expect(forwardedOverTls(value === undefined ? {} : { 'x-forwarded-proto': value })).toBe(expected);
  });
});

describe('ocppIdentity', () => {
  it('property: /ocpp/{id} gives the id for every valid id, with or without a query or trailing slash', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[A-Za-z0-9._:-]{1,128}$/), fc.constantFrom('', '/', '?a=1'), (id, suffix) => ocppIdentity(`/ocpp/${id}${suffix}`, ID_PATTERN) === id),
    );
  });

  it.each(['/ocpp', '/ocpp/', '/ocpp/a/b', '/OCPP/a', '/x/ocpp/a', '/ocpp/a%20b', '/ocpp/é', undefined])('%j is not the endpoint', (url) => {
    expect(ocppIdentity(url, ID_PATTERN)).toBeNull();
  });
});

describe('readCredentials', () => {
  const header = (raw: Buffer) => `Basic ${raw.toString('base64')}`;

  it('property: the password is every byte after "identity:", colons and binary included', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[A-Za-z0-9._-]{1,40}$/), fc.uint8Array({ maxLength: 60 }), (identity, bytes) => {
        const password = Buffer.from(bytes);
        const read = readCredentials(header(Buffer.concat([Buffer.from(`${identity}:`), password])), identity);
        return read.kind === 'basic' && read.password.equals(password);
      }),
    );
  });

  it('tells no credentials, malformed ones and another username apart', () => {
    expect(readCredentials(undefined, 'CP-1')).toEqual({ kind: 'none' });
    expect(readCredentials('Bearer abc', 'CP-1')).toEqual({ kind: 'malformed' });
    expect(readCredentials('Basic !!!', 'CP-1')).toEqual({ kind: 'malformed' });
    expect(readCredentials(header(Buffer.from('CP-2:secret-password-1')), 'CP-1')).toEqual({ kind: 'other-user' });
    expect(readCredentials(header(Buffer.from('CP-1x:secret-password-1')), 'CP-1')).toEqual({ kind: 'other-user' });
    expect(readCredentials(header(Buffer.from('CP-1')), 'CP-1')).toEqual({ kind: 'other-user' });
  });
});

describe('stationTimings', () => {
  it('for every OCPP_LEASE_SECONDS the config accepts (1-60, all of them), the stored lastSeenAt lags by at most 60 s, each station is written at most once per 30 s or per lease, and the lease is renewed three times before it runs out', () => {
    expect(loadConfig({ OCPP_LEASE_SECONDS: '1' }).ocpp.leaseSeconds).toBe(1);
    expect(loadConfig({ OCPP_LEASE_SECONDS: '60' }).ocpp.leaseSeconds).toBe(60);
    expect(() => loadConfig({ OCPP_LEASE_SECONDS: '0' })).toThrow();
    expect(() => loadConfig({ OCPP_LEASE_SECONDS: '61' })).toThrow();
    for (let leaseSeconds = 1; leaseSeconds <= 60; leaseSeconds++) {
      const { renewMs, seenWriteMs, seenFlushMs } = stationTimings(leaseSeconds);
      expect(seenWriteMs + seenFlushMs, `lease ${leaseSeconds}`).toBeLessThanOrEqual(60_000);
      expect(seenWriteMs).toBe(Math.min(leaseSeconds, 30) * 1000);
      expect(seenFlushMs).toBeLessThanOrEqual(Math.min(1000, renewMs));
      expect(renewMs * 3).toBeLessThanOrEqual(leaseSeconds * 1000);
    }
  });
});

describe('releaseRetryDelayMs', () => {
  it('starts at 0.5 s and doubles up to 5 s, never more: the first retries fit in the 5 s a disconnect has to read false', () => {
    expect([1, 2, 3, 4, 5, 6].map(releaseRetryDelayMs)).toEqual([500, 1000, 2000, 4000, 5000, 5000]);
    // Two failed writes (each taking a moment) and the third lands 1.5 s after the first.
    expect(releaseRetryDelayMs(1) + releaseRetryDelayMs(2)).toBeLessThan(5000);
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1_000_000 }), (failures) => {
        const delay = releaseRetryDelayMs(failures);
        return delay >= 500 && delay <= 5000 && delay >= releaseRetryDelayMs(Math.max(1, failures - 1));
      }),
    );
  });
});

describe('storableText', () => {
  it('property: keeps every string but its NUL characters, each of which becomes U+FFFD; a non-string is null', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (value) => {
        const stored = storableText(value)!;
        expect(stored.includes('\u0000')).toBe(false);
        expect(stored.length).toBe(value.length);
        expect(stored.replaceAll('\uFFFD', '\u0000')).toBe(value.replaceAll('\uFFFD', '\u0000'));
      }),
    );
    expect(storableText(7)).toBeNull();
    expect(storableText(undefined)).toBeNull();
  });
});
