// What a station may get back for each frame it sent: the oracle reads a frame the way the
// endpoint does and says which answers, and which closes, are acceptable.
import ocppRpc from 'ocpp-rpc';
import { describeFrame, isHandled, MAX_DEPTH, MAX_FRAME_BYTES, SCHEMAS, type Frame, type Version } from './ocpp-fuzz-frames.js';

const VALIDATORS = {
  '1.6': ocppRpc.createValidator('ocpp1.6', SCHEMAS['1.6']),
  '2.0.1': ocppRpc.createValidator('ocpp2.0.1', SCHEMAS['2.0.1']),
};

// The endpoint closes a station with more CALLs of its own in progress than this (1008).
const MAX_CALLS_IN_PROGRESS = 4;
// The closes ocpp-rpc makes itself: 1002 once a station has sent more unreadable frames in a row
// than maxBadMessages (Infinity unless configured), and 1000 "Unable to send call result" when it
// could not send the answer to a call it read. Only the first is a station's due: the second
// leaves a call unanswered (a CALLERROR whose details JSON.stringify cannot write, for one).
const UNREADABLE_CLOSES = [1002];
// The endpoint terminates a station once about this much waits to be sent to it.
const MAX_UNSENT_BYTES = 2 ** 20;

export type Answer = { kind: 'result'; id: string; payload: unknown } | { kind: 'error'; id: string; code: string };

// A received message as the station reads it: null when it is neither a well-formed CALLRESULT
// nor a well-formed CALLERROR.
export function readAnswer(text: string): Answer | null {
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    return null;
  }
  if (!Array.isArray(message) || typeof message[1] !== 'string') return null;
  const isObject = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v);
  if (message[0] === 3 && message.length === 3 && isObject(message[2])) return { kind: 'result', id: message[1], payload: message[2] };
  if (message[0] === 4 && message.length === 5 && typeof message[2] === 'string' && typeof message[3] === 'string' && isObject(message[4])) {
    return { kind: 'error', id: message[1], code: message[2] };
  }
  return null;
}

// Nesting depth of a parsed value, without recursion (a frame may be 50,000 levels deep).
function depthOf(value: unknown): number {
  let max = 0;
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length) {
    const [v, d] = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    max = Math.max(max, d);
    for (const child of Object.values(v)) stack.push([child, d + 1]);
  }
  return max;
}

// The library's validator throws the CALLERROR a violation calls for; its schemas are synchronous.
function conforms(version: Version, schema: string, value: unknown): boolean {
  try {
    void VALIDATORS[version].validate(schema, value);
    return true;
  } catch {
    return false;
  }
}

const SCHEMA_VIOLATIONS = new Set([
  'FormatViolation',
  'FormationViolation',
  'PropertyConstraintViolation',
  'OccurenceConstraintViolation',
  'OccurrenceConstraintViolation',
  'TypeConstraintViolation',
  'ProtocolError',
]);
// OCPP 2.0.1 calls it FormatViolation, OCPP 1.6 FormationViolation (FormatViolation since its
// errata); ocpp-rpc translates for 1.6. Either is accepted for a frame nested too deep.
const TOO_DEEP = new Set(['FormatViolation', 'FormationViolation']);

export interface Expectation {
  // The ids an answer to this frame may carry ('-1': ocpp-rpc's id for a frame it could not read).
  ids: string[];
  // A well-formed CALL: it must be answered while the socket is open.
  required: boolean;
  // A CALL frame (counts towards the calls in progress).
  isCall: boolean;
  // Read the frame the way the endpoint does: no message id, not an array, …
  unreadable: boolean;
  accepts(answer: Answer): boolean;
  describe: string;
}

const NOTHING: Pick<Expectation, 'ids' | 'required' | 'accepts'> = { ids: [], required: false, accepts: () => false };

export function expectationOf(frame: Frame, version: Version, duplicateIds: ReadonlySet<string>): Expectation {
  const text = typeof frame.data === 'string' ? frame.data : frame.data.toString('utf8');
  const base = { isCall: false, unreadable: true, describe: describeFrame(frame) };
  if (frame.badUtf8 || text.length === 0 || Buffer.byteLength(text) > MAX_FRAME_BYTES) return { ...base, ...NOTHING };
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    return { ...base, ids: ['-1'], required: false, accepts: (a) => a.kind === 'error' };
  }
  const [type, id, action, params] = Array.isArray(message) ? (message as unknown[]) : [];
  const ownId = typeof id === 'string' ? [id] : [];
  // No CALL to answer: ocpp-rpc answers with id '-1' (or not at all); the frame's own id is fine too.
  if (!Array.isArray(message) || typeof type !== 'number' || typeof id !== 'string' || ![2, 3, 4].includes(type)) {
    return { ...base, ids: ['-1', ...ownId], required: false, accepts: (a) => a.kind === 'error' };
  }
  const depth = depthOf(message);
  // A CALLRESULT or CALLERROR for a call the service never made is never answered, unless it is
  // nested too deep: every such frame may get a CALLERROR.
  if (type !== 2) {
    if (depth > MAX_DEPTH + 1) return { ...base, ids: ['-1', id], required: false, accepts: (a) => a.kind === 'error' && TOO_DEEP.has(a.code) };
    return { ...base, ...NOTHING, unreadable: true };
  }
  const call = { ...base, isCall: true, unreadable: false, ids: [id], required: true };
  const duplicate = (a: Answer) => duplicateIds.has(id) && a.kind === 'error' && a.code === 'RpcFrameworkError';
  if (typeof action !== 'string') return { ...call, unreadable: true, accepts: (a) => a.kind === 'error' };
  if (depth > MAX_DEPTH + 1) {
    // A deep frame is answered before it is parsed, by the id read from its first bytes; an id too
    // long to read there gets the answer of an unreadable message (docs/stations.md).
    const unreadableId = (a: Answer) => a.id === '-1' && a.kind === 'error' && a.code === 'RpcFrameworkError';
    return {
      ...call,
      ids: [id, '-1'],
      accepts: (a) => unreadableId(a) || duplicate(a) || (a.kind === 'error' && (TOO_DEEP.has(a.code) || (!isHandled(action) && a.code === 'NotImplemented'))),
    };
  }
  const nearLimit = depth > MAX_DEPTH;
  if (!isHandled(action)) return { ...call, accepts: (a) => duplicate(a) || (a.kind === 'error' && (a.code === 'NotImplemented' || (nearLimit && TOO_DEEP.has(a.code)))) };
  const valid = conforms(version, `urn:${action}.req`, params);
  return {
    ...call,
    accepts: (a) => {
      if (duplicate(a)) return true;
      if (nearLimit && a.kind === 'error' && TOO_DEEP.has(a.code)) return true;
      if (!valid) return a.kind === 'error' && SCHEMA_VIOLATIONS.has(a.code);
      if (a.kind !== 'result' || !conforms(version, `urn:${action}.conf`, a.payload)) return false;
      return action !== 'BootNotification' || (a.payload as { status?: unknown }).status === 'Accepted';
    },
  };
}

// Pairs every answer with a distinct frame that accepts it (augmenting paths; sessions are small).
// Returns the answers no frame accounts for, and which frames were answered. An answer tries the
// frames that must be answered first: an augmenting path never unmatches a frame, so a CALL whose
// own id is '-1' keeps its answer instead of losing it to an unreadable frame that may get one.
export function matchAnswers(expectations: Expectation[], answers: Answer[]): { unmatched: Answer[]; answered: boolean[] } {
  const owner: Array<number | undefined> = new Array(expectations.length).fill(undefined);
  const requiredFirst = expectations.map((_, i) => i).sort((a, b) => Number(expectations[b]!.required) - Number(expectations[a]!.required));
  const candidates = answers.map((a) => requiredFirst.filter((i) => expectations[i]!.ids.includes(a.id) && expectations[i]!.accepts(a)));
  const unmatched: Answer[] = [];
  const tryAssign = (answer: number, seen: Set<number>): boolean => {
    for (const frame of candidates[answer]!) {
      if (seen.has(frame)) continue;
      seen.add(frame);
      if (owner[frame] === undefined || tryAssign(owner[frame], seen)) {
        owner[frame] = answer;
        return true;
      }
    }
    return false;
  };
  answers.forEach((a, i) => {
    if (!tryAssign(i, new Set())) unmatched.push(a);
  });
  return { unmatched, answered: owner.map((o) => o !== undefined) };
}

export interface Seen {
  frames: Frame[];
  // Most CALLs sent back to back (an RPC client's: its concurrency), and most bytes.
  pipelined: number;
  pipelinedBytes: number;
  inbound: Array<{ text: string; binary: boolean }>;
  closedByServer: { code: number; reason: string } | undefined;
}

// The checks every reading session shares: each message is a well-formed answer to a frame of the
// session; a socket the endpoint closed was closed with a code this session may get; one it kept
// open answered every CALL.
export function judge(label: string, version: Version, seen: Seen): string[] {
  const problems: string[] = [];
  const ids = seen.frames.map((f) => expectationOf(f, version, new Set()).ids[0]);
  const duplicates = new Set(ids.filter((id, i) => id !== undefined && ids.indexOf(id) !== i) as string[]);
  const expectations: Expectation[] = seen.frames.map((f) => expectationOf(f, version, duplicates));
  const answers: Answer[] = [];
  for (const message of seen.inbound) {
    const answer = message.binary ? null : readAnswer(message.text);
    if (answer) answers.push(answer);
    else problems.push(`${label}: a message that is neither a CALLRESULT nor a CALLERROR: ${message.text.slice(0, 300)}`);
  }
  const { unmatched, answered } = matchAnswers(expectations, answers);
  for (const a of unmatched) {
    const sent = expectations.filter((e) => e.ids.includes(a.id)).map((e) => e.describe);
    const what = a.kind === 'error' ? `CALLERROR ${a.code}` : `CALLRESULT ${JSON.stringify(a.payload).slice(0, 100)}`;
    const id = JSON.stringify(a.id.length > 40 ? `${a.id.slice(0, 40)}…` : a.id);
    problems.push(`${label}: ${what} (id ${id}) fits no frame of the session; frames with that id: ${sent.length ? sent.join(' | ') : 'none'}`);
  }
  const closes = new Set<number>();
  const oversize = seen.frames.some((f) => Buffer.byteLength(f.data) > MAX_FRAME_BYTES);
  if (oversize) closes.add(1009);
  if (seen.frames.some((f) => f.badUtf8)) closes.add(1007);
  if (seen.pipelined > MAX_CALLS_IN_PROGRESS) closes.add(1008);
  // Answers to over a MiB of calls at once may wait to be sent even to a station that reads.
  if (seen.pipelinedBytes > MAX_UNSENT_BYTES) closes.add(1006);
  if (expectations.some((e) => e.unreadable)) for (const code of UNREADABLE_CLOSES) closes.add(code);
  if (seen.closedByServer) {
    if (!closes.has(seen.closedByServer.code)) {
      problems.push(`${label}: closed with ${seen.closedByServer.code} "${seen.closedByServer.reason}", not a close this session may get (${[...closes].join(', ') || 'none'})`);
    }
  } else {
    if (oversize) problems.push(`${label}: a frame over ${MAX_FRAME_BYTES} bytes did not close the socket`);
    expectations.forEach((e, i) => {
      if (e.required && !answered[i]) problems.push(`${label}: no acceptable answer to ${e.describe}`);
    });
  }
  return problems;
}
