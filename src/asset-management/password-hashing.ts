// How an asset's password is stored and checked: the hash schemes, their parameters and bounds, and
// the one decision of which scheme a new password gets (hashAssetPassword).
import { createHmac, randomBytes, scrypt, timingSafeEqual, type BinaryLike, type ScryptOptions } from 'node:crypto';
import argon2 from 'argon2';
import { OCPP_1_6, type OcppVersion } from '../kernel/ocpp-vocabulary.js';
import { passwordHashQueue } from './password-hash-queue.js';

// Where a slow hash runs: the process's bounded hashing queue (the default), or at once, for a
// caller that already holds a turn in that queue (a station login's turn in the stations' fair
// login queue).
export type HashRunner = <T>(task: () => Promise<T>) => Promise<T>;
export const RUN_NOW: HashRunner = (task) => task();

export interface Argon2Params {
  memoryKiB: number;
  iterations: number;
  parallelism: number;
  hashLength: number;
  saltLength: number;
}

// Supplied passwords get argon2id with the first configuration of OWASP's Password Storage Cheat
// Sheet (19 MiB, 2 passes, 1 lane). On the 2-core target it costs about a quarter of the CPU of the
// scrypt N=2^15 this service used before (28-33 ms against 124-126 ms of CPU per hash, side by
// side, 2026-11-25), which was itself below OWASP's scrypt minimum (N=2^17, four times that cost):
// stronger by the standard's measure, and a burst of password changes or a storm of station logins
// drains about four times faster.
export const DEFAULT_ARGON2_PARAMS: Argon2Params = Object.freeze({
  memoryKiB: 19 * 1024,
  iterations: 2,
  parallelism: 1,
  hashLength: 32,
  saltLength: 16,
});

// scrypt made the supplied-password hashes stored before argon2id; they keep verifying with the
// parameters they carry. Tests make such hashes with hashScryptPassword.
export interface ScryptParams {
  N: number;
  r: number;
  p: number;
  keyLength: number;
  saltLength: number;
}

// Bounds also apply to parameters read back from storage, so a corrupted or planted hash
// cannot make verification allocate gigabytes or run for minutes.
const MAX_HASH_MEMORY = 256 * 1024 * 1024;

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
    128 * N * r <= MAX_HASH_MEMORY
  );
}

function scryptAsync(password: BinaryLike, salt: Buffer, keyLength: number, N: number, r: number, p: number, run: HashRunner = passwordHashQueue): Promise<Buffer> {
  // Node's default maxmem (32 MiB) is just under what N=2^15, r=8 needs, so it would throw;
  // OpenSSL needs about 128*r*(N+p+2) bytes and this allows twice that.
  const options: ScryptOptions = { N, r, p, maxmem: 2 * 128 * r * (N + p + 2) };
  // The callback form runs on the libuv pool; scryptSync would stall every request for ~100 ms.
  // The queue bounds how many run at once (see password-hash-queue.ts).
  return run(
    () =>
      new Promise<Buffer>((resolve, reject) => {
        scrypt(password, salt, keyLength, options, (err, key) => (err ? reject(err) : resolve(key)));
      }),
  );
}

// The scheme of supplied passwords before argon2id, kept to make legacy hashes in tests.
export async function hashScryptPassword(password: string, params: ScryptParams): Promise<string> {
  const { N, r, p, keyLength, saltLength } = params;
  if (!scryptParamsValid(N, r, p)) throw new RangeError(`unsupported scrypt parameters N=${N}, r=${r}, p=${p}`);
  if (!Number.isSafeInteger(keyLength) || keyLength < 16 || keyLength > 128) throw new RangeError('scrypt keyLength must be 16 to 128');
  if (!Number.isSafeInteger(saltLength) || saltLength < 16 || saltLength > 64) throw new RangeError('scrypt saltLength must be 16 to 64');
  const salt = randomBytes(saltLength);
  const key = await scryptAsync(password, salt, keyLength, N, r, p);
  return `scrypt$N=${N},r=${r},p=${p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

// Bounds for parameters read back from storage as much as for our own: a corrupted or planted
// hash must not make verification allocate gigabytes, run for minutes or start many threads.
function argon2ParamsValid(m: number, t: number, p: number): boolean {
  return (
    Number.isSafeInteger(p) &&
    p >= 1 &&
    p <= 4 &&
    Number.isSafeInteger(m) &&
    m >= 8 * p &&
    m * 1024 <= MAX_HASH_MEMORY &&
    Number.isSafeInteger(t) &&
    t >= 1 &&
    t <= 10
  );
}

function argon2Async(password: string, salt: Buffer, params: Omit<Argon2Params, 'saltLength'>, run: HashRunner = passwordHashQueue): Promise<Buffer> {
  // The library runs the hash on the libuv pool, off the event loop; the queue bounds how many
  // run at once (password-hash-queue.ts).
  return run(() =>
    argon2.hash(password, {
      type: argon2.argon2id,
      raw: true,
      salt,
      memoryCost: params.memoryKiB,
      timeCost: params.iterations,
      parallelism: params.parallelism,
      hashLength: params.hashLength,
    }),
  );
}

// Parameters and salt travel with the hash, so DEFAULT_ARGON2_PARAMS can be raised without
// breaking old hashes. Version 0x13 (19) is the only one the library writes.
export async function hashSuppliedPassword(password: string, params: Argon2Params = DEFAULT_ARGON2_PARAMS): Promise<string> {
  const { memoryKiB, iterations, parallelism, hashLength, saltLength } = params;
  if (!argon2ParamsValid(memoryKiB, iterations, parallelism)) throw new RangeError(`unsupported argon2id parameters m=${memoryKiB}, t=${iterations}, p=${parallelism}`);
  if (!Number.isSafeInteger(hashLength) || hashLength < 16 || hashLength > 128) throw new RangeError('argon2id hashLength must be 16 to 128');
  if (!Number.isSafeInteger(saltLength) || saltLength < 16 || saltLength > 64) throw new RangeError('argon2id saltLength must be 16 to 64');
  const salt = randomBytes(saltLength);
  const key = await argon2Async(password, salt, params);
  return `argon2id$v=19,m=${memoryKiB},t=${iterations},p=${parallelism}$${salt.toString('base64')}$${key.toString('base64')}`;
}

const ARGON2_PATTERN = /^argon2id\$v=19,m=([1-9]\d{0,9}),t=([1-9]\d{0,2}),p=([1-9]\d{0,2})\$([A-Za-z0-9+/]+={0,2})\$([A-Za-z0-9+/]+={0,2})$/;
const SCRYPT_PATTERN = /^scrypt\$N=([1-9]\d{0,9}),r=([1-9]\d{0,2}),p=([1-9]\d{0,2})\$([A-Za-z0-9+/]+={0,2})\$([A-Za-z0-9+/]+={0,2})$/;

// Buffer.from(…, 'base64') silently skips junk, so only a value that round-trips counts.
function strictBase64(text: string): Buffer | null {
  const bytes = Buffer.from(text, 'base64');
  return bytes.length > 0 && bytes.toString('base64') === text ? bytes : null;
}

// The scheme is the hash's first `$` field, so old hashes keep verifying when the choice changes:
// - `argon2id`: a supplied password, hashed as given.
// - `argon2id-hex`: a supplied 1.6 key, hashed as lowercase hex text.
// - `hmac-sha256`: a generated password (≥ 200 random bits): nobody can guess it, so a fast salted
//   hash is as safe as a slow one, and a reconnect storm of stations costs microseconds each.
// - `scrypt`, `scrypt-hex`: supplied passwords and 1.6 keys stored before argon2id. 1.6 keys hashed
//   with plain `scrypt` before hex text was normalised carry the case they were supplied in.
const SCHEMES = ['argon2id', 'argon2id-hex', 'hmac-sha256', 'scrypt', 'scrypt-hex'] as const;
export type PasswordScheme = (typeof SCHEMES)[number];

export function passwordScheme(encoded: string): PasswordScheme | null {
  if (typeof encoded !== 'string') return null;
  const scheme = encoded.slice(0, encoded.indexOf('$'));
  return (SCHEMES as readonly string[]).includes(scheme) ? (scheme as PasswordScheme) : null;
}

const HMAC_SALT_LENGTH = 16;
const HMAC_PATTERN = /^hmac-sha256\$([A-Za-z0-9+/]+={0,2})\$([A-Za-z0-9+/]+={0,2})$/;

function hmac(password: string, salt: Buffer): Buffer {
  return createHmac('sha256', salt).update(password, 'utf8').digest();
}

export function hashGeneratedPassword(password: string): string {
  const salt = randomBytes(HMAC_SALT_LENGTH);
  return `hmac-sha256$${salt.toString('base64')}$${hmac(password, salt).toString('base64')}`;
}

// The one place that decides how an asset's new password is stored: 1.6 hex text in lowercase,
// generated ones with HMAC, supplied ones with argon2id.
export async function hashAssetPassword(
  version: OcppVersion,
  password: string,
  options: { generated: boolean; passwordHashParams?: Argon2Params | undefined },
): Promise<string> {
  const text = version === OCPP_1_6 ? password.toLowerCase() : password;
  if (options.generated) return hashGeneratedPassword(text);
  const encoded = await hashSuppliedPassword(text, options.passwordHashParams);
  return version === OCPP_1_6 ? `argon2id-hex${encoded.slice('argon2id'.length)}` : encoded;
}

// Every scheme but HMAC costs a slow hash (tens of milliseconds of CPU) to verify.
export function isSlowHash(encoded: string): boolean {
  return ![null, 'hmac-sha256'].includes(passwordScheme(encoded));
}

export async function verifyPassword(password: string, encoded: string, run: HashRunner = passwordHashQueue): Promise<boolean> {
  if (typeof password !== 'string' || typeof encoded !== 'string') return false;
  switch (passwordScheme(encoded)) {
    case 'hmac-sha256':
      return verifyHmac(password, encoded);
    case 'argon2id':
      return verifySlow(ARGON2ID, password, encoded, run);
    case 'argon2id-hex':
      return verifySlow(ARGON2ID, password.toLowerCase(), `argon2id${encoded.slice('argon2id-hex'.length)}`, run);
    case 'scrypt':
      return verifySlow(SCRYPT, password, encoded, run);
    case 'scrypt-hex':
      return verifySlow(SCRYPT, password.toLowerCase(), `scrypt${encoded.slice('scrypt-hex'.length)}`, run);
    default:
      return false;
  }
}

// A slow hash stored as `scheme$<three parameters>$salt$key`: the parameters are checked against
// their bounds and the salt and key must be canonical base64 before anything is derived.
interface SlowScheme {
  pattern: RegExp;
  valid(a: number, b: number, c: number): boolean;
  derive(password: string, salt: Buffer, keyLength: number, a: number, b: number, c: number, run: HashRunner): Promise<Buffer>;
}

const ARGON2ID: SlowScheme = {
  pattern: ARGON2_PATTERN,
  valid: argon2ParamsValid,
  derive: (password, salt, hashLength, memoryKiB, iterations, parallelism, run) => argon2Async(password, salt, { memoryKiB, iterations, parallelism, hashLength }, run),
};

const SCRYPT: SlowScheme = { pattern: SCRYPT_PATTERN, valid: scryptParamsValid, derive: scryptAsync };

async function verifySlow(scheme: SlowScheme, password: string, encoded: string, run: HashRunner): Promise<boolean> {
  const match = scheme.pattern.exec(encoded);
  if (!match) return false;
  const [a, b, c] = [match[1], match[2], match[3]].map(Number) as [number, number, number];
  if (!scheme.valid(a, b, c)) return false;
  const salt = strictBase64(match[4]!);
  const expected = strictBase64(match[5]!);
  if (!salt || !expected || salt.length < 8 || expected.length < 16 || expected.length > 128) return false;
  const actual = await scheme.derive(password, salt, expected.length, a, b, c, run);
  // Same length by construction, which timingSafeEqual requires.
  return timingSafeEqual(actual, expected);
}

function verifyHmac(password: string, encoded: string): boolean {
  const match = HMAC_PATTERN.exec(encoded);
  if (!match) return false;
  const salt = strictBase64(match[1]!);
  const expected = strictBase64(match[2]!);
  if (!salt || !expected || salt.length < 8 || expected.length !== 32) return false;
  return timingSafeEqual(hmac(password, salt), expected);
}
