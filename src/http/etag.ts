import fp from 'fastify-plugin';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { etagOf, noneMatch } from './conditional-requests.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    // The route's 200 carries an ETag of its body, and a matching If-None-Match gets a 304.
    etag?: boolean;
  }
}

// The tag is taken from the bytes about to be sent, so it changes whenever the representation
// does (a payment collected, a station connecting) with no version to keep in step.
async function conditionalGet(request: FastifyRequest, reply: FastifyReply, payload: unknown) {
  if (reply.statusCode !== 200 || (typeof payload !== 'string' && !Buffer.isBuffer(payload))) return payload;
  const etag = etagOf(payload);
  reply.header('etag', etag);
  if (!noneMatch(request.headers['if-none-match'], etag)) {
    // RFC 9110 §15.4.5: no body, the validator and no representation metadata. HEAD keeps the
    // body for Fastify's own HEAD hook, which runs next, sends none and states its length (which
    // a 304 may carry, being the length a 200 would have).
    reply.code(304).removeHeader('content-type');
    return request.method === 'HEAD' ? payload : null;
  }
  return payload;
}

async function etagPlugin(app: FastifyInstance) {
  app.addHook('onRoute', (route: RouteOptions) => {
    if (route.config?.etag !== true) return;
    const onSend = route.onSend === undefined ? [] : [route.onSend].flat();
    // First: the HEAD route Fastify adds for a GET ends its onSend with a hook that drops the body.
    // It is made from the GET's options, this hook included.
    if (!onSend.includes(conditionalGet)) route.onSend = [conditionalGet, ...onSend];
  });
}

// Completes the routes added after it: the families declare it as a dependency.
export default fp(etagPlugin, { name: 'etag', dependencies: [] });
