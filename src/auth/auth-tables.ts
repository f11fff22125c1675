import { boolean, index, jsonb, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

export const oauthClients = pgTable(
  'oauth_clients',
  {
    id: text('id').primaryKey(),
    name: text('name').notNull(),
    secretHash: text('secret_hash').notNull(),
    scopes: text('scopes').array().notNull(),
    network: text('network'),
    isAdmin: boolean('is_admin').notNull().default(false),
    createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
    revokedAt: timestamp('revoked_at', { withTimezone: true, precision: 3 }),
  },
  (t) => [index('oauth_clients_created_at_idx').on(t.createdAt)],
);

export const signingKeys = pgTable('signing_keys', {
  kid: text('kid').primaryKey(),
  alg: text('alg').notNull(),
  publicJwk: jsonb('public_jwk').notNull().$type<Record<string, string>>(),
  privateJwk: jsonb('private_jwk').notNull().$type<Record<string, string>>(),
  createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
  retiredAt: timestamp('retired_at', { withTimezone: true, precision: 3 }),
});
