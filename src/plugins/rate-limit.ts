import fastifyRateLimit from '@fastify/rate-limit';
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import type { AppConfig } from '../config.js';

async function rateLimitPlugin(app: FastifyInstance, opts: AppConfig['rateLimit']) {
  if (opts.max <= 0) return;
  // Counters in Redis hold the limit across replicas; without it each process counts alone.
  const redis = opts.redisUrl ? new Redis(opts.redisUrl, { maxRetriesPerRequest: 1 }) : undefined;
  if (redis) app.addHook('onClose', async () => void (await redis.quit().catch(() => undefined)));
  await app.register(fastifyRateLimit, {
    // Not per route: the root hook below counts every request exactly once.
    global: false,
    max: opts.max,
    timeWindow: opts.windowSeconds * 1000,
    // A Redis outage must not turn every request into a 500: the limit is protection, not state.
    skipOnError: true,
    ...(redis ? { redis } : {}),
    errorResponseBuilder: (_request, context) => {
      const error = new Error(`Too many requests; retry in ${Math.ceil(context.ttl / 1000)} s`) as Error & { statusCode: number };
      error.statusCode = 429;
      return error;
    },
  });
  // Route-level hooks run after the app-level auth hook, so requests rejected with 401 (token
  // spraying) or 404 would never be counted. This root hook, registered before the auth plugin,
  // counts them all; routes marked `rateLimit: false` (health, metrics) are exempt so probes never
  // see 429.
  const limit = app.rateLimit();
  app.addHook('onRequest', async function (request, reply) {
    if (request.routeOptions.config.rateLimit !== false) await limit.call(this, request, reply);
  });
}

// Registered before the auth plugin: its root hook must run first.
export default fp(rateLimitPlugin, { name: 'rate-limit' });
