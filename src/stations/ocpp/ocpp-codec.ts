// What the service reads from a station's messages and sends it, in the terms of the rest of the
// stations area: each OCPP version's codec (ocpp16-codec.ts, ocpp201-codec.ts) knows its own
// messages, and nothing outside them branches on a version.
import { OCPP_1_6, OCPP_2_0_1, versionOfSubprotocol, type OcppVersion } from '../../kernel/ocpp-vocabulary.js';
import { ocpp16Codec } from './ocpp16-codec.js';
import { ocpp201Codec } from './ocpp201-codec.js';
import type { ConnectorStatusRecord } from '../stations-tables.js';

// What a BootNotification says the station is, each field as it can be stored.
export interface BootReport {
  vendor: string | null;
  model: string | null;
  serialNumber: string | null;
  firmwareVersion: string | null;
}

export interface ConnectorStatusReport {
  // The connector's key among the station's stored statuses.
  key: string;
  status: ConnectorStatusRecord;
}

export interface OcppCall {
  method: string;
  params: object;
}

// The codecs read requests the library has already held against the version's official JSON
// schemas (strict mode), so each may take a request for the type its version's schema gives it.
export interface OcppCodec {
  readBoot(request: unknown): BootReport;
  readConnectorStatus(request: unknown, receivedAt: string): ConnectorStatusReport;
  // The call that gives the station a new Basic Auth password.
  passwordCall(password: string): OcppCall;
  // The station's answer to it as one status, which the rotation maps to its outcome (only
  // `Accepted` switches the password). Answers are read defensively: anything else is a status
  // that is not `Accepted`.
  readPasswordAnswer(response: unknown): string;
  // The CALLERROR code for a message that is not well formed.
  readonly formatViolation: string;
}

const CODECS: Record<OcppVersion, OcppCodec> = { [OCPP_1_6]: ocpp16Codec, [OCPP_2_0_1]: ocpp201Codec };

// The codec of the subprotocol a socket speaks; undefined for a socket without one.
export function codecOf(protocol: string | undefined): OcppCodec | undefined {
  const version = versionOfSubprotocol(protocol);
  return version === undefined ? undefined : CODECS[version];
}
