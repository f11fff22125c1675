import { readFileSync } from 'node:fs';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import closeWithGrace from 'close-with-grace';
import type { FastifyInstance } from 'fastify';
import type { AppConfig } from './config.js';

export interface OcppTlsListener {
  server: HttpsServer;
  port: number;
  close(): Promise<void>;
}

// The service's own TLS listener for OCPP security profile 2 (contract §8.1): stations connect
// with wss:// to this port and reach the same endpoint as on the plain port, which knows the
// connection is encrypted. It serves nothing but the OCPP upgrade.
export async function listenOcppTls(
  app: FastifyInstance,
  options: { host: string; port: number; certFile: string; keyFile: string; requestTimeoutMs: number; backlog: number },
): Promise<OcppTlsListener> {
  const server = createHttpsServer(
    {
      cert: readFileSync(options.certFile),
      key: readFileSync(options.keyFile),
      requestTimeout: options.requestTimeoutMs,
      headersTimeout: options.requestTimeoutMs,
    },
    (_request, response) => {
      response.writeHead(404, { 'content-type': 'application/json; charset=utf-8', connection: 'close' });
      response.end(JSON.stringify({ message: 'Only the OCPP endpoint /ocpp/{identity} is served on this port' }));
    },
  );
  server.on('upgrade', app.stations.handleUpgrade);
  // A failed TLS handshake is the client's problem; Node destroys that socket itself.
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: options.port, host: options.host, backlog: options.backlog }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

// Listens and wires SIGTERM/SIGINT: stop accepting, let in-flight requests finish, close the
// database (an onClose hook), exit 0; a shutdown slower than the timeout exits 1.
export async function runServer(
  app: FastifyInstance,
  config: Pick<AppConfig, 'host' | 'port' | 'shutdownTimeoutMs' | 'requestTimeoutMs' | 'listenBacklog'> & { ocpp?: AppConfig['ocpp'] },
): Promise<string> {
  let tls: OcppTlsListener | undefined;
  closeWithGrace({ delay: config.shutdownTimeoutMs, logger: false }, async ({ signal, err }) => {
    if (err) app.log.error({ err }, 'fatal error, shutting down');
    else app.log.info({ signal }, 'shutting down');
    // The stations' sockets, on either listener, close in the app's preClose; then the TLS port.
    await app.close();
    await tls?.close();
  });
  const address = await app.listen({ host: config.host, port: config.port, backlog: config.listenBacklog });
  if (config.ocpp?.tls) {
    tls = await listenOcppTls(app, { host: config.host, ...config.ocpp.tls, requestTimeoutMs: config.requestTimeoutMs, backlog: config.listenBacklog });
    app.log.info({ port: tls.port }, 'OCPP TLS listener ready');
  }
  return address;
}
