import { bigint, index, jsonb, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';
import type { OcppSubprotocol } from '../kernel/ocpp-vocabulary.js';

// One row per running replica (its id is made at start, in memory): the lease says it is alive.
// A replica that dies stops renewing, and every station it held reads disconnected once the lease
// has run out, without anyone having to clean up after it.
export const stationReplicas = pgTable('station_replicas', {
  id: text('id').primaryKey(),
  startedAt: timestamp('started_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
  leaseExpiresAt: timestamp('lease_expires_at', { withTimezone: true, precision: 3 }).notNull(),
  // X25519, SPKI DER in base64: another replica seals a station's new password to it before the
  // command crosses the notification queue (which PostgreSQL writes to disk). The private half
  // never leaves the replica's memory.
  publicKey: text('public_key'),
});

export interface ConnectorStatusRecord {
  status: string;
  errorCode?: string;
  // The station's own clock, as sent.
  timestamp?: string;
  receivedAt: string;
}

// The latest OCPP connection of each asset that has ever logged in. No foreign key to assets:
// the asset tables belong to another area and assets are never deleted.
export const stationConnections = pgTable(
  'station_connections',
  {
    assetId: text('asset_id').primaryKey(),
    // The replica holding the socket; null once it has closed.
    replicaId: text('replica_id'),
    // The asset's network, written by each claim: the stations' events carry it
    // (docs/stations.md, "Events").
    network: text('network').notNull(),
    // Raised by every accepted connection: a replica acts on a row only while its epoch is the
    // row's, so the newest connection wins whichever replica it lands on.
    epoch: bigint('epoch', { mode: 'number' }).notNull(),
    protocol: text('protocol').$type<OcppSubprotocol>().notNull(),
    connectedAt: timestamp('connected_at', { withTimezone: true, precision: 3 }).notNull(),
    lastSeenAt: timestamp('last_seen_at', { withTimezone: true, precision: 3 }).notNull(),
    disconnectedAt: timestamp('disconnected_at', { withTimezone: true, precision: 3 }),
    vendor: text('vendor'),
    model: text('model'),
    serialNumber: text('serial_number'),
    firmwareVersion: text('firmware_version'),
    bootedAt: timestamp('booted_at', { withTimezone: true, precision: 3 }),
    // Keyed by connector as the version's codec names it: "evseId/connectorId" (2.0.1),
    // "connectorId" (1.6).
    connectorStatuses: jsonb('connector_statuses').notNull().default({}).$type<Record<string, ConnectorStatusRecord>>(),
  },
  (t) => [index('station_connections_replica_idx').on(t.replicaId)],
);

// A station's connection taken from one replica by a newer one on another, written by a trigger in
// the claiming statement itself (migrations/0008): the older replica reads and deletes its rows at
// each lease renewal and closes those sockets. Reading only what changed keeps that renewal cheap
// with 10,000 stations connected, where re-reading every connected row cost ~30 ms per replica per renewal.
export const stationTakeovers = pgTable(
  'station_takeovers',
  {
    // The replica that held the older connection.
    replicaId: text('replica_id').notNull(),
    assetId: text('asset_id').notNull(),
    // The newer connection's epoch: the older replica closes its socket if it holds an older one.
    epoch: bigint('epoch', { mode: 'number' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.replicaId, t.assetId] })],
);
