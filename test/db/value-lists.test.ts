// Each value list (status, payment type, power type, OCPP version, security profile) is written
// once, beside its table, and the Zod enums and column types derive from it. The CHECK
// constraints in the database come from migrations, though: a value added to a list without a
// migration would pass validation and then fail the insert with a 500. These tests hold the
// migrated constraints equal to the lists.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POWER_TYPES } from '../../src/asset-management/asset-management-tables.js';
import { ROTATION_OUTCOMES, ROTATION_RESOLUTIONS, ROTATION_STATES } from '../../src/asset-management/rotation.js';
import { rowsOf, sql, type Database } from '../../src/db/database.js';
import { OCPP_VERSIONS, SECURITY_PROFILES } from '../../src/kernel/ocpp-vocabulary.js';
import { PAYMENT_STATUSES, PAYMENT_TYPES } from '../../src/payments/payments-tables.js';
import { createTestDatabase } from '../helpers/test-database.js';

let database: Database;

beforeAll(async () => {
  database = await createTestDatabase();
  // Runs the migrations (the in-memory PGlite starts from a migrated snapshot already).
  await database.migrate();
});
afterAll(async () => {
  await database.close();
});

async function constraintText(name: string): Promise<string> {
  const rows = await rowsOf<{ def: string }>(database.db, sql`SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = ${name}`);
  expect(rows).toHaveLength(1);
  return rows[0]!.def;
}

// PostgreSQL shows `col IN ('A', 'B')` as `col = ANY (ARRAY['A'::text, 'B'::text])`.
function quotedValues(definition: string): string[] {
  return [...definition.matchAll(/'((?:[^']|'')*)'::text/g)].map((m) => m[1]!.replaceAll("''", "'"));
}

describe('CHECK constraints match the value lists', () => {
  it.each([
    ['session_payments_status_enum', PAYMENT_STATUSES],
    ['session_payments_payment_type_enum', PAYMENT_TYPES],
    ['charging_station_models_power_type_enum', POWER_TYPES],
    ['assets_ocpp_version_enum', OCPP_VERSIONS],
    ['assets_rotation_state_enum', ROTATION_STATES],
    ['asset_password_changes_outcome_enum', ROTATION_OUTCOMES],
    ['asset_password_changes_resolution_enum', ROTATION_RESOLUTIONS],
  ] as const)('%s allows exactly its list', async (name, values) => {
    expect(quotedValues(await constraintText(name))).toEqual([...values]);
  });

  it('assets_security_profile_range spans exactly the security profiles', async () => {
    const definition = await constraintText('assets_security_profile_range');
    const bounds = [...definition.matchAll(/security_profile (>=|<=) (\d+)/g)].map((m) => [m[1], Number(m[2])]);
    expect(bounds).toEqual([
      ['>=', Math.min(...SECURITY_PROFILES)],
      ['<=', Math.max(...SECURITY_PROFILES)],
    ]);
    // A range holds only a list without gaps.
    expect([...SECURITY_PROFILES]).toEqual(Array.from({ length: SECURITY_PROFILES.length }, (_, i) => SECURITY_PROFILES[0] + i));
  });
});
