import { z } from 'zod';
import { RequestValidationError } from '../kernel/errors.js';
import { OAuthError } from './oauth-error.js';

// Control characters (and unpaired surrogates) belong in no token request: PostgreSQL refuses NUL in
// text, and no client id, secret, scope or audience this service knows contains one.
const FORBIDDEN = /[\p{Cc}\p{Cs}]/u;

// Far above any id, secret, scope list or audience this service issues or accepts.
export const MAX_PARAMETER_LENGTH = 1024;

// One parameter of the token request: a single string of sane length and characters. A repeated
// form parameter arrives as an array (RFC 6749 §3.2: parameters MUST NOT repeat). The messages
// name no value, which may be a secret.
const parameter = z
  .string({ error: (issue) => (issue.input === undefined ? 'is required' : 'must be a single string') })
  .max(MAX_PARAMETER_LENGTH, `is longer than ${MAX_PARAMETER_LENGTH} characters`)
  .refine((value) => !FORBIDDEN.test(value), 'must not contain control characters');

const UNSUPPORTED_GRANT = 'unsupported_grant_type';

// Every parameter, the ones the endpoint ignores included, follows the same rule, and so do names.
function parameters<Shape extends z.ZodRawShape>(shape: Shape) {
  return z
    .object(shape, { error: 'must be form parameters or a JSON object' })
    .catchall(parameter)
    .superRefine((value, ctx) => {
      if (Object.keys(value).some((name) => FORBIDDEN.test(name))) {
        ctx.addIssue({ code: 'custom', message: 'must not contain control characters in parameter names', path: [] });
      }
    });
}

// Absent, or null in a JSON body: the parameter was not sent.
const optional = (description: string) => parameter.nullish().describe(description);

export const tokenRequestBody = parameters({
  grant_type: parameter
    .min(1, 'is required')
    .refine((value) => value === 'client_credentials', { message: 'must be client_credentials', params: { oauthError: UNSUPPORTED_GRANT } })
    .describe('must be client_credentials'),
  scope: optional('space-separated subset of the client scopes'),
  audience: optional('must name this API when present'),
  client_id: optional('client_secret_post only'),
  client_secret: optional('client_secret_post only'),
})
  .describe('application/x-www-form-urlencoded or application/json')
  .meta({ examples: [{ grant_type: 'client_credentials', scope: 'read:sessionpayment' }] });

// Parameters belong in the body (RFC 6749 §3.2); anything in the query follows the same rule.
export const tokenRequestQuery = parameters({});

const NAMED = new Set(['grant_type', 'scope', 'audience', 'client_id', 'client_secret']);

// RFC 6749 §5.2 for a request the schemas refused: unsupported_grant_type when the grant type is
// the only problem, invalid_request otherwise (every parameter is read before any is acted on).
export function tokenRequestError(error: unknown): OAuthError {
  const issues = error instanceof RequestValidationError ? error.zodError.issues : [];
  const wrongGrant = (issue: z.core.$ZodIssue) => issue.code === 'custom' && issue.params?.oauthError === UNSUPPORTED_GRANT;
  if (issues.length > 0 && issues.every(wrongGrant)) {
    return new OAuthError('unsupported_grant_type', 'only the client_credentials grant is supported');
  }
  const issue = issues.find((i) => !wrongGrant(i));
  if (!issue) return new OAuthError('invalid_request', 'the request is malformed');
  // Names the endpoint does not know are the client's text, maybe long or strange: not echoed.
  const [name] = issue.path;
  const subject = typeof name === 'string' && NAMED.has(name) ? name : issue.path.length > 0 ? 'every parameter' : 'the request';
  return new OAuthError('invalid_request', `${subject} ${issue.message}`);
}

// A parameter that arrives outside the body (the Basic credentials), under the same rule.
export function tokenParameter(value: unknown, name: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  const result = parameter.safeParse(value);
  if (!result.success) throw new OAuthError('invalid_request', `${name} ${result.error.issues[0]?.message ?? 'is malformed'}`);
  return result.data;
}
