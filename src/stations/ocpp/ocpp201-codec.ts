// OCPP 2.0.1 in the stations area's terms (ocpp-codec.ts). The types name the fields read of each
// message, as the version's schema gives them.
import type { OcppCodec } from './ocpp-codec.js';
import { storableText as text } from '../station-rules.js';

interface BootNotificationRequest {
  reason: string;
  chargingStation: {
    vendorName: string;
    model: string;
    serialNumber?: string;
    firmwareVersion?: string;
  };
}

interface StatusNotificationRequest {
  timestamp: string;
  connectorStatus: string;
  evseId: number;
  connectorId: number;
}

interface VariableAddress {
  component: { name: string };
  variable: { name: string };
}

// The password is the SecurityCtrlr's BasicAuthPassword variable.
interface SetVariablesRequest {
  setVariableData: Array<VariableAddress & { attributeValue: string }>;
}

const PASSWORD_VARIABLE: VariableAddress = { component: { name: 'SecurityCtrlr' }, variable: { name: 'BasicAuthPassword' } };

// An answer's result, every field unchecked until read.
interface SetVariableResult {
  attributeStatus?: unknown;
  attributeType?: unknown;
  component?: { name?: unknown };
  variable?: { name?: unknown };
}

export const ocpp201Codec: OcppCodec = {
  readBoot(request) {
    const station = (request as BootNotificationRequest).chargingStation;
    return {
      vendor: text(station.vendorName),
      model: text(station.model),
      serialNumber: text(station.serialNumber),
      firmwareVersion: text(station.firmwareVersion),
    };
  },
  readConnectorStatus(request, receivedAt) {
    const notification = request as StatusNotificationRequest;
    return {
      key: `${String(notification.evseId)}/${String(notification.connectorId)}`,
      status: { status: String(text(notification.connectorStatus)), timestamp: String(text(notification.timestamp)), receivedAt },
    };
  },
  passwordCall(password) {
    const params: SetVariablesRequest = { setVariableData: [{ ...PASSWORD_VARIABLE, attributeValue: password }] };
    return { method: 'SetVariables', params };
  },
  // SetVariables answers a list: it is `Accepted` only when the list is not empty and every result
  // accepts the password itself (SecurityCtrlr / BasicAuthPassword, the Actual attribute); a
  // result for anything else, or any refusal, is not an acceptance.
  readPasswordAnswer(response) {
    const answer = (response ?? {}) as { setVariableResult?: unknown };
    const results = Array.isArray(answer.setVariableResult) ? (answer.setVariableResult as unknown[]) : [];
    if (results.length === 0) return 'no result';
    const statuses: string[] = [];
    for (const r of results) {
      const result = (r ?? {}) as SetVariableResult;
      const status = typeof result.attributeStatus === 'string' ? result.attributeStatus : 'no status';
      const component = String(result.component?.name);
      const variable = String(result.variable?.name);
      const attribute = result.attributeType ?? 'Actual';
      if (component !== PASSWORD_VARIABLE.component.name || variable !== PASSWORD_VARIABLE.variable.name || attribute !== 'Actual') {
        return `${status} for ${component}/${variable}${attribute === 'Actual' ? '' : ` (${String(attribute)})`}`;
      }
      statuses.push(status);
    }
    // A refusal outweighs a reboot, which outweighs acceptance: the password switches only when no
    // result holds it back, and is left unconfirmed only when the station may still apply it.
    return statuses.find((s) => s !== 'Accepted' && s !== 'RebootRequired') ?? statuses.find((s) => s === 'RebootRequired') ?? 'Accepted';
  },
  formatViolation: 'FormatViolation',
};
