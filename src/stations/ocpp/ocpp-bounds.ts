// The per-station bounds (station-bounds.ts) hooked into the OCPP-J library, and the handshake
// checks that run before it sees an upgrade request. Used by ocpp-adapter.ts only.
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import ocppRpc from 'ocpp-rpc';
import wsUtil from 'ocpp-rpc/lib/ws-util.js';
import { nestsDeeperThan } from '../../http/json-depth.js';
import {
  MAX_CALLS_IN_PROGRESS,
  MAX_FRAME_DEPTH,
  MAX_SEND_BUFFER_BYTES,
  MAX_SUBPROTOCOL_HEADER_LENGTH,
  deepFrameVerdict,
} from '../station-bounds.js';

const { RPCClient } = ocppRpc;

// The library's own receiving and sending parts that the per-station bounds hook into (so its
// version is pinned exactly): every frame goes through _onMessage, every CALL it reads through
// _onCall, everything sent through sendRaw, over the WebSocket _ws.
export interface LibraryClient {
  readonly identity: string;
  readonly protocol: string | undefined;
  readonly state: number;
  _ws: { bufferedAmount: number; pause(): void } | undefined;
  _onMessage(frame: Buffer | string): void;
  _onCall(messageId: string, method: string, params: unknown): Promise<void>;
  sendRaw(message: string | Buffer): void;
  close(options: { code: number; reason: string; force: boolean }): Promise<unknown>;
  on(event: string, listener: (...args: never[]) => void): void;
}

const WEBSOCKET_KEY = /^[+/0-9A-Za-z]{22}==$/;

// What the WebSocket handshake itself gets wrong, checked before any login: the library found a
// malformed Sec-WebSocket-Protocol only after nothing (an HTTP 500), a bad key or version only
// after the password was hashed and the station claimed. The subprotocols are read by the
// library's own parser, so what passes here is what it accepts.
export function handshakeProblem(request: IncomingMessage): { status: 400 | 405; reason: string } | null {
  if (request.method !== 'GET') return { status: 405, reason: 'upgrade request is not a GET' };
  const key = request.headers['sec-websocket-key'];
  if (key === undefined || !WEBSOCKET_KEY.test(key)) return { status: 400, reason: 'missing or invalid Sec-WebSocket-Key' };
  const version = request.headers['sec-websocket-version'];
  if (version !== '13' && version !== '8') return { status: 400, reason: 'missing or unsupported Sec-WebSocket-Version' };
  const offered = request.headers['sec-websocket-protocol'];
  if (offered === undefined) return null;
  if (offered.length > MAX_SUBPROTOCOL_HEADER_LENGTH) return { status: 400, reason: `Sec-WebSocket-Protocol longer than ${MAX_SUBPROTOCOL_HEADER_LENGTH} characters` };
  try {
    wsUtil.parseSubprotocols(offered);
  } catch (error) {
    return { status: 400, reason: `malformed Sec-WebSocket-Protocol: ${(error as Error).message}` };
  }
  return null;
}

export interface BoundReports {
  onProtocolProblem(identity: string, problem: string): void;
  onBoundCrossed(identity: string, reason: string): void;
  onError(error: unknown): void;
}

// The library takes any number of calls at once, buffers any number of answers, and validates
// whatever nesting it parsed. Here each station gets at most MAX_CALLS_IN_PROGRESS calls of its
// own in progress (beyond: closed with 1008, the surplus never reaches a handler), at most
// MAX_SEND_BUFFER_BYTES waiting to be sent to it (beyond: the socket is ended, since a station that
// does not read would never read a closing handshake either), and a frame nested deeper than
// MAX_FRAME_DEPTH is answered before the library reads it. A station closed for a bound is not read
// any further: its socket is paused at the cut, so what it sends after it is never parsed (a flood
// read on until the closing handshake, tens of MiB of frames parsed for nothing); its answer to the
// closing handshake is not read either, so the socket ends after CLOSE_TIMEOUT_MS.
export function boundStation(client: LibraryClient, report: BoundReports): void {
  const { _onMessage: receive, _onCall: onCall, sendRaw, _ws: ws } = client;
  if (typeof receive !== 'function' || typeof onCall !== 'function' || typeof sendRaw !== 'function' || ws === undefined) {
    throw new Error('ocpp-rpc no longer has the parts the per-station bounds hook into');
  }
  let closed = false;
  const closeFor = (reason: string, end: boolean) => {
    if (closed) return;
    closed = true;
    ws.pause();
    report.onBoundCrossed(client.identity, reason);
    client.close({ code: 1008, reason: end ? '' : reason, force: end }).catch((error: unknown) => report.onError(error));
  };
  // The library emits an outbound 'response' as it sends the answer of each call it read, at once
  // for a call it refuses (no handler, a schema violation), after the handler for the others.
  let inProgress = 0;
  client.on('response', ({ outbound }: { outbound: boolean }) => {
    if (outbound) inProgress -= 1;
  });
  client._onCall = (messageId, method, params) => {
    if (closed) return Promise.resolve();
    if (inProgress >= MAX_CALLS_IN_PROGRESS) {
      closeFor(`Too many calls in progress (more than ${MAX_CALLS_IN_PROGRESS})`, false);
      return Promise.resolve();
    }
    inProgress += 1;
    return onCall.call(client, messageId, method, params);
  };
  client._onMessage = (frame) => {
    // The rest of what was read with the frame that crossed the bound.
    if (closed) return;
    const bytes = Buffer.isBuffer(frame) ? frame : Buffer.from(frame);
    if (!nestsDeeperThan(bytes, MAX_FRAME_DEPTH)) {
      receive.call(client, frame);
      return;
    }
    report.onProtocolProblem(client.identity, `message nested deeper than ${MAX_FRAME_DEPTH} levels`);
    const verdict = deepFrameVerdict(bytes, client.protocol);
    if (verdict.kind === 'instead') receive.call(client, Buffer.from(verdict.frame));
    else if (verdict.kind === 'answer' && client.state === RPCClient.OPEN) client.sendRaw(verdict.frame);
  };
  client.sendRaw = (message) => {
    sendRaw.call(client, message);
    if (!closed && ws.bufferedAmount > MAX_SEND_BUFFER_BYTES) {
      closeFor(`more than ${MAX_SEND_BUFFER_BYTES} bytes wait to be sent: the station does not read its answers`, true);
    }
  };
}

// The status line (and Retry-After, when given), as the library refuses an upgrade; the socket is
// destroyed, so nothing more of the request is read.
export function refuseHandshake(socket: Duplex, status: number, retryAfterSeconds?: number): void {
  wsUtil.abortHandshake(socket as Socket, status, undefined, retryAfterSeconds === undefined ? undefined : { 'Retry-After': String(retryAfterSeconds) });
}
