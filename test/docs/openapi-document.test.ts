// The API reference as integrators and their tools read it: who may call what, every answer in its
// family's shape, named schemas, Redocly's recommended rules, and the client types generated from it.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import openapiTS, { astToString } from 'openapi-typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MODEL_ADMIN, modelBody, uniqueAssetId, uniqueNetwork } from '../helpers/asset-factory.js';
import { fetchDocument, operationsOf, type OpenApiDocument, type Operation } from '../helpers/openapi-document.js';
import { paymentBody, READ, RECORD_URL, WRITE } from '../helpers/payments-factory.js';
import { ROOT } from '../helpers/service-process.js';
import { createTestApp, useTestApp } from '../helpers/test-app.js';

const t = useTestApp();
let doc: OpenApiDocument;
beforeAll(async () => {
  doc = await fetchDocument(t);
});

// The webhooks family answers in asset management's shape.
const familyOf = (path: string) =>
  path.startsWith('/payments/') ? 'payments' : path.startsWith('/asset-management/') ? 'asset-management' : path.startsWith('/webhooks/') ? 'webhooks' : 'public';
type Schema = Record<string, unknown> & { properties?: Record<string, Schema>; required?: string[]; enum?: unknown[]; $ref?: string };

function resolve(schema: Schema | undefined): Schema {
  if (!schema?.$ref) return schema ?? {};
  return doc.components.schemas[schema.$ref.replace('#/components/schemas/', '')] as Schema;
}

function bodySchema(operation: Operation, status: number): Schema {
  return resolve(operation.responses[String(status)]?.content?.['application/json']?.schema as Schema | undefined);
}

describe('operations', () => {
  it('each has a unique operationId, a summary, a description and a declared tag', () => {
    const operations = operationsOf(doc);
    expect(operations.length).toBe(23);
    const ids = operations.map(({ operation }) => operation.operationId);
    expect(ids.every((id) => typeof id === 'string' && /^[a-z][A-Za-z]+$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    const tags = new Set(doc.tags!.map((tag) => tag.name));
    for (const { method, path, operation } of operations) {
      expect(operation.summary, `${method} ${path}`).toMatch(/\S/);
      expect(operation.description, `${method} ${path}`).toMatch(/\S{3}/);
      expect(operation.tags!.every((tag) => tags.has(tag)), `${method} ${path}`).toBe(true);
    }
  });

  it('declare who may call them: the OAuth 2.0 scopes their access hooks accept, the bearer scheme, or nothing when public', () => {
    const scopes = doc.components.securitySchemes.oauth2!.flows!.clientCredentials!.scopes;
    for (const { method, path, operation } of operationsOf(doc)) {
      if (familyOf(path) === 'public') {
        expect(operation.security, `${method} ${path}`).toEqual([]);
        continue;
      }
      const oauth = operation.security!.filter((requirement) => 'oauth2' in requirement);
      expect(oauth.length, `${method} ${path}`).toBeGreaterThan(0);
      // one requirement per accepted scope: any one of them suffices
      for (const requirement of oauth) {
        expect(requirement.oauth2).toHaveLength(1);
        expect(Object.keys(scopes)).toContain(requirement.oauth2![0]);
      }
      expect(operation.security).toContainEqual({ bearerAuth: [] });
    }
    const accepted = (method: string, path: string) => doc.paths[path]![method]!.security!.flatMap((r) => r.oauth2 ?? []);
    expect(accepted('get', '/payments/v1/session-payments')).toEqual([READ, WRITE]);
    expect(accepted('post', '/payments/v1/session-payments')).toEqual([WRITE]);
    expect(accepted('post', '/asset-management/v1/assets/change-password')).toEqual(['write:asset']);
    expect(accepted('post', '/webhooks/v1/subscriptions')).toEqual(['write:webhooks']);
    expect(accepted('get', '/webhooks/v1/subscriptions/{id}/deliveries')).toEqual(['read:webhooks', 'write:webhooks']);
    const createModel = doc.paths['/asset-management/v1/charging-station-models']!.post!;
    expect(accepted('post', '/asset-management/v1/charging-station-models')).toEqual(['write:chargingstationmodel']);
    expect(createModel.description).toContain('Needs the scope `write:chargingstationmodel` and the `admin` role, without a network claim.');
    expect(doc.paths['/payments/v1/session-payments']!.get!.description).toContain('Needs one of the scopes `read:sessionpayment`, `write:sessionpayment`.');
  });

  it('get their token from the server the page was opened on', () => {
    expect(doc.components.securitySchemes.oauth2!.flows!.clientCredentials!.tokenUrl).toBe('/oauth/token');
    expect(doc.servers).toEqual([expect.objectContaining({ url: '/' })]);
  });

  it('with an external provider, get their token at {AUTH_ISSUER}/oauth/token, one slash whatever the issuer ends in', async () => {
    for (const issuer of ['https://tenant.example.com', 'https://tenant.example.com/']) {
      const external = await createTestApp({ env: { AUTH_JWKS_URL: 'https://tenant.example.com/.well-known/jwks.json', AUTH_ISSUER: issuer } });
      try {
        const externalDoc = await fetchDocument(external);
        expect(externalDoc.components.securitySchemes.oauth2!.flows!.clientCredentials!.tokenUrl).toBe('https://tenant.example.com/oauth/token');
      } finally {
        await external.close();
      }
    }
  });
});

describe('answers', () => {
  const EVERY = ['400', '401', '403', '408', '429', '500', '503'];

  it('every API operation documents the statuses any of them may answer, in its family\'s shape, with Retry-After and the challenge', () => {
    for (const { method, path, operation } of operationsOf(doc)) {
      const family = familyOf(path);
      if (family === 'public') continue;
      const where = `${method} ${path}`;
      expect(Object.keys(operation.responses), where).toEqual(expect.arrayContaining(EVERY));
      expect(operation.responses['401']!.headers, where).toHaveProperty('WWW-Authenticate');
      expect(operation.responses['429']!.headers, where).toHaveProperty('Retry-After');
      expect(operation.responses['503']!.headers, where).toHaveProperty('Retry-After');
      expect(bodySchema(operation, 401).required, where).toEqual(['message']);
      expect(bodySchema(operation, 429).required, where).toEqual(['message']);
      if (family === 'payments') {
        expect(operation.responses['400']!.content!['application/json']!.schema).toEqual({ $ref: '#/components/schemas/PaymentsValidationError' });
        expect(bodySchema(operation, 400).required, where).toEqual(['success', 'error']);
        for (const [status, code] of [[403, 'FORBIDDEN'], [408, 'REQUEST_TIMEOUT'], [500, 'INTERNAL_SERVER_ERROR'], [503, 'SERVICE_UNAVAILABLE']] as const) {
          const schema = bodySchema(operation, status);
          expect(schema.properties!.code!.enum, `${where} ${status}`).toEqual([code]);
          expect(schema.properties!.status!.enum, `${where} ${status}`).toEqual([status]);
        }
      } else {
        expect(bodySchema(operation, 403).required, where).toEqual(['message']);
        for (const [status, type] of [[400, 'BAD_REQUEST'], [408, 'REQUEST_TIMEOUT'], [500, 'INTERNAL_ERROR'], [503, 'SERVICE_UNAVAILABLE']] as const) {
          expect(bodySchema(operation, status).properties!.type!.enum, `${where} ${status}`).toEqual([type]);
        }
        expect(bodySchema(operation, 503).properties!.code!.enum).toEqual(['DATABASE_UNAVAILABLE', 'SHUTTING_DOWN']);
      }
    }
  });

  it('operations on one record document its 404, and creations and state changes their 409, with the codes they carry', () => {
    const codes = (method: string, path: string, status: number) => bodySchema(doc.paths[path]![method]!, status).properties!.code!.enum;
    for (const { method, path, operation } of operationsOf(doc)) {
      if (path.includes('{id}') || path.endsWith('change-password')) expect(operation.responses, `${method} ${path}`).toHaveProperty('404');
    }
    expect(codes('get', '/payments/v1/session-payments/{id}', 404)).toEqual(['NOT_FOUND']);
    expect(codes('post', '/payments/v1/session-payments', 409)).toEqual(['CONFLICT']);
    expect(codes('post', '/payments/v1/session-payments/{id}/collect', 409)).toEqual(['CONFLICT']);
    expect(codes('get', '/asset-management/v1/assets/{id}', 404)).toEqual(['ASSET_NOT_FOUND']);
    expect(codes('post', '/asset-management/v1/charging-station-models/{id}/archive', 404)).toEqual(['CHARGING_STATION_MODEL_NOT_FOUND']);
    expect(codes('post', '/asset-management/v1/charging-station-models', 409)).toEqual(['CHARGING_STATION_MODEL_ALREADY_EXISTS', 'CONFLICTING_SECURITY_PROFILE_STATE', 'IDEMPOTENCY_KEY_IN_USE']);
    expect(codes('post', '/asset-management/v1/assets', 409)).toEqual(['ASSET_ALREADY_EXISTS', 'CONFLICTING_SECURITY_PROFILE_STATE', 'IDEMPOTENCY_KEY_IN_USE']);
    // The operations that take an Idempotency-Key document the 422 of a key reused for another request.
    for (const path of ['/payments/v1/session-payments', '/payments/v1/session-payments/{id}/collect']) expect(codes('post', path, 422)).toEqual(['IDEMPOTENCY_KEY_REUSED']);
    for (const path of ['/asset-management/v1/charging-station-models', '/asset-management/v1/assets']) expect(codes('post', path, 422)).toEqual(['IDEMPOTENCY_KEY_REUSED']);
    expect(doc.paths['/asset-management/v1/assets/change-password']!.post!.responses).not.toHaveProperty('422');
    expect(codes('post', '/asset-management/v1/assets/change-password', 409)).toEqual([
      'STATION_REJECTED',
      'STATION_OFFLINE',
      'PASSWORD_CHANGE_IN_PROGRESS',
      'CONFLICTING_SECURITY_PROFILE_STATE',
      'NOTHING_TO_ROLL_BACK',
    ]);
  });

  it('the errors the service gives have the documented members and codes of their operation and status', async () => {
    const admin = t.bearer({ ...MODEL_ADMIN, scopes: [...MODEL_ADMIN.scopes, 'write:asset', WRITE] });
    const recorded = paymentBody();
    const model = modelBody();
    const asset = { id: uniqueAssetId(), network: uniqueNetwork() };
    for (const [url, payload] of [[RECORD_URL, recorded], ['/asset-management/v1/charging-station-models', model], ['/asset-management/v1/assets', asset]] as const) {
      expect((await t.app.inject({ method: 'POST', url, headers: { authorization: admin }, payload })).statusCode).toBe(201);
    }
    const cases: { method: 'GET' | 'POST'; url: string; path: string; status: number; authorization?: string; payload?: unknown }[] = [
      { method: 'GET', url: '/payments/v1/session-payments', path: '/payments/v1/session-payments', status: 400, authorization: admin },
      { method: 'GET', url: '/payments/v1/session-payments?sessionIds=a', path: '/payments/v1/session-payments', status: 401 },
      { method: 'GET', url: '/payments/v1/session-payments?sessionIds=a', path: '/payments/v1/session-payments', status: 403, authorization: t.bearer({ scopes: ['read:asset'] }) },
      { method: 'GET', url: '/payments/v1/session-payments/pmt_none', path: '/payments/v1/session-payments/{id}', status: 404, authorization: admin },
      { method: 'POST', url: RECORD_URL, path: '/payments/v1/session-payments', status: 409, authorization: admin, payload: recorded },
      { method: 'POST', url: '/asset-management/v1/assets', path: '/asset-management/v1/assets', status: 400, authorization: admin, payload: {} },
      { method: 'GET', url: '/asset-management/v1/assets', path: '/asset-management/v1/assets', status: 401 },
      { method: 'GET', url: '/asset-management/v1/assets', path: '/asset-management/v1/assets', status: 403, authorization: t.bearer({ scopes: [READ] }) },
      { method: 'GET', url: '/asset-management/v1/assets/none', path: '/asset-management/v1/assets/{id}', status: 404, authorization: admin },
      { method: 'POST', url: '/asset-management/v1/assets', path: '/asset-management/v1/assets', status: 409, authorization: admin, payload: asset },
      { method: 'POST', url: '/asset-management/v1/charging-station-models', path: '/asset-management/v1/charging-station-models', status: 409, authorization: admin, payload: model },
    ];
    for (const c of cases) {
      const res = await t.app.inject({ method: c.method, url: c.url, headers: c.authorization ? { authorization: c.authorization } : {}, ...(c.payload ? { payload: c.payload as object } : {}) });
      const where = `${c.method} ${c.url}`;
      expect(res.statusCode, where).toBe(c.status);
      const schema = bodySchema(doc.paths[c.path]![c.method.toLowerCase()]!, c.status);
      const body = res.json() as Record<string, unknown>;
      expect(Object.keys(body).sort(), where).toEqual(Object.keys(schema.properties!).sort());
      for (const [member, property] of Object.entries(schema.properties!)) {
        if (property.enum) expect(property.enum, `${where} ${member}`).toContain(body[member]);
      }
    }
  });
});

describe('schemas', () => {
  it('names SessionPayment, ChargingStationModel, Asset and the webhooks\' schemas, each with an example, and no schema no operation uses', () => {
    const named = ['Asset', 'ChargingStationModel', 'SessionPayment', 'WebhookDelivery', 'WebhookSubscription', 'WebhookSubscriptionWithSecret'];
    expect(Object.keys(doc.components.schemas).sort()).toEqual([...named, 'PaymentsValidationError'].sort());
    for (const name of named) {
      const schema = doc.components.schemas[name]!;
      expect(schema.examples, name).toHaveLength(1);
      expect(Object.keys((schema.examples as Record<string, unknown>[])[0]!).sort(), name).toEqual(expect.arrayContaining(schema.required as string[]));
    }
    const list = doc.paths['/payments/v1/session-payments']!.get!.responses['200']!.content!['application/json']!.schema;
    expect(list).toMatchObject({ type: 'array', items: { $ref: '#/components/schemas/SessionPayment' } });
  });

  it('no pattern that other tools read differently, and no integer bound at the safe-integer limit', () => {
    const text = JSON.stringify(doc);
    expect(text).not.toContain('9007199254740991');
    const patterns = [...text.matchAll(/"pattern":("(?:[^"\\]|\\.)*")/g)].map((m) => JSON.parse(m[1]!) as string);
    expect(patterns.length).toBeGreaterThan(0);
    for (const pattern of patterns) {
      expect(pattern).not.toMatch(/\\[pP]\{/);
      // the same meaning with and without the u flag, as ECMA-262 and JSON Schema tools read it
      expect(() => new RegExp(pattern)).not.toThrow();
      expect(() => new RegExp(pattern, 'u')).not.toThrow();
    }
  });
});

it('has the published interface version, servers, tags and the package\'s license', () => {
  const { license } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { license: string };
  expect(license).toBe('UNLICENSED');
  expect(doc.info).toMatchObject({ version: '1.404.0', license: { name: expect.stringMatching(/^UNLICENSED/) } });
  expect(doc.info.license).not.toHaveProperty('identifier');
  expect(doc.tags!.map((tag) => tag.name)).toEqual(['payments', 'asset-management', 'webhooks', 'oauth']);
});

describe('tools', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cns-openapi-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('Redocly finds no problem with its recommended rules (redocly.yaml)', () => {
    const file = join(dir, 'openapi.json');
    writeFileSync(file, JSON.stringify(doc));
    const run = spawnSync(process.execPath, [join(ROOT, 'node_modules/@redocly/cli/bin/cli.js'), 'lint', file, '--config', join(ROOT, 'redocly.yaml'), '--format', 'json'], {
      cwd: ROOT,
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '', HOME: dir, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
      timeout: 60_000,
    });
    const report = JSON.parse(run.stdout.slice(run.stdout.indexOf('{'))) as { totals: { errors: number; warnings: number }; problems: { ruleId: string; message: string }[] };
    expect(report.problems.map((p) => `${p.ruleId}: ${p.message}`)).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
    expect(run.status).toBe(0);
  });

  // The client types the typed-client test compiles against are this document's: a renamed schema or
  // operation fails here, and `npx vitest run test/docs/openapi-document.test.ts -u` writes them anew.
  it('the committed client types are openapi-typescript\'s output for the live document', async () => {
    const types = astToString(await openapiTS(doc as unknown as Parameters<typeof openapiTS>[0]));
    const header = '// Generated by openapi-typescript from /openapi.json; do not edit. Regenerate: npx vitest run test/docs/openapi-document.test.ts -u\n';
    await expect(header + types).toMatchFileSnapshot('../generated/openapi.ts');
  });
});
