import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/kernel/config.js';
import { withPassword } from '../../src/db/database.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}

function expectRejected(env: Record<string, string>, variable: string) {
  const error = configError(env);
  expect(error.message.startsWith(`invalid configuration: ${variable}: `)).toBe(true);
  expect(error.message).not.toContain('\n');
}

describe('loadConfig', () => {
  it('has safe defaults for an empty environment', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      env: 'development',
      host: '127.0.0.1',
      port: 3000,
      logLevel: 'info',
      trustProxy: false,
      database: { url: undefined, poolMax: 10, dataDir: './data' },
      ocppMinSecurityProfile: 2,
      rateLimit: { max: 6000, tokenMax: 120, windowSeconds: 60, redisUrl: undefined, redisPrefix: 'charging-network:rate-limit:' },
      shutdownTimeoutMs: 10_000,
    });
    expect(config.auth).toMatchObject({
      mode: 'embedded',
      jwksUrl: undefined,
      issuer: 'http://localhost:3000',
      networkClaim: 'network',
      rolesClaim: 'roles',
      tokenTtlSeconds: 3600,
      signingAlg: 'ES256',
    });
    expect(config.auth.audience.length).toBeGreaterThan(0);
  });

  it('treats empty strings as unset', () => {
    const config = loadConfig({ PORT: '', HOST: '', DATABASE_URL: '', AUTH_JWKS_URL: '' });
    expect(config.port).toBe(3000);
    expect(config.host).toBe('127.0.0.1');
    expect(config.database.url).toBeUndefined();
    expect(config.auth.mode).toBe('embedded');
  });

  it('reads explicit values', () => {
    const config = loadConfig({
      HOST: '0.0.0.0',
      PORT: '8080',
      LOG_LEVEL: 'warn',
      TRUST_PROXY: 'true',
      DATABASE_URL: 'postgresql://app@db:5432/charging',
      OCPP_MIN_SECURITY_PROFILE: '3',
      AUTH_SIGNING_ALG: 'RS256',
      REDIS_URL: 'redis://cache:6379',
    });
    expect(config).toMatchObject({ host: '0.0.0.0', port: 8080, logLevel: 'warn', trustProxy: true, ocppMinSecurityProfile: 3 });
    expect(config.database.url).toBe('postgresql://app@db:5432/charging');
    expect(config.auth.signingAlg).toBe('RS256');
    expect(config.auth.issuer).toBe('http://localhost:8080');
    expect(config.rateLimit.redisUrl).toBe('redis://cache:6379');
  });

  it('switches to the external identity provider with AUTH_JWKS_URL + AUTH_ISSUER', () => {
    const config = loadConfig({
      AUTH_JWKS_URL: 'https://idp.example/.well-known/jwks.json',
      AUTH_ISSUER: 'https://idp.example/',
      AUTH_AUDIENCE: 'https://api.example',
    });
    expect(config.auth).toMatchObject({
      mode: 'external',
      jwksUrl: 'https://idp.example/.well-known/jwks.json',
      issuer: 'https://idp.example/',
      audience: 'https://api.example',
    });
  });

  it('gives the embedded issuer PUBLIC_URL, the address clients use, and never an external provider', () => {
    expect(loadConfig({ PORT: '3000', PUBLIC_URL: 'https://charging.example' }).auth.issuer).toBe('https://charging.example');
    expect(loadConfig({ PUBLIC_URL: 'https://charging.example', AUTH_ISSUER: 'https://issuer.example' }).auth.issuer).toBe('https://issuer.example');
    expectRejected({ PUBLIC_URL: 'https://charging.example', AUTH_JWKS_URL: 'https://idp.example/.well-known/jwks.json' }, 'AUTH_ISSUER');
    expectRejected({ PUBLIC_URL: 'charging.example' }, 'PUBLIC_URL');
    // An origin only, spelt as clients compare it: an issuer with a query or a login would be sent
    // in every token and metadata document, and one with a path would have its metadata elsewhere.
    for (const notAnOrigin of ['https://charging.example/cns', 'https://charging.example/?tenant=a&x=1', 'https://charging.example/#f', 'https://user:pw@charging.example', 'ftp://charging.example']) {
      expectRejected({ PUBLIC_URL: notAnOrigin }, 'PUBLIC_URL');
    }
    expect(loadConfig({ PUBLIC_URL: 'HTTPS://Charging.Example:443/' }).publicUrl).toBe('https://charging.example');
    expect(loadConfig({ PUBLIC_URL: 'http://[::1]:3000/' }).auth.issuer).toBe('http://[::1]:3000');
  });

  it.each([
    [{ PORT: 'notaport' }, 'PORT'],
    [{ PORT: '70000' }, 'PORT'],
    [{ PORT: '-1' }, 'PORT'],
    [{ PORT: '80.5' }, 'PORT'],
    [{ LOG_LEVEL: 'verbose' }, 'LOG_LEVEL'],
    [{ LOG_LEVEL: 'INFO ' }, 'LOG_LEVEL'],
    [{ DATABASE_URL: 'mysql://root@localhost/db' }, 'DATABASE_URL'],
    [{ DATABASE_URL: 'localhost:5432' }, 'DATABASE_URL'],
    [{ DATABASE_URL: 'postgres://cns@pooler:6432/cns', DATABASE_DIRECT_URL: 'mysql://root@db/cns' }, 'DATABASE_DIRECT_URL'],
    [{ DATABASE_URL: 'postgres://cns@pooler:6432/cns', DATABASE_DIRECT_URL: 'postgres://cns:se#cret@db/cns' }, 'DATABASE_DIRECT_URL'],
    [{ DATABASE_DIRECT_URL: 'postgres://cns@db:5432/cns' }, 'DATABASE_DIRECT_URL'],
    [{ OCPP_MIN_SECURITY_PROFILE: '0' }, 'OCPP_MIN_SECURITY_PROFILE'],
    [{ OCPP_MIN_SECURITY_PROFILE: '4' }, 'OCPP_MIN_SECURITY_PROFILE'],
    [{ OCPP_MIN_SECURITY_PROFILE: '2.5' }, 'OCPP_MIN_SECURITY_PROFILE'],
    [{ OCPP_MIN_SECURITY_PROFILE: 'two' }, 'OCPP_MIN_SECURITY_PROFILE'],
    [{ AUTH_SIGNING_ALG: 'HS256' }, 'AUTH_SIGNING_ALG'],
    [{ AUTH_JWKS_URL: 'not a url', AUTH_ISSUER: 'https://idp.example' }, 'AUTH_JWKS_URL'],
    [{ AUTH_JWKS_URL: 'https://idp.example/jwks' }, 'AUTH_ISSUER'],
    [{ TRUST_PROXY: 'yes' }, 'TRUST_PROXY'],
    [{ REDIS_URL: 'http://cache:6379' }, 'REDIS_URL'],
    [{ NODE_ENV: 'staging' }, 'NODE_ENV'],
    [{ AUTH_TOKEN_TTL_SECONDS: '5' }, 'AUTH_TOKEN_TTL_SECONDS'],
  ])('rejects %j naming %s', (env, variable) => {
    expectRejected(env, variable);
  });

  it('never echoes a rejected value (it may hold a secret)', () => {
    const error = configError({ DATABASE_URL: 'mysql://app:hunter2-secret@db/charging' });
    expect(error.message).not.toContain('hunter2');
    const redis = configError({ REDIS_URL: 'http://:redis-pass-123@cache:6379' });
    expect(redis.message).not.toContain('redis-pass-123');
  });

  it('OCPP stations: defaults, and the TLS listener only with its port, certificate and key together', () => {
    expect(loadConfig({}).ocpp).toEqual({ heartbeatIntervalSeconds: 300, pingIntervalSeconds: 30, leaseSeconds: 30, callTimeoutMs: 30_000, tls: undefined });
    expect(loadConfig({ OCPP_TLS_PORT: '3443', OCPP_TLS_CERT_FILE: '/c.pem', OCPP_TLS_KEY_FILE: '/k.pem' }).ocpp.tls).toEqual({
      port: 3443,
      certFile: '/c.pem',
      keyFile: '/k.pem',
    });
    expectRejected({ OCPP_TLS_PORT: '3443' }, 'OCPP_TLS_PORT');
    expectRejected({ OCPP_TLS_CERT_FILE: '/c.pem', OCPP_TLS_KEY_FILE: '/k.pem' }, 'OCPP_TLS_PORT');
    expectRejected({ OCPP_HEARTBEAT_INTERVAL_SECONDS: '0' }, 'OCPP_HEARTBEAT_INTERVAL_SECONDS');
    expectRejected({ OCPP_PING_INTERVAL_SECONDS: '31' }, 'OCPP_PING_INTERVAL_SECONDS');
    expectRejected({ OCPP_LEASE_SECONDS: '61' }, 'OCPP_LEASE_SECONDS');
    expectRejected({ PORT: '3443', OCPP_TLS_PORT: '3443', OCPP_TLS_CERT_FILE: '/c.pem', OCPP_TLS_KEY_FILE: '/k.pem' }, 'OCPP_TLS_PORT');
    expectRejected({ OCPP_TLS_PORT: '3000', OCPP_TLS_CERT_FILE: '/c.pem', OCPP_TLS_KEY_FILE: '/k.pem' }, 'OCPP_TLS_PORT');
  });

  it('a number is digits only: blank, hexadecimal, exponent or signed values are refused, not read as 0, 16 or 1000', () => {
    for (const value of [' ', '  \t', '0x10', '1e3', '+5', '-1', '12 ', ' 12', '1.5']) {
      for (const variable of ['PORT', 'RATE_LIMIT_MAX', 'RATE_LIMIT_TOKEN_MAX', 'AUTH_JWKS_REFETCH_INTERVAL_SECONDS', 'DATABASE_POOL_MAX']) {
        const error = configError({ [variable]: value });
        expect(error.message, `${variable}=${JSON.stringify(value)}`).toBe(`invalid configuration: ${variable}: must be a whole number (digits only)`);
      }
    }
    expect(loadConfig({ RATE_LIMIT_MAX: '0', PORT: '0' })).toMatchObject({ port: 0 });
  });

  it('time limits a timer can hold: SHUTDOWN_TIMEOUT_MS and REQUEST_TIMEOUT_MS at most an hour, RATE_LIMIT_WINDOW_SECONDS at most a day', () => {
    expect(loadConfig({ SHUTDOWN_TIMEOUT_MS: '3600000', REQUEST_TIMEOUT_MS: '3600000', RATE_LIMIT_WINDOW_SECONDS: '86400' })).toMatchObject({ shutdownTimeoutMs: 3_600_000, requestTimeoutMs: 3_600_000 });
    expectRejected({ SHUTDOWN_TIMEOUT_MS: '3000000000' }, 'SHUTDOWN_TIMEOUT_MS');
    expectRejected({ REQUEST_TIMEOUT_MS: '3600001' }, 'REQUEST_TIMEOUT_MS');
    expectRejected({ RATE_LIMIT_WINDOW_SECONDS: '86401' }, 'RATE_LIMIT_WINDOW_SECONDS');
  });

  it('LISTEN_BACKLOG: 4096 unless set, a whole number from 1 to 65535', () => {
    expect(loadConfig({}).listenBacklog).toBe(4096);
    expect(loadConfig({ LISTEN_BACKLOG: '100' }).listenBacklog).toBe(100);
    expectRejected({ LISTEN_BACKLOG: '0' }, 'LISTEN_BACKLOG');
    expectRejected({ LISTEN_BACKLOG: '65536' }, 'LISTEN_BACKLOG');
    expectRejected({ LISTEN_BACKLOG: 'many' }, 'LISTEN_BACKLOG');
  });

  it('SHUTDOWN_DRAIN_SECONDS: 5 unless set, 0 allowed, whole seconds, shorter than SHUTDOWN_TIMEOUT_MS (the stop it is part of)', () => {
    expect(loadConfig({}).shutdownDrainMs).toBe(5000);
    expect(loadConfig({ SHUTDOWN_DRAIN_SECONDS: '0' }).shutdownDrainMs).toBe(0);
    expect(loadConfig({ SHUTDOWN_DRAIN_SECONDS: '9' }).shutdownDrainMs).toBe(9000);
    expect(loadConfig({ SHUTDOWN_DRAIN_SECONDS: '20', SHUTDOWN_TIMEOUT_MS: '30000' })).toMatchObject({ shutdownDrainMs: 20_000, shutdownTimeoutMs: 30_000 });
    for (const bad of ['-1', '1.5', 'five', ' 5', '5s', '1e3', '0x5']) {
      expect(configError({ SHUTDOWN_DRAIN_SECONDS: bad }).message).toBe('invalid configuration: SHUTDOWN_DRAIN_SECONDS: must be a whole number (digits only)');
    }
    // The default drain does not fit a stop bounded by 3 s: the message says what to change.
    for (const env of [{ SHUTDOWN_DRAIN_SECONDS: '10' }, { SHUTDOWN_TIMEOUT_MS: '3000' }, { SHUTDOWN_DRAIN_SECONDS: '99999999999999999999' }] as Record<string, string>[]) {
      expectRejected(env, 'SHUTDOWN_DRAIN_SECONDS');
      expect(configError(env).message).toContain('must be shorter than SHUTDOWN_TIMEOUT_MS');
    }
  });

  it('OCPP_CALL_TIMEOUT_SECONDS: any whole number of seconds from 1 is valid; a timer never exceeds what setTimeout can wait', () => {
    expect(loadConfig({ OCPP_CALL_TIMEOUT_SECONDS: '1' }).ocpp.callTimeoutMs).toBe(1000);
    expect(loadConfig({ OCPP_CALL_TIMEOUT_SECONDS: '86400' }).ocpp.callTimeoutMs).toBe(86_400_000);
    expect(loadConfig({ OCPP_CALL_TIMEOUT_SECONDS: '100000000' }).ocpp.callTimeoutMs).toBe(2 ** 31 - 1);
    expectRejected({ OCPP_CALL_TIMEOUT_SECONDS: '0' }, 'OCPP_CALL_TIMEOUT_SECONDS');
    expectRejected({ OCPP_CALL_TIMEOUT_SECONDS: '1.5' }, 'OCPP_CALL_TIMEOUT_SECONDS');
  });

  it('DATABASE_DIRECT_URL: unset by default, read beside DATABASE_URL (the pooler it bypasses)', () => {
    expect(loadConfig({ DATABASE_URL: 'postgres://cns@db:5432/cns' }).database).toMatchObject({ url: 'postgres://cns@db:5432/cns', directUrl: undefined });
    expect(loadConfig({ DATABASE_URL: 'postgres://cns@pooler:6432/cns', DATABASE_DIRECT_URL: 'postgresql://cns@db:5432/cns' }).database).toMatchObject({
      url: 'postgres://cns@pooler:6432/cns',
      directUrl: 'postgresql://cns@db:5432/cns',
    });
    expect(configError({ DATABASE_DIRECT_URL: 'postgres://cns@db:5432/cns' }).message).toBe('invalid configuration: DATABASE_DIRECT_URL: needs DATABASE_URL (the pooler it bypasses)');
  });

  it('reports one variable in one line when several are wrong', () => {
    const error = configError({ PORT: 'x', LOG_LEVEL: 'loud', OCPP_MIN_SECURITY_PROFILE: '9' });
    expect(error.message).toMatch(/^invalid configuration: (PORT|LOG_LEVEL|OCPP_MIN_SECURITY_PROFILE): [^\n]+$/);
  });

  it('takes the database password apart from the URL, from DATABASE_PASSWORD or a secret file, and names DATABASE_URL when the URL does not parse', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cns-secret-'));
    try {
      const file = join(dir, 'db_password');
      writeFileSync(file, 'p#ss/w@rd%20:x\n');
      const url = 'postgres://cns@db:5432/cns';
      expect(loadConfig({ DATABASE_URL: url, DATABASE_PASSWORD_FILE: file }).database.password).toBe('p#ss/w@rd%20:x');
      expect(loadConfig({ DATABASE_URL: url, DATABASE_PASSWORD: 'plain' }).database.password).toBe('plain');
      expectRejected({ DATABASE_URL: url, DATABASE_PASSWORD_FILE: join(dir, 'missing') }, 'DATABASE_PASSWORD_FILE');
      // A password pasted into the URL: the line names the variable, never its value.
      const error = configError({ DATABASE_URL: 'postgres://cns:se#cret@db:5432/cns' });
      expect(error.message).toMatch(/^invalid configuration: DATABASE_URL: is not a valid URL/);
      expect(error.message).not.toContain('se#cret');

      // Whatever it holds reaches pg as the password itself.
      const withIt = new URL(withPassword(url, 'p#ss/w@rd%20:x'));
      expect(decodeURIComponent(withIt.password)).toBe('p#ss/w@rd%20:x');
      expect(`${withIt.hostname}${withIt.pathname}`).toBe('db/cns');
      expect(withPassword(url, undefined)).toBe(url);
      // A Unix socket's URL has no host to put it before: pg gets it all the same.
      const viaSocket = new pg.Client({ connectionString: withPassword('postgres:///cns?host=/run/postgresql', 'p#ss w+rd%20:x&y=z') }) as unknown as { connectionParameters: Record<string, unknown> };
      expect(viaSocket.connectionParameters).toMatchObject({ host: '/run/postgresql', database: 'cns', password: 'p#ss w+rd%20:x&y=z' });
      // A password already in the URL, before the `@` or as a parameter, gives way to it.
      for (const written of ['postgres://cns:old@db:5432/cns?password=older', 'postgres:///cns?host=/run/postgresql&password=older']) {
        const client = new pg.Client({ connectionString: withPassword(written, 'n3w') }) as unknown as { connectionParameters: Record<string, unknown> };
        expect(client.connectionParameters.password, written).toBe('n3w');
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('server entry point', () => {
  it('exits non-zero with one line on stderr naming the variable for a bad PORT', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: 'notaport' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    // A safety net so a hanging process cannot hang the suite; not an assertion on speed.
    const guard = setTimeout(() => child.kill('SIGKILL'), 25_000);
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
      child.on('exit', (c, s) => resolve([c, s])),
    );
    clearTimeout(guard);

    expect(signal).toBeNull();
    expect(code).not.toBe(0);
    const lines = stderr.split('\n').filter((l) => l.length > 0);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('PORT');
    expect(lines[0]).toMatch(/^invalid configuration: PORT: /);
    expect(stdout).toBe('');
  });
});
