import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Database } from '../db/database.js';

const PROBES = new Set(['/healthz', '/readyz', '/metrics']);

// One registry per app instance: several apps in one process (tests) must not share counters.
declare module 'fastify' {
  interface FastifyInstance {
    // The app's /metrics registry, for plugins that count their own events.
    metrics: Registry;
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

  app.addHook('onResponse', async (request, reply) => {
    // Unmatched URLs share one label so random paths cannot explode the series count.
    const route = request.is404 ? 'unmatched' : (request.routeOptions.url ?? 'unmatched');
    duration.observe({ method: request.method, route, status_code: String(reply.statusCode) }, reply.elapsedTime / 1000);
    // Probes and scrapers call every few seconds: their lines would drown the requests' lines.
    request.log[PROBES.has(route) ? 'debug' : 'info'](
      { method: request.method, url: redactUrl(request.url), statusCode: reply.statusCode, responseTimeMs: Math.round(reply.elapsedTime * 10) / 10 },
      'request completed',
    );
  });

  const hidden = { hide: true } as const;
  // Probes and scrapers poll from one address; they must never be rate limited into "down".
  const probe = { public: true, rateLimit: false } as const;
  app.get('/healthz', { config: probe, schema: hidden }, async () => ({ status: 'ok' }));
  app.get('/readyz', { config: probe, schema: hidden }, async (request, reply) => {
    try {
      await opts.database.ping();
      return { status: 'ready' };
    } catch (err) {
      request.log.warn({ err }, 'readiness check failed');
      return reply.code(503).send({ message: 'database is not answering' });
    }
  });
  app.get('/metrics', { config: probe, schema: hidden }, async (_request, reply) => {
    reply.header('content-type', registry.contentType);
    return registry.metrics();
  });
}

const SECRET_QUERY_KEYS = /^(client_secret|password|access_token|token)$/i;

// Query strings are logged, so anything that looks like a credential in them is masked.
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const params = new URLSearchParams(url.slice(q + 1));
  let changed = false;
  for (const key of [...params.keys()]) {
    if (SECRET_QUERY_KEYS.test(key)) {
      params.set(key, '[redacted]');
      changed = true;
    }
  }
  return changed ? `${url.slice(0, q)}?${params.toString()}` : url;
}

export default fp(observabilityPlugin, { name: 'observability' });
