// How the password bytes a station sends in its Basic Auth header compare with a stored hash.
import { OCPP_1_6, OCPP_2_0_1, type OcppVersion } from '../kernel/ocpp-vocabulary.js';
import { passwordScheme, verifyPassword } from './password-hashing.js';
import { passwordProblem } from './password-rules.js';

// What a station's Basic Auth password bytes stand for, as the text the API took,
// or null when they cannot be a password of that version at all (refused without hashing).
// 2.0.1 sends the passwordString as UTF-8. 1.6 sends the AuthorizationKey's 16-20 raw bytes, which
// are compared as their hex text; 32-40 bytes of hex text are the common station quirk of sending
// the text itself. The two lengths never overlap, so neither reading can shadow the other.
export function stationPasswordText(version: OcppVersion, raw: Buffer): string | null {
  if (!Buffer.isBuffer(raw)) return null;
  if (version === OCPP_2_0_1) {
    const text = raw.toString('utf8');
    // The alphabet is ASCII, so invalid UTF-8 (decoded to U+FFFD) fails the rule too.
    return passwordProblem(OCPP_2_0_1, text) === null ? text : null;
  }
  if (raw.length >= 16 && raw.length <= 20) return raw.toString('hex');
  const text = raw.toString('latin1');
  return passwordProblem(OCPP_1_6, text) === null ? text.toLowerCase() : null;
}

// The texts a station's password is compared as against one stored hash: none when it cannot be a
// password of that version, else one; two for a 1.6 key stored by plain `scrypt` before hex text
// was normalised (it may carry upper case). Against a slow hash each text is one slow run, and a
// station login chooses which one to run (station-credentials-service.ts).
export function stationPasswordTexts(version: OcppVersion, raw: Buffer, encoded: string): string[] {
  const text = stationPasswordText(version, raw);
  const scheme = passwordScheme(encoded);
  if (text === null || scheme === null) return [];
  return version === OCPP_1_6 && scheme === 'scrypt' && text.toUpperCase() !== text ? [text, text.toUpperCase()] : [text];
}

// Whether any reading matches: every run through the bounded hashing queue, one after the other.
export async function verifyStationPassword(version: OcppVersion, raw: Buffer, encoded: string): Promise<boolean> {
  for (const text of stationPasswordTexts(version, raw, encoded)) if (await verifyPassword(text, encoded)) return true;
  return false;
}
