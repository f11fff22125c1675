import type { IncomingMessage } from 'node:http';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import fp from 'fastify-plugin';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  AppError,
  EarlyError,
  HeadersTooLargeError,
  MAX_ISSUES,
  MalformedRequestError,
  MethodNotAllowedError,
  RequestTimeoutError,
  RequestValidationError,
  ServiceUnavailableError,
  ShuttingDownError,
  type ValidationIssue,
} from '../errors.js';
import { OAuthError } from '../auth/oauth-error.js';
import { redactUrl } from '../url-redaction.js';
import { classifyDatabaseError, loggableError } from '../db/failures.js';

type Family = 'payments' | 'asset-management' | 'oauth' | 'plain';

// The family follows the API a request addressed, so one status always has one body shape there.
// Only for answers given before a route is matched: routes take their family's plugin's handler.
function familyOf(request: Pick<FastifyRequest, 'url'>): Family {
  const url = request.url;
  if (url.startsWith('/payments/')) return 'payments';
  if (url.startsWith('/asset-management/')) return 'asset-management';
  if (url.startsWith('/oauth/')) return 'oauth';
  return 'plain';
}

const ASSET_TYPES: Record<number, string> = {
  400: 'BAD_REQUEST',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  409: 'CONFLICT',
  422: 'UNPROCESSABLE_ENTITY',
  500: 'INTERNAL_ERROR',
  408: 'REQUEST_TIMEOUT',
  503: 'SERVICE_UNAVAILABLE',
};

const PAYMENT_CODES: Record<number, string> = {
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  409: 'CONFLICT',
  422: 'IDEMPOTENCY_KEY_REUSED',
  500: 'INTERNAL_SERVER_ERROR',
  408: 'REQUEST_TIMEOUT',
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

// What one error body may carry (at most MAX_ISSUES issues, a 400 under 20 KB),
// whatever produced the issues: messages and keys can echo input (an unknown key of 60 KB), and
// JSON may escape one character into six bytes, so the issues also stop at a byte budget.
const MAX_TEXT = 200;
const MAX_KEY = 64;
const MAX_PATH = 16;
const ISSUES_BUDGET_BYTES = 16 * 1024;

function cut(text: string, max: number): string {
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

// The asset-management 400 names every listed problem in its message.
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

function render(error: unknown): Rendered {
  if (error instanceof RequestValidationError) {
    const issues = boundIssues(error.issues);
    const message = describeIssues(issues, error.zodError.issues.length > issues.length);
    return { status: 400, message, code: 'INVALID_REQUEST_PARAMETERS', issues };
  }
  if (error instanceof AppError) {
    const status = {
      bad_request: 400,
      unauthorized: 401,
      forbidden: 403,
      not_found: 404,
      method_not_allowed: 405,
      conflict: 409,
      unprocessable: 422,
      too_many_requests: 429,
      service_unavailable: 503,
    }[error.kind];
    const issues = error.issues && boundIssues(error.issues);
    const message = error.kind === 'bad_request' && issues?.length ? describeIssues(issues, error.issues!.length > issues.length) : error.message;
    return { status, message, code: error.code, issues };
  }
  if (error instanceof EarlyError) return { status: error.status, message: error.message, code: error.code };
  const fastifyError = fromFastifyError(error as FastifyError);
  if (fastifyError) return fastifyError;
  return { status: 500, message: 'Internal server error' };
}

export type ErrorRenderer = (error: unknown, request: FastifyRequest, reply: FastifyReply) => FastifyReply;

interface FamilyShape {
  // the body of a 503 for a database that cannot answer now (Retry-After is set already)
  unavailable(error: ServiceUnavailableError): unknown;
  // the body of every other status but 401, 429 and 431, which are `{ message }` in every family
  body(r: Rendered): unknown;
}

// What every family shares: a database that cannot answer now is a 503 with Retry-After, logged
// without drizzle's wrapper (its message carries the query's parameters); a 500 is logged with
// its details, which never reach the client; every 401 challenges with error="invalid_token".
function familyRenderer(shape: FamilyShape): ErrorRenderer {
  return (error, request, reply) => {
    const unavailable = classifyDatabaseError(error);
    if (unavailable) {
      logUnavailable(request, unavailable);
      return reply.code(503).header('retry-after', String(unavailable.retryAfterSeconds)).send(shape.unavailable(unavailable));
    }
    const r = render(error);
    if (r.status === 500) request.log.error({ err: loggableError(error) }, 'request failed');
    // error="invalid_token" on every 401, a missing token included (docs/api.md, Authentication).
    if (r.status === 401) reply.header('www-authenticate', `Bearer error="invalid_token", error_description="${r.message.replace(/"/g, "'")}"`);
    if (error instanceof MethodNotAllowedError) reply.header('allow', error.allow.join(', '));
    reply.code(r.status);
    if (r.status === 401 || r.status === 429 || r.status === 431) return reply.send({ message: r.message });
    return reply.send(shape.body(r));
  };
}

function logUnavailable(request: FastifyRequest, error: ServiceUnavailableError) {
  request.log.warn({ err: loggableError(error.cause ?? error) }, 'request failed: service unavailable');
}

export const renderPaymentsError = familyRenderer({
  unavailable: (error) => ({ code: PAYMENT_CODES[503], message: error.message, status: 503 }),
  body: (r) =>
    r.status === 400
      ? { success: false, error: { name: 'ZodError', issues: r.issues ?? [{ code: 'custom', message: r.message, path: [] }] } }
      : { code: PAYMENT_CODES[r.status] ?? 'ERROR', message: r.message, status: r.status },
});

export const renderAssetManagementError = familyRenderer({
  unavailable: (error) => ({ type: ASSET_TYPES[503], code: error.code, message: error.message }),
  body: (r) => {
    if (r.status === 403) return { message: r.message };
    const defaultCode = r.status === 400 ? 'INVALID_REQUEST_PARAMETERS' : r.status === 500 ? 'INTERNAL_SERVER_ERROR' : 'NOT_FOUND';
    return { type: ASSET_TYPES[r.status] ?? 'ERROR', code: r.status === 500 ? 'INTERNAL_SERVER_ERROR' : (r.code ?? defaultCode), message: r.message };
  },
});

export const renderPlainError = familyRenderer({
  unavailable: (error) => ({ message: error.message }),
  body: (r) => ({ message: r.message }),
});

// The token endpoint answers RFC 6749 §5.2 bodies, and RFC 6749's temporarily_unavailable for a
// 503. §5.2 names bodies for 400 and 401 only: 408, 429 and 500 keep their own status and the
// { message } body (a throttled token request is not an invalid_request).
export const renderOAuthError: ErrorRenderer = (error, request, reply) => {
  const unavailable = classifyDatabaseError(error);
  if (unavailable) {
    logUnavailable(request, unavailable);
    return reply
      .code(503)
      .header('retry-after', String(unavailable.retryAfterSeconds))
      .header('cache-control', 'no-store')
      .send({ error: 'temporarily_unavailable', error_description: unavailable.message });
  }
  let oauth: OAuthError;
  if (error instanceof OAuthError) oauth = error;
  else {
    const r = render(error);
    if ([500, 429, 408, 405].includes(r.status)) return renderPlainError(error, request, reply);
    oauth = new OAuthError('invalid_request', r.message);
  }
  if (oauth.statusCode === 401) reply.header('www-authenticate', oauth.basicChallenge ? 'Basic realm="oauth"' : 'Bearer');
  return reply
    .code(oauth.statusCode)
    .header('cache-control', 'no-store')
    .send({ error: oauth.error, error_description: cut(oauth.description, 1000) });
};

const RENDERERS: Record<Family, ErrorRenderer> = {
  payments: renderPaymentsError,
  'asset-management': renderAssetManagementError,
  oauth: renderOAuthError,
  plain: renderPlainError,
};

// Each family's plugin renders the errors of its own routes. What reaches the root instead failed
// before any route was matched (or belongs to no family), so only its URL can name the family.
function renderByUrl(error: unknown, request: FastifyRequest, reply: FastifyReply) {
  return RENDERERS[familyOf(request)](error, request, reply);
}

// Fastify's own early answers (a URL that does not decode, an over-long path parameter) take
// the same shapes as every other error.
export function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  return renderByUrl(error, request, reply);
}

// The request whose headers last arrived on each socket: when the HTTP server gives up on a
// socket, this tells whether the URL (hence the family) is known and the answer still unsent.
const arrived = new WeakMap<Socket, { req: IncomingMessage; answered: () => boolean }>();

// Renders an error through renderByUrl() for a socket that has no Fastify reply, as HTTP/1.1 text.
function renderForSocket(url: string | null, error: EarlyError, log: FastifyInstance['log']): string {
  let status = 500;
  const headers: Record<string, string> = {};
  let body = '';
  const reply = {
    code(code: number) {
      status = code;
      return reply;
    },
    header(name: string, value: string) {
      headers[name.toLowerCase()] = value;
      return reply;
    },
    send(payload: unknown) {
      body = JSON.stringify(payload);
      return reply;
    },
  };
  renderByUrl(error, { url: url ?? '', log } as FastifyRequest, reply as unknown as FastifyReply);
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}`,
    'content-type: application/json; charset=utf-8',
    `content-length: ${Buffer.byteLength(body)}`,
    'connection: close',
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
  ];
  return `${lines.join('\r\n')}\r\n\r\n${body}`;
}

// Node's 'clientError': the request did not arrive within REQUEST_TIMEOUT_MS (408), its headers
// overflowed (431), or it is not HTTP (400). Routine client behaviour, so logged at info without
// a stack. Bound to the Fastify instance.
export function clientErrorHandler(this: FastifyInstance, err: Error & { code?: string }, socket: Socket) {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const current = arrived.get(socket);
  // A request whose body is still arriving has a URL; otherwise its headers have not all come.
  const pending = current && !current.req.complete ? current : null;
  const error =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? new RequestTimeoutError(this.server.requestTimeout)
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? new HeadersTooLargeError()
        : new MalformedRequestError();
  const url = pending ? pending.req.url ?? null : null;
  this.log.info({ statusCode: error.status, url: url === null ? undefined : redactUrl(url), reason: err.code }, 'request answered before routing');
  // Bytes of an answer already on the wire must not be followed by a second status line.
  if (socket.writable && !pending?.answered()) socket.write(renderForSocket(url, error, this.log));
  socket.destroy();
}

// The methods each registered path serves, so a known path asked with another method is a 405
// whose Allow comes from the routes themselves.
function routeTable() {
  const routes: { pattern: RegExp; methods: Set<string> }[] = [];
  return {
    add(url: string, method: string | string[]) {
      const source = url
        .replace(/\/+$/, '')
        .split('/')
        .map((segment) => (segment === '*' ? '.*' : segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
        .join('/');
      routes.push({ pattern: new RegExp(`^${source}/?$`), methods: new Set([method].flat()) });
    },
    allowed(path: string): string[] {
      const methods = new Set<string>();
      for (const route of routes) if (route.pattern.test(path)) route.methods.forEach((m) => methods.add(m));
      return [...methods].sort();
    },
  };
}

async function errorHandlerPlugin(app: FastifyInstance) {
  app.setErrorHandler(renderByUrl);
  const routes = routeTable();
  app.addHook('onRoute', (route) => routes.add(route.url, route.method));
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0]!;
    const allow = routes.allowed(path);
    if (allow.length > 0 && !allow.includes(request.method)) return renderByUrl(new MethodNotAllowedError(request.method, allow), request, reply);
    return reply.code(404).send({ message: `Route ${request.method} ${path} not found` });
  });

  app.server.on('request', (req: IncomingMessage, res: { headersSent: boolean }) => {
    arrived.set(req.socket, { req, answered: () => res.headersSent });
  });

  // Requests that reach the server while it closes (on kept-alive connections) get the family's
  // 503; Fastify's own answer (return503OnClosing) has a shape of its own and is turned off.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onRequest', async () => {
    if (closing) throw new ShuttingDownError();
  });
}

export default fp(errorHandlerPlugin, { name: 'error-handler' });
