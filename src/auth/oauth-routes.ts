import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { z } from 'zod';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { AppConfig } from '../kernel/config.js';
import type { Db } from '../db/database.js';
import fastifyFormbody from '@fastify/formbody';
import { PLAIN_ERRORS, describeErrorShapes, documentedErrors } from '../http/errors/error-shapes.js';
import { API_ROUTES_NEED } from '../http/plugin-order.js';
import { OAUTH_ERRORS, OAUTH_ERROR_FAMILY } from './oauth-error-family.js';
import { OAuthError } from './oauth-error.js';
import { SCOPES } from './scopes.js';
import { publishedJwks } from './signing-keys-service.js';
import { tokenRequestBody, tokenRequestError, tokenRequestQuery } from './token-parameters.js';
import { parseBasicAuthorization, type TokenService } from './token-service.js';

const tokenResponse = z.object({
  access_token: z.string(),
  token_type: z.literal('Bearer'),
  expires_in: z.number().int(),
  scope: z.string(),
});

// Answers of the well-known documents (routes of no family): rate limit, internal failure, a
// database that cannot answer now.
const publicErrors = documentedErrors(PLAIN_ERRORS, [429, 500, 503]);

const jwks = z
  .object({ keys: z.array(z.record(z.string(), z.string()).describe('A public JSON Web Key (kty, kid, alg, use and the key\'s own members)')) })
  .describe('The public keys (RFC 7517), the current one and those of tokens that may still be valid');

const metadata = z
  .object({
    issuer: z.string(),
    token_endpoint: z.string(),
    jwks_uri: z.string(),
    grant_types_supported: z.array(z.string()),
    token_endpoint_auth_methods_supported: z.array(z.string()),
    token_endpoint_auth_signing_alg_values_supported: z.array(z.string()),
    response_types_supported: z.array(z.string()),
    scopes_supported: z.array(z.string()),
  })
  .describe('Authorization server metadata (RFC 8414)');

const OAUTH_PREFIX = '/oauth';
export const TOKEN_PATH = `${OAUTH_PREFIX}/token`;
const JWKS_PATH = '/.well-known/jwks.json';

// The API reference's group of these operations.
export const OAUTH_TAG = {
  name: 'oauth',
  description: `The embedded OAuth 2.0 authorization server (client credentials grant, RFC 6749 §4.4; error bodies per RFC 6749 §5.2). ${describeErrorShapes(OAUTH_ERRORS)}`,
};
const tags = [OAUTH_TAG.name];

// A path under the issuer. An issuer may end in a slash (many providers' do, and `iss` must match
// it exactly), which must not double.
function underIssuer(issuer: string, path: string): string {
  return `${issuer.replace(/\/+$/, '')}${path}`;
}

// An issuer's token endpoint is {issuer}/oauth/token (docs/api.md, Authentication).
export function tokenEndpointOf(issuer: string): string {
  return underIssuer(issuer, TOKEN_PATH);
}

// The token endpoint is a family of its own (RFC 6749 §5.2 bodies), registered under /oauth; the
// well-known documents are plain routes.
async function tokenEndpoint(app: FastifyInstance, opts: { tokens: TokenService }) {
  const { tokens } = opts;
  app.setErrorHandler(OAUTH_ERROR_FAMILY.render);
  await app.register(fastifyFormbody, { bodyLimit: 8 * 1024 });
  app.withTypeProvider<ZodTypeProvider>().post(
    '/token',
    {
      // Its own rate-limit budget per address: stricter than the general one (secret guessing).
      config: { public: true, rateLimitBucket: 'token' },
      // Validation errors become RFC 6749 errors in the handler, not the API families' bodies.
      // Basic credentials are checked with the same rule in the token service.
      attachValidation: true,
      schema: {
        tags,
        operationId: 'issueToken',
        summary: 'Issue an access token (OAuth 2.0 client credentials grant)',
        description:
          'RFC 6749 §4.4. The client authenticates with HTTP Basic (`client_secret_basic`, preferred) or with `client_id` and `client_secret` in the body (`client_secret_post`). Without `scope` the token carries every scope of the client. The answer is never cached (`Cache-Control: no-store`).',
        consumes: ['application/x-www-form-urlencoded', 'application/json'],
        body: tokenRequestBody,
        querystring: tokenRequestQuery,
        response: {
          200: tokenResponse,
          ...documentedErrors(OAUTH_ERRORS, [400, 401, 408, 429, 500, 503]),
        },
      },
    },
    async (request, reply) => {
      if (request.validationError) throw tokenRequestError(request.validationError);
      const basic = parseBasicAuthorization(request.headers.authorization);
      if (basic === 'malformed') throw new OAuthError('invalid_client', 'malformed Basic credentials', true);
      const { body } = request;
      const result = await tokens.clientCredentialsGrant({
        scope: body.scope ?? undefined,
        audience: body.audience ?? undefined,
        basic,
        bodyClientId: body.client_id ?? undefined,
        bodyClientSecret: body.client_secret ?? undefined,
      });
      reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
      return result;
    },
  );
}

async function oauthRoutes(app: FastifyInstance, opts: { db: Db; auth: AppConfig['auth']; tokens: TokenService }) {
  const { db, auth, tokens } = opts;
  const r = app.withTypeProvider<ZodTypeProvider>();

  await app.register(tokenEndpoint, { prefix: OAUTH_PREFIX, tokens });

  r.get(
    JWKS_PATH,
    {
      config: { public: true },
      schema: {
        tags,
        operationId: 'getJwks',
        summary: 'Public keys that sign access tokens',
        description: 'The JSON Web Key Set that verifies the access tokens of the embedded issuer; cacheable for 5 minutes.',
        response: { 200: jwks, ...publicErrors },
      },
    },
    async (_request, reply) => {
      reply.header('cache-control', 'public, max-age=300');
      return publishedJwks(db);
    },
  );

  r.get(
    '/.well-known/oauth-authorization-server',
    {
      config: { public: true },
      schema: {
        tags,
        operationId: 'getAuthorizationServerMetadata',
        summary: 'Authorization server metadata (RFC 8414)',
        description: 'Where the token endpoint and the keys are, and what the issuer supports.',
        response: { 200: metadata, ...publicErrors },
      },
    },
    async () => ({
      issuer: auth.issuer,
      token_endpoint: tokenEndpointOf(auth.issuer),
      jwks_uri: underIssuer(auth.issuer, JWKS_PATH),
      grant_types_supported: ['client_credentials'],
      token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
      token_endpoint_auth_signing_alg_values_supported: [auth.signingAlg],
      response_types_supported: ['token'],
      scopes_supported: [...SCOPES],
    }),
  );
}

// The embedded issuer's endpoints: a family of their own (encapsulated), after the plugins every
// route needs.
export default fp(oauthRoutes, { name: 'oauth-routes', encapsulate: true, dependencies: ['auth', ...API_ROUTES_NEED] });
