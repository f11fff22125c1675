// The token endpoint's errors: RFC 6749 §5.2 bodies for what that section names (400, 401) and
// RFC 6749's temporarily_unavailable for a 503; the statuses it does not name (405, 408, 429,
// 500) keep the `{ message }` body (a throttled token request is not an invalid_request).
import { z } from 'zod';
import { cut, renderError, renderPlainError, unavailableOf, type ErrorRenderer } from '../http/errors/error-rendering.js';
import { messageBody, type ErrorTable } from '../http/errors/error-shapes.js';
import type { ErrorFamily } from '../http/errors/error-families.js';
import { OAuthError } from './oauth-error.js';

const oauthErrorBody = z.object({ error: z.string(), error_description: z.string() });

const oauthError = (codes: readonly [string, ...string[]]) => oauthErrorBody.extend({ error: z.enum(codes) });

// The token endpoint's error bodies by status, each with what it means there.
export const OAUTH_ERRORS = {
  400: { body: oauthError(['invalid_request', 'unsupported_grant_type', 'invalid_scope']), means: "The request is malformed, the grant type is not client_credentials, or a scope is not the client's" },
  401: { body: oauthError(['invalid_client']), means: 'Unknown client, wrong secret, or a revoked client' },
  405: { body: messageBody, means: 'The path does not serve this method; Allow lists those it does' },
  408: { body: messageBody, means: 'The request did not arrive in time' },
  429: { body: messageBody, means: 'Too many requests; retry after Retry-After seconds' },
  500: { body: messageBody, means: 'Internal failure (details are in the log, under the request id)' },
  503: { body: oauthError(['temporarily_unavailable']), means: 'The database cannot answer now; retry after Retry-After seconds' },
} as const satisfies ErrorTable;

const MESSAGE_ONLY = new Set(Object.entries(OAUTH_ERRORS).flatMap(([status, { body }]) => (body === messageBody ? [Number(status)] : [])));

const renderOAuthError: ErrorRenderer = (error, request, reply) => {
  const unavailable = unavailableOf(error, request);
  if (unavailable) {
    return reply
      .code(503)
      .header('retry-after', String(unavailable.retryAfterSeconds))
      .header('cache-control', 'no-store')
      .send({ error: 'temporarily_unavailable', error_description: unavailable.message } satisfies z.input<typeof oauthErrorBody>);
  }
  let oauth: OAuthError;
  if (error instanceof OAuthError) oauth = error;
  else {
    const r = renderError(error);
    if (MESSAGE_ONLY.has(r.status)) return renderPlainError(error, request, reply);
    oauth = new OAuthError('invalid_request', r.message);
  }
  if (oauth.statusCode === 401) reply.header('www-authenticate', oauth.basicChallenge ? 'Basic realm="oauth"' : 'Bearer');
  return reply
    .code(oauth.statusCode)
    .header('cache-control', 'no-store')
    .send({ error: oauth.error, error_description: cut(oauth.description, 1000) } satisfies z.input<typeof oauthErrorBody>);
};

// Every URL under /oauth/, whether the embedded issuer serves its token endpoint or not.
export const OAUTH_ERROR_FAMILY: ErrorFamily = { name: 'oauth', prefix: '/oauth/', render: renderOAuthError };
