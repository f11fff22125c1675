// OCPP 1.6 in the stations area's terms (ocpp-codec.ts). The types name the fields read of each
// message, as the version's schema gives them.
import type { OcppCodec } from './ocpp-codec.js';
import { storableText as text } from '../station-rules.js';

interface BootNotificationRequest {
  chargePointVendor: string;
  chargePointModel: string;
  chargePointSerialNumber?: string;
  // The older field of the same number, still sent by some stations.
  chargeBoxSerialNumber?: string;
  firmwareVersion?: string;
}

interface StatusNotificationRequest {
  connectorId: number;
  errorCode: string;
  status: string;
  timestamp?: string;
}

// The password is the AuthorizationKey, set as its hex text in lower case.
interface ChangeConfigurationRequest {
  key: 'AuthorizationKey';
  value: string;
}

interface ChangeConfigurationResponse {
  status?: unknown;
}

export const ocpp16Codec: OcppCodec = {
  readBoot(request) {
    const boot = request as BootNotificationRequest;
    return {
      vendor: text(boot.chargePointVendor),
      model: text(boot.chargePointModel),
      serialNumber: text(boot.chargePointSerialNumber ?? boot.chargeBoxSerialNumber),
      firmwareVersion: text(boot.firmwareVersion),
    };
  },
  readConnectorStatus(request, receivedAt) {
    const notification = request as StatusNotificationRequest;
    const timestamp = typeof notification.timestamp === 'string' ? { timestamp: text(notification.timestamp)! } : {};
    return {
      key: String(notification.connectorId),
      status: { status: String(text(notification.status)), errorCode: String(text(notification.errorCode)), ...timestamp, receivedAt },
    };
  },
  passwordCall(password) {
    const params: ChangeConfigurationRequest = { key: 'AuthorizationKey', value: password.toLowerCase() };
    return { method: 'ChangeConfiguration', params };
  },
  // ChangeConfiguration answers one status.
  readPasswordAnswer(response) {
    const answer = (response ?? {}) as ChangeConfigurationResponse;
    return typeof answer.status === 'string' ? answer.status : 'no status';
  },
  // OCPP-J 1.6's name for it.
  formatViolation: 'FormationViolation',
};
