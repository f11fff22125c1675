// The payments family's errors: their shapes by status (the one statement of them), the renderer
// that writes them, and the response schemas the API reference takes from them.
import { z } from 'zod';
import { familyRenderer } from '../http/errors/error-rendering.js';
import { documentedErrors, fixedMembers, messageBody, type ErrorTable } from '../http/errors/error-shapes.js';
import type { ErrorFamily } from '../http/errors/error-families.js';

const issue = z.object({ code: z.string(), message: z.string(), path: z.array(z.union([z.string(), z.number()])) });

// A 400: Zod's own error, one issue per problem found.
const validationErrorSchema = z
  .object({
    success: z.literal(false),
    error: z.object({
      name: z.literal('ZodError'),
      issues: z.array(issue),
    }),
  })
  .meta({
    id: 'PaymentsValidationError',
    description: 'Validation error: one issue per problem found, its path pointing into the query, path or body',
    examples: [{ success: false, error: { name: 'ZodError', issues: [{ code: 'too_small', message: 'session ID must not be blank', path: ['sessionIds', 1] }] } }],
  });

// Every other status but those answered `{ message }`: the status's code, and the status again.
const codedError = z.object({ code: z.string(), message: z.string(), status: z.number() });

const coded = <Code extends string, Status extends number>(code: Code, status: Status) => codedError.extend({ code: z.literal(code), status: z.literal(status) });

// The payments family's error bodies by status, each with what it means
// when an operation does not say more.
export const PAYMENTS_ERRORS = {
  400: { body: validationErrorSchema, means: 'The query, path or body is invalid' },
  401: { body: messageBody, means: 'The access token is missing, invalid or expired' },
  403: { body: coded('FORBIDDEN', 403), means: 'The access token lacks the required scope, or may not act on this network' },
  404: { body: coded('NOT_FOUND', 404), means: 'No such payment visible to this access token' },
  405: { body: coded('METHOD_NOT_ALLOWED', 405), means: 'The path does not serve this method; Allow lists those it does' },
  408: { body: coded('REQUEST_TIMEOUT', 408), means: 'The request did not arrive in time' },
  409: { body: coded('CONFLICT', 409), means: 'The request conflicts with the state of the payment' },
  422: { body: coded('IDEMPOTENCY_KEY_REUSED', 422), means: 'The Idempotency-Key was already used for a different request' },
  429: { body: messageBody, means: 'Too many requests; retry after Retry-After seconds' },
  431: { body: messageBody, means: 'The request headers are too large' },
  500: { body: coded('INTERNAL_SERVER_ERROR', 500), means: 'Internal failure (details are in the log, under the request id)' },
  503: { body: coded('SERVICE_UNAVAILABLE', 503), means: 'The database cannot answer now; retry after Retry-After seconds' },
} as const satisfies ErrorTable;

// What every payments operation may answer besides its success.
const EVERY_OPERATION = [400, 401, 403, 408, 429, 500, 503] as const;

// An operation's responses: its success, the family's answers of every operation, and the ones
// it names (404, 409, 422) with what they mean there (true: what they mean in the table above).
export function paymentsResponses<Success extends Record<number, z.ZodType>>(success: Success, own: Partial<Record<404 | 409 | 422, string | true>> = {}) {
  const errors = documentedErrors(PAYMENTS_ERRORS, EVERY_OPERATION);
  for (const status of [404, 409, 422] as const) {
    const means = own[status];
    if (means) errors[status] = PAYMENTS_ERRORS[status].body.describe(means === true ? PAYMENTS_ERRORS[status].means : means);
  }
  return { ...success, ...errors };
}

type PaymentsErrorBody = z.input<typeof validationErrorSchema | typeof codedError | typeof messageBody>;

const CODES = fixedMembers(PAYMENTS_ERRORS, 'code');
const codeOf = (status: number) => CODES.get(status) ?? 'ERROR';

const renderPaymentsError = familyRenderer<PaymentsErrorBody>({
  unavailable: (error): z.input<typeof codedError> => ({ code: codeOf(503), message: error.message, status: 503 }),
  body: (r) =>
    r.status === 400
      ? { success: false, error: { name: 'ZodError', issues: r.issues ?? [{ code: 'custom', message: r.message, path: [] }] } }
      : { code: codeOf(r.status), message: r.message, status: r.status },
});

// Every URL under /payments/, a version no route serves included.
export const PAYMENTS_ERROR_FAMILY: ErrorFamily = { name: 'payments', prefix: '/payments/', render: renderPaymentsError };
