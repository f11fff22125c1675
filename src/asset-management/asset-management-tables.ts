import { sql } from 'drizzle-orm';
import { boolean, check, foreignKey, index, integer, jsonb, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

export interface ConnectorRecord {
  id: number;
  maxAmperage: number;
  maxVoltage: number;
  maxPowerWatts: number;
  connectionType?: string;
  format?: string;
}

export const chargingStationModels = pgTable(
  'charging_station_models',
  {
    id: text('id').primaryKey(),
    vendor: text('vendor').notNull(),
    model: text('model').notNull(),
    powerType: text('power_type', { enum: ['AC_1_PHASE', 'AC_3_PHASE', 'DC'] }).notNull(),
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
    check('charging_station_models_power_type_enum', sql`${t.powerType} IN ('AC_1_PHASE', 'AC_3_PHASE', 'DC')`),
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
    ocppVersion: text('ocpp_version', { enum: ['1.6', '2.0.1'] }).notNull(),
    securityProfile: integer('security_profile').notNull(),
    passwordHash: text('password_hash'),
    passwordChangedAt: timestamp('password_changed_at', { withTimezone: true, precision: 3 }),
    createdAt: timestamp('created_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true, precision: 3 }).notNull().defaultNow(),
  },
  (t) => [
    index('assets_network_id_idx').on(t.network, t.id),
    foreignKey({ columns: [t.chargingStationModelId], foreignColumns: [chargingStationModels.id], name: 'assets_charging_station_model_fk' }),
    check('assets_ocpp_version_enum', sql`${t.ocppVersion} IN ('1.6', '2.0.1')`),
    check('assets_security_profile_range', sql`${t.securityProfile} BETWEEN 1 AND 3`),
    check('assets_password_pair', sql`(${t.passwordHash} IS NULL) = (${t.passwordChangedAt} IS NULL)`),
  ],
);

export const assetPasswordChanges = pgTable(
  'asset_password_changes',
  {
    id: text('id').primaryKey(),
    assetId: text('asset_id').notNull(),
    network: text('network').notNull(),
    actorClientId: text('actor_client_id').notNull(),
    generated: boolean('generated').notNull(),
    changedAt: timestamp('changed_at', { withTimezone: true, precision: 3 }).notNull(),
  },
  (t) => [
    index('asset_password_changes_asset_idx').on(t.assetId, t.changedAt),
    foreignKey({ columns: [t.assetId], foreignColumns: [assets.id], name: 'asset_password_changes_asset_fk' }),
  ],
);
