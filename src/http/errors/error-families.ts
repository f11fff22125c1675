// Which API family a URL belongs to. A family's own routes render their errors with its renderer
// (Fastify answers a route's errors with its context's handler); what reaches the root instead
// failed before any route was matched, or on a route of no family, so only its URL can name the
// family. Each family registers itself from its own folder: this module knows none of them.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { renderPlainError, type ErrorRenderer } from './error-rendering.js';

export interface ErrorFamily {
  name: string;
  // Every URL under it is the family's, whether a route serves it or not (so one status has one
  // body shape there). Starts and ends with "/"; no two families' prefixes overlap.
  prefix: string;
  render: ErrorRenderer;
}

declare module 'fastify' {
  interface FastifyInstance {
    errorFamilies: ErrorFamilies;
  }
}

export class ErrorFamilies {
  readonly #families: ErrorFamily[] = [];

  register(family: ErrorFamily): void {
    if (!/^\/.*\/$/.test(family.prefix) || family.prefix === '/') throw new Error(`error family ${family.name}: the prefix "${family.prefix}" must be a path that starts and ends with "/"`);
    const overlapping = this.#families.find((f) => f.prefix.startsWith(family.prefix) || family.prefix.startsWith(f.prefix));
    if (overlapping) throw new Error(`error family ${family.name} (${family.prefix}) overlaps ${overlapping.name} (${overlapping.prefix})`);
    this.#families.push(family);
  }

  // The renderer of the family the URL belongs to; `{ message }` for a URL of no family.
  rendererFor(url: string): ErrorRenderer {
    return this.#families.find((family) => url.startsWith(family.prefix))?.render ?? renderPlainError;
  }
}

// A family's routes plugin calls this with its own instance: its routes render their errors with
// the family's renderer, and so do the answers to its URLs given before a route is matched.
export function serveErrorFamily(app: FastifyInstance, family: ErrorFamily): void {
  app.errorFamilies.register(family);
  app.setErrorHandler(family.render);
}

// The root's error handler, and the renderer of every answer given before routing.
export function renderByUrl(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return request.server.errorFamilies.rendererFor(request.url)(error, request, reply);
}
