import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { answerBeforeRouting } from './errors/early-answers.js';
import { ErrorFamilies, renderByUrl } from './errors/error-families.js';

// The error machinery: domain errors rendered in each API family's shape (errors/error-rendering.ts),
// the families registered by their own plugins under their prefixes (errors/error-families.ts), and
// the answers given before a route runs (errors/early-answers.ts).
async function errorHandlerPlugin(app: FastifyInstance) {
  app.decorate('errorFamilies', new ErrorFamilies());
  app.setErrorHandler(renderByUrl);
  answerBeforeRouting(app);
}

export default fp(errorHandlerPlugin, { name: 'error-handler' });
