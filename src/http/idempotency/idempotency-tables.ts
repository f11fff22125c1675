import { sql } from 'drizzle-orm';
import { check, index, integer, jsonb, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';
import { isOneOf } from '../../db/checks.js';

export const IDEMPOTENCY_KEY_STATES = ['IN_FLIGHT', 'COMPLETED'] as const;

// One row per key a client has used within its lifetime. A key belongs to the client and the
// network its token was scoped to ('' for a token that may act on every network: a network claim
// is never empty), so neither another client nor another network's token ever sees its answer.
export const idempotencyKeys = pgTable(
  'idempotency_keys',
  {
    clientId: text('client_id').notNull(),
    network: text('network').notNull(),
    key: text('key').notNull(),
    // sha-256 of the canonical request (method, route, parameters, body)
    fingerprint: text('fingerprint').notNull(),
    state: text('state', { enum: IDEMPOTENCY_KEY_STATES }).notNull(),
    // Who holds an IN_FLIGHT key: completing and giving back are guarded by it, so a holder whose
    // lease ran out can no longer touch a row another request has taken over.
    claimId: text('claim_id').notNull(),
    lockedUntil: timestamp('locked_until', { withTimezone: true, precision: 3 }),
    responseStatus: integer('response_status'),
    responseHeaders: jsonb('response_headers').$type<Record<string, string>>(),
    responseBody: text('response_body'),
    createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true, precision: 3 }).notNull(),
  },
  (t) => [
    primaryKey({ name: 'idempotency_keys_pkey', columns: [t.clientId, t.network, t.key] }),
    index('idempotency_keys_expires_at_idx').on(t.expiresAt),
    check('idempotency_keys_state_check', isOneOf(t.state, IDEMPOTENCY_KEY_STATES)),
    check(
      'idempotency_keys_state_fields_check',
      sql`(${t.state} = 'IN_FLIGHT' AND ${t.lockedUntil} IS NOT NULL AND ${t.responseStatus} IS NULL)
        OR (${t.state} = 'COMPLETED' AND ${t.lockedUntil} IS NULL AND ${t.responseStatus} IS NOT NULL AND ${t.responseHeaders} IS NOT NULL AND ${t.responseBody} IS NOT NULL)`,
    ),
  ],
);
