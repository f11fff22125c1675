import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { AppConfig } from '../config.js';
import type { Db } from '../db/database.js';
import fastifyFormbody from '@fastify/formbody';
import { renderOAuthError } from '../plugins/error-handler.js';
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

const oauthErrorBody = z.object({ error: z.string(), error_description: z.string() });

export const OAUTH_PREFIX = '/oauth';

// The token endpoint is a family of its own (RFC 6749 §5.2 bodies), registered under /oauth; the
// well-known documents are plain routes.
async function tokenEndpoint(app: FastifyInstance, opts: { tokens: TokenService }) {
  const { tokens } = opts;
  app.setErrorHandler(renderOAuthError);
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
        tags: ['oauth'],
        summary: 'Issue an access token (OAuth 2.0 client credentials grant)',
        body: tokenRequestBody,
        querystring: tokenRequestQuery,
        response: { 200: tokenResponse, 400: oauthErrorBody, 401: oauthErrorBody },
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

export async function oauthRoutes(app: FastifyInstance, opts: { db: Db; auth: AppConfig['auth']; tokens: TokenService }) {
  const { db, auth, tokens } = opts;
  const r = app.withTypeProvider<ZodTypeProvider>();

  await app.register(tokenEndpoint, { prefix: OAUTH_PREFIX, tokens });

  r.get(
    '/.well-known/jwks.json',
    { config: { public: true }, schema: { tags: ['oauth'], summary: 'Public keys that sign access tokens' } },
    async (_request, reply) => {
      reply.header('cache-control', 'public, max-age=300');
      return publishedJwks(db);
    },
  );

  r.get(
    '/.well-known/oauth-authorization-server',
    { config: { public: true }, schema: { tags: ['oauth'], summary: 'Authorization server metadata (RFC 8414)' } },
    async () => ({
      issuer: auth.issuer,
      token_endpoint: `${auth.issuer}/oauth/token`,
      jwks_uri: `${auth.issuer}/.well-known/jwks.json`,
      grant_types_supported: ['client_credentials'],
      token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
      token_endpoint_auth_signing_alg_values_supported: [auth.signingAlg],
      response_types_supported: ['token'],
      scopes_supported: SCOPES,
    }),
  );
}
