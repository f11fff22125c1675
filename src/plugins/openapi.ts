import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';

async function openapiPlugin(app: FastifyInstance, opts: { tokenUrl: string }) {
  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Charging network service',
        description: 'Session payments, charging station models and asset passwords.',
        version: '1.404.0',
      },
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
          oauth2: { type: 'oauth2', flows: { clientCredentials: { tokenUrl: opts.tokenUrl, scopes: {} } } },
        },
      },
      security: [{ bearerAuth: [] }],
    },
    transform: jsonSchemaTransform,
  });

  await app.register(async (docs) => {
    // The reference page and its assets are public; every other route is authenticated by default.
    docs.addHook('onRoute', (route) => {
      route.config = { ...(route.config ?? {}), public: true };
    });
    await docs.register(fastifySwaggerUi, { routePrefix: '/docs' });
    docs.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  });
}

export default fp(openapiPlugin, { name: 'openapi' });
