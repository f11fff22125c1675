import { readFileSync } from 'node:fs';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { createServer as createNetServer, type AddressInfo, type Server as NetServer, type Socket } from 'node:net';
import closeWithGrace from 'close-with-grace';
import type { FastifyInstance, FastifyListenOptions } from 'fastify';
import type { AppConfig } from './config.js';

// Extra listening sockets on the port, each handing its connections to the one server. libuv
// accepts one connection per listening socket per turn of the event loop (libuv#3696), and with
// the API busy a turn takes milliseconds: a reconnect storm then waits in the kernel's queue at
// about 200 stations a second. With SO_REUSEPORT (Node 22.12+ and 23.1+ on Linux, the Docker
// image's Node 24) the kernel spreads new connections over all the sockets, and each accepts one
// per turn. Where the option is not supported (Node 20) it is ignored, the first extra socket
// fails to bind, and the port keeps its one socket.
const EXTRA_ACCEPTORS = 7;

async function listenOn(server: NetServer, options: { host: string; port: number; backlog: number }): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ ...options, reusePort: true }, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

export interface Acceptors {
  count: number;
  // Stops accepting at once. The connections already accepted belong to the server they were
  // handed to, and its close waits for them (below).
  close(): void;
}

export async function addAcceptors(target: NetServer, options: { host: string; backlog: number }): Promise<Acceptors> {
  const { port } = target.address() as AddressInfo;
  const acceptors: NetServer[] = [];
  const handed = new Set<Socket>();
  for (let i = 0; i < EXTRA_ACCEPTORS; i++) {
    const acceptor = createNetServer((socket) => {
      handed.add(socket);
      socket.once('close', () => handed.delete(socket));
      target.emit('connection', socket);
    });
    try {
      await listenOn(acceptor, { host: options.host, port, backlog: options.backlog });
    } catch {
      break;
    }
    acceptors.push(acceptor);
  }
  if (acceptors.length > 0) {
    // The server counts only the connections its own socket accepted: its close (Fastify's, at
    // shutdown) would call back, and the database close, while a request that came through an
    // acceptor still runs. So its callback waits for those too.
    const close = target.close.bind(target);
    target.close = ((callback?: (error?: Error) => void) =>
      close((error?: Error) => {
        const waitForHanded = () => {
          if (handed.size === 0) callback?.(error);
          else [...handed][0]!.once('close', waitForHanded);
        };
        waitForHanded();
      })) as typeof target.close;
  }
  return {
    count: acceptors.length,
    close: () => {
      for (const acceptor of acceptors) acceptor.close();
    },
  };
}

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
  await listenOn(server, { port: options.port, host: options.host, backlog: options.backlog });
  const acceptors = await addAcceptors(server, options);
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: async () => {
      acceptors.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

// Listens and wires SIGTERM/SIGINT: stop accepting, let in-flight requests finish, close the
// database (an onClose hook), exit 0; a shutdown slower than the timeout exits 1.
export async function runServer(
  app: FastifyInstance,
  config: Pick<AppConfig, 'host' | 'port' | 'shutdownTimeoutMs' | 'requestTimeoutMs' | 'listenBacklog'> & { ocpp?: AppConfig['ocpp'] },
): Promise<string> {
  let tls: OcppTlsListener | undefined;
  const port: { acceptors?: Acceptors } = {};
  closeWithGrace({ delay: config.shutdownTimeoutMs, logger: false }, async ({ signal, err }) => {
    if (err) app.log.error({ err }, 'fatal error, shutting down');
    else app.log.info({ signal }, 'shutting down');
    // New connections stop at every socket of the port; the stations' sockets, on either
    // listener, close in the app's preClose; then the TLS port.
    port.acceptors?.close();
    await app.close();
    await tls?.close();
  });
  // Fastify hands the options to server.listen: reusePort lets the acceptors share the port.
  const address = await app.listen({ host: config.host, port: config.port, backlog: config.listenBacklog, reusePort: true } as FastifyListenOptions);
  port.acceptors = await addAcceptors(app.server, { host: config.host, backlog: config.listenBacklog });
  app.log.info({ sockets: port.acceptors.count + 1 }, 'listening sockets on the port');
  if (config.ocpp?.tls) {
    tls = await listenOcppTls(app, { host: config.host, ...config.ocpp.tls, requestTimeoutMs: config.requestTimeoutMs, backlog: config.listenBacklog });
    app.log.info({ port: tls.port }, 'OCPP TLS listener ready');
  }
  return address;
}
