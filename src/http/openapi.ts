import { readFileSync } from 'node:fs';
import fastifySwagger, { type SwaggerTransform } from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { accessRuleOf, type AccessRule } from '../auth/auth-plugin.js';
import type { Scope } from '../auth/scopes.js';
import { REQUEST_PIPELINE } from './plugin-order.js';

export interface OpenapiOptions {
  // Where the page's "Authorize" asks for a token. The embedded issuer's is relative, so the page
  // works from whatever address it is opened on.
  tokenUrl: string;
  // The groups of operations, in the order the page shows them; each area says what its group is
  // and how its errors look.
  tags: { name: string; description: string }[];
}

// The published payments interface's version (docs/api.md, "The API reference and generated clients").
const API_VERSION = '1.404.0';

// What the scopes the operations ask for mean, shown in the "Authorize" dialog.
const SCOPE_MEANINGS: Partial<Record<Scope, string>> = {
  'read:sessionpayment': 'Retrieve session payments and receipts',
  'write:sessionpayment': 'Record, collect and retrieve session payments',
  'read:chargingstationmodel': 'Retrieve charging station models',
  'write:chargingstationmodel': 'Create and update charging station models',
  'read:asset': 'Retrieve assets',
  'write:asset': 'Create and update assets',
};

const DESCRIPTION = `Session payments, charging station models and asset passwords of an EV charging network.

Every operation but the token endpoint and the key documents needs \`Authorization: Bearer <access token>\`.
With the embedded issuer, get a token with the client credentials grant at \`/oauth/token\` (on this page: **Authorize**, \`oauth2\`,
with a client id and secret from \`npm run cli -- clients create\`). Checks run in the order token (401), scope or role (403), request (400).

Each API family answers errors in its own shape, shown with every operation. Beyond those, any operation may answer a wrong method
on its path with 405 and \`Allow\`, and a request that does not arrive within the server's time limit with 408, in the family's shape.`;

// package.json's license field, as OpenAPI says it: an SPDX identifier, or the name alone for
// "UNLICENSED" (npm's word for "no licence is granted").
function licenseOf(): { name: string; identifier?: string } {
  const { license } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { license?: string };
  if (!license || license === 'UNLICENSED') return { name: 'UNLICENSED: proprietary, no licence is granted' };
  return { name: license, identifier: license };
}

type Hooks = unknown;
type Json = Record<string, unknown>;

function accessOf(onRequest: Hooks): AccessRule[] {
  const hooks = Array.isArray(onRequest) ? (onRequest as unknown[]) : [onRequest];
  return hooks.map(accessRuleOf).filter((rule): rule is AccessRule => rule !== undefined);
}

// Who may call an operation, read from the route's own access hooks: an OAuth 2.0 requirement per
// accepted scope (any one suffices), and the plain bearer scheme for tokens of another issuer.
function securityOf(rules: AccessRule[]): Record<string, string[]>[] {
  const scopes = rules.flatMap((rule) => rule.scopes ?? []);
  return [...(scopes.length > 0 ? scopes.map((scope) => ({ oauth2: [scope] })) : [{ oauth2: [] }]), { bearerAuth: [] }];
}

function accessSentence(rules: AccessRule[]): string {
  const scopes = rules.flatMap((rule) => rule.scopes ?? []).map((s) => `\`${s}\``);
  const admin = rules.find((rule) => rule.admin)?.admin;
  const parts = [scopes.length > 1 ? `one of the scopes ${scopes.join(', ')}` : scopes.length === 1 ? `the scope ${scopes[0]}` : 'a valid access token'];
  if (admin) parts.push(admin.allNetworks ? 'the `admin` role, without a network claim' : 'the `admin` role');
  return `Needs ${parts.join(' and ')}.`;
}

// Zod leaves the examples of a schema that transforms out of its input JSON Schema (they might be
// outputs); a request example is an input, written as a client sends it, so it goes back in.
function restoreRequestExamples(zodSchemas: Record<string, unknown>, jsonSchemas: Record<string, unknown>): void {
  for (const part of ['body', 'querystring', 'params']) {
    const source = zodSchemas[part];
    const target = jsonSchemas[part] as Json | undefined;
    const examples = source instanceof z.ZodType ? z.globalRegistry.get(source)?.examples : undefined;
    if (target && examples && target.examples === undefined) target.examples = examples;
  }
}

const transform: SwaggerTransform = (input) => {
  const result = jsonSchemaTransform(input as Parameters<typeof jsonSchemaTransform>[0]);
  const schema = result.schema as Record<string, unknown> | undefined;
  if (!schema || schema.hide) return result;
  restoreRequestExamples((input.schema ?? {}) as Record<string, unknown>, schema);
  const route = input.route as { config?: { public?: boolean }; onRequest?: Hooks };
  if (route.config?.public === true) {
    schema.security = [];
    return result;
  }
  const rules = accessOf(route.onRequest);
  schema.security = securityOf(rules);
  schema.description = [schema.description, accessSentence(rules)].filter(Boolean).join('\n\n');
  return result;
};

// Headers that come with some statuses, whatever the operation.
const STATUS_HEADERS: Record<string, Json> = {
  '401': { 'WWW-Authenticate': { description: 'The challenge (RFC 6750; Basic at the token endpoint)', schema: { type: 'string' } } },
  '429': { 'Retry-After': { description: 'Seconds until the limit resets', schema: { type: 'integer' } } },
  '503': { 'Retry-After': { description: 'Seconds after which a retry may succeed', schema: { type: 'integer' } } },
};

function eachSchemaNode(node: unknown, visit: (node: Json) => void): void {
  if (Array.isArray(node)) {
    for (const item of node) eachSchemaNode(item, visit);
  } else if (node !== null && typeof node === 'object') {
    visit(node as Json);
    for (const value of Object.values(node)) eachSchemaNode(value, visit);
  }
}

// Zod writes JavaScript's safe-integer range as the bounds of every integer: true, but read by
// example generators as the example (-9007199254740991). And `\p{…}` classes in a pattern are read
// differently by other tools (they are not ECMA-262 without the u flag): the refinement behind such
// a pattern still runs, so the document leaves the pattern out rather than mislead.
function tidySchemas(document: Json): void {
  eachSchemaNode(document, (node) => {
    if (node.type === 'integer' || (Array.isArray(node.type) && node.type.includes('integer'))) {
      if (node.minimum === Number.MIN_SAFE_INTEGER) delete node.minimum;
      if (node.maximum === Number.MAX_SAFE_INTEGER) delete node.maximum;
    }
    if (typeof node.pattern === 'string' && /\\[pP]\{/.test(node.pattern)) delete node.pattern;
  });
}

// Components a client generator would emit although no operation uses them (Zod's registry
// holds the input twin of every named schema).
function pruneComponents(document: Json): void {
  const components = document.components as { schemas?: Json };
  const schemas = components.schemas ?? {};
  const reached = new Set<string>();
  const pending = [JSON.stringify(document.paths)];
  while (pending.length > 0) {
    for (const [, name] of pending.pop()!.matchAll(/"#\/components\/schemas\/([^"]+)"/g)) {
      if (!reached.has(name!)) {
        reached.add(name!);
        pending.push(JSON.stringify(schemas[name!] ?? null));
      }
    }
  }
  components.schemas = Object.fromEntries(Object.entries(schemas).filter(([name]) => reached.has(name)));
}

function finishDocument(document: Json): Json {
  const used = new Set<string>();
  for (const operations of Object.values(document.paths as Record<string, Record<string, Json>>)) {
    for (const operation of Object.values(operations)) {
      for (const requirement of (operation.security as Record<string, string[]>[] | undefined) ?? []) {
        for (const scope of requirement.oauth2 ?? []) used.add(scope);
      }
      for (const [status, response] of Object.entries(operation.responses as Record<string, Json>)) {
        const headers = STATUS_HEADERS[status];
        if (headers) response.headers = { ...headers, ...(response.headers as Json | undefined) };
      }
    }
  }
  const schemes = (document.components as { securitySchemes: { oauth2: { flows: { clientCredentials: { scopes: Json } } } } }).securitySchemes;
  schemes.oauth2.flows.clientCredentials.scopes = Object.fromEntries(
    [...used].sort().map((scope) => [scope, SCOPE_MEANINGS[scope as Scope] ?? scope]),
  );
  tidySchemas(document);
  pruneComponents(document);
  return document;
}

async function openapiPlugin(app: FastifyInstance, opts: OpenapiOptions) {
  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Charging network service', description: DESCRIPTION, version: API_VERSION, license: licenseOf() },
      // Relative: requests and token requests go to the address the document was fetched from.
      servers: [{ url: '/', description: 'The server that serves this document' }],
      tags: opts.tags,
      components: {
        securitySchemes: {
          oauth2: {
            type: 'oauth2',
            description: 'OAuth 2.0 client credentials grant; the token is sent as `Authorization: Bearer <token>`.',
            flows: { clientCredentials: { tokenUrl: opts.tokenUrl, scopes: {} } },
          },
          bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'An access token obtained elsewhere (an external identity provider, or curl).' },
        },
      },
    },
    transform,
    transformObject: (input) => finishDocument(jsonSchemaTransformObject(input) as Json),
  });

  await app.register(async (docs) => {
    // The reference page and its assets are public; every other route is authenticated by default.
    docs.addHook('onRoute', (route) => {
      route.config = { ...(route.config ?? {}), public: true };
    });
    await docs.register(fastifySwaggerUi, { routePrefix: '/docs' });
    docs.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  });
}

// Documents the routes added after it (the families declare it as a dependency); its own page and
// document are routes behind the request pipeline like any other.
export default fp(openapiPlugin, { name: 'openapi', dependencies: REQUEST_PIPELINE });
