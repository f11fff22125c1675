// The only module that knows the OCPP-J library (ocpp-rpc), with ocpp-bounds.ts that hooks the
// per-station bounds into it: framing, schema validation (strict mode, the official JSON schemas
// of each version), CALLERRORs and WebSocket pings. The rest of the service speaks in identities,
// methods and params.
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import ocppRpc from 'ocpp-rpc';
import { OCPP_SUBPROTOCOLS, type OcppSubprotocol } from '../../kernel/ocpp-vocabulary.js';
import { boundStation, handshakeProblem, refuseHandshake, type LibraryClient } from './ocpp-bounds.js';
import { CLOSE_TIMEOUT_MS } from '../station-bounds.js';

const { RPCServer, RPCClient, createRPCError } = ocppRpc;

// Large enough for any message the handled actions carry; ws would otherwise accept 100 MiB.
const MAX_MESSAGE_BYTES = 256 * 1024;

export type Credentials =
  | { kind: 'none' }
  | { kind: 'malformed' }
  // The username is not the identity in the URL (A00.FR.204/303).
  | { kind: 'other-user' }
  | { kind: 'basic'; password: Buffer };

export interface UpgradeRequest {
  identity: string;
  request: IncomingMessage;
  credentials: Credentials;
  offeredProtocols: ReadonlySet<string>;
}

// A refusal may say when to try again (Retry-After, in seconds): a 503 does.
export type UpgradeDecision<S> = { accept: true; protocol: OcppSubprotocol; session: S } | { accept: false; status: 401 | 404 | 503; retryAfterSeconds?: number };

export type CallHandler = (params: unknown) => unknown | Promise<unknown>;

export interface StationSocket<S> {
  readonly identity: string;
  // undefined when the station offered none of the protocols it had to (it is closed at once).
  readonly protocol: string | undefined;
  readonly session: S;
  handle(method: string, handler: CallHandler): void;
  // Sends a CALL and resolves with the CALLRESULT's payload; rejects with an OcppCallError for a
  // CALLERROR, a timeout or a dropped socket.
  call(method: string, params: unknown, timeoutMs: number): Promise<unknown>;
  close(code: number, reason: string): void;
  onClose(listener: () => void): void;
  // Any message or pong from the station.
  onActivity(listener: () => void): void;
}

export class OcppCallError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface OcppEndpointOptions<S> {
  pingIntervalMs: number;
  // The first look at an upgrade request, before anything else of it is read (its handshake, its
  // credentials): a refusal is answered at once. The address throttle runs here.
  admit(identity: string, request: IncomingMessage): { status: 429; retryAfterSeconds: number } | null;
  authenticate(upgrade: UpgradeRequest): Promise<UpgradeDecision<S>>;
  onConnection(socket: StationSocket<S>): void;
  // Problems of one station's messages; never carries a message's params (they may hold secrets).
  onProtocolProblem(identity: string, problem: string): void;
  // A station closed for crossing one of its bounds (station-bounds.ts), and why.
  onBoundCrossed(identity: string, reason: string): void;
  // An upgrade request refused before any login check because the handshake itself is malformed.
  onUpgradeRefused(identity: string, status: number, reason: string): void;
  onError(error: unknown): void;
}

export interface OcppEndpoint {
  // identity must already be known to be URL-safe (the caller routes the path).
  handleUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void;
  close(): Promise<void>;
}

// The parts of the library's server-side client this adapter uses.
interface ServerSideClient {
  identity: string;
  protocol: string | undefined;
  session: unknown;
  handle(...args: unknown[]): void;
  call(method: string, params: unknown, options?: { callTimeoutMs: number }): Promise<unknown>;
  close(options: { code: number; reason: string; force: boolean }): Promise<unknown>;
  on(event: string, listener: (...args: never[]) => void): void;
  once(event: string, listener: (...args: never[]) => void): void;
}

const BASIC = /^ *[Bb][Aa][Ss][Ii][Cc] +([A-Za-z0-9+/]+=*) *$/;

export function readCredentials(header: string | undefined, identity: string): Credentials {
  if (header === undefined) return { kind: 'none' };
  const match = BASIC.exec(header);
  if (!match) return { kind: 'malformed' };
  const decoded = Buffer.from(match[1]!, 'base64');
  // Split after `identity:` rather than at a colon: a 2.0.1 password may contain colons, and the
  // 1.6 password is raw bytes, which may be anything.
  const prefix = Buffer.from(`${identity}:`, 'utf8');
  if (decoded.length < prefix.length || !decoded.subarray(0, prefix.length).equals(prefix)) return { kind: 'other-user' };
  return { kind: 'basic', password: decoded.subarray(prefix.length) };
}

function toCallError(error: unknown): OcppCallError {
  if (error instanceof OcppCallError) return error;
  const e = error as { rpcErrorCode?: unknown; message?: unknown; name?: unknown };
  const code = typeof e?.rpcErrorCode === 'string' ? e.rpcErrorCode : e?.name === 'TimeoutError' ? 'Timeout' : 'Disconnected';
  return new OcppCallError(code, typeof e?.message === 'string' ? e.message : String(error));
}

export function createOcppEndpoint<S>(options: OcppEndpointOptions<S>): OcppEndpoint {
  const server = new RPCServer({
    protocols: [...OCPP_SUBPROTOCOLS],
    strictMode: true,
    pingIntervalMs: options.pingIntervalMs,
    // A station that sent anything (a message, a ping, a pong) within the interval has shown its
    // socket alive, so only silent sockets are pinged; one that stays silent is closed at the
    // next turn (within 60 s: docs/stations.md, "Liveness and lastSeenAt"). Stations heartbeating every 5 s are never pinged: at
    // 10,000 of them that is 333 pings and pongs a second less for the service and the stations.
    deferPingsOnActivity: true,
    respondWithDetailedErrors: false,
    // Per-message compression costs memory per socket and is declined. The closing handshake's
    // timeout (station-bounds.ts) is an option newer than ws's typings.
    wssOptions: { perMessageDeflate: false, maxPayload: MAX_MESSAGE_BYTES, ...({ closeTimeout: CLOSE_TIMEOUT_MS } as object) },
  });
  server.on('error', (error: unknown) => options.onError(error));

  server.auth(async (accept, reject, handshake) => {
    const request = handshake.request as IncomingMessage;
    try {
      const decision = await options.authenticate({
        identity: handshake.identity,
        request,
        credentials: readCredentials(request.headers.authorization, handshake.identity),
        offeredProtocols: handshake.protocols,
      });
      if (!decision.accept) {
        // The status's own reason phrase only: nothing about which check failed. The library's
        // reject writes no headers of ours, so the answer (with any Retry-After) is written here;
        // the reject after it finds the socket destroyed and only settles the handshake.
        refuseHandshake(request.socket, decision.status, decision.retryAfterSeconds);
        reject(decision.status, '');
        return;
      }
      // Offered or not, the asset's version is the only one: without it the handshake completes
      // with no subprotocol and the socket is closed at once (OCPP 2.0.1 Part 4 §3.2).
      accept(decision.session as Record<string, unknown>, handshake.protocols.has(decision.protocol) ? decision.protocol : false);
    } catch (error) {
      options.onError(error);
      reject(503, '');
    }
  });

  server.on('client', (client: ServerSideClient) => {
    boundStation(client as unknown as LibraryClient, options);
    // A station's calls are handled one at a time, in the order they came (OCPP-J lets a station
    // have one CALL outstanding). The library would run them all at once, so a station that sends
    // a burst without waiting took a pooled database connection per call: every connection, with
    // the API and the other stations waiting behind it. In order also means the last
    // StatusNotification sent is the one stored.
    let previous: Promise<unknown> = Promise.resolve();
    const inTurn = (run: () => unknown): Promise<unknown> => {
      const result = previous.then(run);
      previous = result.catch(() => undefined);
      return result;
    };
    const socket: StationSocket<S> = {
      identity: client.identity,
      protocol: client.protocol || undefined,
      session: client.session as S,
      handle(method, handler) {
        client.handle(method, ({ params }: { params: unknown }) =>
          inTurn(() => handler(params)).catch((error: unknown) => {
            if (error instanceof OcppCallError) throw createRPCError(error.code, error.message);
            // The library would send the error's own message, a failed query's text with its
            // parameters: the log gets it, the station only that its call failed.
            options.onError(error);
            throw createRPCError('InternalError', `${method} could not be handled`);
          }),
        );
      },
      async call(method, params, timeoutMs) {
        try {
          return await client.call(method, params, { callTimeoutMs: timeoutMs });
        } catch (error) {
          throw toCallError(error);
        }
      },
      close(code, reason) {
        // A closing handshake, so the station sees why; ws ends the socket if it never answers.
        client.close({ code, reason, force: false }).catch((error: unknown) => options.onError(error));
      },
      onClose(listener) {
        client.once('close', listener);
      },
      onActivity(listener) {
        client.on('message', ({ outbound }: { outbound: boolean }) => {
          if (!outbound) listener();
        });
        client.on('ping', listener);
      },
    };
    // No handler for every other action: the library answers an action nobody handles with the
    // version's NotImplemented before it looks at the schema (a catch-all handler was reached only
    // after it, so an unknown action got ProtocolError and a malformed known one a violation).
    client.on('strictValidationFailure', ({ error }: { error: { message?: string } }) =>
      options.onProtocolProblem(client.identity, `schema violation: ${error?.message ?? 'invalid message'}`),
    );
    client.on('badMessage', ({ error }: { error: { message?: string } }) =>
      options.onProtocolProblem(client.identity, `malformed message: ${error?.message ?? 'unreadable'}`),
    );
    client.on('socketError', (error: unknown) => options.onProtocolProblem(client.identity, `socket error: ${(error as Error)?.message}`));
    options.onConnection(socket);
  });

  return {
    handleUpgrade(request, socket, head) {
      // The identity as the library would read it; the caller has checked the path.
      const identity = (request.url ?? '').split('?', 1)[0]!.split('/').pop() ?? '';
      const refused = options.admit(identity, request);
      if (refused) {
        refuseHandshake(socket, refused.status, refused.retryAfterSeconds);
        return;
      }
      const problem = handshakeProblem(request);
      if (problem) {
        options.onUpgradeRefused(identity, problem.status, problem.reason);
        refuseHandshake(socket, problem.status);
        return;
      }
      server.handleUpgrade(request, socket as never, head).catch((error: unknown) => {
        options.onError(error);
        socket.destroy();
      });
    },
    async close() {
      await server.close({ code: 1001, reason: 'Server shutting down', force: true });
    },
  };
}

export interface StationClientOptions {
  url: string;
  identity: string;
  protocol: OcppSubprotocol;
  password: string | Buffer;
  // Extra CA certificates to trust (a self-signed certificate for local use).
  ca?: Buffer | undefined;
}

// The station's side, for the CLI that plays a station. Same library, same strict validation.
export async function connectStation(options: StationClientOptions) {
  // The library's typings are stricter than its documented options; this is the part used here.
  const client = new RPCClient({
    endpoint: options.url,
    identity: options.identity,
    // The library sends a Buffer as raw bytes (1.6 keys); its typings say string only.
    password: options.password as string,
    protocols: [options.protocol],
    strictMode: true,
    reconnect: false,
    ...(options.ca ? { wsOpts: { ca: options.ca } } : {}),
  } as never) as unknown as ServerSideClient & { connect(): Promise<unknown> };
  await client.connect();
  return {
    protocol: client.protocol as string,
    handle(method: string, handler: CallHandler) {
      client.handle(method, ({ params }: { params?: unknown }) => handler(params));
    },
    // Every call the service sends that has no handler of its own; an OcppCallError thrown by the
    // handler goes back as that CALLERROR.
    handleAny(handler: (method: string, params: unknown) => unknown) {
      client.handle(async ({ method, params }: { method?: string; params?: unknown }) => {
        try {
          return await handler(String(method), params);
        } catch (error) {
          throw error instanceof OcppCallError ? createRPCError(error.code, error.message) : error;
        }
      });
    },
    async call(method: string, params: unknown): Promise<unknown> {
      try {
        return await client.call(method, params);
      } catch (error) {
        throw toCallError(error);
      }
    },
    onClose(listener: (code: number) => void) {
      client.once('close', ({ code }: { code: number }) => listener(code));
    },
    async close() {
      await client.close({ code: 1000, reason: 'Station closing', force: true });
    },
  };
}

