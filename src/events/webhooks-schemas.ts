import { z } from 'zod';
import { nameSchema } from '../kernel/identifier-schemas.js';
import { MAX_ID_LENGTH, describeProblem, hasForbiddenCharacter } from '../kernel/identifiers.js';
import { emptyBody, envelope, page, pageLimit } from '../kernel/paging-schemas.js';
import { SUBSCRIBABLE_EVENT_TYPES, subscribableEventTypeSchema } from './event-types.js';
import { DELIVERY_STATES, SUBSCRIPTION_STATUSES } from './events-tables.js';
import { MAX_TARGET_URL_LENGTH } from './target-addresses.js';
// Request schemas validate; response schemas only document (the app serialises with JSON.stringify).
// Every object is strict: a misspelt optional field must be a 400, never silently ignored.

export const DESCRIPTION_MAX = 500;
export const DELIVERIES_SHOWN = 100;

// Which targets may be reached is decided by target-rules.ts (after the syntax, at creation and at
// every delivery); here only the syntax. A control character (a NUL, which PostgreSQL text cannot
// hold) is a 400, never a failed insert.
const noForbiddenCharacter = [(value: string) => !hasForbiddenCharacter(value), describeProblem('forbidden_character', 0)] as const;

const targetUrl = z
  .string()
  .max(MAX_TARGET_URL_LENGTH)
  .refine(...noForbiddenCharacter)
  .refine((value) => /^https?:\/\/[^\s]+$/i.test(value) && URL.canParse(value), 'must be an absolute http(s) URL')
  .describe('https; http only where private targets are allowed (WEBHOOKS_ALLOW_PRIVATE_TARGETS)');

const eventList = z
  .array(subscribableEventTypeSchema)
  .min(1)
  .max(SUBSCRIBABLE_EVENT_TYPES.length)
  .refine((types) => new Set(types).size === types.length, 'must not list a type twice')
  .describe('the event types to receive');

const description = nameSchema(DESCRIPTION_MAX);

const SUBSCRIPTION_EXAMPLE = { url: 'https://hooks.example.com/charging', events: ['payment.recorded', 'payment.collected'], description: 'Finance' };

export const createSubscriptionBody = z
  .object({ url: targetUrl, events: eventList, description: description.optional() })
  .strict()
  .meta({ examples: [SUBSCRIPTION_EXAMPLE] });

export const updateSubscriptionBody = z
  .object({
    url: targetUrl.optional(),
    events: eventList.optional(),
    description: description.nullable().optional().describe('null removes it'),
    status: z.enum(SUBSCRIPTION_STATUSES).optional().describe('DISABLED stops deliveries; ENABLED resumes them'),
  })
  .strict()
  .refine((body) => Object.keys(body).length > 0, 'must change at least one of url, events, description, status')
  .meta({ examples: [{ events: ['payment.recorded', 'payment.collected'], status: 'ENABLED' }] });

export type CreateSubscriptionInput = z.output<typeof createSubscriptionBody>;
export type UpdateSubscriptionInput = z.output<typeof updateSubscriptionBody>;

// Any id of the right length is looked up: one of another syntax simply does not exist (404). One
// with a control character is a 400 (a NUL cannot even be compared with a stored id).
const lookedUpId = z.string().min(1).max(MAX_ID_LENGTH).refine(...noForbiddenCharacter);

export const subscriptionParams = z.object({ id: lookedUpId }).strict();

export const listSubscriptionsQuery = z
  .object({
    limit: pageLimit,
    startingAfter: lookedUpId.optional().describe('the last id of the previous page'),
  })
  .strict();

const dateTime = z.string().describe('ISO 8601 UTC date-time with milliseconds');
const WRITTEN_AT = { createdAt: '2026-11-26T10:00:00.000Z', updatedAt: '2026-11-26T10:00:00.000Z' };
const SUBSCRIPTION_ID = 'whk_01JJZK6C2B8X5Q4W7R9T3V1N2M';

const subscriptionFields = {
  id: z.string().describe('whk_ and 26 characters'),
  url: z.string(),
  events: z.array(subscribableEventTypeSchema),
  network: z.string().nullable().describe("the network whose events it receives; null: every network's"),
  status: z.enum(SUBSCRIPTION_STATUSES),
  description: z.string().nullable(),
  createdAt: dateTime,
  updatedAt: dateTime,
};
const EXAMPLE_OUTPUT = { id: SUBSCRIPTION_ID, ...SUBSCRIPTION_EXAMPLE, network: null, status: 'ENABLED', ...WRITTEN_AT };

export const subscriptionOutput = z.object(subscriptionFields).meta({ id: 'WebhookSubscription', examples: [EXAMPLE_OUTPUT] });

export const subscriptionWithSecretOutput = z
  .object({ ...subscriptionFields, secret: z.string().describe('whsec_ and base64: the signing key, shown in this answer only') })
  .meta({ id: 'WebhookSubscriptionWithSecret', examples: [{ ...EXAMPLE_OUTPUT, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' }] });

export const deliveryOutput = z
  .object({
    eventId: z.string().describe('the event, and the webhook-id header of every attempt'),
    eventType: z.string(),
    state: z.enum(DELIVERY_STATES).describe('PENDING until a 2xx (SUCCEEDED) or the last retry (FAILED)'),
    attempts: z.number().int(),
    lastStatus: z.number().int().nullable().describe("the receiver's HTTP status of the latest attempt; null without an answer"),
    lastError: z.string().nullable().describe('why the latest attempt got no answer (timeout, refused target, …)'),
    lastDurationMs: z.number().int().nullable(),
    lastAttemptAt: dateTime.nullable(),
    nextAttemptAt: dateTime.nullable().describe('when PENDING: the next attempt'),
  })
  .meta({
    id: 'WebhookDelivery',
    examples: [
      {
        eventId: 'evt_0193b2c4d5e6a1b2c3d4e5f6a7b8c9d0',
        eventType: 'payment.recorded',
        state: 'SUCCEEDED',
        attempts: 1,
        lastStatus: 204,
        lastError: null,
        lastDurationMs: 41,
        lastAttemptAt: '2026-11-26T10:00:00.120Z',
        nextAttemptAt: null,
      },
    ],
  });

export const testEventOutput = z.object({ eventId: z.string().describe('the webhook.test event sent: see …/deliveries') });

export { emptyBody, envelope, page };

export type SubscriptionOutput = z.output<typeof subscriptionOutput>;
export type DeliveryOutput = z.output<typeof deliveryOutput>;
