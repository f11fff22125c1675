import { sql, type SQL } from 'drizzle-orm';
import { check, foreignKey, index, integer, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';
import { isOneOf } from '../db/checks.js';
import { EVENT_TYPES } from './event-types.js';

// The one list of each: the column types, their CHECK constraints and the Zod enums derive from
// these.
export const SUBSCRIPTION_STATUSES = ['ENABLED', 'DISABLED'] as const;
export const DELIVERY_STATES = ['PENDING', 'SUCCEEDED', 'FAILED'] as const;

export type SubscriptionStatus = (typeof SUBSCRIPTION_STATUSES)[number];
export type DeliveryState = (typeof DELIVERY_STATES)[number];

// `evt_` + 12 hex digits of the Unix time in milliseconds + 20 random hex digits: made by the
// database, so a batched statement that appends events as a CTE (appendEventsSql, events-repository.ts) and appendEvents
// spell identifiers the same way; time-ordered, so inserts stay at the B-tree's right edge.
// The time part of an event id made at `at`: ids made before `at` sort below `'evt_' || this`.
export function eventIdTimeSql(at: SQL): SQL {
  return sql`lpad(to_hex(floor(extract(epoch from ${at}) * 1000)::bigint), 12, '0')`;
}
const EVENT_ID_DEFAULT = sql`('evt_' || ${eventIdTimeSql(sql`clock_timestamp()`)} || substr(replace(gen_random_uuid()::text, '-', ''), 1, 20))`;

// The outbox (docs/events.md, "Delivery"): written in the transaction of the change it reports,
// fanned out later by the delivery worker to the subscriptions it matches.
export const events = pgTable(
  'events',
  {
    id: text('id').primaryKey().default(EVENT_ID_DEFAULT),
    // null only for a webhook.test sent to a subscription without a network.
    network: text('network'),
    type: text('type', { enum: EVENT_TYPES }).notNull(),
    // The JSON text of the body's `data`, sent as is; the body is
    // `{"type":…,"timestamp":<created_at>,"data":<data>}`.
    data: text('data').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
    // Set once the worker has made the event's deliveries; null while it waits for fan-out.
    dispatchedAt: timestamp('dispatched_at', { withTimezone: true, precision: 3 }),
  },
  (t) => [
    check('events_type_enum', isOneOf(t.type, EVENT_TYPES)),
    // The fan-out's queue: only the undispatched rows, oldest first.
    index('events_undispatched_idx').on(t.createdAt).where(sql`${t.dispatchedAt} IS NULL`),
    // The test events, the only ones a DISABLED subscription is sent: its claim reads these, not
    // its backlog (delivery-repository.ts).
    index('events_test_idx').on(t.id).where(sql`${t.type} = 'webhook.test'`),
  ],
);

export const webhookSubscriptions = pgTable(
  'webhook_subscriptions',
  {
    id: text('id').primaryKey(),
    // null: made by a token without a network claim, receives every network's events.
    network: text('network'),
    url: text('url').notNull(),
    events: text('events').array().notNull(),
    status: text('status', { enum: SUBSCRIPTION_STATUSES }).notNull().default('ENABLED'),
    description: text('description'),
    // `whsec_` + base64: the signing key, shown only when made or rotated.
    secret: text('secret').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
  },
  (t) => [
    check('webhook_subscriptions_status_enum', isOneOf(t.status, SUBSCRIPTION_STATUSES)),
    index('webhook_subscriptions_network_id_idx').on(t.network, t.id),
  ],
);

// One row per event and subscription: where its delivery stands and its latest attempt.
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    eventId: text('event_id').notNull(),
    subscriptionId: text('subscription_id').notNull(),
    state: text('state', { enum: DELIVERY_STATES }).notNull().default('PENDING'),
    // Attempts started; also the fencing number of the one in flight.
    attempts: integer('attempts').notNull().default(0),
    // When the next attempt is due; while one is in flight, when its lease ends (an attempt cut
    // short by a crash is made again then). null once SUCCEEDED or FAILED.
    nextAttemptAt: timestamp('next_attempt_at', { withTimezone: true, precision: 3 }),
    // Set while an attempt is in flight: the replica holding it must finish by then.
    leaseUntil: timestamp('lease_until', { withTimezone: true, precision: 3 }),
    lastAttemptAt: timestamp('last_attempt_at', { withTimezone: true, precision: 3 }),
    lastStatus: integer('last_status'),
    lastError: text('last_error'),
    lastDurationMs: integer('last_duration_ms'),
    createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ name: 'webhook_deliveries_pkey', columns: [t.eventId, t.subscriptionId] }),
    check('webhook_deliveries_state_enum', isOneOf(t.state, DELIVERY_STATES)),
    check('webhook_deliveries_due_when_pending', sql`(${t.state} = 'PENDING') = (${t.nextAttemptAt} IS NOT NULL)`),
    foreignKey({ columns: [t.eventId], foreignColumns: [events.id], name: 'webhook_deliveries_event_fk' }).onDelete('cascade'),
    foreignKey({ columns: [t.subscriptionId], foreignColumns: [webhookSubscriptions.id], name: 'webhook_deliveries_subscription_fk' }).onDelete('cascade'),
    // The worker's queue: each subscription's pending deliveries by due time, so a claim takes the
    // oldest few of every subscription (delivery-repository.ts).
    index('webhook_deliveries_subscription_due_idx').on(t.subscriptionId, t.nextAttemptAt).where(sql`${t.state} = 'PENDING'`),
    // A subscription's latest attempts.
    index('webhook_deliveries_subscription_idx').on(t.subscriptionId, t.lastAttemptAt),
  ],
);
