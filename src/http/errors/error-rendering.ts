// The rendering every API family shares: what a domain error, a validation error or one of
// Fastify's own errors means as a status, a code and a message, and what a database that cannot
// answer now means (503 with Retry-After). It knows no family: each family turns a Rendered into
// its own body (error-families.ts says which family a URL belongs to).
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { AppError, EarlyError, MAX_ISSUES, MethodNotAllowedError, RequestValidationError, type ServiceUnavailableError, type ValidationIssue } from '../../kernel/errors.js';
import { classifyDatabaseError, loggableError } from '../../db/failures.js';
import type { messageBody } from './error-shapes.js';

// An error, rendered: its status, its message for the client, the code a family may name, and the
// validation issues (at most MAX_ISSUES, under a byte budget).
export interface Rendered {
  status: number;
  message: string;
  code?: string | undefined;
  issues?: ValidationIssue[] | undefined;
}

export type ErrorRenderer = (error: unknown, request: FastifyRequest, reply: FastifyReply) => FastifyReply;

function describeIssue(issue: ValidationIssue): string {
  const where = issue.path.length > 0 ? issue.path.join('.') : 'request';
  return `${where}: ${issue.message}`;
}

// What one error body may carry (at most MAX_ISSUES issues, a 400 under 20 KB),
// whatever produced the issues: messages and keys can echo input (an unknown key of 60 KB), and
// JSON may escape one character into six bytes, so the issues also stop at a byte budget.
const MAX_TEXT = 200;
const MAX_KEY = 64;
const MAX_PATH = 16;
const ISSUES_BUDGET_BYTES = 16 * 1024;

export function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  // Never end on half of a surrogate pair: it would be sent as U+FFFD.
  const end = /[\uD800-\uDBFF]/.test(text.charAt(max - 2)) ? max - 2 : max - 1;
  return `${text.slice(0, end)}…`;
}

function boundIssues(issues: ValidationIssue[]): ValidationIssue[] {
  const bounded: ValidationIssue[] = [];
  let bytes = 0;
  for (const issue of issues.slice(0, MAX_ISSUES)) {
    const b: ValidationIssue = {
      code: cut(issue.code, MAX_KEY),
      message: cut(issue.message, MAX_TEXT),
      path: issue.path.slice(0, MAX_PATH).map((p) => (typeof p === 'string' ? cut(p, MAX_KEY) : p)),
    };
    bytes += Buffer.byteLength(JSON.stringify(b)) + 1;
    if (bytes > ISSUES_BUDGET_BYTES && bounded.length > 0) break;
    bounded.push(b);
  }
  return bounded;
}

// A 400's message names every listed problem (the families whose body has no issue list need it).
function describeIssues(issues: ValidationIssue[], more: boolean): string {
  const text = issues.map(describeIssue).join('; ');
  return more ? `${text}; further problems not listed` : text;
}

// Fastify's own 4xx (body parsing, content type, size) become 400s: clients get one shape per status.
function fromFastifyError(error: FastifyError): Rendered | null {
  const status = error.statusCode;
  if (status === undefined || status < 400 || status >= 500) return null;
  const messages: Record<string, string> = {
    FST_ERR_CTP_BODY_TOO_LARGE: 'Request body is larger than 64 KiB',
    FST_ERR_CTP_INVALID_MEDIA_TYPE: 'Content-Type must be application/json',
    FST_ERR_CTP_EMPTY_JSON_BODY: 'Request body is empty but Content-Type is application/json',
    FST_ERR_CTP_INVALID_JSON_BODY: 'Request body is not valid JSON',
  };
  const message =
    messages[error.code] ?? (error instanceof SyntaxError || error.code === 'FST_ERR_CTP_INVALID_CONTENT_LENGTH' ? 'Request body is not valid JSON' : error.message);
  const bounded = cut(message, MAX_TEXT);
  return { status: 400, message: bounded, issues: [{ code: 'custom', message: bounded, path: [] }] };
}

const STATUS_OF_KIND = {
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  unprocessable: 422,
  too_many_requests: 429,
  service_unavailable: 503,
} as const;

export function renderError(error: unknown): Rendered {
  if (error instanceof RequestValidationError) {
    const issues = boundIssues(error.issues);
    const message = describeIssues(issues, error.zodError.issues.length > issues.length);
    return { status: 400, message, code: 'INVALID_REQUEST_PARAMETERS', issues };
  }
  if (error instanceof AppError) {
    const status = STATUS_OF_KIND[error.kind];
    const issues = error.issues && boundIssues(error.issues);
    const message = error.kind === 'bad_request' && issues?.length ? describeIssues(issues, error.issues!.length > issues.length) : error.message;
    return { status, message, code: error.code, issues };
  }
  if (error instanceof EarlyError) return { status: error.status, message: error.message, code: error.code };
  const fastifyError = fromFastifyError(error as FastifyError);
  if (fastifyError) return fastifyError;
  return { status: 500, message: 'Internal server error' };
}

// A database that cannot answer now, or null: logged here without drizzle's wrapper (its message
// carries the query's parameters), so a family only chooses the 503's body.
export function unavailableOf(error: unknown, request: FastifyRequest): ServiceUnavailableError | null {
  const unavailable = classifyDatabaseError(error);
  if (unavailable) request.log.warn({ err: loggableError(unavailable.cause ?? unavailable) }, 'request failed: service unavailable');
  return unavailable;
}

export interface FamilyShape<Body> {
  // the body of a 503 for a database that cannot answer now (Retry-After is set already)
  unavailable(error: ServiceUnavailableError): Body;
  // the body of every other status but 401, 429 and 431, which are `{ message }` in every family
  body(r: Rendered): Body;
}

// What every family shares: a database that cannot answer now is a 503 with Retry-After; a 500 is
// logged with its details, which never reach the client; every 401 challenges with
// error="invalid_token", a missing token included; a 405 lists the allowed methods.
export function familyRenderer<Body>(shape: FamilyShape<Body>): ErrorRenderer {
  return (error, request, reply) => {
    const unavailable = unavailableOf(error, request);
    if (unavailable) return reply.code(503).header('retry-after', String(unavailable.retryAfterSeconds)).send(shape.unavailable(unavailable));
    const r = renderError(error);
    if (r.status === 500) request.log.error({ err: loggableError(error) }, 'request failed');
    if (r.status === 401) reply.header('www-authenticate', `Bearer error="invalid_token", error_description="${r.message.replace(/"/g, "'")}"`);
    if (error instanceof MethodNotAllowedError) reply.header('allow', error.allow.join(', '));
    reply.code(r.status);
    if (r.status === 401 || r.status === 429 || r.status === 431) return reply.send({ message: r.message } satisfies z.input<typeof messageBody>);
    return reply.send(shape.body(r));
  };
}

// The routes of no family: `{ message }` whatever the status.
export const renderPlainError = familyRenderer<z.input<typeof messageBody>>({
  unavailable: (error) => ({ message: error.message }),
  body: (r) => ({ message: r.message }),
});
