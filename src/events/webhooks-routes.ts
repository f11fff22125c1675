import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireScope } from '../auth/auth-plugin.js';
import { describeErrorShapes } from '../http/errors/error-shapes.js';
import { serveErrorFamily } from '../http/errors/error-families.js';
import { API_ROUTES_NEED } from '../http/plugin-order.js';
import { CHECK_LOOKUP_TIMEOUT_MS, type TargetLookups } from './target-lookups.js';
import {
  MAX_SUBSCRIPTIONS_PER_NETWORK,
  SUBSCRIPTION_LIMIT_REACHED,
  SUBSCRIPTION_NOT_FOUND,
  createSubscription,
  deleteSubscription,
  getSubscription,
  listSubscriptionDeliveries,
  listSubscriptionsPage,
  rotateSubscriptionSecret,
  sendTestEvent,
  updateSubscription,
} from './subscriptions-service.js';
import {
  createSubscriptionBody,
  deliveryOutput,
  emptyBody,
  envelope,
  listSubscriptionsQuery,
  page,
  subscriptionOutput,
  subscriptionParams,
  subscriptionWithSecretOutput,
  testEventOutput,
  updateSubscriptionBody,
} from './webhooks-schemas.js';
// After the schemas: the API reference lists named schemas in the order they are defined.
import { WEBHOOKS_ERRORS, WEBHOOKS_ERROR_FAMILY, webhooksResponses } from './webhooks-error-family.js';

// The webhooks family, registered with the prefix /webhooks/v1 (docs/events.md): its errors, the
// root hooks' 401 and 429 included, take asset management's shape.
export const WEBHOOKS_PREFIX = '/webhooks/v1';

export const WEBHOOKS_TAG = {
  name: 'webhooks',
  description: `Webhook subscriptions: \`${WEBHOOKS_PREFIX}\`. Events are delivered as signed Standard Webhooks (docs/events.md). ${describeErrorShapes(WEBHOOKS_ERRORS)}`,
};
const tags = [WEBHOOKS_TAG.name];

const notFound = { codes: [SUBSCRIPTION_NOT_FOUND], means: 'No webhook subscription with this id visible to this access token' } as const;

// Hooks run in order after authentication, so the order of checks is 401 → 403 → 400 (validation).
const writers = [requireScope('write:webhooks')];
const readers = [requireScope('read:webhooks', 'write:webhooks')];

export interface WebhooksRoutesOptions {
  // The replica's host name lookups (webhooks-plugin.ts), which the deliveries share.
  lookups: TargetLookups;
  // How long a request waits for its target's lookup (default CHECK_LOOKUP_TIMEOUT_MS).
  lookupTimeoutMs?: number | undefined;
}

async function webhooksRoutes(app: FastifyInstance, options: WebhooksRoutesOptions): Promise<void> {
  serveErrorFamily(app, WEBHOOKS_ERROR_FAMILY);
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db } = app.database;
  const policy = { allowPrivateTargets: app.config.webhooks.allowPrivateTargets, lookups: options.lookups, lookupTimeoutMs: options.lookupTimeoutMs ?? CHECK_LOOKUP_TIMEOUT_MS };
  const one = '/subscriptions/:id';

  r.post(
    '/subscriptions',
    {
      onRequest: writers,
      schema: {
        tags,
        operationId: 'createWebhookSubscription',
        summary: 'Subscribe a URL to events (the signing secret is shown in this answer only)',
        description:
          "The URL must be https and must not resolve to a private, loopback, link-local or metadata address (400 otherwise). A network-scoped token's subscription receives its network's events only; one made without a network claim has `network: null` and receives every network's.",
        body: createSubscriptionBody,
        response: webhooksResponses(
          { 201: envelope(subscriptionWithSecretOutput) },
          {
            409: {
              codes: [SUBSCRIPTION_LIMIT_REACHED],
              means: `The network has ${MAX_SUBSCRIPTIONS_PER_NETWORK} subscriptions already (the most it may have); nothing was made`,
              examples: [{ code: SUBSCRIPTION_LIMIT_REACHED, message: `Network net_1 may have at most ${MAX_SUBSCRIPTIONS_PER_NETWORK} webhook subscriptions; delete one first` }],
            },
          },
        ),
      },
    },
    async (request, reply) => {
      const subscription = await createSubscription(db, policy, request.principal, request.body);
      reply.header('cache-control', 'no-store');
      return reply.code(201).header('location', `${app.prefix}/subscriptions/${subscription.id}`).send({ data: subscription });
    },
  );

  r.get(
    '/subscriptions',
    {
      onRequest: readers,
      schema: {
        tags,
        operationId: 'listWebhookSubscriptions',
        summary: 'List webhook subscriptions, ordered by id',
        description: 'One page; `hasMore` says whether another follows (ask for it with `startingAfter` = the last id). A network-scoped token sees its network\'s only.',
        querystring: listSubscriptionsQuery,
        response: webhooksResponses({ 200: page(subscriptionOutput) }),
      },
    },
    async (request) => ({ data: await listSubscriptionsPage(db, request.principal, request.query) }),
  );

  r.get(
    one,
    {
      onRequest: readers,
      schema: {
        tags,
        operationId: 'getWebhookSubscription',
        summary: 'Get one webhook subscription (never its secret)',
        params: subscriptionParams,
        response: webhooksResponses({ 200: envelope(subscriptionOutput) }, { 404: notFound }),
      },
    },
    async (request) => ({ data: await getSubscription(db, request.principal, request.params.id) }),
  );

  r.patch(
    one,
    {
      onRequest: writers,
      schema: {
        tags,
        operationId: 'updateWebhookSubscription',
        summary: 'Change the URL, events, description or status of a subscription',
        description: 'DISABLED stops its deliveries (those pending wait); ENABLED resumes them. A new URL is checked as at creation.',
        params: subscriptionParams,
        body: updateSubscriptionBody,
        response: webhooksResponses({ 200: envelope(subscriptionOutput) }, { 404: notFound }),
      },
    },
    async (request) => ({ data: await updateSubscription(db, policy, request.principal, request.params.id, request.body) }),
  );

  r.delete(
    one,
    {
      onRequest: writers,
      schema: {
        tags,
        operationId: 'deleteWebhookSubscription',
        summary: 'Delete a subscription and its deliveries',
        params: subscriptionParams,
        response: webhooksResponses({ 204: z.null().describe('Deleted') }, { 404: notFound }),
      },
    },
    async (request, reply) => {
      await deleteSubscription(db, request.principal, request.params.id);
      return reply.code(204).send(null);
    },
  );

  r.post(
    `${one}/rotate-secret`,
    {
      onRequest: writers,
      schema: {
        tags,
        operationId: 'rotateWebhookSubscriptionSecret',
        summary: 'Replace the signing secret (the new one is shown in this answer only)',
        description: 'Every attempt made from now on is signed with the new secret, retries of earlier events included.',
        params: subscriptionParams,
        body: emptyBody,
        response: webhooksResponses({ 200: envelope(subscriptionWithSecretOutput) }, { 404: notFound }),
      },
    },
    async (request, reply) => {
      reply.header('cache-control', 'no-store');
      return { data: await rotateSubscriptionSecret(db, request.principal, request.params.id) };
    },
  );

  r.post(
    `${one}/test`,
    {
      onRequest: writers,
      schema: {
        tags,
        operationId: 'testWebhookSubscription',
        summary: 'Send a webhook.test event to this subscription',
        description: 'Delivered like any event, to this subscription only, whatever its events or status; see …/deliveries for the outcome.',
        params: subscriptionParams,
        body: emptyBody,
        response: webhooksResponses({ 202: envelope(testEventOutput) }, { 404: notFound }),
      },
    },
    async (request, reply) => reply.code(202).send({ data: await sendTestEvent(db, request.principal, request.params.id) }),
  );

  r.get(
    `${one}/deliveries`,
    {
      onRequest: readers,
      schema: {
        tags,
        operationId: 'listWebhookDeliveries',
        summary: "A subscription's latest deliveries and their attempts",
        description: 'Up to 100, the latest attempted first: the event, its state, the status code or error and the duration of its latest attempt.',
        params: subscriptionParams,
        response: webhooksResponses({ 200: envelope(z.array(deliveryOutput)) }, { 404: notFound }),
      },
    },
    async (request) => ({ data: await listSubscriptionDeliveries(db, request.principal, request.params.id) }),
  );
}

export default fp(webhooksRoutes, {
  name: 'webhooks-routes',
  encapsulate: true,
  dependencies: [...API_ROUTES_NEED],
  decorators: { fastify: ['database', 'config'] },
});
