import { readFileSync } from 'node:fs';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { createServer as createNetServer, type AddressInfo, type Server as NetServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import closeWithGrace from 'close-with-grace';
import type { FastifyInstance, FastifyListenOptions } from 'fastify';
import type { AppConfig } from '../kernel/config.js';
import { tlsTimeLimits } from '../http/time-limits.js';
import { closeHandles, duplicateListeningHandle, type ListeningHandle } from './listening-handles.js';

// Extra acceptors on the port, each handing its connections to the one server. libuv accepts one
// connection per listening handle per turn of the event loop (libuv#3696), and with the API busy a
// turn takes milliseconds: a reconnect storm then waits in the kernel's queue at about 200 stations
// a second. With SO_REUSEPORT (Node 22.12+ and 23.1+ on Linux, the Docker image's Node 24) each
// acceptor is a socket of its own and the kernel spreads new connections over them. Where the
// option is not supported (Node 20, 22.0-22.11, 23.0) the first extra socket fails to bind, and the acceptors are
// handles on duplicates of the server's own socket instead (listening-handles.ts): one accept
// queue, polled through several descriptors.
const EXTRA_ACCEPTORS = 7;

// Where a socket listens: on the port (with SO_REUSEPORT, so that acceptors may share it), or on a
// duplicate of a listening socket, whose accept queue it shares. listen() again on a listening
// socket keeps it and sets its backlog: the same as the server's.
type ListenAt = { host: string; port: number; backlog: number } | { handle: ListeningHandle; backlog: number };

async function listenOn(server: NetServer, at: ListenAt): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    const listening = () => {
      server.off('error', reject);
      resolve();
    };
    if ('handle' in at) server.listen(at.handle, at.backlog, listening);
    else server.listen({ ...at, reusePort: true }, listening);
  });
}

// An acceptor that hands each connection it accepts to `target`, with the socket options the
// target's own socket would have given it (HTTP servers accept with TCP_NODELAY and half-open
// sockets allowed; a plain net server would not). The target's close closes it too and calls back
// only once the connections it handed over have ended: the server counts only the connections its
// own socket accepted, and Fastify's close would otherwise call back, and close the database, while
// a request that came through this acceptor still runs.
export async function listenAcceptor(target: NetServer, at: ListenAt, onError: (error: Error) => void): Promise<NetServer> {
  const own = target as NetServer & { noDelay?: boolean; allowHalfOpen?: boolean; keepAlive?: boolean; keepAliveInitialDelay?: number };
  const acceptor = createNetServer(
    { noDelay: own.noDelay ?? true, allowHalfOpen: own.allowHalfOpen ?? false, keepAlive: own.keepAlive ?? false, keepAliveInitialDelay: own.keepAliveInitialDelay ?? 0 },
    (socket) => target.emit('connection', socket),
  );
  await listenOn(acceptor, at);
  // After the bind: an accept that fails (EMFILE in a storm) is reported, never thrown.
  acceptor.on('error', onError);
  // A net server's close event waits for every connection it accepted, handed over or not.
  const drained = new Promise<void>((resolve) => acceptor.once('close', () => resolve()));
  const close = target.close.bind(target);
  target.close = ((callback?: (error?: Error) => void) => {
    acceptor.close();
    return close((error?: Error) => void drained.then(() => callback?.(error)));
  }) as typeof target.close;
  return acceptor;
}

// EXTRA_ACCEPTORS more acceptors on the target's port, or as many as could be made, and the line
// that says how many the port has (`message`).
async function addAcceptors(app: FastifyInstance, target: NetServer, options: { host: string; backlog: number }, message: string): Promise<void> {
  const { sockets, duplicates } = await makeAcceptors(app, target, options);
  app.log.info({ port: (target.address() as AddressInfo).port, sockets: 1 + sockets, acceptors: 1 + sockets + duplicates }, message);
}

async function makeAcceptors(app: FastifyInstance, target: NetServer, options: { host: string; backlog: number }): Promise<{ sockets: number; duplicates: number }> {
  const onError = acceptErrorLog(app);
  const { port } = target.address() as AddressInfo;
  let sockets = 0;
  for (; sockets < EXTRA_ACCEPTORS; sockets++) {
    try {
      await listenAcceptor(target, { host: options.host, port, backlog: options.backlog }, onError);
    } catch {
      break;
    }
  }
  if (sockets > 0) return { sockets, duplicates: 0 };
  const handles = await duplicateListeningHandle(target, EXTRA_ACCEPTORS).catch((error: unknown) => {
    app.log.warn({ err: error, port }, 'the listening socket could not be duplicated: the port keeps one acceptor');
    return [];
  });
  let duplicates = 0;
  try {
    for (const handle of handles) {
      await listenAcceptor(target, { handle, backlog: options.backlog }, onError);
      duplicates++;
    }
  } catch (error) {
    closeHandles(handles.slice(duplicates + 1));
    app.log.warn({ err: error, port }, 'a duplicate of the listening socket could not listen: the port keeps fewer acceptors');
  }
  return { sockets: 0, duplicates };
}

// A listening socket's error once it listens is an accept that failed (EMFILE in a storm): the
// connection is lost, the socket listens on.
function acceptErrorLog(app: FastifyInstance): (error: Error) => void {
  return (error) => app.log.warn({ err: error }, 'a connection could not be accepted');
}

async function assertPortFree(host: string, port: number): Promise<void> {
  const probe = createNetServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', reject);
    probe.listen({ host, port }, () => resolve());
  });
  await new Promise((resolve) => probe.close(resolve));
}

// Which listener a failure to listen belongs to, for the one line that names its variable (a
// failure without it is the API's, PORT).
export interface ListenerOf {
  variable: 'PORT' | 'OCPP_TLS_PORT';
  port: number;
}

// A certificate or key file the process cannot read, as one line naming its variable (the reason
// is the system's code: ENOENT, EACCES).
function readTlsFile(variable: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (error) {
    throw new Error(`${variable} ${file}: cannot read it (${(error as NodeJS.ErrnoException).code ?? String(error)})`, { cause: error });
  }
}

export interface OcppTlsListener {
  server: HttpsServer;
  port: number;
  close(): Promise<void>;
}

// The service's own TLS listener for OCPP security profile 2: stations connect
// with wss:// to this port and reach the same endpoint as on the plain port, which knows the
// connection is encrypted. It serves nothing but the OCPP upgrade.
export async function listenOcppTls(
  app: FastifyInstance,
  options: { host: string; port: number; certFile: string; keyFile: string; requestTimeoutMs: number; backlog: number },
): Promise<OcppTlsListener> {
  // The API port's time limits, the TLS handshake included.
  const limits = tlsTimeLimits(options.requestTimeoutMs);
  const server = createHttpsServer(
    {
      cert: readTlsFile('OCPP_TLS_CERT_FILE', options.certFile),
      key: readTlsFile('OCPP_TLS_KEY_FILE', options.keyFile),
      ...limits,
    },
    (_request, response) => {
      response.writeHead(404, { 'content-type': 'application/json; charset=utf-8', connection: 'close' });
      response.end(JSON.stringify({ message: 'Only the OCPP endpoint /ocpp/{identity} is served on this port' }));
    },
  );
  server.keepAliveTimeout = limits.keepAliveTimeout;
  server.on('upgrade', app.stations.handleUpgrade);
  // A failed TLS handshake is the client's problem; Node destroys that socket itself.
  server.on('tlsClientError', () => undefined);
  try {
    // As for the API's port (runServer): with SO_REUSEPORT a port held by another process would be
    // shared with it, not refused.
    if (options.port !== 0) await assertPortFree(options.host, options.port);
    await listenOn(server, { port: options.port, host: options.host, backlog: options.backlog });
  } catch (error) {
    throw Object.assign(error as Error, { listener: { variable: 'OCPP_TLS_PORT', port: options.port } satisfies ListenerOf });
  }
  server.on('error', acceptErrorLog(app));
  await addAcceptors(app, server, options, 'acceptors on the OCPP TLS port');
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

// Longest wait for the stations' closing handshakes before the endpoint cuts what is left.
const STATIONS_MOVE_WAIT_MS = 1000;

// SIGTERM, the stop of a replica behind a load balancer: /readyz answers 503 for the drain while
// everything else is still served, so the balancer's health checks take the replica out before
// it stops accepting (a request it sends meanwhile is answered, not refused).
async function drain(app: FastifyInstance, drainMs: number): Promise<void> {
  app.startDraining();
  app.log.info({ drainMs }, 'draining: /readyz answers 503 until the stop begins');
  await sleep(drainMs);
}

// Listens and wires SIGTERM/SIGINT: on SIGTERM the drain first; then the stations are asked to
// reconnect (to another replica, through the balancer), the listening sockets close, in-flight
// requests finish, the database closes (an onClose hook), exit 0. A stop slower than the timeout,
// the drain included, exits 1.
export async function runServer(
  app: FastifyInstance,
  config: Pick<AppConfig, 'host' | 'port' | 'shutdownTimeoutMs' | 'shutdownDrainMs' | 'requestTimeoutMs' | 'listenBacklog'> & { ocpp?: AppConfig['ocpp'] },
): Promise<string> {
  let tls: OcppTlsListener | undefined;
  closeWithGrace({ delay: config.shutdownTimeoutMs, logger: false }, async ({ signal, err }) => {
    if (err) app.log.error({ err }, 'fatal error, shutting down');
    else app.log.info({ signal }, 'shutting down');
    // SIGINT is someone at a terminal: no balancer waits for it.
    if (signal === 'SIGTERM' && config.shutdownDrainMs > 0) await drain(app, config.shutdownDrainMs);
    const moved = await app.stations.moveStations(STATIONS_MOVE_WAIT_MS);
    if (moved > 0) app.log.info({ stations: moved }, 'stations asked to reconnect');
    // The server's close closes every socket of the port (listenAcceptor); the stations'
    // sockets still open, on either listener, close in the app's preClose; then the TLS port.
    await app.close();
    await tls?.close();
  });
  const onAcceptError = acceptErrorLog(app);
  // With SO_REUSEPORT a second copy of the service (its sockets ask for it too) would share the
  // port instead of failing: a socket that does not ask for it finds out whether anything holds
  // the port, and leaves it to this one.
  if (config.port !== 0) await assertPortFree(config.host, config.port);
  // Fastify hands the options to server.listen: reusePort lets the acceptors share the port.
  const address = await app.listen({ host: config.host, port: config.port, backlog: config.listenBacklog, reusePort: true } as FastifyListenOptions);
  app.server.on('error', onAcceptError);
  await addAcceptors(app, app.server, { host: config.host, backlog: config.listenBacklog }, 'acceptors on the port');
  if (config.ocpp?.tls) {
    tls = await listenOcppTls(app, { host: config.host, ...config.ocpp.tls, requestTimeoutMs: config.requestTimeoutMs, backlog: config.listenBacklog });
  }
  return address;
}
