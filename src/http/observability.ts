import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Database, PoolStats } from '../db/database.js';
import { databaseErrorClass, type DatabaseErrorClass } from '../db/failures.js';
import { redactUrl } from './url-redaction.js';

const PROBES = new Set(['/healthz', '/readyz', '/metrics']);

// One registry per app instance: several apps in one process (tests) must not share counters.
declare module 'fastify' {
  interface FastifyInstance {
    // The app's /metrics registry, for plugins that count their own events.
    metrics: Registry;
    // From now on /readyz answers 503 (a stop is coming); every other route is served as before.
    startDraining(): void;
  }
}

async function observabilityPlugin(app: FastifyInstance, opts: { database: Database }) {
  const registry = new Registry();
  app.decorate('metrics', registry);
  collectDefaultMetrics({ register: registry });
  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request duration by route and status',
    labelNames: ['method', 'route', 'status_code'] as const,
    buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });

  const databaseErrors = new Counter({
    name: 'database_errors_total',
    help: 'Database errors that failed a request or a readiness check, by class (timeout, unavailable, other)',
    labelNames: ['class'] as const,
    registers: [registry],
  });
  // Every class is exported from the start, so rate() sees the first error of each.
  for (const c of ['timeout', 'unavailable', 'other'] satisfies DatabaseErrorClass[]) databaseErrors.inc({ class: c }, 0);
  const countDatabaseError = (error: unknown) => {
    const c = databaseErrorClass(error);
    if (c) databaseErrors.inc({ class: c });
  };

  const { poolStats } = opts.database;
  if (poolStats) {
    // Read at scrape time: the pool's own counters, nothing kept in between.
    const gauge = (name: string, help: string, read: (s: PoolStats) => number) =>
      new Gauge({
        name,
        help,
        registers: [registry],
        collect() {
          this.set(read(poolStats()));
        },
      });
    gauge('database_pool_connections', 'Open connections of the request pool, idle or in use', (s) => s.total);
    gauge('database_pool_idle_connections', 'Idle connections of the request pool', (s) => s.idle);
    gauge('database_pool_waiting_requests', 'Queries waiting for a connection of the request pool', (s) => s.waiting);
  }

  // Before the error handler renders the answer, whichever family's it is.
  app.addHook('onError', async (_request, _reply, error) => countDatabaseError(error));

  // Synchronous, like the other hooks every request runs: an async hook costs each request a
  // promise and a turn of the microtask queue (docs/performance.md, "Where a list request's time goes").
  app.addHook('onResponse', (request, reply, done) => {
    const route = routeLabel(request);
    duration.observe({ method: request.method, route, status_code: String(reply.statusCode) }, reply.elapsedTime / 1000);
    // Probes and scrapers call every few seconds: their lines would drown the requests' lines.
    const level = PROBES.has(route) ? 'debug' : 'info';
    // The line's fields (the URL with its query masked, 2 KB for a 100-ID list) are built only
    // when the line is written.
    if (!isLevelEnabled(request.log, level)) {
      done();
      return;
    }
    request.log[level](
      {
        method: request.method,
        url: redactUrl(request.url),
        statusCode: reply.statusCode,
        responseTimeMs: Math.round(reply.elapsedTime * 10) / 10,
        // Who called, from the verified token (never the token itself); absent without one.
        ...(request.principal ? { clientId: request.principal.clientId, network: request.principal.network } : {}),
      },
      'request completed',
    );
    done();
  });

  const hidden = { hide: true } as const;
  // Probes and scrapers poll from one address; they must never be rate limited into "down".
  const probe = { public: true, rateLimit: false } as const;
  app.get('/healthz', { config: probe, schema: hidden }, async () => ({ status: 'ok' }));
  let draining = false;
  app.decorate('startDraining', () => {
    draining = true;
  });
  app.get('/readyz', { config: probe, schema: hidden }, async (request, reply) => {
    // A load balancer's health check takes the replica out before it stops accepting.
    if (draining) return reply.code(503).send({ message: 'shutting down' });
    try {
      await opts.database.ping();
      return { status: 'ready' };
    } catch (err) {
      countDatabaseError(err);
      request.log.warn({ err }, 'readiness check failed');
      return reply.code(503).send({ message: 'database is not answering' });
    }
  });
  app.get('/metrics', { config: probe, schema: hidden }, async (_request, reply) => {
    reply.header('content-type', registry.contentType);
    return registry.metrics();
  });
}

// Fastify's logger type leaves out pino's isLevelEnabled, which every logger here has.
function isLevelEnabled(log: FastifyBaseLogger, level: 'debug' | 'info'): boolean {
  return (log as FastifyBaseLogger & { isLevelEnabled(level: string): boolean }).isLevelEnabled(level);
}

const DOCS_ASSETS = '/docs/static/';

// The route label of a request: its route's pattern, never the URL. Unmatched URLs (405s
// included) share one label, and the reference page's assets one more, whether the docs plugin
// serves them under a wildcard or registers a route per file: random paths and asset names cannot
// multiply the series.
function routeLabel(request: FastifyRequest): string {
  const pattern = request.is404 ? undefined : request.routeOptions.url;
  if (pattern === undefined) return 'unmatched';
  return pattern.startsWith(DOCS_ASSETS) ? `${DOCS_ASSETS}*` : pattern;
}

// Its probes are routes: the table of known routes (405s) and compression see them as they are added.
export default fp(observabilityPlugin, { name: 'observability', dependencies: ['error-handler', '@fastify/compress'] });
