import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killProcess, startService } from '../helpers/service-process.js';

// Two real service processes counting in the Redis on 127.0.0.1:6379: one budget between them.
// Needs Redis, not PostgreSQL: each process runs on an embedded database of its own. Without Redis
// this fails (in beforeAll), it never skips. Keys live under a prefix of this run's own, deleted
// afterwards: other suites may be using the same Redis at the same time.
const REDIS_URL = 'redis://127.0.0.1:6379';
const PREFIX = `cns-test:rate-limit:${randomUUID()}:`;
const MAX = 4;
const TOKEN_MAX = 2;

describe('rate limits shared through Redis by two service processes', () => {
  let redis: Redis;
  const dataDirs: string[] = [];
  let services: Awaited<ReturnType<typeof startService>>[] = [];

  beforeAll(async () => {
    redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
    await redis.connect();
    expect(await redis.ping()).toBe('PONG');
    services = await Promise.all(
      [0, 1].map(() => {
        const dataDir = mkdtempSync(join(tmpdir(), 'cns-rate-redis-'));
        dataDirs.push(dataDir);
        return startService({
          DATA_DIR: dataDir,
          REDIS_URL,
          RATE_LIMIT_REDIS_PREFIX: PREFIX,
          RATE_LIMIT_MAX: String(MAX),
          RATE_LIMIT_TOKEN_MAX: String(TOKEN_MAX),
          RATE_LIMIT_WINDOW_SECONDS: '60',
        });
      }),
    );
  }, 120_000);

  afterAll(async () => {
    await Promise.all(services.map((s) => killProcess(s.child)));
    for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
    if (redis?.status === 'ready') {
      const keys = await redis.keys(`${PREFIX}*`);
      if (keys.length > 0) await redis.del(...keys);
      await redis.quit();
    }
  });

  it('counts requests through either process against one budget, and refuses on both once it is spent', async () => {
    const [a, b] = services.map((s) => s.base) as [string, string];
    const seen: string[] = [];
    for (let i = 0; i < MAX; i++) {
      const res = await fetch(`${i % 2 === 0 ? a : b}/.well-known/jwks.json`);
      expect(res.status).toBe(200);
      seen.push(res.headers.get('ratelimit') ?? '');
    }
    // remaining counts down across the two processes: the counter is one
    expect(seen.map((v) => /;r=(\d+);/.exec(v)?.[1])).toEqual(['3', '2', '1', '0']);
    for (const base of [a, b]) {
      const res = await fetch(`${base}/.well-known/jwks.json`);
      expect(res.status).toBe(429);
      expect(await res.json()).toEqual({ message: expect.any(String) });
      expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(res.headers.get('ratelimit-policy')).toBe(`"address";q=${MAX};w=60`);
    }
    // the keys are this run's own
    expect((await redis.keys(`${PREFIX}*`)).length).toBeGreaterThan(0);
  });

  it('shares the token endpoint’s own bucket too', async () => {
    const [a, b] = services.map((s) => s.base) as [string, string];
    const guess = (base: string) =>
      fetch(`${base}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'grant_type=client_credentials&client_id=cli_x&client_secret=guess',
      });
    expect((await guess(a)).status).toBe(401);
    expect((await guess(b)).status).toBe(401);
    for (const base of [a, b]) {
      const res = await guess(base);
      expect(res.status).toBe(429);
      expect(res.headers.get('ratelimit')).toMatch(/^"token";r=0;t=\d+$/);
    }
  });
});
