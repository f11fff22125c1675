import { ConflictError } from '../kernel/errors.js';

// The 409 code of every conflict between a request and the OCPP security profiles in force.
export const CONFLICTING_SECURITY_PROFILE_STATE = 'CONFLICTING_SECURITY_PROFILE_STATE';

// Whether a model's OCPP URL is plain WebSocket, which a profile that needs TLS cannot use.
export function isPlainWebSocketUrl(url: string | null | undefined): boolean {
  return typeof url === 'string' && url.toLowerCase().startsWith('ws://');
}

// Profile 3 authenticates with client certificates: such an asset has no password to change or restore.
export function noPasswordOnProfile3(id: string): ConflictError {
  return new ConflictError(
    `Asset ${id} uses OCPP security profile 3, which authenticates with client certificates and has no password`,
    CONFLICTING_SECURITY_PROFILE_STATE,
  );
}
