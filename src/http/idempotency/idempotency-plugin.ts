import fp from 'fastify-plugin';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { z } from 'zod';
import type { Db } from '../../db/database.js';
import { loggableError } from '../../db/failures.js';
import { BadRequestError } from '../../kernel/errors.js';
import { KEY_RULE, REPLAYED_HEADERS, isReplayable, parseIdempotencyKey, requestFingerprint, type StoredResponse } from './idempotency-rules.js';
import { claimKey, completeKey, purgeExpiredKeys, releaseKey, type Claim, type KeyScope } from './idempotency-service.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    // 'honoured': the route takes an Idempotency-Key (a retry with it replays the first answer);
    // 'refused': a request carrying one is a 400 (a route whose answer must never be stored).
    idempotencyKey?: 'honoured' | 'refused';
  }
}

const HEADER = 'idempotency-key';
const REPLAYED_HEADER = 'idempotent-replayed';

// Added to the schema of every honouring route: validation refuses a malformed key with the
// family's 400 before a key is taken, and the OpenAPI document shows the header.
const honouringHeaders = z.looseObject({
  [HEADER]: z
    .string()
    .refine((value) => parseIdempotencyKey(value) !== null, KEY_RULE)
    .optional()
    .meta({
      description:
        'Makes a retry safe: a request with the same key, method, path and body within 24 h gets the first answer again (with `Idempotent-Replayed: true`) instead of running twice. The same key with another request is a 422; while the first request with the key runs, a 409.',
      example: '5b0f4c1e-9d3a-4c6e-8f0a-2b7d1e6c9a44',
    }),
});

export interface IdempotencyOptions {
  db: Db;
  // The time a key is claimed, stored and expires by; tests move it.
  clock: () => Date;
  // How long a claim holds its key before it counts as abandoned (inFlightLeaseMs).
  leaseMs: number;
}

// Expired keys are deleted in batches after an answer has been sent: at most one batch per
// interval, and the next one at once while a batch comes back full, so deletion keeps up with any
// rate of new keys without a request ever waiting for it.
const PURGE_INTERVAL_MS = 5 * 60 * 1000;
const PURGE_BATCH = 1000;

async function idempotencyPlugin(app: FastifyInstance, options: IdempotencyOptions) {
  const { db, clock, leaseMs } = options;
  // Between preValidation and preHandler: the request's key and fingerprint; from the claim on,
  // until its answer is stored or the key given back: the claim.
  const pending = new WeakMap<FastifyRequest, { scope: KeyScope; fingerprint: string }>();
  const claims = new WeakMap<FastifyRequest, Claim>();
  let nextPurgeAt = 0;

  // The body is fingerprinted as it was parsed from JSON, before validation normalises it (trims,
  // de-duplicates, NFC): "the same request" is the same JSON value, whatever its key order.
  async function fingerprint(request: FastifyRequest) {
    const raw = request.headers[HEADER];
    if (typeof raw !== 'string') return;
    const key = parseIdempotencyKey(raw);
    // A malformed key fails validation, which follows this hook.
    if (key === null) return;
    pending.set(request, {
      scope: { clientId: request.principal.clientId, network: request.principal.network ?? '', key },
      fingerprint: requestFingerprint({
        method: request.method,
        route: request.routeOptions.url ?? request.url,
        params: request.params,
        query: request.query,
        body: request.body,
      }),
    });
  }

  async function claim(request: FastifyRequest, reply: FastifyReply) {
    const wanted = pending.get(request);
    if (!wanted) return;
    pending.delete(request);
    const outcome = await claimKey(db, wanted.scope, wanted.fingerprint, { now: clock(), leaseMs });
    if (outcome.kind === 'claimed') {
      claims.set(request, outcome.claim);
      return;
    }
    const { status, headers, body } = outcome.response;
    reply.code(status).headers(headers).header(REPLAYED_HEADER, 'true');
    return reply.send(body);
  }

  // Runs for every answer of a claimed request, errors included, before it is sent: a client that
  // got an answer finds it stored (or the key given back) when it retries.
  async function settle(request: FastifyRequest, reply: FastifyReply, payload: unknown) {
    const held = claims.get(request);
    if (!held) return payload;
    claims.delete(request);
    const status = reply.statusCode;
    try {
      if (isReplayable(status) && (typeof payload === 'string' || Buffer.isBuffer(payload))) {
        const response: StoredResponse = { status, headers: replayedHeaders(reply), body: payload.toString() };
        if (!(await completeKey(db, held, response))) {
          request.log.warn({ idempotencyKey: held.scope.key }, 'idempotency key was taken over before its answer was stored');
        }
      } else {
        await releaseKey(db, held);
      }
    } catch (error) {
      // The answer goes out all the same; the key stays claimed until its lease runs out.
      request.log.error({ err: loggableError(error) }, 'could not store or give back an idempotency key');
    }
    return payload;
  }

  // A claim whose answer never went through settle (the reply failed before onSend) is given back.
  async function afterResponse(request: FastifyRequest) {
    const held = claims.get(request);
    if (held) {
      claims.delete(request);
      await releaseKey(db, held).catch((error: unknown) => request.log.error({ err: loggableError(error) }, 'could not give back an idempotency key'));
    }
    const now = clock().getTime();
    if (now < nextPurgeAt) return;
    nextPurgeAt = now + PURGE_INTERVAL_MS;
    try {
      if ((await purgeExpiredKeys(db, new Date(now), PURGE_BATCH)) === PURGE_BATCH) nextPurgeAt = now;
    } catch (error) {
      request.log.warn({ err: loggableError(error) }, 'could not delete expired idempotency keys');
    }
  }

  async function refuse(request: FastifyRequest) {
    if (request.headers[HEADER] === undefined) return;
    const message =
      'this operation takes no Idempotency-Key: its answer may carry a generated password, which is never stored, so it cannot be replayed';
    throw new BadRequestError(message, [{ code: 'custom', message, path: [HEADER] }]);
  }

  app.addHook('onRoute', (route: RouteOptions) => {
    const mode = route.config?.idempotencyKey;
    if (mode === undefined) return;
    if (mode === 'refused') {
      route.preValidation = [refuse, ...hooks(route.preValidation)];
      return;
    }
    if (route.schema?.headers !== undefined) throw new Error(`${route.url}: a route that honours Idempotency-Key has its headers schema made for it`);
    route.schema = { ...route.schema, headers: honouringHeaders };
    route.preValidation = [...hooks(route.preValidation), fingerprint];
    route.preHandler = [...hooks(route.preHandler), claim];
    // First of the route's onSend hooks: it stores the body as serialised, before compression
    // (whose hook @fastify/compress added when the route was declared) turns it into a stream
    // that could not be stored, which gave the key back and let a retry run the operation again.
    route.onSend = [settle, ...hooks(route.onSend)];
    route.onResponse = [...hooks(route.onResponse), afterResponse];
  });
}

function hooks<T>(value: T | T[] | undefined): T[] {
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}

function replayedHeaders(reply: FastifyReply): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of REPLAYED_HEADERS) {
    const value = reply.getHeader(name);
    if (value !== undefined) headers[name] = String(value);
  }
  return headers;
}

// Completes the routes added after it: the families declare it as a dependency.
export default fp(idempotencyPlugin, { name: 'idempotency', dependencies: [] });
