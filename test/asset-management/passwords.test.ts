import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { passwordHashQueue } from '../../src/asset-management/password-hash-queue.js';
import {
  DEFAULT_ARGON2_PARAMS,
  hashAssetPassword,
  hashGeneratedPassword,
  hashScryptPassword,
  hashSuppliedPassword,
  passwordScheme,
  verifyPassword,
  type ScryptParams,
} from '../../src/asset-management/password-hashing.js';
import { PASSWORD_RULES, generatePassword, passwordProblem } from '../../src/asset-management/password-rules.js';
import { stationPasswordText, verifyStationPassword } from '../../src/asset-management/station-passwords.js';
import { OCPP_VERSIONS, type OcppVersion } from '../../src/kernel/ocpp-vocabulary.js';
import { CHEAP_HASH } from '../helpers/password-hash-params.js';

// Written out independently of the implementation so a typo there cannot hide here.
const LOWER = 'abcdefghijklmnopqrstuvwxyz';
const UPPER = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';
const DIGITS = '0123456789';
const SPECIALS = '*-_=:+|@.';
const ALPHABET_201 = LOWER + UPPER + DIGITS + SPECIALS;
const HEX = '0123456789abcdef';
const HEX_ANY_CASE = '0123456789abcdefABCDEF';

// The scheme of supplied passwords before argon2id, at a cost cheap enough for tests.
const LEGACY_SCRYPT: ScryptParams = { N: 1024, r: 8, p: 1, keyLength: 32, saltLength: 16 };

const repeat = (chars: string, length: number): string =>
  Array.from({ length }, (_, i) => chars[i % chars.length]).join('');

describe('OCPP_VERSIONS', () => {
  it('lists both supported versions', () => {
    expect([...OCPP_VERSIONS].sort()).toEqual(['1.6', '2.0.1']);
  });

  it('has a rule message for every version', () => {
    for (const version of OCPP_VERSIONS) expect(PASSWORD_RULES[version]).toMatch(/\S/);
  });
});

describe('passwordProblem, OCPP 2.0.1', () => {
  const rule = PASSWORD_RULES['2.0.1'];

  it('has a 71-character alphabet in the test oracle', () => {
    expect(new Set(ALPHABET_201).size).toBe(71);
  });

  it.each([
    [15, rule],
    [16, null],
    [40, null],
    [41, rule],
  ])('length %i → %s', (length, expected) => {
    expect(passwordProblem('2.0.1', repeat(ALPHABET_201, length))).toBe(expected);
  });

  it('rejects the empty string', () => {
    expect(passwordProblem('2.0.1', '')).toBe(rule);
  });

  it.each([...SPECIALS])('accepts the special character %s', (special) => {
    expect(passwordProblem('2.0.1', special.repeat(16))).toBeNull();
    expect(passwordProblem('2.0.1', 'aB3' + special + 'aB3aB3aB3aB3aB3aB3')).toBeNull();
  });

  it('accepts every alphabet character', () => {
    for (const ch of ALPHABET_201) expect(passwordProblem('2.0.1', ch.repeat(20))).toBeNull();
  });

  it.each([' ', '#', '!', 'é', '\u0000', '/', '\n', '\t', '$', '%', '~', '😀'])(
    'rejects %j inside an otherwise valid password',
    (bad) => {
      expect(passwordProblem('2.0.1', 'aaaaaaaaaaaaaaaaaaa' + bad)).toBe(rule);
      expect(passwordProblem('2.0.1', bad + 'aaaaaaaaaaaaaaaaaaa')).toBe(rule);
      expect(passwordProblem('2.0.1', 'aaaaaaaaa' + bad + 'aaaaaaaaaa')).toBe(rule);
    },
  );

  it('rejects a trailing newline after a valid password', () => {
    expect(passwordProblem('2.0.1', 'a'.repeat(20) + '\n')).toBe(rule);
  });

  it('property: any 16..40 string over the alphabet is valid', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom(...ALPHABET_201), minLength: 16, maxLength: 40 }),
        (password) => passwordProblem('2.0.1', password) === null,
      ),
    );
  });

  it('property: any string with a character outside the alphabet is invalid', () => {
    const outside = fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }).filter((c) => !ALPHABET_201.includes(c));
    fc.assert(
      fc.property(
        // Start from a valid password so it is the foreign character, not the length, that fails it.
        fc.string({ unit: fc.constantFrom(...ALPHABET_201), minLength: 16, maxLength: 40 }),
        fc.nat(),
        outside,
        (valid, at, bad) => {
          const i = at % valid.length;
          const password = valid.slice(0, i) + bad + valid.slice(i + 1);
          return passwordProblem('2.0.1', password) === rule;
        },
      ),
    );
  });
});

describe('passwordProblem, OCPP 1.6', () => {
  const rule = PASSWORD_RULES['1.6'];

  it.each([
    [31, rule],
    [32, null],
    [33, rule],
    [34, null],
    [38, null],
    [39, rule],
    [40, null],
    [41, rule],
    [42, rule],
  ])('length %i → %s', (length, expected) => {
    expect(passwordProblem('1.6', repeat(HEX, length))).toBe(expected);
  });

  it('accepts upper-case and mixed-case hex', () => {
    expect(passwordProblem('1.6', 'ABCDEF0123456789'.repeat(2))).toBeNull();
    expect(passwordProblem('1.6', 'aBcDeF0123456789'.repeat(2))).toBeNull();
  });

  it.each(['g', 'G', 'x', ' ', '-', ':', 'é', '\u0000'])('rejects %j', (bad) => {
    expect(passwordProblem('1.6', '0'.repeat(31) + bad)).toBe(rule);
  });

  it('rejects a valid 2.0.1 password that is not hex', () => {
    expect(passwordProblem('1.6', 'abcdefghijklmnopqrstuvwxyzABCDEF')).toBe(rule);
  });

  it('property: whole bytes of hex, 16..20 of them, are valid', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom(...HEX_ANY_CASE), minLength: 16, maxLength: 20 }),
        fc.string({ unit: fc.constantFrom(...HEX_ANY_CASE), minLength: 16, maxLength: 20 }),
        (a, b) => {
          const password = [...a].map((c, i) => c + (b[i] ?? '0')).join('');
          return passwordProblem('1.6', password) === null;
        },
      ),
    );
  });

  it('property: any other hex length is invalid', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 80 }).filter((n) => !(n >= 32 && n <= 40 && n % 2 === 0)),
        (length) => passwordProblem('1.6', repeat(HEX, length)) === rule,
      ),
    );
  });
});

describe('generatePassword', () => {
  const expectations: Record<OcppVersion, { alphabet: string; pattern: RegExp }> = {
    '2.0.1': { alphabet: ALPHABET_201, pattern: /^[a-zA-Z0-9*\-_=:+|@.]{40}$/ },
    '1.6': { alphabet: HEX, pattern: /^[0-9a-f]{40}$/ },
  };

  it.each(OCPP_VERSIONS)('%s: 40 characters from the alphabet, valid for its version', (version) => {
    for (let i = 0; i < 200; i++) {
      const password = generatePassword(version);
      expect(password).toMatch(expectations[version].pattern);
      expect(passwordProblem(version, password)).toBeNull();
    }
  });

  it.each(OCPP_VERSIONS)('%s: 1,000 generations are all distinct', (version) => {
    const seen = new Set(Array.from({ length: 1000 }, () => generatePassword(version)));
    expect(seen.size).toBe(1000);
  });

  it('property: a generated password always passes the rule of its version', () => {
    fc.assert(
      fc.property(fc.constantFrom(...OCPP_VERSIONS), (version) => passwordProblem(version, generatePassword(version)) === null),
      { numRuns: 500 },
    );
  });

  // Each character's count over n draws is Binomial(n, 1/k). Allowing 7 standard deviations
  // either side makes a false failure about 2.6e-12 per character (normal tail), so below
  // 1e-9 for the whole alphabet: never in practice. With 20,000 passwords (800,000 characters)
  // the bound is about ±6.5% of the mean for 2.0.1 and ±3% for hex, tight enough to catch a
  // missing character (count 0, also caught by the key comparison) and the classic `byte % 71`
  // bias, which gives the first 43 characters 4/256 instead of 1/71 (+11%) and the rest −17%.
  // A ±35% bound over 80,000 characters would be equally safe but would let that bias through.
  it.each(OCPP_VERSIONS)('%s: character frequencies are uniform within 7 sigma', (version) => {
    const { alphabet } = expectations[version];
    const passwords = 20_000;
    const counts = new Map<string, number>();
    for (let i = 0; i < passwords; i++) {
      for (const ch of generatePassword(version)) counts.set(ch, (counts.get(ch) ?? 0) + 1);
    }
    const n = passwords * 40;
    const k = alphabet.length;
    const mean = n / k;
    const sigma = Math.sqrt(n * (1 / k) * (1 - 1 / k));
    const bound = 7 * sigma;

    expect([...counts.keys()].sort()).toEqual([...alphabet].sort());
    for (const ch of alphabet) {
      const count = counts.get(ch) ?? 0;
      expect(Math.abs(count - mean), `count of ${JSON.stringify(ch)} = ${count}, mean ${mean.toFixed(1)}`).toBeLessThanOrEqual(bound);
    }
  });
});

describe('hashSuppliedPassword (argon2id) / verifyPassword', () => {
  const password = 'aB3*-_=:+|@.xyz0123456789';

  it('verifies the password and rejects a different one', async () => {
    const encoded = await hashSuppliedPassword(password, CHEAP_HASH);
    expect(passwordScheme(encoded)).toBe('argon2id');
    await expect(verifyPassword(password, encoded)).resolves.toBe(true);
    await expect(verifyPassword(password + 'x', encoded)).resolves.toBe(false);
    await expect(verifyPassword(password.slice(0, -1), encoded)).resolves.toBe(false);
    await expect(verifyPassword(password.toUpperCase(), encoded)).resolves.toBe(false);
    await expect(verifyPassword('', encoded)).resolves.toBe(false);
  });

  it('salts: two hashes of the same password differ and both verify', async () => {
    const [a, b] = await Promise.all([hashSuppliedPassword(password, CHEAP_HASH), hashSuppliedPassword(password, CHEAP_HASH)]);
    expect(a).not.toBe(b);
    await expect(verifyPassword(password, a)).resolves.toBe(true);
    await expect(verifyPassword(password, b)).resolves.toBe(true);
  });

  it('records its parameters, so a hash made with other parameters still verifies', async () => {
    const encoded = await hashSuppliedPassword(password, { memoryKiB: 256, iterations: 3, parallelism: 2, hashLength: 64, saltLength: 32 });
    expect(encoded).toMatch(/^argon2id\$v=19,m=256,t=3,p=2\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/);
    const [, , salt, key] = encoded.split('$');
    expect(Buffer.from(salt!, 'base64')).toHaveLength(32);
    expect(Buffer.from(key!, 'base64')).toHaveLength(64);
    await expect(verifyPassword(password, encoded)).resolves.toBe(true);
  });

  it('never contains the password', async () => {
    for (const version of OCPP_VERSIONS) {
      const secret = generatePassword(version);
      const encoded = await hashSuppliedPassword(secret, CHEAP_HASH);
      expect(encoded).not.toContain(secret);
      expect(encoded).not.toContain(Buffer.from(secret).toString('base64'));
      expect(encoded).not.toContain(Buffer.from(secret).toString('hex'));
    }
  });

  it('returns false, without throwing or hashing, for malformed or planted encoded strings', async () => {
    const good = await hashSuppliedPassword(password, CHEAP_HASH);
    const [, , salt, key] = good.split('$');
    const malformed: unknown[] = [
      '',
      'garbage',
      password,
      good.slice(0, -1),
      good.slice(0, -3),
      good.replace(/=+$/, ''), // unpadded base64 does not round-trip
      good + '$',
      good.replace('argon2id$', 'argon2i$'),
      good.replace('argon2id$', 'argon2d$'),
      good.replace('v=19', 'v=16'),
      good.replace('m=64', 'm=0'),
      good.replace('m=64', 'm=4'), // below 8 KiB per lane
      good.replace('m=64', 'm=064'),
      good.replace('m=64', 'm=4194304'), // 4 GiB
      good.replace('t=1', 't=0'),
      good.replace('t=1', 't=100000'), // minutes of work
      good.replace('p=1', 'p=0'),
      good.replace('p=1', 'p=64'),
      good.replace('m=64,t=1,p=1', 't=1,m=64,p=1'),
      `argon2id$v=19,m=64,t=1,p=1$$${key}`,
      `argon2id$v=19,m=64,t=1,p=1$${salt}$`,
      `argon2id$v=19,m=64,t=1,p=1$${salt}$!!!!`,
      `argon2id$v=19,m=64,t=1,p=1$${salt}$${key}\n`,
      `argon2id$v=19,m=64,t=1,p=1$${salt}$${Buffer.alloc(4).toString('base64')}`, // key too short
      // The library's own PHC form is not ours: refused rather than read with the library's bounds.
      `$argon2id$v=19$m=64,t=1,p=1$${salt}$${key}`,
      null,
      undefined,
      42,
    ];
    for (const encoded of malformed) {
      await expect(verifyPassword(password, encoded as string), JSON.stringify(encoded)).resolves.toBe(false);
    }
  });

  it('rejects a tampered hash of the right length', async () => {
    const encoded = await hashSuppliedPassword(password, CHEAP_HASH);
    const parts = encoded.split('$');
    const key = Buffer.from(parts[3]!, 'base64');
    key[0]! ^= 1;
    parts[3] = key.toString('base64');
    await expect(verifyPassword(password, parts.join('$'))).resolves.toBe(false);
  });

  it('refuses parameters outside its bounds when hashing', async () => {
    await expect(hashSuppliedPassword(password, { ...CHEAP_HASH, memoryKiB: 4 })).rejects.toThrow(RangeError);
    await expect(hashSuppliedPassword(password, { ...CHEAP_HASH, iterations: 0 })).rejects.toThrow(RangeError);
    await expect(hashSuppliedPassword(password, { ...CHEAP_HASH, parallelism: 5 })).rejects.toThrow(RangeError);
    await expect(hashSuppliedPassword(password, { ...CHEAP_HASH, saltLength: 4 })).rejects.toThrow(RangeError);
    await expect(hashSuppliedPassword(password, { ...CHEAP_HASH, hashLength: 8 })).rejects.toThrow(RangeError);
  });

  it('works with DEFAULT_ARGON2_PARAMS, at least OWASP’s first argon2id configuration, and records them', async () => {
    const { memoryKiB, iterations, parallelism } = DEFAULT_ARGON2_PARAMS;
    // OWASP Password Storage Cheat Sheet: m=19 MiB, t=2, p=1 at the least.
    expect(memoryKiB).toBeGreaterThanOrEqual(19 * 1024);
    expect(iterations).toBeGreaterThanOrEqual(2);
    expect(DEFAULT_ARGON2_PARAMS.saltLength).toBeGreaterThanOrEqual(16);
    const encoded = await hashSuppliedPassword(password);
    expect(encoded.startsWith(`argon2id$v=19,m=${memoryKiB},t=${iterations},p=${parallelism}$`)).toBe(true);
    await expect(verifyPassword(password, encoded)).resolves.toBe(true);
    await expect(verifyPassword('not-' + password, encoded)).resolves.toBe(false);
  });

  it('does not block the event loop while hashing with the default parameters', async () => {
    let ticks = 0;
    const timer = setInterval(() => {
      ticks++;
    }, 2);
    try {
      await hashSuppliedPassword(password);
    } finally {
      clearInterval(timer);
    }
    // A hash on the event loop would leave the timer no chance to fire before it is done.
    expect(ticks).toBeGreaterThanOrEqual(3);
  });
});

describe('scrypt hashes stored before argon2id', () => {
  const password = 'aB3*-_=:+|@.xyz0123456789';

  it('keep verifying with the parameters they carry, and only for their password', async () => {
    for (const params of [LEGACY_SCRYPT, { N: 2048, r: 4, p: 2, keyLength: 64, saltLength: 32 }]) {
      const encoded = await hashScryptPassword(password, params);
      expect(encoded).toMatch(new RegExp(`^scrypt\\$N=${params.N},r=${params.r},p=${params.p}\\$`));
      expect(passwordScheme(encoded)).toBe('scrypt');
      await expect(verifyPassword(password, encoded)).resolves.toBe(true);
      await expect(verifyPassword(password + 'x', encoded)).resolves.toBe(false);
      await expect(verifyPassword(password.toUpperCase(), encoded)).resolves.toBe(false);
    }
  });

  it('return false, without throwing, when malformed or planted', async () => {
    const good = await hashScryptPassword(password, LEGACY_SCRYPT);
    const [, , salt, key] = good.split('$');
    const malformed: unknown[] = [
      good.slice(0, -1),
      good.replace(/=+$/, ''),
      good + '$',
      good.replace('N=1024', 'N=1000'), // not a power of two
      good.replace('N=1024', 'N=0'),
      good.replace('N=1024', 'N=1'),
      good.replace('N=1024', 'N=01024'),
      good.replace('N=1024', 'N=1073741824'), // would need 1 TiB
      good.replace('r=8', 'r=0'),
      good.replace('r=8', 'r=999'),
      good.replace('p=1', 'p=0'),
      good.replace('p=1', 'p=-1'),
      good.replace('N=1024,r=8,p=1', 'r=8,N=1024,p=1'),
      `scrypt$N=1024,r=8,p=1$$${key}`,
      `scrypt$N=1024,r=8,p=1$${salt}$`,
      `scrypt$N=1024,r=8,p=1$${salt}$!!!!`,
      `scrypt$N=1024,r=8,p=1$${salt}$${key}\n`,
      `scrypt$N=1024,r=8,p=1$${salt}$${Buffer.alloc(4).toString('base64')}`,
    ];
    for (const encoded of malformed) {
      await expect(verifyPassword(password, encoded as string), JSON.stringify(encoded)).resolves.toBe(false);
    }
    const parts = good.split('$');
    const tampered = Buffer.from(parts[3]!, 'base64');
    tampered[0]! ^= 1;
    parts[3] = tampered.toString('base64');
    await expect(verifyPassword(password, parts.join('$'))).resolves.toBe(false);
  });

  it('scrypt-hex: a supplied 1.6 key stored as lowercase hex text verifies in either case', async () => {
    const key = 'ABCDEF0123456789abcdef0123456789AbCdEf01';
    const encoded16 = `scrypt-hex${(await hashScryptPassword(key.toLowerCase(), LEGACY_SCRYPT)).slice('scrypt'.length)}`;
    expect(passwordScheme(encoded16)).toBe('scrypt-hex');
    for (const text of [key, key.toLowerCase(), key.toUpperCase()]) await expect(verifyPassword(text, encoded16)).resolves.toBe(true);
    await expect(verifyStationPassword('1.6', Buffer.from(key, 'hex'), encoded16)).resolves.toBe(true);
  });

  it('refuse parameters outside their bounds when made', async () => {
    await expect(hashScryptPassword(password, { ...LEGACY_SCRYPT, N: 1000 })).rejects.toThrow(RangeError);
    await expect(hashScryptPassword(password, { ...LEGACY_SCRYPT, saltLength: 4 })).rejects.toThrow(RangeError);
    await expect(hashScryptPassword(password, { ...LEGACY_SCRYPT, keyLength: 8 })).rejects.toThrow(RangeError);
  });
});

describe('hash schemes matched to the secret', () => {
  it('a generated password gets a salted HMAC-SHA-256 that names its scheme and verifies only it', async () => {
    for (const version of OCPP_VERSIONS) {
      const password = generatePassword(version);
      const encoded = await hashAssetPassword(version, password, { generated: true });
      expect(encoded).toMatch(/^hmac-sha256\$[A-Za-z0-9+/]{22}==\$[A-Za-z0-9+/]{43}=$/);
      expect(passwordScheme(encoded)).toBe('hmac-sha256');
      expect(encoded).not.toContain(password);
      await expect(verifyPassword(password, encoded)).resolves.toBe(true);
      await expect(verifyPassword(password.slice(1), encoded)).resolves.toBe(false);
    }
    const a = hashGeneratedPassword('same-generated-password-0123456789');
    expect(a).not.toBe(hashGeneratedPassword('same-generated-password-0123456789'));
  });

  it('an HMAC hash verifies without a turn in the hashing queue', async () => {
    const releases: Array<() => void> = [];
    const held = Array.from({ length: passwordHashQueue.concurrency }, () =>
      passwordHashQueue(() => new Promise<void>((resolve) => releases.push(resolve))),
    );
    const password = generatePassword('2.0.1');
    const encoded = await hashAssetPassword('2.0.1', password, { generated: true });
    // Every place is taken: an answer now can only come from outside the queue.
    await expect(verifyPassword(password, encoded)).resolves.toBe(true);
    expect(passwordHashQueue.pendingCount).toBe(0);
    for (const release of releases) release();
    await Promise.all(held);
  });

  it('a supplied password gets argon2id; a supplied 1.6 key is stored as lowercase hex text', async () => {
    const supplied201 = 'Supplied*Password-0123';
    const encoded201 = await hashAssetPassword('2.0.1', supplied201, { generated: false, passwordHashParams: CHEAP_HASH });
    expect(encoded201).toMatch(/^argon2id\$v=19,m=64,t=1,p=1\$/);
    await expect(verifyPassword(supplied201, encoded201)).resolves.toBe(true);
    await expect(verifyPassword(supplied201.toLowerCase(), encoded201)).resolves.toBe(false);

    const key = 'ABCDEF0123456789abcdef0123456789AbCdEf01';
    const encoded16 = await hashAssetPassword('1.6', key, { generated: false, passwordHashParams: CHEAP_HASH });
    expect(encoded16).toMatch(/^argon2id-hex\$v=19,m=64,t=1,p=1\$/);
    expect(passwordScheme(encoded16)).toBe('argon2id-hex');
    for (const text of [key, key.toLowerCase(), key.toUpperCase()]) await expect(verifyPassword(text, encoded16)).resolves.toBe(true);
    await expect(verifyStationPassword('1.6', Buffer.from(key, 'hex'), encoded16)).resolves.toBe(true);
    await expect(verifyStationPassword('1.6', Buffer.from(key.toUpperCase()), encoded16)).resolves.toBe(true);
  });

  it('malformed HMAC hashes are refused without throwing', async () => {
    const good = hashGeneratedPassword('whatever-generated-password-0000');
    const [, salt, mac] = good.split('$');
    for (const encoded of [
      'hmac-sha256$',
      `hmac-sha256$${salt}$`,
      `hmac-sha256$$${mac}`,
      `hmac-sha256$${salt}$${Buffer.alloc(16).toString('base64')}`,
      `hmac-sha256$${salt}$${mac}$`,
      `hmac-sha512$${salt}$${mac}`,
      good.replace(/=+$/, ''),
    ]) {
      await expect(verifyPassword('whatever-generated-password-0000', encoded), encoded).resolves.toBe(false);
    }
  });
});

describe('stationPasswordText: the Basic Auth bytes as the text the API took', () => {
  it('property: 1.6 keys of 16-20 raw bytes read as their lowercase hex', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 16, maxLength: 20 }), (bytes) => {
        const raw = Buffer.from(bytes);
        return stationPasswordText('1.6', raw) === raw.toString('hex');
      }),
    );
  });

  it('property: 1.6 keys sent as 32-40 hex characters, any case, read as that text in lowercase', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 16, maxLength: 20 }), fc.boolean(), (bytes, upper) => {
        const hex = Buffer.from(bytes).toString('hex');
        const sent = upper ? hex.toUpperCase() : hex;
        return stationPasswordText('1.6', Buffer.from(sent, 'latin1')) === hex;
      }),
    );
  });

  it('property: 1.6 bytes of any other length, or non-hex text of hex length, are no key at all', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 0, maxLength: 64 }).filter((b) => b.length < 16 || (b.length > 20 && !/^(?:[0-9A-Fa-f]{2}){16,20}$/.test(Buffer.from(b).toString('latin1')))),
        (bytes) => stationPasswordText('1.6', Buffer.from(bytes)) === null,
      ),
    );
    expect(stationPasswordText('1.6', Buffer.from('g'.repeat(32)))).toBeNull();
    expect(stationPasswordText('1.6', Buffer.from('a'.repeat(33)))).toBeNull();
  });

  it('property: 2.0.1 reads the UTF-8 string, valid passwords only', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom(...ALPHABET_201), minLength: 16, maxLength: 40 }), (password) =>
        stationPasswordText('2.0.1', Buffer.from(password, 'utf8')) === password,
      ),
    );
    expect(stationPasswordText('2.0.1', Buffer.from('short'))).toBeNull();
    expect(stationPasswordText('2.0.1', Buffer.from([0xff, ...Buffer.from('a'.repeat(20))]))).toBeNull();
  });
});

describe('verifyStationPassword', () => {
  it('property: a 1.6 key verifies as raw bytes and as hex text in either case; other bytes do not', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 16, maxLength: 20 }), fc.uint8Array({ minLength: 16, maxLength: 20 }), async (a, b) => {
        const key = Buffer.from(a);
        const hex = key.toString('hex');
        const encoded = await hashAssetPassword('1.6', hex, { generated: true });
        const other = Buffer.from(b);
        return (
          (await verifyStationPassword('1.6', key, encoded)) &&
          (await verifyStationPassword('1.6', Buffer.from(hex), encoded)) &&
          (await verifyStationPassword('1.6', Buffer.from(hex.toUpperCase()), encoded)) &&
          (other.equals(key) || !(await verifyStationPassword('1.6', other, encoded)))
        );
      }),
      { numRuns: 200 },
    );
  });

  it('a 1.6 key hashed before normalisation keeps verifying, whether it was stored in lower or upper case', async () => {
    const key = randomKey();
    for (const stored of [key.toString('hex'), key.toString('hex').toUpperCase()]) {
      const legacy = await hashScryptPassword(stored, LEGACY_SCRYPT);
      expect(passwordScheme(legacy)).toBe('scrypt');
      await expect(verifyStationPassword('1.6', key, legacy)).resolves.toBe(true);
      await expect(verifyStationPassword('1.6', Buffer.from(key.toString('hex').toUpperCase()), legacy)).resolves.toBe(true);
      await expect(verifyStationPassword('1.6', Buffer.from(key.toString('hex')), legacy)).resolves.toBe(true);
      await expect(verifyStationPassword('1.6', randomKey(), legacy)).resolves.toBe(false);
    }
  });

  it('2.0.1 compares the UTF-8 password exactly', async () => {
    const password = generatePassword('2.0.1');
    const encoded = await hashAssetPassword('2.0.1', password, { generated: true });
    await expect(verifyStationPassword('2.0.1', Buffer.from(password), encoded)).resolves.toBe(true);
    await expect(verifyStationPassword('2.0.1', Buffer.from(password.toLowerCase() === password ? password.toUpperCase() : password.toLowerCase()), encoded)).resolves.toBe(false);
    await expect(verifyStationPassword('2.0.1', Buffer.from(password + 'x'), encoded)).resolves.toBe(false);
  });

  it('refuses an unknown scheme or a missing hash', async () => {
    await expect(verifyStationPassword('2.0.1', Buffer.from('a'.repeat(20)), 'argon2id$x$y')).resolves.toBe(false);
    await expect(verifyStationPassword('2.0.1', Buffer.from('a'.repeat(20)), null as unknown as string)).resolves.toBe(false);
  });
});

function randomKey(): Buffer {
  return Buffer.from(Array.from({ length: 20 }, () => Math.floor(Math.random() * 256)));
}
