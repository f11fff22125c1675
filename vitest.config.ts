import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Needs a PgBouncer in front of the PostgreSQL server: only the pooler pass of .ci/run, which
    // sets PGBOUNCER_URL, runs it (named on its command line); every other run leaves it out.
    // The balancer's tests start several service processes on one PostgreSQL database behind
    // Debian's haproxy: every run with DATABASE_URL has them (and fails without haproxy); a run on
    // PGlite leaves them out, and the webhook deliveries of several service processes on one
    // database with them, and the guard against a silent connection (PGlite has no socket).
    exclude: [
      ...configDefaults.exclude,
      ...(process.env.PGBOUNCER_URL ? [] : ['test/e2e/pooler.test.ts']),
      ...(process.env.DATABASE_URL ? [] : ['test/e2e/balancer.test.ts', 'test/e2e/webhook-replicas.test.ts', 'test/db/silent-connections.test.ts']),
    ],
    globalSetup: ['test/global-setup.ts'],
    environment: 'node',
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
