import { describe, expect, it, vi } from 'vitest';
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

describe('bench --floor and --rounds', () => {
  // The parser reports a bad command line on stderr and exits 2, as the harness's CLI.
  function refused(argv: string[], env: NodeJS.ProcessEnv = {}): string {
    const exit = vi.spyOn(process, 'exit').mockImplementation((code) => {
      throw new Error(`exit ${code}`);
    });
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      expect(() => parseOptions(argv, env)).toThrow('exit 2');
      return String(stderr.mock.calls[0]?.[0] ?? '');
    } finally {
      exit.mockRestore();
      stderr.mockRestore();
    }
  }

  it('compares with the floor in 3 rounds by default, 5 with --floor alone, and writes its own file', () => {
    expect(parseOptions([], { DATABASE_URL: LOCAL_URL })).toMatchObject({ floorOnly: false, floorRounds: 3 });
    const floor = parseOptions(['--floor'], { DATABASE_URL: LOCAL_URL });
    expect(floor).toMatchObject({ floorOnly: true, floorRounds: 5, sizes: [10_000, 1_000_000] });
    expect(floor.out).toMatch(/results\/latest-floor\.json$/);
    expect(parseOptions(['--floor', '--own-postgres', '--rounds', '7', '--sizes', '10000'], {})).toMatchObject({ floorOnly: true, floorRounds: 7, sizes: [10_000] });
  });

  it('--peers is the floor comparison with the peers beside it, in its own file', () => {
    expect(parseOptions(['--floor'], { DATABASE_URL: LOCAL_URL }).peers).toBe(false);
    const peers = parseOptions(['--peers', '--sizes', '10000'], { DATABASE_URL: LOCAL_URL });
    expect(peers).toMatchObject({ floorOnly: true, peers: true, floorRounds: 5, sizes: [10_000] });
    expect(peers.out).toMatch(/results\/latest-peers\.json$/);
  });

  it('refuses --floor without PostgreSQL, beside another single-purpose run, and rounds out of range', () => {
    expect(refused(['--floor'])).toMatch(/--floor needs PostgreSQL/);
    expect(refused(['--peers'])).toMatch(/--peers needs PostgreSQL/);
    expect(refused(['--peers', '--memory'], { DATABASE_URL: LOCAL_URL })).toMatch(/separate runs/);
    expect(refused(['--floor', '--baseline'], { DATABASE_URL: LOCAL_URL })).toMatch(/separate runs/);
    expect(refused(['--rounds', '0'], { DATABASE_URL: LOCAL_URL })).toMatch(/--rounds must be an integer from 1 to 99/);
    expect(refused(['--rounds'], { DATABASE_URL: LOCAL_URL })).toMatch(/--rounds needs a value/);
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
