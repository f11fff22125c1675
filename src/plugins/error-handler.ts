import fp from 'fastify-plugin';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, RequestValidationError, ServiceUnavailableError, type ValidationIssue } from '../errors.js';
import { OAuthError } from '../auth/oauth-error.js';
import { classifyDatabaseError } from '../db/database.js';

type Family = 'payments' | 'asset-management' | 'oauth' | 'plain';

// The family follows the API a request addressed, so one status always has one body shape there.
function familyOf(request: FastifyRequest): Family {
  const url = request.url;
  if (url.startsWith('/payments/')) return 'payments';
  if (url.startsWith('/asset-management/')) return 'asset-management';
  if (url.startsWith('/oauth/')) return 'oauth';
  return 'plain';
}

const ASSET_TYPES: Record<number, string> = {
  400: 'BAD_REQUEST',
  404: 'NOT_FOUND',
  409: 'CONFLICT',
  500: 'INTERNAL_ERROR',
  503: 'SERVICE_UNAVAILABLE',
};

const PAYMENT_CODES: Record<number, string> = {
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  409: 'CONFLICT',
  500: 'INTERNAL_SERVER_ERROR',
  503: 'SERVICE_UNAVAILABLE',
};

interface Rendered {
  status: number;
  message: string;
  code?: string | undefined;
  issues?: ValidationIssue[] | undefined;
}

function describeIssue(issue: ValidationIssue): string {
  const where = issue.path.length > 0 ? issue.path.join('.') : 'request';
  return `${where}: ${issue.message}`;
}

// Fastify's own 4xx (body parsing, content type, size) become 400s: clients get one shape per status.
function fromFastifyError(error: FastifyError): Rendered | null {
  const status = error.statusCode;
  if (status === undefined || status < 400 || status >= 500) return null;
  if (status === 429) return { status, message: error.message };
  const messages: Record<string, string> = {
    FST_ERR_CTP_BODY_TOO_LARGE: 'Request body is larger than 64 KiB',
    FST_ERR_CTP_INVALID_MEDIA_TYPE: 'Content-Type must be application/json',
    FST_ERR_CTP_EMPTY_JSON_BODY: 'Request body is empty but Content-Type is application/json',
    FST_ERR_CTP_INVALID_JSON_BODY: 'Request body is not valid JSON',
  };
  const message =
    messages[error.code] ?? (error instanceof SyntaxError || error.code === 'FST_ERR_CTP_INVALID_CONTENT_LENGTH' ? 'Request body is not valid JSON' : error.message);
  return { status: 400, message, issues: [{ code: 'custom', message, path: [] }] };
}

function render(error: unknown): Rendered {
  if (error instanceof RequestValidationError) {
    const issues = error.issues;
    return { status: 400, message: issues.map(describeIssue).join('; '), code: 'INVALID_REQUEST_PARAMETERS', issues };
  }
  if (error instanceof AppError) {
    const status = { bad_request: 400, unauthorized: 401, forbidden: 403, not_found: 404, conflict: 409, service_unavailable: 503 }[error.kind];
    const message = error.kind === 'bad_request' && error.issues?.length ? error.issues.map(describeIssue).join('; ') : error.message;
    return { status, message, code: error.code, issues: error.issues };
  }
  const fastifyError = fromFastifyError(error as FastifyError);
  if (fastifyError) return fastifyError;
  return { status: 500, message: 'Internal server error' };
}

// A database that cannot answer now is a 503 with Retry-After in every family (RFC 6749's
// temporarily_unavailable for the token endpoint), logged without drizzle's wrapper, whose message
// carries the query's parameters.
function sendUnavailable(request: FastifyRequest, reply: FastifyReply, family: Family, error: ServiceUnavailableError) {
  request.log.warn({ err: error.cause ?? error }, 'request failed: service unavailable');
  reply.code(503).header('retry-after', String(error.retryAfterSeconds));
  if (family === 'oauth') {
    return reply.header('cache-control', 'no-store').send({ error: 'temporarily_unavailable', error_description: error.message });
  }
  if (family === 'payments') return reply.send({ code: PAYMENT_CODES[503], message: error.message, status: 503 });
  if (family === 'asset-management') return reply.send({ type: ASSET_TYPES[503], code: error.code, message: error.message });
  return reply.send({ message: error.message });
}

function send(request: FastifyRequest, reply: FastifyReply, error: unknown) {
  const family = familyOf(request);
  const unavailable = classifyDatabaseError(error);
  if (unavailable) return sendUnavailable(request, reply, family, unavailable);
  const r = render(error);
  if (error instanceof OAuthError || family === 'oauth') {
    // 500 and 429 keep their own status (a throttled token request is not an invalid_request).
    const oauth = error instanceof OAuthError ? error : [500, 429].includes(r.status) ? null : new OAuthError('invalid_request', r.message);
    if (oauth) {
      if (oauth.statusCode === 401) reply.header('www-authenticate', oauth.basicChallenge ? 'Basic realm="oauth"' : 'Bearer');
      return reply.code(oauth.statusCode).header('cache-control', 'no-store').send({ error: oauth.error, error_description: oauth.description });
    }
  }

  if (r.status === 500) {
    request.log.error({ err: error }, 'request failed');
  }
  if (r.status === 401) {
    // The contract asks for error="invalid_token" on every 401, a missing token included.
    reply.header('www-authenticate', `Bearer error="invalid_token", error_description="${r.message.replace(/"/g, "'")}"`);
  }
  reply.code(r.status);

  if (r.status === 401 || r.status === 429) return reply.send({ message: r.message });
  if (family === 'payments') {
    if (r.status === 400) {
      return reply.send({
        success: false,
        error: { name: 'ZodError', issues: r.issues ?? [{ code: 'custom', message: r.message, path: [] }] },
      });
    }
    return reply.send({ code: PAYMENT_CODES[r.status] ?? 'ERROR', message: r.message, status: r.status });
  }
  if (family === 'asset-management') {
    if (r.status === 403) return reply.send({ message: r.message });
    const defaultCode = r.status === 400 ? 'INVALID_REQUEST_PARAMETERS' : r.status === 500 ? 'INTERNAL_SERVER_ERROR' : 'NOT_FOUND';
    return reply.send({
      type: ASSET_TYPES[r.status] ?? 'ERROR',
      code: r.status === 500 ? 'INTERNAL_SERVER_ERROR' : (r.code ?? defaultCode),
      message: r.message,
    });
  }
  return reply.send({ message: r.message });
}

async function errorHandlerPlugin(app: FastifyInstance) {
  app.setErrorHandler((error, request, reply) => send(request, reply, error));
  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send({ message: `Route ${request.method} ${request.url.split('?')[0]} not found` });
  });
}

export default fp(errorHandlerPlugin, { name: 'error-handler' });
