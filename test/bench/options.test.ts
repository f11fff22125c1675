import { describe, expect, it } from 'vitest';
import { parseOptions, parseWebhookOptions } from '../../bench/options.js';
import { BENCH_POSTGRES_SETTINGS } from '../../bench/postgres-cluster.js';

const LOCAL_URL = 'postgres://postgres@127.0.0.1:5432/test';

describe('bench options', () => {
  it('uses PGlite and one size without DATABASE_URL', () => {
    const options = parseOptions([], {});
    expect(options).toMatchObject({ databaseUrl: undefined, ownPostgres: false, sizes: [10_000], runs: 1, durationSeconds: 10 });
  });

  it('uses DATABASE_URL and both sizes when it is set', () => {
    const options = parseOptions(['--runs', '3', '--duration', '8'], { DATABASE_URL: LOCAL_URL });
    expect(options).toMatchObject({ databaseUrl: LOCAL_URL, ownPostgres: false, sizes: [10_000, 1_000_000], runs: 3, durationSeconds: 8 });
  });

  it('--own-postgres ignores DATABASE_URL and seeds both sizes', () => {
    const options = parseOptions(['--own-postgres'], { DATABASE_URL: LOCAL_URL });
    expect(options).toMatchObject({ databaseUrl: undefined, ownPostgres: true, sizes: [10_000, 1_000_000] });
    expect(parseOptions(['--own-postgres', '--quick'], {}).sizes).toEqual([10_000]);
  });

  it('--memory measures the start only and writes its own file', () => {
    const options = parseOptions(['--memory'], {});
    expect(options).toMatchObject({ memoryOnly: true, baselineOnly: false });
    expect(options.out).toMatch(/results\/latest-memory\.json$/);
    expect(parseOptions([], {}).memoryOnly).toBe(false);
  });

  it('sorts and de-duplicates sizes', () => {
    expect(parseOptions(['--sizes', '1_000_000,10000,10000'], { DATABASE_URL: LOCAL_URL }).sizes).toEqual([10_000, 1_000_000]);
  });
});

describe('bench PostgreSQL settings', () => {
  it('holds the 1,000,000-row table (about 1.3 GB with its indexes) in shared_buffers', () => {
    const match = /^(\d+)GB$/.exec(BENCH_POSTGRES_SETTINGS.shared_buffers ?? '');
    expect(match).not.toBeNull();
    expect(Number(match![1])).toBeGreaterThanOrEqual(2);
  });
});

describe('bench --accept-encoding', () => {
  it('sends no Accept-Encoding unless asked, and takes a header value', () => {
    expect(parseOptions([], {}).acceptEncoding).toBeUndefined();
    expect(parseOptions(['--accept-encoding', 'br, gzip'], {}).acceptEncoding).toBe('br, gzip');
  });
});

describe('bench --webhooks options', () => {
  it('defaults to the targets’ figures: five alternated rounds, a backlog of 100,000, a storm of 2,000', () => {
    const options = parseWebhookOptions(['--webhooks'], { DATABASE_URL: LOCAL_URL });
    expect(options).toMatchObject({ quick: false, rounds: 5, durationSeconds: 10, backlog: 100_000, storm: 2000, build: true, databaseUrl: LOCAL_URL });
    expect(options.out).toMatch(/results\/webhooks-latest\.json$/);
  });

  it('--quick shrinks every part and writes its own file; the parts can be set one by one, a storm of 0 skips it', () => {
    expect(parseWebhookOptions(['--webhooks', '--quick'], {})).toMatchObject({ rounds: 1, durationSeconds: 5, backlog: 10_000, storm: 200, databaseUrl: undefined });
    expect(parseWebhookOptions(['--quick'], {}).out).toMatch(/results\/webhooks-quick\.json$/);
    const set = parseWebhookOptions(['--rounds', '3', '--duration', '8', '--backlog', '50_000', '--storm', '0', '--no-build'], {});
    expect(set).toMatchObject({ rounds: 3, durationSeconds: 8, backlog: 50_000, storm: 0, build: false });
  });
});
