// The token endpoint's errors: RFC 6749 §5.2 bodies for what that section names (400, 401) and
// RFC 6749's temporarily_unavailable for a 503; the statuses it does not name (405, 408, 429,
// 500) keep the `{ message }` body (a throttled token request is not an invalid_request).
import { cut, renderError, renderPlainError, unavailableOf, type ErrorRenderer } from '../plugins/errors/error-rendering.js';
import type { ErrorFamily } from '../plugins/errors/error-families.js';
import { OAuthError } from './oauth-error.js';

const renderOAuthError: ErrorRenderer = (error, request, reply) => {
  const unavailable = unavailableOf(error, request);
  if (unavailable) {
    return reply
      .code(503)
      .header('retry-after', String(unavailable.retryAfterSeconds))
      .header('cache-control', 'no-store')
      .send({ error: 'temporarily_unavailable', error_description: unavailable.message });
  }
  let oauth: OAuthError;
  if (error instanceof OAuthError) oauth = error;
  else {
    const r = renderError(error);
    if ([500, 429, 408, 405].includes(r.status)) return renderPlainError(error, request, reply);
    oauth = new OAuthError('invalid_request', r.message);
  }
  if (oauth.statusCode === 401) reply.header('www-authenticate', oauth.basicChallenge ? 'Basic realm="oauth"' : 'Bearer');
  return reply
    .code(oauth.statusCode)
    .header('cache-control', 'no-store')
    .send({ error: oauth.error, error_description: cut(oauth.description, 1000) });
};

// Every URL under /oauth/, whether the embedded issuer serves its token endpoint or not.
export const OAUTH_ERROR_FAMILY: ErrorFamily = { name: 'oauth', prefix: '/oauth/', render: renderOAuthError };
