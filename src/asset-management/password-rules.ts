// What an asset's password may be in each OCPP version, and the passwords the service generates.
// Pure rules: no I/O.
import { randomBytes, randomInt } from 'node:crypto';
import { OCPP_1_6, OCPP_2_0_1, type OcppVersion } from '../kernel/ocpp-vocabulary.js';

// OCPP 2.0.1 passwordString (A00.FR.205): exactly these 71 characters.
const OCPP201_ALPHABET = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789*-_=:+|@.';

// Anchored without the `m` flag, so `$` cannot match before a trailing newline.
const PASSWORD_PATTERNS: Record<OcppVersion, RegExp> = {
  [OCPP_2_0_1]: /^[A-Za-z0-9*\-_=:+|@.]{16,40}$/,
  // The 1.6 AuthorizationKey is 16 to 20 bytes; hex pairs keep it to whole bytes.
  [OCPP_1_6]: /^(?:[0-9A-Fa-f]{2}){16,20}$/,
};

export const PASSWORD_RULES: Record<OcppVersion, string> = {
  [OCPP_2_0_1]: 'password for an OCPP 2.0.1 asset must be 16 to 40 characters from a-z, A-Z, 0-9 and * - _ = : + | @ .',
  [OCPP_1_6]:
    'password for an OCPP 1.6 asset must be 16 to 20 bytes written as hexadecimal: an even number of 32 to 40 characters from 0-9, a-f, A-F',
};

export function passwordProblem(version: OcppVersion, password: string): string | null {
  return typeof password === 'string' && PASSWORD_PATTERNS[version].test(password) ? null : PASSWORD_RULES[version];
}

// Always the maximum length the version allows: more entropy costs the caller nothing.
export function generatePassword(version: OcppVersion): string {
  if (version === OCPP_1_6) return randomBytes(20).toString('hex');
  let password = '';
  // randomInt rejects out-of-range draws instead of reducing modulo, so there is no bias.
  for (let i = 0; i < 40; i++) password += OCPP201_ALPHABET[randomInt(OCPP201_ALPHABET.length)];
  return password;
}
