import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { claimRotation } from '../../src/asset-management/assets-repository.js';
import { recordPasswordChange } from '../../src/asset-management/password-audit-service.js';
import type { Db } from '../../src/db/database.js';
import { newId } from '../../src/kernel/ids.js';
import { buildApp } from '../../src/main/app.js';
import { loadConfig } from '../../src/kernel/config.js';
import type { OcppVersion } from '../../src/kernel/ocpp-vocabulary.js';
import type { TestApp, TokenOptions } from './test-app.js';

// Fresh names per call: tests share one app (and database) per file, so no two may collide.
export function unique(prefix: string): string {
  return `${prefix}-${randomBytes(6).toString('hex')}`;
}

export function uniqueAssetId(): string {
  return unique('CP');
}

export function uniqueNetwork(): string {
  return unique('net');
}

export function modelBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    vendor: unique('Vendor'),
    model: unique('Model'),
    powerType: 'AC_3_PHASE',
    connectors: [{ id: 1, maxAmperage: 32, maxVoltage: 400, maxPowerWatts: 22_000 }],
    ...overrides,
  };
}

export const MODEL_ADMIN = { scopes: ['write:chargingstationmodel'], admin: true };
export const ASSET_WRITER = { scopes: ['write:asset'] };

export interface CreatedModel {
  id: string;
  vendor: string;
  model: string;
  [key: string]: unknown;
}

export async function createModel(t: TestApp, overrides: Record<string, unknown> = {}): Promise<CreatedModel> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/asset-management/v1/charging-station-models',
    headers: { authorization: t.bearer(MODEL_ADMIN) },
    payload: modelBody(overrides),
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().data as CreatedModel;
}

export interface CreatedAsset {
  id: string;
  network: string;
  ocppVersion: OcppVersion;
  securityProfile: number;
  passwordChangedAt: string | null;
  [key: string]: unknown;
}

export async function createAsset(
  t: TestApp,
  body: { id?: string; network?: string; ocppVersion?: OcppVersion; securityProfile?: number; name?: string; chargingStationModelId?: string } = {},
): Promise<CreatedAsset> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/asset-management/v1/assets',
    headers: { authorization: t.bearer(ASSET_WRITER) },
    payload: { id: uniqueAssetId(), network: uniqueNetwork(), ...body },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().data as CreatedAsset;
}

// The family's error body, exactly: no stack, no extra members.
export function familyError(type: string, code: string) {
  return { type, code, message: expect.any(String) };
}

export const BAD_REQUEST = familyError('BAD_REQUEST', 'INVALID_REQUEST_PARAMETERS');

export interface SiblingApp {
  app: FastifyInstance;
  bearer(options: TokenOptions): string;
  close(): Promise<void>;
}

// A second app on the same database with a different configuration, as another replica would be:
// far cheaper than a fresh database, and the data stays visible to both.
export async function siblingApp(t: TestApp, env: Record<string, string>): Promise<SiblingApp> {
  const config = loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', RATE_LIMIT_MAX: '0', ...env });
  const app = await buildApp(config, { database: t.database });
  await app.ready();
  return {
    app,
    bearer({ scopes, network, admin, clientId }) {
      const { access_token } = app.auth.tokens!.issue({ clientId: clientId ?? 'cli_test', scopes, network: network ?? null, isAdmin: admin ?? false });
      return `Bearer ${access_token}`;
    },
    close: () => app.close(),
  };
}

// A password change as its replica writes it before sending the command, left IN_FLIGHT with its
// deadline `deadlineMs` from now (negative: passed long ago): what a replica that died mid-change
// leaves behind (docs/rotation.md, "A change whose replica died"). Returns the change's id.
export async function inFlightChange(
  db: Db,
  asset: { id: string; network: string },
  options: { deadlineMs: number; pendingPasswordHash?: string; generated?: boolean; actorClientId?: string },
): Promise<string> {
  const rotationId = newId('apc');
  const { deadlineMs, pendingPasswordHash = 'hmac-sha256$unused', generated = true, actorClientId = 'cli_replica_died' } = options;
  await db.transaction(async (tx) => {
    const changedAt = await claimRotation(tx, { id: asset.id, pendingPasswordHash, rotationId, deadlineMs });
    await recordPasswordChange(tx, { rotationId, assetId: asset.id, network: asset.network, actorClientId, generated, changedAt, outcome: null });
  });
  return rotationId;
}
