// What the OCPP fuzzer sends. Frames are built as text: a JSON.stringify of a deep value would
// overflow the test's own stack, and numbers like 1e309 have no JSON.stringify form.
import { createRequire } from 'node:module';
import fc from 'fast-check';
import type { OcppVersion } from '../../src/kernel/ocpp-vocabulary.js';

// Every version the service speaks: a new one does not compile here until the fuzzer has its
// schemas and frames.
export type Version = OcppVersion;

const require = createRequire(import.meta.url);
type Schema = { $id: string };
export const SCHEMAS: Record<Version, Schema[]> = {
  '1.6': require('ocpp-rpc/lib/schemas/ocpp1_6.json') as Schema[],
  '2.0.1': require('ocpp-rpc/lib/schemas/ocpp2_0_1.json') as Schema[],
};

// Every action either version defines, handled or not.
const ACTIONS = [...new Set(Object.values(SCHEMAS).flatMap((list) => list.map((s) => s.$id).filter((id) => id.endsWith('.req')).map((id) => id.slice(4, -4))))].sort();
export const HANDLED = ['BootNotification', 'Heartbeat', 'StatusNotification'] as const;
type Handled = (typeof HANDLED)[number];
export const isHandled = (action: string): action is Handled => (HANDLED as readonly string[]).includes(action);

// The endpoint's limits the fuzzer knows of: frames over MAX_FRAME_BYTES are closed with 1009;
// frames nested deeper than MAX_DEPTH levels get a CALLERROR. Whether the frame's own array counts
// as a level is the endpoint's choice, so depths within one of the limit are not judged.
export const MAX_FRAME_BYTES = 256 * 1024;
export const MAX_DEPTH = 32;

// Placeholders in a value, replaced in the frame's text by what JSON.stringify cannot write.
const RAW_NUMBERS = ['1e309', '-1e309', '1e-400', '123456789012345678901234567890', '-0', '1.0', '0.1e1'];
const placeholder = (raw: string) => `@@raw:${raw}@@`;
const deepPlaceholder = (depth: number) => placeholder(`deep${depth}`);
// A value exactly `depth` levels deep, arrays and objects in turn.
function deep(depth: number): string {
  const open: string[] = [];
  const close: string[] = [];
  for (let level = 0; level < depth; level++) {
    open.push(level % 2 ? '{"a":' : '[');
    close.push(level % 2 ? '}' : ']');
  }
  return open.join('') + (depth % 2 ? '' : '0') + close.reverse().join('');
}

function render(value: unknown): string {
  return JSON.stringify(value).replace(/"@@raw:([^@"]+)@@"/g, (_, raw: string) => (raw.startsWith('deep') ? deep(Number(raw.slice(4))) : raw));
}

// Nesting the fuzzer picks: well inside the limit, well past it, or absurd.
const depthArb = fc.oneof(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 40, max: 300 }), fc.constantFrom(5_000, 50_000));
const oddNumber = fc.constantFrom(...RAW_NUMBERS).map(placeholder);
const oddValue = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  oddNumber,
  depthArb.map(deepPlaceholder),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.integer({ min: 100, max: 200_000 }).map((n) => 'x'.repeat(n)),
  fc.constantFrom(null, true, [], {}, '', -1, 2 ** 53, 0.5),
);
// Text a station may send in a field: anything Unicode has, including what a database or a log
// line may choke on (NUL, a lone surrogate, bidi overrides).
const text = (max: number) =>
  fc.oneof(
    fc.string({ unit: 'binary', minLength: 1, maxLength: max }),
    fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: max }),
    fc.constantFrom('\u0000', 'a\u0000b', '\ud800', '\udfff\ud800', '\u202e\u2066', '\ufeff', '😀', '\r\n', '%s%n', "'; --").filter((t) => t.length <= max),
  );
const timestamp = fc.date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2099-12-31T00:00:00Z'), noInvalidDate: true }).map((d) => d.toISOString());
const customData = fc.record({ vendorId: text(40) }, { requiredKeys: ['vendorId'] }).chain((c) => fc.option(oddValue, { nil: undefined }).map((extra) => (extra === undefined ? c : { ...c, extra })));

// Payloads the schemas accept (the oracle still decides: an odd string may make one invalid).
const VALID: Record<Version, Record<Handled, fc.Arbitrary<Record<string, unknown>>>> = {
  '2.0.1': {
    BootNotification: fc.record(
      {
        reason: fc.constantFrom('ApplicationReset', 'FirmwareUpdate', 'LocalReset', 'PowerUp', 'RemoteReset', 'ScheduledReset', 'Triggered', 'Unknown', 'Watchdog'),
        chargingStation: fc.record({ model: text(20), vendorName: text(50), serialNumber: text(25), firmwareVersion: text(50), modem: fc.record({ iccid: text(20), imsi: text(20) }, { requiredKeys: [] }) }, { requiredKeys: ['model', 'vendorName'] }),
        customData,
      },
      { requiredKeys: ['reason', 'chargingStation'] },
    ),
    Heartbeat: fc.record({ customData }, { requiredKeys: [] }),
    // Few connectors, as on a real station: the service keeps a bounded number per station.
    StatusNotification: fc.record(
      { timestamp, connectorStatus: fc.constantFrom('Available', 'Occupied', 'Reserved', 'Unavailable', 'Faulted'), evseId: fc.integer({ min: 1, max: 2 }), connectorId: fc.integer({ min: 1, max: 2 }), customData },
      { requiredKeys: ['timestamp', 'connectorStatus', 'evseId', 'connectorId'] },
    ),
  },
  '1.6': {
    BootNotification: fc.record(
      { chargePointVendor: text(20), chargePointModel: text(20), chargePointSerialNumber: text(25), chargeBoxSerialNumber: text(25), firmwareVersion: text(50), iccid: text(20), imsi: text(20), meterType: text(25), meterSerialNumber: text(25) },
      { requiredKeys: ['chargePointVendor', 'chargePointModel'] },
    ),
    Heartbeat: fc.constant({}),
    StatusNotification: fc.record(
      {
        connectorId: fc.integer({ min: 0, max: 4 }),
        errorCode: fc.constantFrom('ConnectorLockFailure', 'EVCommunicationError', 'GroundFailure', 'HighTemperature', 'InternalError', 'LocalListConflict', 'NoError', 'OtherError', 'OverCurrentFailure', 'PowerMeterFailure', 'PowerSwitchFailure', 'ReaderFailure', 'ResetFailure', 'UnderVoltage', 'OverVoltage', 'WeakSignal'),
        status: fc.constantFrom('Available', 'Preparing', 'Charging', 'SuspendedEVSE', 'SuspendedEV', 'Finishing', 'Reserved', 'Unavailable', 'Faulted'),
        info: text(50),
        timestamp,
        vendorId: text(255),
        vendorErrorCode: text(50),
      },
      { requiredKeys: ['connectorId', 'errorCode', 'status'] },
    ),
  },
};

export const validCall = (version: Version) =>
  fc.constantFrom(...HANDLED).chain((action) => VALID[version][action].map((params) => ({ action, params })));

// A valid payload broken one way, or replaced by anything at all.
function broken(params: Record<string, unknown>): fc.Arbitrary<unknown> {
  const keys = Object.keys(params);
  const someKey = keys.length ? fc.constantFrom(...keys) : fc.constant('field');
  return fc.oneof(
    someKey.map((k) => Object.fromEntries(Object.entries(params).filter(([key]) => key !== k))),
    fc.tuple(someKey, oddValue).map(([k, v]) => ({ ...params, [k]: v })),
    fc.tuple(fc.string({ maxLength: 12 }), oddValue).map(([k, v]) => ({ ...params, [k]: v })),
    oddValue,
  );
}

const idArb = fc.oneof(
  { weight: 6, arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 36 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  // Few distinct ids, so duplicates in one session are common.
  { weight: 3, arbitrary: fc.constantFrom('1', '2', 'dup', '-1', '') },
  { weight: 1, arbitrary: fc.integer({ min: 1000, max: 100_000 }).map((n) => 'i'.repeat(n)) },
);

const anyAction = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...ACTIONS) },
  { weight: 1, arbitrary: fc.constantFrom('heartbeat', 'Boot Notification', 'BootNotification ', '__proto__', 'constructor', 'Heartbeat.req') },
  { weight: 1, arbitrary: fc.string({ maxLength: 30 }) },
);

// Any action with a payload: a valid one of a handled action, a broken one, or anything.
export const callParams = (version: Version) =>
  fc.oneof(
    validCall(version),
    validCall(version).chain(({ action, params }) => broken(params).map((p) => ({ action, params: p }))),
    fc.tuple(anyAction, fc.oneof(fc.jsonValue({ maxDepth: 3 }), fc.constant({}), oddValue)).map(([action, params]) => ({ action, params })),
  );

export interface Frame {
  data: string | Buffer;
  binary: boolean;
  // A text frame whose bytes are not UTF-8 (ws closes the socket with 1007).
  badUtf8?: boolean;
}

// A frame prints as its first bytes in a failure report: a frame may be 256 KiB.
function frame(data: string | Buffer, binary: boolean, badUtf8 = false): Frame {
  const f: Frame = { data, binary, ...(badUtf8 ? { badUtf8 } : {}) };
  Object.defineProperty(f, fc.toStringMethod, { value: () => `${binary ? 'binary ' : ''}${describeFrame(f)}`, enumerable: false });
  return f;
}
const textFrame = (data: string): Frame => frame(data, false);

export function describeFrame(f: Frame): string {
  const text = typeof f.data === 'string' ? f.data : f.data.toString('utf8');
  return text.length > 200 ? `${JSON.stringify(text.slice(0, 200))}… (${Buffer.byteLength(f.data)} bytes)` : JSON.stringify(text);
}
const callText = (id: unknown, action: unknown, params: unknown) => `[2,${render(id)},${render(action)},${render(params)}]`;

const garbage: fc.Arbitrary<Frame> = fc.oneof(
  fc.string({ maxLength: 60 }).map(textFrame),
  fc.constantFrom('', '{', '[2,', 'null', '"x"', '42', '{}', '[]', 'true', '[2]', '[3]', '[4]', '\u0000', '['.repeat(5000)).map(textFrame),
  // Message type ids that are not CALL, CALLRESULT or CALLERROR, or not numbers.
  fc.tuple(fc.constantFrom(0, 1, 5, 99, -1, 2.5, '2', null), idArb, anyAction, fc.jsonValue({ maxDepth: 2 })).map(([t, id, a, p]) => textFrame(`[${render(t)},${render(id)},${render(a)},${render(p)}]`)),
  // Wrong arity.
  idArb.map((id) => textFrame(`[2,${render(id)}]`)),
  fc.tuple(idArb, anyAction).map(([id, a]) => textFrame(`[2,${render(id)},${render(a)}]`)),
  fc.tuple(idArb, fc.constantFrom(...HANDLED), fc.array(fc.jsonValue({ maxDepth: 1 }), { minLength: 1, maxLength: 3 })).map(([id, a, extra]) => textFrame(`[2,${render(id)},${render(a)},{},${extra.map(render).join(',')}]`)),
  // Ids and actions of the wrong type.
  fc.tuple(fc.constantFrom(123, null, ['x'], { id: 1 }, true), fc.constantFrom(...HANDLED)).map(([id, a]) => textFrame(callText(id, a, {}))),
  fc.tuple(idArb, fc.constantFrom(5, null, ['Heartbeat'], {})).map(([id, a]) => textFrame(callText(id, a, {}))),
  // Answers to calls the service never made.
  fc.tuple(idArb, fc.jsonValue({ maxDepth: 2 })).map(([id, p]) => textFrame(`[3,${render(id)},${render(p)}]`)),
  fc.tuple(idArb, fc.string({ maxLength: 20 })).map(([id, code]) => textFrame(`[4,${render(id)},${render(code)},"",{}]`)),
  // A whole frame nested deep, and a deep answer to a call never made.
  depthArb.map((d) => textFrame(deep(d))),
  fc.tuple(idArb, fc.integer({ min: 40, max: 300 })).map(([id, d]) => textFrame(`[3,${render(id)},${deep(d)}]`)),
  // Binary frames of any bytes.
  fc.uint8Array({ minLength: 1, maxLength: 40 }).map((bytes) => frame(Buffer.from(bytes), true)),
);

export const callFrame = (version: Version): fc.Arbitrary<Frame> =>
  fc.tuple(idArb, callParams(version), fc.boolean()).map(([id, { action, params }, binary]) => {
    const text = callText(id, action, params);
    // Sometimes as a binary frame: the endpoint reads both alike.
    return binary && text.length < 2000 ? frame(Buffer.from(text), true) : textFrame(text);
  });

export const frameArb = (version: Version): fc.Arbitrary<Frame> => fc.oneof({ weight: 2, arbitrary: callFrame(version) }, { weight: 1, arbitrary: garbage });

// Frames after which the socket is closed: over the size limit (1009), a text frame that is not
// UTF-8 (1007).
export const closingFrame: fc.Arbitrary<Frame> = fc.oneof(
  fc.integer({ min: MAX_FRAME_BYTES + 1, max: MAX_FRAME_BYTES + 64 * 1024 }).map((n) => textFrame(callText('big', 'DataTransfer', { vendorId: 'x', data: 'x'.repeat(n) }))),
  fc.constant(frame(Buffer.from([0x5b, 0x32, 0x2c, 0xff, 0xfe, 0x5d]), false, true)),
);
