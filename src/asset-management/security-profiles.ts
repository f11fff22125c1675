// The 409 code of every conflict between a request and the OCPP security profiles in force.
export const CONFLICTING_SECURITY_PROFILE_STATE = 'CONFLICTING_SECURITY_PROFILE_STATE';

// Whether a model's OCPP URL is plain WebSocket, which a profile that needs TLS cannot use.
export function isPlainWebSocketUrl(url: string | null | undefined): boolean {
  return typeof url === 'string' && url.toLowerCase().startsWith('ws://');
}
