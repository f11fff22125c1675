import { z } from 'zod';
import { identifierSchema, nameSchema } from '../kernel/identifier-schemas.js';
import { LISTED_ID } from '../kernel/identifiers.js';
import { OCPP_2_0_1, OCPP_VERSIONS, SECURITY_PROFILES, type OcppVersion } from '../kernel/ocpp-vocabulary.js';
import { emptyBody, envelope, page, pageLimit } from '../kernel/paging-schemas.js';
import { CONNECTION_TYPES, CONNECTOR_FORMATS, POWER_TYPES } from './asset-management-tables.js';
import { stationOutput } from './station-link.js';
import { ROTATION_STATES } from './rotation.js';
// Request schemas validate; response schemas only document (the app serialises with JSON.stringify).
// Every object is strict: a misspelt optional field must be a 400, never silently ignored.

export const ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;
const ID_RULE = 'must be 1 to 128 characters from A-Z, a-z, 0-9 and . _ : -';

// Identifiers are compared exactly, so they are not trimmed; the syntax also keeps NUL bytes and
// other input PostgreSQL would refuse away from the database.
export const idSchema = z.string().regex(ID_PATTERN, ID_RULE);

// Free text, but an identifier: the same rules as the network of a payment.
export const networkSchema = identifierSchema(LISTED_ID);

function absoluteUrl(schemes: readonly string[]) {
  return (value: string): boolean => {
    const prefix = /^([a-z][a-z0-9+.-]*):\/\//i.exec(value);
    if (!prefix || !schemes.includes(prefix[1]!.toLowerCase()) || /\s/.test(value)) return false;
    try {
      return new URL(value).hostname.length > 0;
    } catch {
      return false;
    }
  };
}

export const OCPP_URL_MAX = 500;

// Requests that succeed as they stand (each once: a model and an asset id are unique).
const MODEL_EXAMPLE = {
  vendor: 'Wallbox',
  model: 'Pulsar Plus 22',
  powerType: 'AC_3_PHASE',
  connectors: [{ id: 1, maxAmperage: 32, maxVoltage: 400, maxPowerWatts: 22000, connectionType: 'IEC_62196_T2', format: 'CABLE' }],
  configurationKeys: { ocppUrl: 'wss://ocpp.example.com/ocpp' },
  friendlyName: 'Wallbox Pulsar Plus 22 kW',
  imageUrl: 'https://images.example.com/pulsar-plus.png',
};
const ASSET_EXAMPLE = { id: 'CP-1', network: 'net_1', name: 'Depot bay 1', ocppVersion: OCPP_2_0_1, securityProfile: 2 };
// What the examples are answered with (the generated id and the times of writing aside).
const WRITTEN_AT = { createdAt: '2025-01-31T18:04:05.123Z', updatedAt: '2025-01-31T18:04:05.123Z' };

export const MAX_CONNECTORS = 32;

// z.number() already refuses NaN and ±Infinity (JSON's 1e400 parses to Infinity).
const rating = z.number().positive('must be greater than 0');

const connectorInput = z
  .object({
    id: z.number().int('must be an integer').min(1, 'must be at least 1'),
    maxAmperage: rating,
    maxVoltage: rating,
    maxPowerWatts: rating,
    connectionType: z.enum(CONNECTION_TYPES).optional(),
    format: z.enum(CONNECTOR_FORMATS).optional(),
  })
  .strict();

export const createChargingStationModelBody = z
  .object({
    vendor: nameSchema(200),
    model: nameSchema(200),
    powerType: z.enum(POWER_TYPES),
    connectors: z
      .array(connectorInput)
      .min(1, 'must list at least 1 connector')
      .max(MAX_CONNECTORS, `must list at most ${MAX_CONNECTORS} connectors`)
      .superRefine((connectors, ctx) => {
        const seen = new Set<number>();
        connectors.forEach((connector, index) => {
          if (seen.has(connector.id)) {
            ctx.addIssue({ code: 'custom', path: [index, 'id'], message: `connector id ${connector.id} appears more than once` });
          }
          seen.add(connector.id);
        });
      }),
    configurationKeys: z
      .object({
        ocppUrl: nameSchema(OCPP_URL_MAX)
          .refine(absoluteUrl(['ws', 'wss']), 'must be an absolute ws:// or wss:// URL')
          .optional(),
      })
      .strict()
      .optional(),
    friendlyName: nameSchema(200).optional().describe('defaults to "vendor model"'),
    imageUrl: nameSchema(500).refine(absoluteUrl(['http', 'https']), 'must be an absolute http:// or https:// URL').optional(),
  })
  .strict()
  .meta({ examples: [MODEL_EXAMPLE] });

export type CreateChargingStationModelInput = z.output<typeof createChargingStationModelBody>;

const connectorOutput = z.object({
  id: z.number().int(),
  connectionType: z.enum(CONNECTION_TYPES).optional().describe('omitted when unknown'),
  format: z.enum(CONNECTOR_FORMATS).optional().describe('omitted when unknown'),
  maxAmperage: z.number(),
  maxVoltage: z.number(),
  maxPowerWatts: z.number(),
});

const dateTime = z.string().describe('ISO 8601 UTC date-time with milliseconds');

export const chargingStationModelOutput = z.object({
  id: z.string(),
  vendor: z.string(),
  model: z.string(),
  powerType: z.enum(POWER_TYPES),
  connectors: z.array(connectorOutput),
  configurationKeys: z.object({ ocppUrl: z.string().optional() }).describe('{} when no key is configured'),
  isArchived: z.boolean(),
  createdAt: dateTime,
  updatedAt: dateTime,
  friendlyName: z.string(),
  imageUrl: z.string().optional().describe('omitted when the model has no image'),
}).meta({
  id: 'ChargingStationModel',
  examples: [{ id: 'csm_01JJZK6C2B8X5Q4W7R9T3V1N2M', ...MODEL_EXAMPLE, isArchived: false, ...WRITTEN_AT }],
});

export type ChargingStationModel = z.output<typeof chargingStationModelOutput>;

export const pageQuery = z
  .object({
    limit: pageLimit,
    startingAfter: idSchema.optional().describe('the last id of the previous page'),
  })
  .strict();

export const listChargingStationModelsQuery = pageQuery
  .extend({
    includeArchived: z
      .enum(['true', 'false'])
      .transform((value) => value === 'true')
      .default(false)
      .describe('default false'),
  })
  .strict();

export const listAssetsQuery = pageQuery.extend({ network: networkSchema.optional().describe('only this network\'s assets') }).strict();

export const idParams = z.object({ id: idSchema }).strict();

export const DEFAULT_OCPP_VERSION: OcppVersion = OCPP_2_0_1;

export const createAssetBody = z
  .object({
    id: idSchema.optional().describe('the OCPP charge point identity; default ast_ + a time-ordered id'),
    network: networkSchema,
    name: nameSchema(200).optional(),
    chargingStationModelId: idSchema.optional(),
    ocppVersion: z.enum(OCPP_VERSIONS).optional().describe(`default ${DEFAULT_OCPP_VERSION}`),
    securityProfile: z
      .literal(SECURITY_PROFILES, { error: 'must be 1, 2 or 3' })
      .optional()
      .describe('default OCPP_MIN_SECURITY_PROFILE'),
  })
  .strict()
  .meta({ examples: [ASSET_EXAMPLE] });

export type CreateAssetInput = z.output<typeof createAssetBody>;

export const rotationOutput = z
  .object({
    id: z.string().describe('the change (its audit record)'),
    state: z
      .enum(ROTATION_STATES)
      .describe(
        'IN_FLIGHT: sent, answer awaited; UNCONFIRMED: outcome unknown, both passwords accepted until the station logs in with one; ACCEPTED, REJECTED: the station answered; CONFIRMED, DISCARDED: an UNCONFIRMED change ended by a login with the new or the old password; FORCED, PROVISIONED: stored at once; ROLLED_BACK: the password the change before replaced is the only one again',
      ),
    requestedAt: dateTime,
    resolvedAt: dateTime.nullable().describe('null while IN_FLIGHT or UNCONFIRMED'),
    staleLoginAt: dateTime
      .nullable()
      .describe('after a switch: when the station last tried the password it replaced (and was refused); null if it never did'),
  })
  .describe('the latest password change; null before the first');

export const assetOutput = z.object({
  id: z.string(),
  network: z.string(),
  name: z.string().nullable(),
  chargingStationModelId: z.string().nullable(),
  ocppVersion: z.enum(OCPP_VERSIONS),
  securityProfile: z.number().int(),
  passwordChangedAt: dateTime.nullable().describe('null before the first change'),
  createdAt: dateTime,
  updatedAt: dateTime,
  station: stationOutput.nullable(),
  rotation: rotationOutput.nullable(),
}).meta({
  id: 'Asset',
  examples: [{ ...ASSET_EXAMPLE, chargingStationModelId: null, passwordChangedAt: null, ...WRITTEN_AT, station: null, rotation: null }],
});

export type Asset = z.output<typeof assetOutput>;

// `rollback: true` undoes the latest change and takes only the id (no password by mistake); false is
// the same as absent, as with `force`. Not a oneOf: a variant that may omit `rollback` overlaps.
export const changePasswordBody = z
  .strictObject({
    id: idSchema,
    // Only the type here: the rule depends on the asset's OCPP version, checked by the service.
    password: z.string().optional().describe('omit to have a random password generated'),
    force: z.boolean().optional().describe('default false; for a station that has logged in before and is offline: store the new password at once (configure the station by hand)'),
    rollback: z.boolean().optional().describe('default false; true: make no change, but make the password the latest change replaced the only one again (for a station that answered Accepted and kept its old password); takes no password or force'),
  })
  .superRefine((body, ctx) => {
    const beside = body.rollback === true ? (['password', 'force'] as const).filter((field) => body[field] !== undefined) : [];
    for (const field of beside) ctx.addIssue({ code: 'custom', path: [field], message: 'not allowed with rollback: true, which restores the password the latest change replaced' });
  })
  .meta({ examples: [{ id: ASSET_EXAMPLE.id }, { id: ASSET_EXAMPLE.id, rollback: true }] });

const shownOnce = z.string().optional().describe('present only when the service generated the password');

export const changePasswordOutput = z
  .object({ id: z.string(), passwordChangedAt: dateTime, password: shownOnce })
  .describe('stored: never logged in, forced, the station answered Accepted, or rolled back (never with a password)')
  .meta({ examples: [{ id: 'CP-1', passwordChangedAt: '2026-11-25T10:00:00.000Z' }] });

export const changePasswordUnconfirmedOutput = z
  .object({ id: z.string(), status: z.literal('UNCONFIRMED'), password: shownOnce })
  .describe('no answer in time, the connection dropped, or RebootRequired: both passwords work until the station logs in with one')
  .meta({ examples: [{ id: 'CP-1', status: 'UNCONFIRMED' }] });

export { emptyBody, envelope, page };

export const notModified = z.null().describe('Not modified: the resource still has the ETag given in If-None-Match');
