import { randomBytes, randomInt, scrypt, timingSafeEqual, type BinaryLike, type ScryptOptions } from 'node:crypto';
// A type only, erased at run time: this file of rules loads nothing of the database.
import type { OcppVersion } from './asset-management-tables.js';
import { passwordHashQueue } from './password-hash-queue.js';

// OCPP 2.0.1 passwordString (A00.FR.205): exactly these 71 characters.
const OCPP201_ALPHABET = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789*-_=:+|@.';

// Anchored without the `m` flag, so `$` cannot match before a trailing newline.
const PASSWORD_PATTERNS: Record<OcppVersion, RegExp> = {
  '2.0.1': /^[A-Za-z0-9*\-_=:+|@.]{16,40}$/,
  // The 1.6 AuthorizationKey is 16 to 20 bytes; hex pairs keep it to whole bytes.
  '1.6': /^(?:[0-9A-Fa-f]{2}){16,20}$/,
};

export const PASSWORD_RULES: Record<OcppVersion, string> = {
  '2.0.1': 'password for an OCPP 2.0.1 asset must be 16 to 40 characters from a-z, A-Z, 0-9 and * - _ = : + | @ .',
  '1.6':
    'password for an OCPP 1.6 asset must be 16 to 20 bytes written as hexadecimal: an even number of 32 to 40 characters from 0-9, a-f, A-F',
};

export function passwordProblem(version: OcppVersion, password: string): string | null {
  return typeof password === 'string' && PASSWORD_PATTERNS[version].test(password) ? null : PASSWORD_RULES[version];
}

// Always the maximum length the version allows: more entropy costs the caller nothing.
export function generatePassword(version: OcppVersion): string {
  if (version === '1.6') return randomBytes(20).toString('hex');
  let password = '';
  // randomInt rejects out-of-range draws instead of reducing modulo, so there is no bias.
  for (let i = 0; i < 40; i++) password += OCPP201_ALPHABET[randomInt(OCPP201_ALPHABET.length)];
  return password;
}

export interface ScryptParams {
  N: number;
  r: number;
  p: number;
  keyLength: number;
  saltLength: number;
}

// N=2^15, r=8 measured at about 100 ms of CPU (median) per hash on the 2-core target and
// needs 32 MiB; 2^16 doubles both, which is too much per request on a 4-thread libuv pool.
export const DEFAULT_SCRYPT_PARAMS: ScryptParams = Object.freeze({
  N: 2 ** 15,
  r: 8,
  p: 1,
  keyLength: 32,
  saltLength: 16,
});

// Bounds also apply to parameters read back from storage, so a corrupted or planted hash
// cannot make verification allocate gigabytes or run for minutes.
const MAX_SCRYPT_MEMORY = 256 * 1024 * 1024;

function scryptParamsValid(N: number, r: number, p: number): boolean {
  return (
    Number.isSafeInteger(N) &&
    N >= 2 &&
    (N & (N - 1)) === 0 &&
    Number.isSafeInteger(r) &&
    r >= 1 &&
    r <= 32 &&
    Number.isSafeInteger(p) &&
    p >= 1 &&
    p <= 16 &&
    128 * N * r <= MAX_SCRYPT_MEMORY
  );
}

function scryptAsync(password: BinaryLike, salt: Buffer, keyLength: number, N: number, r: number, p: number): Promise<Buffer> {
  // Node's default maxmem (32 MiB) is just under what N=2^15, r=8 needs, so it would throw;
  // OpenSSL needs about 128*r*(N+p+2) bytes and this allows twice that.
  const options: ScryptOptions = { N, r, p, maxmem: 2 * 128 * r * (N + p + 2) };
  // The callback form runs on the libuv pool; scryptSync would stall every request for ~100 ms.
  // The queue bounds how many run at once (see password-hash-queue.ts).
  return passwordHashQueue(
    () =>
      new Promise<Buffer>((resolve, reject) => {
        scrypt(password, salt, keyLength, options, (err, key) => (err ? reject(err) : resolve(key)));
      }),
  );
}

export async function hashPassword(password: string, params: ScryptParams = DEFAULT_SCRYPT_PARAMS): Promise<string> {
  const { N, r, p, keyLength, saltLength } = params;
  if (!scryptParamsValid(N, r, p)) throw new RangeError(`unsupported scrypt parameters N=${N}, r=${r}, p=${p}`);
  if (!Number.isSafeInteger(keyLength) || keyLength < 16 || keyLength > 128) throw new RangeError('scrypt keyLength must be 16 to 128');
  if (!Number.isSafeInteger(saltLength) || saltLength < 16 || saltLength > 64) throw new RangeError('scrypt saltLength must be 16 to 64');
  const salt = randomBytes(saltLength);
  const key = await scryptAsync(password, salt, keyLength, N, r, p);
  // Parameters travel with the hash so DEFAULT_SCRYPT_PARAMS can be raised without breaking old hashes.
  return `scrypt$N=${N},r=${r},p=${p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

const ENCODED_PATTERN = /^scrypt\$N=([1-9]\d{0,9}),r=([1-9]\d{0,2}),p=([1-9]\d{0,2})\$([A-Za-z0-9+/]+={0,2})\$([A-Za-z0-9+/]+={0,2})$/;

// Buffer.from(…, 'base64') silently skips junk, so only a value that round-trips counts.
function strictBase64(text: string): Buffer | null {
  const bytes = Buffer.from(text, 'base64');
  return bytes.length > 0 && bytes.toString('base64') === text ? bytes : null;
}

export async function verifyPassword(password: string, encoded: string): Promise<boolean> {
  if (typeof password !== 'string' || typeof encoded !== 'string') return false;
  const match = ENCODED_PATTERN.exec(encoded);
  if (!match) return false;
  const [, nText, rText, pText, saltText, keyText] = match as unknown as [string, string, string, string, string, string];
  const N = Number(nText);
  const r = Number(rText);
  const p = Number(pText);
  if (!scryptParamsValid(N, r, p)) return false;
  const salt = strictBase64(saltText);
  const expected = strictBase64(keyText);
  if (!salt || !expected || salt.length < 8 || expected.length < 16 || expected.length > 128) return false;
  const actual = await scryptAsync(password, salt, expected.length, N, r, p);
  // Same length by construction, which timingSafeEqual requires.
  return timingSafeEqual(actual, expected);
}
