// The request log never shows a value whose parameter name looks like a credential, wherever the
// client put it (query, `;` parameters of a path segment) and however it spelt the name; the token
// endpoint's query is never shown at all.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isSecretParameterName, redactUrl } from '../../src/http/url-redaction.js';
import { LIST_URL, reader } from '../helpers/payments-factory.js';
import { createTestApp } from '../helpers/test-app.js';

const FRAGMENTS = ['pass', 'pwd', 'secret', 'token', 'key', 'auth', 'credential', 'signature', 'jwt', 'bearer', 'cookie', 'hash', 'sessid', 'sessionid'];
// Names the API reads, and other everyday names: never masked.
const PLAIN_NAMES = ['sessionIds', 'limit', 'startingAfter', 'network', 'includeArchived', 'vendor', 'q', 'page', 'sort'];

// Percent-encodes each character of `text` that `pick` selects (every character can be encoded).
function encodeSome(text: string, pick: (i: number) => boolean): string {
  return [...text].map((c, i) => (pick(i) ? [...Buffer.from(c)].map((b) => `%${b.toString(16).padStart(2, '0').toUpperCase()}`).join('') : c)).join('');
}

describe('isSecretParameterName', () => {
  it('masks the names seen in clear, and their spellings', () => {
    const secret = [
      'pass', 'pwd', 'secret', 'api_key', 'authorization', 'client_secret[]', 'client_secret', 'password', 'Password[0]', 'user[password]',
      'CLIENT_SECRET', 'client-secret', 'client%5Fsecret', 'client%255Fsecret', 'pass%77ord', 'ｐａｓｓｗｏｒｄ', 'pass\u200bword',
      'access_token', 'refresh_token', 'id_token', 'X-Amz-Signature', 'X-Amz-Credential', 'X-Amz-Security-Token', 'sig', 'apiKey',
      'x-api-key', 'PHPSESSID', 'JSESSIONID', 'session', 'sid', 'session_id', 'otp', 'PIN', 'passphrase', 'client+secret', 'p%61ss%ZZ', '%2525252525252541',
    ];
    for (const name of secret) expect(isSecretParameterName(name), name).toBe(true);
    for (const name of PLAIN_NAMES) expect(isSecretParameterName(name), name).toBe(false);
  });

  it('masks any name containing a marker, in any case, with any affixes, brackets and percent-encoding', () => {
    const affix = fc.string({ unit: fc.constantFrom('a', 'Z', '0', '_', '-', '.', ' '), maxLength: 6 });
    const brackets = fc.array(fc.string({ unit: fc.constantFrom('a', '0', ''), maxLength: 3 }), { maxLength: 3 });
    fc.assert(
      fc.property(
        fc.constantFrom(...FRAGMENTS),
        affix,
        affix,
        brackets,
        fc.array(fc.boolean(), { minLength: 1 }),
        fc.array(fc.boolean(), { minLength: 1 }),
        fc.integer({ min: 0, max: 3 }),
        (fragment, before, after, index, cases, encoded, rounds) => {
          let name = `${before}${[...fragment].map((c, i) => (cases[i % cases.length] ? c.toUpperCase() : c)).join('')}${after}${index.map((k) => `[${k}]`).join('')}`;
          for (let round = 0; round < rounds; round++) name = encodeSome(name, (i) => encoded[(i + round) % encoded.length]!);
          expect(isSecretParameterName(name), name).toBe(true);
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe('redactUrl', () => {
  const piece = fc.oneof(
    fc.record({ secret: fc.constant(true), name: fc.constantFrom('password', 'client_secret[]', 'api%5Fkey', 'Authorization', 'pwd', 'secret') }),
    fc.record({ secret: fc.constant(false), name: fc.constantFrom(...PLAIN_NAMES) }),
  );
  // Values never contain a separator; secret values carry a marker the output must not show.
  const value = fc.string({ unit: fc.constantFrom('a', '1', '%20', '+', '=', '.', '[', ']'), maxLength: 8 });

  it('masks exactly the secret-named values, in the query and in path segments, keeping everything else byte for byte', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(piece, value, fc.constantFrom('&', ';')), { maxLength: 8 }),
        fc.array(fc.tuple(piece, value), { maxLength: 3 }),
        fc.nat(),
        (query, matrix, seed) => {
          let n = seed;
          const build = (p: { secret: boolean; name: string }, v: string) => {
            n += 1;
            return p.secret ? [`${p.name}=SECRET${n}${v}`, `${p.name}=[redacted]`] : [`${p.name}=${v}`, `${p.name}=${v}`];
          };
          const matrixPieces = matrix.map(([p, v]) => build(p, v));
          const queryPieces = query.map(([p, v, sep], i) => [...build(p, v), i === 0 ? '' : sep] as const);
          const pathOf = (k: 0 | 1) => `/payments/v1/session-payments${matrixPieces.map((m) => `;${m[k]}`).join('')}/x`;
          const queryOf = (k: 0 | 1) => queryPieces.map((q) => `${q[2]}${q[k]}`).join('');
          const url = `${pathOf(0)}${query.length ? `?${queryOf(0)}` : ''}`;
          const expected = `${pathOf(1)}${query.length ? `?${queryOf(1)}` : ''}`;
          expect(redactUrl(url)).toBe(expected);
          expect(redactUrl(url)).not.toContain('SECRET');
        },
      ),
      { numRuns: 500 },
    );
  });

  it('never shows the token endpoint\'s query, however its path is spelt', () => {
    fc.assert(
      fc.property(fc.constantFrom('/oauth/token', '/oauth/token/', '/OAuth/Token', '/oauth/%74oken', '/oauth//token', '/oauth/token;x=1'), fc.string({ minLength: 1 }), (path, query) => {
        const url = `${path}?${query}`;
        const logged = redactUrl(url);
        expect(logged.endsWith('?[redacted]')).toBe(true);
        expect(logged.slice(0, -'?[redacted]'.length)).toBe(path);
      }),
    );
  });

  it('leaves a URL without secret-named parameters as it is', () => {
    for (const url of ['/payments/v1/session-payments?sessionIds=a,b&x=%20', '/asset-management/v1/assets?limit=5&network=net_a', '/healthz']) {
      expect(redactUrl(url)).toBe(url);
    }
  });
});

describe('the request log line', () => {
  it('shows no secret-named value of the query or the path, and nothing of the token endpoint\'s query', async () => {
    const t = await createTestApp({ captureLogs: true });
    try {
      const authorization = reader(t);
      const secrets = ['pass=SeCrEt01', 'pwd=SeCrEt02', 'secret=SeCrEt03', 'api_key=SeCrEt04', 'authorization=SeCrEt05', 'client_secret[]=SeCrEt06', 'client%5Fsecret=SeCrEt07', 'password=SeCrEt08', 'password=SeCrEt09'];
      const query = `sessionIds=ses_logged&${secrets.slice(0, 5).join('&')}&${secrets[5]};client_secret=SeCrEt10&${secrets.slice(6).join('&')}`;
      await t.app.inject({ url: `${LIST_URL}?${query}`, headers: { authorization, 'x-request-id': 'log-query' } });
      await t.app.inject({ url: `${LIST_URL};password=SeCrEt11;token=SeCrEt12?sessionIds=ses_logged`, headers: { authorization, 'x-request-id': 'log-path' } });
      await t.app.inject({
        method: 'POST',
        url: '/oauth/token?grant_type=client_credentials&client_id=cli_x&audience=SeCrEt13',
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-request-id': 'log-token' },
        payload: 'grant_type=client_credentials&client_id=cli_x&client_secret=SeCrEt14',
      });
      const log = t.logLines().join('\n');
      for (let i = 1; i <= 14; i++) expect(log).not.toContain(`SeCrEt${String(i).padStart(2, '0')}`);

      const lines = t
        .logLines()
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((l) => l.msg === 'request completed');
      const url = (id: string) => lines.find((l) => l.reqId === id)?.url;
      expect(url('log-query')).toBe(
        `${LIST_URL}?sessionIds=ses_logged&pass=[redacted]&pwd=[redacted]&secret=[redacted]&api_key=[redacted]&authorization=[redacted]` +
          '&client_secret[]=[redacted];client_secret=[redacted]&client%5Fsecret=[redacted]&password=[redacted]&password=[redacted]',
      );
      expect(url('log-path')).toBe(`${LIST_URL};password=[redacted];token=[redacted]?sessionIds=ses_logged`);
      expect(url('log-token')).toBe('/oauth/token?[redacted]');
    } finally {
      await t.close();
    }
  });
});
