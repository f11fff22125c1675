// The `{ type, code, message }` error family, said once: its shapes by status, the renderer that
// writes them, and the response schemas the API reference takes from them. Asset management and
// the webhooks each serve it under their own prefix (typedErrorFamily).
import { z } from 'zod';
import { familyRenderer } from './error-rendering.js';
import { documentedErrors, fixedMembers, messageBody, type ErrorTable } from './error-shapes.js';
import type { ErrorFamily } from './error-families.js';

// Every status but those answered `{ message }`: the status's type, and a code saying more.
const typedError = z.object({ type: z.string(), code: z.string(), message: z.string() });

// A status's body; its codes are named here when they are the same for every operation, by the
// operation otherwise (404, 409).
const typed = (type: string, codes?: readonly [string, ...string[]]) =>
  typedError.extend(codes ? { type: z.literal(type), code: z.enum(codes) } : { type: z.literal(type) });

// The family's error bodies by status: `{ type, code, message }`, but `{ message }` for 401, 403,
// 429 and 431; each with what it means when an operation does not say more.
export const TYPED_ERRORS = {
  400: { body: typed('BAD_REQUEST', ['INVALID_REQUEST_PARAMETERS']), means: 'The query, path or body is invalid; the message names every problem' },
  401: { body: messageBody, means: 'The access token is missing, invalid or expired' },
  403: { body: messageBody, means: 'The access token lacks the required scope or role' },
  404: { body: typed('NOT_FOUND'), means: 'No such resource visible to this access token' },
  405: { body: typed('METHOD_NOT_ALLOWED', ['METHOD_NOT_ALLOWED']), means: 'The path does not serve this method; Allow lists those it does' },
  408: { body: typed('REQUEST_TIMEOUT', ['REQUEST_TIMEOUT']), means: 'The request did not arrive in time' },
  409: { body: typed('CONFLICT'), means: 'The request conflicts with the state of the resource' },
  422: { body: typed('UNPROCESSABLE_ENTITY', ['IDEMPOTENCY_KEY_REUSED']), means: 'The Idempotency-Key was already used for a different request' },
  429: { body: messageBody, means: 'Too many requests; retry after Retry-After seconds' },
  431: { body: messageBody, means: 'The request headers are too large' },
  500: { body: typed('INTERNAL_ERROR', ['INTERNAL_SERVER_ERROR']), means: 'Internal failure (details are in the log, under the request id)' },
  503: {
    body: typed('SERVICE_UNAVAILABLE', ['DATABASE_UNAVAILABLE', 'SHUTTING_DOWN']),
    means: 'The database cannot answer now, or the server is shutting down; retry after Retry-After seconds',
  },
} as const satisfies ErrorTable;

// What every operation of the family may answer besides its success.
const EVERY_OPERATION = [400, 401, 403, 408, 429, 500, 503] as const;

export interface OwnAnswer {
  codes: readonly [string, ...string[]];
  means: string;
  examples?: { code: string; message: string }[];
}

// The 409 of an Idempotency-Key whose first request is still running.
export interface KeyInUse {
  code: string;
  means: string;
}

function withKeyInUse(answer: OwnAnswer | undefined, keyInUse: KeyInUse): OwnAnswer {
  if (!answer) return { codes: [keyInUse.code], means: `${keyInUse.means[0]!.toUpperCase()}${keyInUse.means.slice(1)}` };
  return { ...answer, codes: [...answer.codes, keyInUse.code], means: `${answer.means}, or ${keyInUse.means}` };
}

const TYPES = fixedMembers(TYPED_ERRORS, 'type');
const typeOf = (status: number) => TYPES.get(status) ?? 'ERROR';

// An operation's responses: its success, the family's answers of every operation, its own 404 and
// 409 with the codes they carry there, and the 422 of a reused Idempotency-Key where it takes one.
export function typedErrorResponses<Success extends Record<number, z.ZodType>>(
  success: Success,
  own: { 404?: OwnAnswer; 409?: OwnAnswer; idempotencyKey?: KeyInUse } = {},
) {
  const errors = documentedErrors(TYPED_ERRORS, EVERY_OPERATION);
  for (const status of [404, 409] as const) {
    let answer = own[status];
    // A key whose first request is still running is the operation's 409 too.
    if (status === 409 && own.idempotencyKey) answer = withKeyInUse(answer, own.idempotencyKey);
    if (!answer) continue;
    const body = TYPED_ERRORS[status].body.extend({ code: z.enum(answer.codes) }).describe(answer.means);
    errors[status] = answer.examples ? body.meta({ examples: answer.examples.map((e) => ({ type: typeOf(status), ...e })) }) : body;
  }
  if (own.idempotencyKey) errors[422] = TYPED_ERRORS[422].body.describe(TYPED_ERRORS[422].means);
  return { ...success, ...errors };
}

type TypedErrorBody = z.input<typeof typedError | typeof messageBody>;

const MESSAGE_ONLY = new Set(Object.entries(TYPED_ERRORS).flatMap(([status, { body }]) => (body === messageBody ? [Number(status)] : [])));

const renderTypedError = familyRenderer<TypedErrorBody>({
  unavailable: (error): z.input<typeof typedError> => ({ type: typeOf(503), code: error.code, message: error.message }),
  body: (r) => {
    if (MESSAGE_ONLY.has(r.status)) return { message: r.message };
    const defaultCode = r.status === 400 ? 'INVALID_REQUEST_PARAMETERS' : r.status === 500 ? 'INTERNAL_SERVER_ERROR' : 'NOT_FOUND';
    return { type: typeOf(r.status), code: r.status === 500 ? 'INTERNAL_SERVER_ERROR' : (r.code ?? defaultCode), message: r.message };
  },
});

// The family served under `prefix`: every URL under it, a version no route serves included.
export function typedErrorFamily(name: string, prefix: string): ErrorFamily {
  return { name, prefix, render: renderTypedError };
}
