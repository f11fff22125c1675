import type { z } from 'zod';

// Domain errors carry meaning, not HTTP bodies: the error plugin renders them in the family's shape.
export type ErrorKind =
  | 'bad_request'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'method_not_allowed'
  | 'conflict'
  | 'unprocessable'
  | 'too_many_requests'
  | 'service_unavailable';

export interface ValidationIssue {
  code: string;
  message: string;
  path: (string | number)[];
}

export class AppError extends Error {
  constructor(
    readonly kind: ErrorKind,
    message: string,
    // asset-management family error code (e.g. ASSET_NOT_FOUND); payments family ignores it
    readonly code?: string,
    readonly issues?: ValidationIssue[],
  ) {
    super(message);
    this.name = 'AppError';
  }
}

export class BadRequestError extends AppError {
  constructor(message: string, issues?: ValidationIssue[]) {
    super('bad_request', message, 'INVALID_REQUEST_PARAMETERS', issues ?? [{ code: 'custom', message, path: [] }]);
  }
}

export class UnauthorizedError extends AppError {
  constructor(message = 'Access token is missing, invalid or expired', options?: { cause?: unknown }) {
    super('unauthorized', message);
    if (options?.cause !== undefined) this.cause = options.cause;
  }
}

export class ForbiddenError extends AppError {
  constructor(message = 'Access token lacks the required scope') {
    super('forbidden', message);
  }
}

export class NotFoundError extends AppError {
  constructor(message: string, code = 'NOT_FOUND') {
    super('not_found', message, code);
  }
}

// A known path asked with a method it does not serve; the Allow header lists those it does.
export class MethodNotAllowedError extends AppError {
  constructor(
    method: string,
    readonly allow: string[],
  ) {
    super('method_not_allowed', `Method ${method} is not allowed here; allowed: ${allow.join(', ')}`, 'METHOD_NOT_ALLOWED');
  }
}

export class ConflictError extends AppError {
  constructor(message: string, code = 'CONFLICT') {
    super('conflict', message, code);
  }
}

// An Idempotency-Key already used, within its lifetime, for a different request (422).
export class IdempotencyKeyReusedError extends AppError {
  constructor(message: string) {
    super('unprocessable', message, 'IDEMPOTENCY_KEY_REUSED');
  }
}

// The caller's rate-limit bucket is empty; Retry-After and the RateLimit fields say when it refills.
export class TooManyRequestsError extends AppError {
  constructor(retryAfterSeconds: number) {
    super('too_many_requests', `Too many requests; retry in ${retryAfterSeconds} s`, 'TOO_MANY_REQUESTS');
  }
}

// A dependency cannot answer now but may soon: rendered 503 with Retry-After, so clients retry.
export class ServiceUnavailableError extends AppError {
  // always set: the families' 503 bodies name it
  declare readonly code: string;
  readonly retryAfterSeconds: number;
  // The database did not answer in time (a statement or connection timeout, a deadline of ours),
  // as opposed to refusing or losing the connection: told apart in /metrics.
  readonly timedOut: boolean;
  constructor(message: string, options: { code?: string; retryAfterSeconds?: number; cause?: unknown; timedOut?: boolean } = {}) {
    super('service_unavailable', message, options.code ?? 'DATABASE_UNAVAILABLE');
    this.retryAfterSeconds = options.retryAfterSeconds ?? 1;
    this.timedOut = options.timedOut ?? false;
    if (options.cause !== undefined) this.cause = options.cause;
  }
}

// Thrown by the validator compiler: keeps the ZodError so paths keep numeric indices.
export class RequestValidationError extends Error {
  readonly statusCode = 400;
  constructor(
    readonly part: string,
    readonly zodError: z.ZodError,
  ) {
    super(zodError.issues[0]?.message ?? 'Invalid request');
    this.name = 'RequestValidationError';
  }

  // Only the first MAX_ISSUES are ever rendered, so only those are converted.
  get issues(): ValidationIssue[] {
    return this.zodError.issues.slice(0, MAX_ISSUES).map((i) => ({
      code: i.code,
      message: i.message,
      path: i.path.map((p) => (typeof p === 'symbol' ? String(p) : p)),
    }));
  }
}

// A JSON body refused before anything reads it. It carries a 4xx statusCode like Fastify's own
// body-parsing errors, so it takes their path: a 400 in the family's shape with this message.
export class MalformedJsonError extends Error {
  readonly statusCode = 400;
  readonly code = 'MALFORMED_JSON';
  constructor(message: string) {
    super(message);
    this.name = 'MalformedJsonError';
  }
}

// A 400 lists at most this many issues (the first found): a short malformed request must not be
// able to ask for a megabyte of errors.
export const MAX_ISSUES = 100;

// Answers given before any route runs: by the HTTP server while a request is still arriving, or
// while the server shuts down. The error plugin renders them in the family's shape when the URL
// has arrived, as `{ message }` otherwise.
export class EarlyError extends Error {
  constructor(
    readonly status: 400 | 408 | 431,
    // asset-management family error code; the payments family derives its code from the status
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'EarlyError';
  }
}

export class RequestTimeoutError extends EarlyError {
  constructor(limitMs: number) {
    super(408, 'REQUEST_TIMEOUT', `The request did not arrive within ${limitMs} ms`);
  }
}

export class HeadersTooLargeError extends EarlyError {
  constructor() {
    super(431, 'REQUEST_HEADER_FIELDS_TOO_LARGE', 'Request headers are too large');
  }
}

export class MalformedRequestError extends EarlyError {
  constructor() {
    super(400, 'INVALID_REQUEST_PARAMETERS', 'Malformed HTTP request');
  }
}

// A 503 like a database outage: the same bodies, Retry-After and RFC 6749 error at /oauth.
export class ShuttingDownError extends ServiceUnavailableError {
  constructor() {
    super('The server is shutting down; retry the request', { code: 'SHUTTING_DOWN' });
  }
}
