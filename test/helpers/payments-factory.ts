import { randomBytes } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import type { z } from 'zod';
import type { SessionPayment, recordBodySchema } from '../../src/payments/payments-schemas.js';
import type { TestApp } from './test-app.js';

// A record request as a client writes it.
export type RecordPaymentBody = z.input<typeof recordBodySchema>;

export const LIST_URL = '/payments/v1/session-payments';
export const RECORD_URL = '/payments/v1/session-payments';
export const oneUrl = (id: string) => `/payments/v1/session-payments/${encodeURIComponent(id)}`;
export const collectUrl = (id: string) => `/payments/v1/session-payments/${encodeURIComponent(id)}/collect`;

export const READ = 'read:sessionpayment';
export const WRITE = 'write:sessionpayment';

let counter = 0;

// Unique across tests, files and repeated runs against one database.
export function uniqueId(prefix: string): string {
  counter += 1;
  return `${prefix}_${Date.now().toString(36)}${counter.toString(36)}${randomBytes(4).toString('hex')}`;
}

export function paymentBody(overrides: Partial<RecordPaymentBody> = {}): RecordPaymentBody {
  return {
    network: 'net_a',
    session: uniqueId('ses'),
    sitePartners: ['sp_1', 'sp_2'],
    location: 'loc_1',
    currency: 'USD',
    paymentType: 'DRIVER_ACCOUNT',
    costs: { energy: 2700, idle: 150, flat: 100, time: 54 },
    usages: { energy: 20000, time: 3600, idle: 300 },
    taxConfig: { totalPercentSalesTax: 0.08, energyPerKwhExciseTax: 0.02 },
    priceAdjustment: null,
    ...overrides,
  };
}

export function writer(t: TestApp, network: string | null = null): string {
  return t.bearer({ scopes: [WRITE], network });
}

export function reader(t: TestApp, network: string | null = null): string {
  return t.bearer({ scopes: [READ], network });
}

export async function recordPayment(
  t: TestApp,
  overrides: Partial<RecordPaymentBody> = {},
  authorization: string = writer(t),
): Promise<SessionPayment> {
  const res = await t.app.inject({ method: 'POST', url: RECORD_URL, headers: { authorization }, payload: paymentBody(overrides) });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as SessionPayment;
}

export async function listPayments(t: TestApp, query: string, authorization: string = reader(t)): Promise<LightMyRequestResponse> {
  return t.app.inject({ method: 'GET', url: `${LIST_URL}?${query}`, headers: { authorization } });
}

export function validationError(issues: { code: string; path: (string | number)[]; message?: unknown }[]) {
  return {
    success: false,
    error: { name: 'ZodError', issues: issues.map((i) => ({ code: i.code, message: i.message ?? expect.any(String), path: i.path })) },
  };
}

export function codedError(status: 403 | 404 | 409 | 500) {
  const code = { 403: 'FORBIDDEN', 404: 'NOT_FOUND', 409: 'CONFLICT', 500: 'INTERNAL_SERVER_ERROR' }[status];
  return { code, message: expect.any(String), status };
}

const ISSUE_KEYS = ['code', 'message', 'path'];

// Every answer of the payments family has exactly its status's shape (docs/api.md, "Errors").
export function expectPaymentsShape(res: LightMyRequestResponse): void {
  expect(res.statusCode, res.body).toBeLessThan(500);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  const body = res.json() as Record<string, unknown>;
  if (res.statusCode < 300) return;
  if (res.statusCode === 400) {
    expect(Object.keys(body).sort()).toEqual(['error', 'success']);
    expect(body.success).toBe(false);
    const error = body.error as { name: unknown; issues: unknown[] };
    expect(Object.keys(error).sort()).toEqual(['issues', 'name']);
    expect(error.name).toBe('ZodError');
    expect(error.issues.length).toBeGreaterThan(0);
    for (const issue of error.issues as Record<string, unknown>[]) {
      expect(Object.keys(issue).sort()).toEqual(ISSUE_KEYS);
      expect(typeof issue.code).toBe('string');
      expect(typeof issue.message).toBe('string');
      expect(Array.isArray(issue.path)).toBe(true);
      for (const segment of issue.path as unknown[]) expect(['string', 'number']).toContain(typeof segment);
    }
    return;
  }
  if (res.statusCode === 401) {
    expect(body).toEqual({ message: expect.any(String) });
    return;
  }
  expect(body).toEqual(codedError(res.statusCode as 403 | 404 | 409));
}
