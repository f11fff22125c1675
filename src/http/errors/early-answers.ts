// Answers given before a route runs, in the shape of the family the URL names (when it has
// arrived): Node's own client errors written as raw HTTP/1.1 on the socket, Fastify's framework
// errors, a known path asked with a method it does not serve (405), an unknown one (404), and
// requests that reach a closing server (503).
import type { IncomingMessage } from 'node:http';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { EarlyError, HeadersTooLargeError, MalformedRequestError, MethodNotAllowedError, RequestTimeoutError, ShuttingDownError } from '../../kernel/errors.js';
import { redactUrl } from '../url-redaction.js';
import { renderByUrl } from './error-families.js';

// Fastify's own early answers (a URL that does not decode, an over-long path parameter) take
// the same shapes as every other error.
export function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  return renderByUrl(error, request, reply);
}

// The request whose headers last arrived on each socket: when the HTTP server gives up on a
// socket, this tells whether the URL (hence the family) is known and the answer still unsent.
const arrived = new WeakMap<Socket, { req: IncomingMessage; answered: () => boolean }>();

// Renders an error with the URL's family for a socket that has no Fastify reply, as HTTP/1.1 text.
function renderForSocket(app: FastifyInstance, url: string | null, error: EarlyError): string {
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
  app.errorFamilies.rendererFor(url ?? '')(error, { url: url ?? '', log: app.log } as FastifyRequest, reply as unknown as FastifyReply);
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
  if (socket.writable && !pending?.answered()) socket.write(renderForSocket(this, url, error));
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

// Installs the answers given before routing on the root instance (Fastify's constructor takes
// clientErrorHandler and frameworkErrors).
export function answerBeforeRouting(app: FastifyInstance): void {
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
  app.addHook('onRequest', (_request, _reply, done) => {
    done(closing ? new ShuttingDownError() : undefined);
  });
}
