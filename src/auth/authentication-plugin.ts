import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';

// The root hook that demands a verified bearer token of every request to a route that is not
// public, and leaves its principal on request.principal; a missing, invalid, expired or revoked
// token is a 401. Root hooks run in the order they are added: after the rate limiter's, so the
// requests refused here (token spraying) are counted too.
async function authenticationPlugin(app: FastifyInstance) {
  app.addHook('onRequest', (request, _reply, done) => {
    if (request.is404 || request.routeOptions.config.public === true) {
      done();
      return;
    }
    app.auth.verify(request).then(() => done(), done);
  });
}

export default fp(authenticationPlugin, { name: 'authentication', dependencies: ['auth', 'rate-limit'] });
