// What one station may cost the service, whatever it sends: the numbers, and the pure rules that
// read a frame before the OCPP-J library does. docs/stations.md tells operators what a station
// sees at each bound.
import { codecOf } from './ocpp/ocpp-codec.js';

// Calls of a station's own that the service has received and not answered yet. OCPP-J lets a
// station have one; a few more forgive a station that sends its next call as its answer is on the
// way. Beyond it the station is flooding: without a bound, every call it sent waited in memory for
// its turn (200,000 in 20 s were enough to exhaust the heap).
export const MAX_CALLS_IN_PROGRESS = 4;

// Bytes waiting to be sent to one station, above what the kernel holds for its TCP connection. An
// answer is at most about as large as the frame it answers (a CALLERROR repeats the action's name,
// or the params the schema refused), and frames are at most 256 KiB: only a station that does not
// read its answers gets near it.
export const MAX_SEND_BUFFER_BYTES = 1024 * 1024;

// How long the service waits for a station's answer to its closing handshake before it ends the
// socket (the library's default is 30 s). A station closed for a bound is not read any more, so its
// answer is never seen: its socket, with what the kernel buffered for it, is held this long.
export const CLOSE_TIMEOUT_MS = 5000;

// Nesting of a frame, its outer array included. The deepest message the OCPP schemas describe
// nests 14 levels (2.0.1 ReportChargingProfiles: 13 in its payload), 1.6 far less; 2.0.1 lets
// vendor data (customData) nest further, so the bound leaves room. Schema validation and the
// JSON of an answer are recursive: a frame 5,000 levels deep overflowed the stack.
export const MAX_FRAME_DEPTH = 32;

// Sec-WebSocket-Protocol: a station offers one or two subprotocols (`ocpp2.0.1, ocpp1.6`).
export const MAX_SUBPROTOCOL_HEADER_LENGTH = 256;

// Connectors whose latest status is stored per station. A station has a handful of EVSEs with
// one to three connectors each; beyond the bound a new connector's status is not stored.
export const MAX_CONNECTOR_STATUSES = 64;

// OCPP message ids are at most 36 characters; a little more is read, so a longer one is still
// answered by its id.
const HEAD_BYTES = 256;
// A string literal is checked by JSON.parse afterwards (control characters, escapes).
const HEAD = /^[\t\n\r ]*\[[\t\n\r ]*(\d{1,3})[\t\n\r ]*,[\t\n\r ]*("(?:[^"\\]|\\.)*")/;

// The message type and id at the start of a frame, read without parsing the rest; null for what
// cannot be read there.
export function frameHead(frame: Uint8Array): { type: number; id: string | null } | null {
  const head = Buffer.from(frame.buffer, frame.byteOffset, Math.min(frame.length, HEAD_BYTES)).toString('utf8');
  const match = HEAD.exec(head);
  if (!match) {
    const type = /^[\t\n\r ]*\[[\t\n\r ]*(\d{1,3})\b/.exec(head);
    return type ? { type: Number(type[1]), id: null } : null;
  }
  let id: unknown;
  try {
    id = JSON.parse(match[2]!);
  } catch {
    id = null;
  }
  return { type: Number(match[1]), id: typeof id === 'string' ? id : null };
}

export const CALL = 2;
export const CALLRESULT = 3;
export const CALLERROR = 4;

// What becomes of a frame nested deeper than MAX_FRAME_DEPTH, before anything recursive reads it:
// - a CALL is answered with the version's format CALLERROR (its codec's formatViolation);
// - a CALLRESULT or CALLERROR (a station's answer to a call of ours) stands for a CALLERROR of
//   that id, so the call it answers fails as a malformed answer would;
// - one whose id cannot be read is answered the way OCPP-J answers an unreadable message:
//   RpcFrameworkError with the id "-1" (a CALLRESULT or CALLERROR is never answered: dropped).
// The connection stays open in every case.
export type DeepFrameVerdict = { kind: 'answer'; frame: string } | { kind: 'instead'; frame: string } | { kind: 'drop' };

export function deepFrameVerdict(frame: Uint8Array, protocol: string | undefined): DeepFrameVerdict {
  const why = `message nested deeper than ${MAX_FRAME_DEPTH} levels`;
  const head = frameHead(frame);
  const answersOurs = head !== null && (head.type === CALLRESULT || head.type === CALLERROR);
  if (head?.id == null) {
    return answersOurs ? { kind: 'drop' } : { kind: 'answer', frame: JSON.stringify([CALLERROR, '-1', 'RpcFrameworkError', why, {}]) };
  }
  if (answersOurs) return { kind: 'instead', frame: JSON.stringify([CALLERROR, head.id, 'FormatViolation', `answer ${why}`, {}]) };
  if (head.type === CALL) {
    const code = codecOf(protocol)?.formatViolation ?? 'FormatViolation';
    return { kind: 'answer', frame: JSON.stringify([CALLERROR, head.id, code, why, {}]) };
  }
  return { kind: 'answer', frame: JSON.stringify([CALLERROR, head.id, 'MessageTypeNotSupported', why, {}]) };
}
