import type { FastifyBodyParser, FastifyInstance } from 'fastify';
import { MalformedJsonError } from '../kernel/errors.js';
import { MAX_JSON_DEPTH, nestsDeeperThan } from './json-depth.js';

// Fastify's JSON parser (with its prototype-poisoning checks), behind a nesting limit that is
// checked on the raw text first: a few kilobytes of brackets must be refused before anything that
// walks the parsed value recursively (fingerprints, validation) can run out of stack on it.
export function jsonBodyParser(app: FastifyInstance): FastifyBodyParser<string> {
  const parse = app.getDefaultJsonParser('error', 'error');
  return (request, body, done) => {
    if (nestsDeeperThan(body, MAX_JSON_DEPTH)) {
      done(new MalformedJsonError(`Request body nests objects and arrays deeper than ${MAX_JSON_DEPTH} levels`), undefined);
      return;
    }
    // Fastify's parser answers through `done`; its type allows a promise it never returns.
    void parse(request, body, done);
  };
}

// Every JSON body of the instance goes through jsonBodyParser; plugins registered afterwards
// inherit it.
export function limitJsonDepth(app: FastifyInstance): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, jsonBodyParser(app));
}
