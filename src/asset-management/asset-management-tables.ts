import { sql } from 'drizzle-orm';
import { boolean, check, foreignKey, index, integer, jsonb, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { isOneOf } from '../db/checks.js';
import { OCPP_VERSIONS, SECURITY_PROFILES, type SecurityProfile } from '../kernel/ocpp-vocabulary.js';
import { OPEN_STATES, ROTATION_OUTCOMES, ROTATION_RESOLUTIONS, ROTATION_STATES, type RotationOutcome } from './rotation.js';

// The one list of each: the column types, their CHECK constraints and the Zod enums derive from
// these (the OCPP versions and security profiles from ocpp-vocabulary.ts).
export const POWER_TYPES = ['AC_1_PHASE', 'AC_3_PHASE', 'DC'] as const;

// OCPI 2.2.1 ConnectorType.
export const CONNECTION_TYPES = [
  'CHADEMO',
  'CHAOJI',
  'DOMESTIC_A',
  'DOMESTIC_B',
  'DOMESTIC_C',
  'DOMESTIC_D',
  'DOMESTIC_E',
  'DOMESTIC_F',
  'DOMESTIC_G',
  'DOMESTIC_H',
  'DOMESTIC_I',
  'DOMESTIC_J',
  'DOMESTIC_K',
  'DOMESTIC_L',
  'GBT_AC',
  'GBT_DC',
  'IEC_60309_2_single_16',
  'IEC_60309_2_three_16',
  'IEC_60309_2_three_32',
  'IEC_60309_2_three_64',
  'IEC_62196_T1',
  'IEC_62196_T1_COMBO',
  'IEC_62196_T2',
  'IEC_62196_T2_COMBO',
  'IEC_62196_T3A',
  'IEC_62196_T3C',
  'NEMA_5_20',
  'NEMA_6_30',
  'NEMA_6_50',
  'NEMA_10_30',
  'NEMA_10_50',
  'NEMA_14_30',
  'NEMA_14_50',
  'PANTOGRAPH_BOTTOM_UP',
  'PANTOGRAPH_TOP_DOWN',
  'TESLA_R',
  'TESLA_S',
] as const;

// OCPI 2.2.1 ConnectorFormat.
export const CONNECTOR_FORMATS = ['SOCKET', 'CABLE'] as const;

export type ConnectionType = (typeof CONNECTION_TYPES)[number];
export type ConnectorFormat = (typeof CONNECTOR_FORMATS)[number];

export interface ConnectorRecord {
  id: number;
  maxAmperage: number;
  maxVoltage: number;
  maxPowerWatts: number;
  connectionType?: ConnectionType;
  format?: ConnectorFormat;
}

export const chargingStationModels = pgTable(
  'charging_station_models',
  {
    id: text('id').primaryKey(),
    vendor: text('vendor').notNull(),
    model: text('model').notNull(),
    powerType: text('power_type', { enum: POWER_TYPES }).notNull(),
    connectors: jsonb('connectors').notNull().$type<ConnectorRecord[]>(),
    ocppUrl: text('ocpp_url'),
    friendlyName: text('friendly_name').notNull(),
    imageUrl: text('image_url'),
    isArchived: boolean('is_archived').notNull().default(false),
    createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
  },
  (t) => [
    // Duplicates are decided here, not by a read-then-write: vendor+model, trimmed, case-insensitive.
    check('charging_station_models_power_type_enum', isOneOf(t.powerType, POWER_TYPES)),
    uniqueIndex('charging_station_models_vendor_model_key').on(sql`lower(btrim(${t.vendor}))`, sql`lower(btrim(${t.model}))`),
  ],
);

export const assets = pgTable(
  'assets',
  {
    id: text('id').primaryKey(),
    network: text('network').notNull(),
    name: text('name'),
    chargingStationModelId: text('charging_station_model_id'),
    ocppVersion: text('ocpp_version', { enum: OCPP_VERSIONS }).notNull(),
    securityProfile: integer('security_profile').$type<SecurityProfile>().notNull(),
    passwordHash: text('password_hash'),
    passwordChangedAt: timestamp('password_changed_at', { withTimezone: true, precision: 3 }),
    // The second credential slot (rotation.ts): accepted only while the latest rotation is open.
    pendingPasswordHash: text('pending_password_hash'),
    // The credential the last switch retired: never accepted, only recognised, so a station that
    // keeps trying it is reported.
    replacedPasswordHash: text('replaced_password_hash'),
    // The latest change (its audit row's id) and where it stands.
    rotationId: text('rotation_id'),
    rotationState: text('rotation_state', { enum: ROTATION_STATES }),
    rotationRequestedAt: timestamp('rotation_requested_at', { withTimezone: true, precision: 3 }),
    // While IN_FLIGHT: past it, the replica waiting for the answer is gone and the rotation reads
    // as UNCONFIRMED.
    rotationDeadline: timestamp('rotation_deadline', { withTimezone: true, precision: 3 }),
    rotationResolvedAt: timestamp('rotation_resolved_at', { withTimezone: true, precision: 3 }),
    // When the station last tried the credential the latest switch retired.
    staleLoginAt: timestamp('stale_login_at', { withTimezone: true, precision: 3 }),
    createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
  },
  (t) => [
    index('assets_network_id_idx').on(t.network, t.id),
    // The changes each replica's sweep looks for every few seconds (abandoned-rotations.ts): only
    // those in flight, by deadline, so the sweep reads none of the other assets.
    index('assets_rotation_in_flight_idx').on(t.rotationDeadline).where(sql`${t.rotationState} = 'IN_FLIGHT'`),
    foreignKey({ columns: [t.chargingStationModelId], foreignColumns: [chargingStationModels.id], name: 'assets_charging_station_model_fk' }),
    check('assets_ocpp_version_enum', isOneOf(t.ocppVersion, OCPP_VERSIONS)),
    check(
      'assets_security_profile_range',
      sql`${t.securityProfile} BETWEEN ${sql.raw(String(Math.min(...SECURITY_PROFILES)))} AND ${sql.raw(String(Math.max(...SECURITY_PROFILES)))}`,
    ),
    check('assets_password_pair', sql`(${t.passwordHash} IS NULL) = (${t.passwordChangedAt} IS NULL)`),
    check('assets_rotation_state_enum', isOneOf(t.rotationState, ROTATION_STATES)),
    // Two accepted credentials only while a rotation is open, never otherwise.
    check('assets_pending_only_open', sql`${t.pendingPasswordHash} IS NULL OR (${t.rotationState} IS NOT NULL AND ${isOneOf(t.rotationState, OPEN_STATES)})`),
  ],
);

export const assetPasswordChanges = pgTable(
  'asset_password_changes',
  {
    id: text('id').primaryKey(),
    assetId: text('asset_id').notNull(),
    network: text('network').notNull(),
    actorClientId: text('actor_client_id').notNull(),
    // Whether the service generated the new password; null for a rollback, which sets none.
    generated: boolean('generated'),
    changedAt: timestamp('changed_at', { withTimezone: true, precision: 3 }).notNull(),
    // null while the command is in flight; rows written before rotations existed have none.
    outcome: text('outcome', { enum: ROTATION_OUTCOMES }),
    // How an UNCONFIRMED change ended, and when.
    resolution: text('resolution', { enum: ROTATION_RESOLUTIONS }),
    resolvedAt: timestamp('resolved_at', { withTimezone: true, precision: 3 }),
  },
  (t) => [
    check('asset_password_changes_outcome_enum', isOneOf(t.outcome, ROTATION_OUTCOMES)),
    check('asset_password_changes_resolution_enum', isOneOf(t.resolution, ROTATION_RESOLUTIONS)),
    check(
      'asset_password_changes_generated_known',
      sql`(${t.generated} IS NULL) = coalesce(${isOneOf(t.outcome, ['ROLLED_BACK' satisfies RotationOutcome])}, false)`,
    ),
    index('asset_password_changes_asset_idx').on(t.assetId, t.changedAt),
    foreignKey({ columns: [t.assetId], foreignColumns: [assets.id], name: 'asset_password_changes_asset_fk' }),
  ],
);
