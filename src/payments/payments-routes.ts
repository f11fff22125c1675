import type { FastifyInstance, FastifyReply } from 'fastify';
import fp from 'fastify-plugin';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireScope } from '../auth/auth-plugin.js';
import { describeErrorShapes } from '../http/errors/error-shapes.js';
import { serveErrorFamily } from '../http/errors/error-families.js';
import { jsonBodyParser } from '../http/json-body.js';
import { API_ROUTES_NEED } from '../http/plugin-order.js';
import type { SessionPaymentJson } from './payments-repository.js';
import * as service from './payments-service.js';
import {
  MAX_SESSION_IDS,
  collectBodySchema,
  listQuerySchema,
  notModifiedResponse,
  paymentIdParamsSchema,
  recordBodySchema,
  sessionPaymentSchema,
  type SessionPayment,
} from './payments-schemas.js';
// After the schemas: the API reference lists named schemas in the order they are defined.
import { PAYMENTS_ERRORS, PAYMENTS_ERROR_FAMILY, paymentsResponses } from './payments-error-family.js';

// Answers are JSON text the database rendered (one rendering per payment): with a
// JSON content type Fastify sends a string as is, never through the serializer.
function sendPayment(reply: FastifyReply, json: SessionPaymentJson) {
  return reply.type('application/json').send(json as unknown as SessionPayment);
}

// The payments family, registered with the prefix /payments/v1: its errors, the root hooks' 401
// and 429 included (Fastify answers a route's errors with its own context's handler), take the
// shapes payments-error-family.ts lists.
export const PAYMENTS_PREFIX = '/payments/v1';

// The API reference's group of these operations.
export const PAYMENTS_TAG = { name: 'payments', description: `Session payments: \`${PAYMENTS_PREFIX}\`. ${describeErrorShapes(PAYMENTS_ERRORS)}` };
const tags = [PAYMENTS_TAG.name];

async function paymentsRoutes(app: FastifyInstance): Promise<void> {
  serveErrorFamily(app, PAYMENTS_ERROR_FAMILY);
  const routes = app.withTypeProvider<ZodTypeProvider>();
  const { db } = app.database;
  const readers = requireScope('read:sessionpayment', 'write:sessionpayment');
  const writers = requireScope('write:sessionpayment');

  routes.get(
    '/session-payments',
    {
      onRequest: readers,
      schema: {
        tags,
        operationId: 'listSessionPayments',
        summary: 'List payments for sessions',
        description: `Returns the payments of up to ${MAX_SESSION_IDS} charging sessions, in no particular order. Sessions without a payment are left out. A network-scoped token sees only its network's payments.`,
        querystring: listQuerySchema,
        response: paymentsResponses({ 200: z.array(sessionPaymentSchema).describe('The payments found; empty when none is') }),
      },
    },
    async (request, reply) => {
      const json = await service.listSessionPaymentsJson(db, request.principal, request.query.sessionIds);
      return reply.type('application/json').send(json as unknown as SessionPayment[]);
    },
  );

  // Where a payment is read: the Location of a recorded one.
  const paymentPath = (id: string) => `${app.prefix}/session-payments/${encodeURIComponent(id)}`;

  routes.get(
    '/session-payments/:id',
    {
      onRequest: readers,
      config: { etag: true },
      schema: {
        tags,
        operationId: 'getSessionPayment',
        summary: 'Read one session payment',
        description:
          "Returns one payment by its id. A network-scoped token sees only its network's payments; another network's is a 404. The answer carries an ETag; a request whose If-None-Match holds it gets a 304 without a body.",
        params: paymentIdParamsSchema,
        response: paymentsResponses({ 200: sessionPaymentSchema, 304: notModifiedResponse }, { 404: true }),
      },
    },
    async (request, reply) => sendPayment(reply, await service.getSessionPayment(db, request.principal, request.params.id)),
  );

  routes.post(
    '/session-payments',
    {
      onRequest: writers,
      config: { idempotencyKey: 'honoured' },
      schema: {
        tags,
        operationId: 'recordSessionPayment',
        summary: 'Record the payment of a session',
        description:
          'Records the payment of one charging session and derives its pre-tax figures, taxes, discount and billed amount. A session has at most one payment. A network-scoped token may record for its own network only. The answer carries the payment\'s URL in Location.',
        body: recordBodySchema,
        response: paymentsResponses(
          { 201: sessionPaymentSchema },
          { 409: 'The session already has a payment, or the first request with this Idempotency-Key is still being processed', 422: true },
        ),
      },
    },
    async (request, reply) => {
      const { id, json } = await service.recordSessionPayment(db, request.principal, request.body);
      return sendPayment(reply.code(201).header('location', paymentPath(id)), json);
    },
  );

  await routes.register(async (collect) => {
    // The body of collect is optional, and "no body" often arrives as an empty body that still
    // carries Content-Type: application/json; the shared JSON parser (Fastify's) would refuse that.
    const parseJson = jsonBodyParser(collect);
    collect.removeContentTypeParser('application/json');
    collect.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
      const text = body.toString();
      if (text === '') {
        done(null, undefined);
        return;
      }
      void parseJson(request, text, done);
    });

    collect.withTypeProvider<ZodTypeProvider>().post(
      '/session-payments/:id/collect',
      {
        onRequest: writers,
        config: { idempotencyKey: 'honoured' },
        schema: {
          tags,
          operationId: 'collectSessionPayment',
          summary: 'Collect a session payment',
          description: 'Moves a PENDING payment to COLLECTED and sets collectedAt (default now). The body is optional.',
          params: paymentIdParamsSchema,
          body: collectBodySchema,
          response: paymentsResponses(
            { 200: sessionPaymentSchema },
            {
              404: true,
              409: 'The payment is already collected, or the first request with this Idempotency-Key is still being processed',
              422: true,
            },
          ),
        },
      },
      async (request, reply) => sendPayment(reply, await service.collectSessionPayment(db, request.principal, request.params.id, request.body?.collectedAt)),
    );
  });
}

export default fp(paymentsRoutes, { name: 'payments-routes', encapsulate: true, dependencies: API_ROUTES_NEED, decorators: { fastify: ['database'] } });
