import { OAuthError } from './oauth-error.js';

// Control characters (and unpaired surrogates) belong in no token request: PostgreSQL refuses NUL in
// text, and no client id, secret, scope or audience this service knows contains one.
const FORBIDDEN = /[\p{Cc}\p{Cs}]/u;

// Far above any id, secret, scope list or audience this service issues or accepts.
export const MAX_PARAMETER_LENGTH = 1024;

// One parameter of the token request: absent, or a single string of sane length and characters.
export function tokenParameter(value: unknown, name: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  // A repeated form parameter arrives as an array (RFC 6749 §3.2: parameters MUST NOT repeat).
  if (typeof value !== 'string') throw new OAuthError('invalid_request', `${name} must be a single string`);
  if (value.length > MAX_PARAMETER_LENGTH) throw new OAuthError('invalid_request', `${name} is longer than ${MAX_PARAMETER_LENGTH} characters`);
  if (FORBIDDEN.test(value)) throw new OAuthError('invalid_request', `${name} must not contain control characters`);
  return value;
}

// Anywhere in the request, parameters the endpoint ignores included. Iterative: a 64 KiB JSON body
// can nest deeper than the call stack. The message names no value, which may be a secret.
export function refuseControlCharacters(parts: Record<string, unknown>): void {
  const pending: unknown[] = [parts];
  while (pending.length > 0) {
    const value = pending.pop();
    if (typeof value === 'string') {
      if (FORBIDDEN.test(value)) throw new OAuthError('invalid_request', 'the request must not contain control characters');
    } else if (Array.isArray(value)) {
      for (const item of value) pending.push(item);
    } else if (typeof value === 'object' && value !== null) {
      for (const [key, inner] of Object.entries(value)) pending.push(key, inner);
    }
  }
}
