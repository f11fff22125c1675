import closeWithGrace from 'close-with-grace';
import type { FastifyInstance } from 'fastify';
import type { AppConfig } from './config.js';

// Listens and wires SIGTERM/SIGINT: stop accepting, let in-flight requests finish, close the
// database (an onClose hook), exit 0; a shutdown slower than the timeout exits 1.
export async function runServer(app: FastifyInstance, config: Pick<AppConfig, 'host' | 'port' | 'shutdownTimeoutMs'>): Promise<string> {
  closeWithGrace({ delay: config.shutdownTimeoutMs, logger: false }, async ({ signal, err }) => {
    if (err) app.log.error({ err }, 'fatal error, shutting down');
    else app.log.info({ signal }, 'shutting down');
    await app.close();
  });
  return app.listen({ host: config.host, port: config.port });
}
