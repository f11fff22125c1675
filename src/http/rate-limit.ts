import fastifyRateLimit, { normalizeIP } from '@fastify/rate-limit';
import { once } from 'node:events';
import fp from 'fastify-plugin';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Redis } from 'ioredis';
import type { AppConfig } from '../kernel/config.js';
import { TooManyRequestsError } from '../kernel/errors.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    // A route with a budget of its own (the token endpoint); the others share the general one.
    rateLimitBucket?: 'token';
  }
}

// The buckets a request can count against, named as the RateLimit-Policy field names them.
// Authenticated requests count per client: many clients behind one address (a NAT, a partner's
// gateway) must not share a budget. Everything else counts per address, a token that fails
// verification included: keying on a claim nobody verified would let a token sprayer pick a fresh
// bucket for every guess.
type Policy = 'client' | 'address' | 'token';

interface Bucket {
  policy: Policy;
  key: string;
}

// How long start-up waits for the counters' Redis connection before serving uncounted.
const REDIS_READY_WAIT_MS = 2000;
const BUCKET = Symbol('rateLimitBucket');

declare module 'fastify' {
  interface FastifyRequest {
    [BUCKET]?: Bucket;
  }
}

async function bucketOf(request: FastifyRequest, auth: FastifyInstance['auth']): Promise<Bucket> {
  // IPv6 callers are counted per /64, the smallest block a host is usually given. A socket
  // already gone has no address; its request is answered to nobody.
  const address = typeof request.ip === 'string' ? normalizeIP(request.ip) : 'unknown';
  if (request.routeOptions.config.rateLimitBucket === 'token') return { policy: 'token', key: `token:${address}` };
  if (!request.is404 && request.routeOptions.config.public !== true) {
    const principal = await auth.verifiedPrincipal(request);
    if (principal) return { policy: 'client', key: `client:${principal.clientId}` };
  }
  return { policy: 'address', key: `address:${address}` };
}

// The IETF fields of draft-ietf-httpapi-ratelimit-headers-10 (structured fields, RFC 9651):
// RateLimit-Policy names the policy with its quota q and window w in seconds; RateLimit gives what
// remains of it, r, and the seconds until the window resets, t. The earlier drafts' separate
// RateLimit-Limit/-Remaining/-Reset fields are not sent; the X-RateLimit-* ones are, for the
// clients that read those.
function setHeaders(reply: FastifyReply, policy: Policy, quota: number, windowSeconds: number, remaining: number, resetSeconds: number) {
  reply
    .header('x-ratelimit-limit', quota)
    .header('x-ratelimit-remaining', remaining)
    .header('x-ratelimit-reset', resetSeconds)
    .header('ratelimit-policy', `"${policy}";q=${quota};w=${windowSeconds}`)
    .header('ratelimit', `"${policy}";r=${remaining};t=${resetSeconds}`);
}

async function rateLimitPlugin(app: FastifyInstance, opts: AppConfig['rateLimit']) {
  if (opts.max <= 0) return;
  // Counters in Redis hold the limit across replicas; without it each process counts alone.
  // Without an offline queue a command fails at once while Redis is unreachable, instead of
  // holding every request until a reconnect attempt gives up.
  const redis = opts.redisUrl ? new Redis(opts.redisUrl, { maxRetriesPerRequest: 1, enableOfflineQueue: false }) : undefined;
  if (redis) {
    // ioredis reports every failed reconnect: one line when Redis goes away, one when it is back.
    let down = false;
    redis.on('error', (err: Error) => {
      if (!down) app.log.warn({ err: { message: err.message, code: (err as { code?: string }).code } }, 'rate-limit store unavailable: requests are not counted');
      down = true;
    });
    redis.on('ready', () => {
      if (down) app.log.info('rate-limit store available again');
      down = false;
    });
    // A replica that started listening before its connection was up would let its first requests
    // through uncounted: start-up waits for the connection, or for its first failure (then the
    // service starts uncounted, as it runs through an outage), or for REDIS_READY_WAIT_MS.
    app.addHook('onReady', async () => {
      if (redis.status !== 'ready') await once(redis, 'ready', { signal: AbortSignal.timeout(REDIS_READY_WAIT_MS) }).catch(() => undefined);
    });
    app.addHook('onClose', async () => void (await redis.quit().catch(() => undefined)));
  }
  const maxOf: Record<Policy, number> = { client: opts.max, address: opts.max, token: opts.tokenMax };
  await app.register(fastifyRateLimit, {
    // Not per route: the root hook below counts every request exactly once.
    global: false,
    timeWindow: opts.windowSeconds * 1000,
    // A Redis outage must not turn every request into a 500: the limit is protection, not state.
    skipOnError: true,
    ...(redis ? { redis, nameSpace: opts.redisPrefix } : {}),
    keyGenerator: (request) => request[BUCKET]!.key,
    max: (request) => maxOf[request[BUCKET]!.policy],
  });
  const limit = app.createRateLimit();

  // One root hook, added before the authentication plugin's, so that requests refused with 401
  // (token spraying) or answered 404 are counted too. It verifies the token itself to find the
  // client; the authentication hook reuses that verification. Routes marked `rateLimit: false` (health,
  // metrics) are exempt, so probes never see 429.
  app.addHook('onRequest', async (request, reply) => {
    const config = request.routeOptions.config;
    if (config.rateLimit === false) return;
    if (config.rateLimitBucket === 'token' && opts.tokenMax <= 0) return;
    const bucket = await bucketOf(request, app.auth);
    request[BUCKET] = bucket;
    const result = await limit(request);
    if (result.isAllowed) return;
    // A store that failed (skipOnError) counted nothing and knows no window: no fields then.
    if (result.ttl <= 0) return;
    setHeaders(reply, bucket.policy, result.max, opts.windowSeconds, result.remaining, result.ttlInSeconds);
    if (result.isExceeded) {
      reply.header('retry-after', result.ttlInSeconds);
      throw new TooManyRequestsError(result.ttlInSeconds);
    }
  });
}

// Keys a request by its verified client: the auth plugin's verification. Its root hook must run
// before authentication's, which declares this plugin as a dependency.
export default fp(rateLimitPlugin, { name: 'rate-limit', dependencies: ['auth'] });
