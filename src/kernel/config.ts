import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { SECURITY_PROFILES } from './ocpp-vocabulary.js';

const booleanString = z
  .enum(['true', 'false', '1', '0'])
  .transform((v) => v === 'true' || v === '1');

// A number in the environment is digits, nothing else: coerced, ' ' would read 0 (a rate limit
// turned off, a random port), '0x10' 16 and '1e3' 1000.
const envNumber = z
  .string()
  .regex(/^\d+$/, 'must be a whole number (digits only)')
  .transform(Number);

const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' });
const optionalUrl = httpUrl.optional();

// An origin, kept as the WHATWG URL spells it (lower case, no trailing slash): it becomes the
// embedded issuer's iss, which OAuth clients compare byte for byte with the address they used, and
// a path would put the issuer's metadata where the service does not serve it. The transform runs
// only on what httpUrl accepted.
const originUrl = httpUrl.transform((value, ctx) => {
  const url = new URL(value);
  if (url.username !== '' || url.password !== '' || url.pathname !== '/' || url.search !== '' || url.hash !== '') {
    ctx.addIssue({ code: 'custom', message: 'must be scheme, host and port only (no path, query, fragment or login), e.g. https://charging.example.com' });
    return z.NEVER;
  }
  return url.origin;
});

const postgresUrl = z
  .string()
  .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
  .refine((url) => URL.canParse(url), 'is not a valid URL (a password with # / @ or % must be percent-encoded; or give it in DATABASE_PASSWORD_FILE or DATABASE_PASSWORD instead)');

const envSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  HOST: z.string().min(1).default('127.0.0.1'),
  PORT: envNumber.pipe(z.number().int().min(0).max(65535)).default(3000),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  TRUST_PROXY: booleanString.default(false),
  DATABASE_URL: postgresUrl.optional(),
  // The server itself when DATABASE_URL is a transaction-mode pooler (PgBouncer and the like): it
  // carries migrations, the start-up lock and LISTEN, and tells the service to speak to the pooler
  // the way such a pooler needs.
  DATABASE_DIRECT_URL: postgresUrl.optional(),
  // The password apart from the URL, so it needs no escaping and can come from a secret file.
  DATABASE_PASSWORD: z.string().optional(),
  DATABASE_PASSWORD_FILE: z.string().min(1).optional(),
  DATABASE_POOL_MAX: envNumber.pipe(z.number().int().min(1).max(500)).default(10),
  DATABASE_STATEMENT_TIMEOUT_MS: envNumber.pipe(z.number().int().min(100).max(3_600_000)).default(5000),
  DATABASE_ACQUIRE_TIMEOUT_MS: envNumber.pipe(z.number().int().min(100).max(3_600_000)).default(5000),
  DATA_DIR: z.string().min(1).default('./data'),
  // The address clients reach the service at (a balancer's, a published port's): the embedded
  // issuer's iss unless AUTH_ISSUER says otherwise, and the base of the commands the start prints.
  PUBLIC_URL: originUrl.optional(),
  AUTH_JWKS_URL: optionalUrl,
  AUTH_ISSUER: z.string().min(1).optional(),
  AUTH_AUDIENCE: z.string().min(1).optional(),
  AUTH_NETWORK_CLAIM: z.string().min(1).default('network'),
  AUTH_ROLES_CLAIM: z.string().min(1).default('roles'),
  AUTH_TOKEN_TTL_SECONDS: envNumber.pipe(z.number().int().min(60).max(86_400)).default(3600),
  AUTH_SIGNING_ALG: z.enum(['ES256', 'RS256']).default('ES256'),
  AUTH_JWKS_CACHE_TTL_SECONDS: envNumber.pipe(z.number().int().min(1).max(86_400)).default(600),
  AUTH_JWKS_REFETCH_INTERVAL_SECONDS: envNumber.pipe(z.number().int().min(0).max(3600)).default(30),
  // A revoked client's tokens stop working within 30 s (docs/api.md, Authentication).
  AUTH_REVOCATION_REFRESH_SECONDS: envNumber.pipe(z.number().int().min(1).max(30)).default(10),
  OCPP_MIN_SECURITY_PROFILE: envNumber.pipe(z.number().int().min(1).max(3)).pipe(z.literal(SECURITY_PROFILES)).default(2),
  RATE_LIMIT_MAX: envNumber.pipe(z.number().int().min(0)).default(6000),
  RATE_LIMIT_WINDOW_SECONDS: envNumber.pipe(z.number().int().min(1).max(86_400)).default(60),
  // The token endpoint's own bucket per address: a client secret must not be guessable at the
  // general budget, while a script or a test suite fetching tokens is not refused.
  RATE_LIMIT_TOKEN_MAX: envNumber.pipe(z.number().int().min(0)).default(120),
  // Several deployments may share one Redis: each counts under its own prefix.
  RATE_LIMIT_REDIS_PREFIX: z.string().min(1).max(200).default('charging-network:rate-limit:'),
  REDIS_URL: z.string().regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL').optional(),
  // Webhook targets on private, loopback and link-local addresses, and http URLs: for tests and a
  // network of one's own only (docs/events.md, "Targets").
  WEBHOOKS_ALLOW_PRIVATE_TARGETS: booleanString.default(false),
  // Days an event and its deliveries are kept after it was made, and until none is pending
  // (docs/events.md, "Retention").
  WEBHOOKS_RETENTION_DAYS: envNumber.pipe(z.number().int().min(1).max(3650)).default(30),
  SHUTDOWN_TIMEOUT_MS: envNumber.pipe(z.number().int().min(100).max(3_600_000)).default(10_000),
  // On SIGTERM, how long /readyz answers 503 (everything else still served) before the stop
  // begins, so a load balancer's health checks take the replica out first. Counts inside
  // SHUTDOWN_TIMEOUT_MS.
  SHUTDOWN_DRAIN_SECONDS: envNumber.default(5),
  // Longest time for a request's headers and body to arrive (never bounds a handler's work).
  REQUEST_TIMEOUT_MS: envNumber.pipe(z.number().int().min(1000).max(3_600_000)).default(30_000),
  // Connections the kernel completes and queues until the process accepts them. Node's default
  // (511) overflows in a reconnect storm: the kernel then drops the stations' SYNs, and each
  // retries after 1, 3, 7, 15 s. Linux caps it at net.core.somaxconn.
  LISTEN_BACKLOG: envNumber.pipe(z.number().int().min(1).max(65_535)).default(4096),
  OCPP_HEARTBEAT_INTERVAL_SECONDS: envNumber.pipe(z.number().int().min(1).max(86_400)).default(300),
  // A socket that misses one ping is closed at the next: dead within twice this (at most 60 s).
  OCPP_PING_INTERVAL_SECONDS: envNumber.pipe(z.number().int().min(1).max(30)).default(30),
  // A replica that dies reads disconnected once its lease runs out (within 60 s).
  OCPP_LEASE_SECONDS: envNumber.pipe(z.number().int().min(1).max(60)).default(30),
  // How long a password change waits for the station's answer; any value ≥ 1.
  OCPP_CALL_TIMEOUT_SECONDS: envNumber.pipe(z.number().int().min(1)).default(30),
  OCPP_TLS_PORT: envNumber.pipe(z.number().int().min(0).max(65535)).optional(),
  OCPP_TLS_CERT_FILE: z.string().min(1).optional(),
  OCPP_TLS_KEY_FILE: z.string().min(1).optional(),
});

const DEFAULT_AUDIENCE = 'charging-network-api';

// The application's view of the environment: AppConfig is whatever this returns.
const configSchema = envSchema.transform((e, ctx) => {
  const external = e.AUTH_JWKS_URL !== undefined;
  const tlsVariables = [e.OCPP_TLS_PORT, e.OCPP_TLS_CERT_FILE, e.OCPP_TLS_KEY_FILE].filter((v) => v !== undefined).length;
  if (tlsVariables !== 0 && tlsVariables !== 3) {
    ctx.addIssue({ code: 'custom', path: ['OCPP_TLS_PORT'], message: 'OCPP_TLS_PORT, OCPP_TLS_CERT_FILE and OCPP_TLS_KEY_FILE go together' });
    return z.NEVER;
  }
  // Both listeners ask for SO_REUSEPORT (on Node 22.12+), so one port named twice would not fail:
  // the kernel would share its connections between the API and the TLS listener.
  if (e.OCPP_TLS_PORT !== undefined && e.OCPP_TLS_PORT !== 0 && e.OCPP_TLS_PORT === e.PORT) {
    ctx.addIssue({ code: 'custom', path: ['OCPP_TLS_PORT'], message: `must differ from PORT (${e.PORT})` });
    return z.NEVER;
  }
  let databasePassword = e.DATABASE_PASSWORD;
  if (e.DATABASE_PASSWORD_FILE !== undefined) {
    try {
      // A secret file usually ends in a newline that is not part of the password.
      databasePassword = readFileSync(e.DATABASE_PASSWORD_FILE, 'utf8').replace(/\r?\n$/, '');
    } catch (error) {
      ctx.addIssue({ code: 'custom', path: ['DATABASE_PASSWORD_FILE'], message: `cannot read it (${(error as NodeJS.ErrnoException).code ?? 'error'})` });
      return z.NEVER;
    }
  }
  if (e.DATABASE_DIRECT_URL !== undefined && e.DATABASE_URL === undefined) {
    ctx.addIssue({ code: 'custom', path: ['DATABASE_DIRECT_URL'], message: 'needs DATABASE_URL (the pooler it bypasses)' });
    return z.NEVER;
  }
  if (e.SHUTDOWN_DRAIN_SECONDS * 1000 >= e.SHUTDOWN_TIMEOUT_MS) {
    ctx.addIssue({
      code: 'custom',
      path: ['SHUTDOWN_DRAIN_SECONDS'],
      message: `must be shorter than SHUTDOWN_TIMEOUT_MS (${e.SHUTDOWN_TIMEOUT_MS} ms), which bounds the whole stop, the drain included (5 s when unset): lower it or raise SHUTDOWN_TIMEOUT_MS`,
    });
    return z.NEVER;
  }
  if (external && !e.AUTH_ISSUER) {
    ctx.addIssue({ code: 'custom', path: ['AUTH_ISSUER'], message: 'required when AUTH_JWKS_URL is set' });
    return z.NEVER;
  }
  return {
    env: e.NODE_ENV,
    host: e.HOST,
    port: e.PORT,
    logLevel: e.LOG_LEVEL,
    trustProxy: e.TRUST_PROXY,
    publicUrl: e.PUBLIC_URL,
    database: {
      url: e.DATABASE_URL,
      directUrl: e.DATABASE_DIRECT_URL,
      password: databasePassword,
      poolMax: e.DATABASE_POOL_MAX,
      dataDir: e.DATA_DIR,
      statementTimeoutMs: e.DATABASE_STATEMENT_TIMEOUT_MS,
      acquireTimeoutMs: e.DATABASE_ACQUIRE_TIMEOUT_MS,
    },
    auth: {
      mode: external ? ('external' as const) : ('embedded' as const),
      jwksUrl: e.AUTH_JWKS_URL,
      // Never PUBLIC_URL for an external provider's tokens: their iss is its to say (required above).
      issuer: e.AUTH_ISSUER ?? e.PUBLIC_URL ?? `http://localhost:${e.PORT}`,
      audience: e.AUTH_AUDIENCE ?? DEFAULT_AUDIENCE,
      networkClaim: e.AUTH_NETWORK_CLAIM,
      rolesClaim: e.AUTH_ROLES_CLAIM,
      tokenTtlSeconds: e.AUTH_TOKEN_TTL_SECONDS,
      signingAlg: e.AUTH_SIGNING_ALG,
      jwksCacheTtlSeconds: e.AUTH_JWKS_CACHE_TTL_SECONDS,
      jwksRefetchIntervalSeconds: e.AUTH_JWKS_REFETCH_INTERVAL_SECONDS,
      revocationRefreshSeconds: e.AUTH_REVOCATION_REFRESH_SECONDS,
    },
    ocppMinSecurityProfile: e.OCPP_MIN_SECURITY_PROFILE,
    rateLimit: {
      max: e.RATE_LIMIT_MAX,
      tokenMax: e.RATE_LIMIT_TOKEN_MAX,
      windowSeconds: e.RATE_LIMIT_WINDOW_SECONDS,
      redisUrl: e.REDIS_URL,
      redisPrefix: e.RATE_LIMIT_REDIS_PREFIX,
    },
    webhooks: { allowPrivateTargets: e.WEBHOOKS_ALLOW_PRIVATE_TARGETS, retentionDays: e.WEBHOOKS_RETENTION_DAYS },
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    shutdownDrainMs: e.SHUTDOWN_DRAIN_SECONDS * 1000,
    requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
    listenBacklog: e.LISTEN_BACKLOG,
    ocpp: {
      heartbeatIntervalSeconds: e.OCPP_HEARTBEAT_INTERVAL_SECONDS,
      pingIntervalSeconds: e.OCPP_PING_INTERVAL_SECONDS,
      leaseSeconds: e.OCPP_LEASE_SECONDS,
      // Timers fire at once beyond 2^31-1 ms (about 24.8 days): longer settings wait that long.
      callTimeoutMs: Math.min(e.OCPP_CALL_TIMEOUT_SECONDS * 1000, 2 ** 31 - 1),
      tls:
        e.OCPP_TLS_PORT !== undefined ? { port: e.OCPP_TLS_PORT, certFile: e.OCPP_TLS_CERT_FILE!, keyFile: e.OCPP_TLS_KEY_FILE! } : undefined,
    },
  };
});

export type AppConfig = z.output<typeof configSchema>;

export class ConfigError extends Error {}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  // Empty strings in .env files mean "unset", not "invalid".
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = configSchema.safeParse(cleaned);
  if (!parsed.success) {
    // One line naming one variable, never the value (it may hold a secret).
    const issue = parsed.error.issues[0]!;
    const name = String(issue.path[0] ?? 'environment');
    throw new ConfigError(`invalid configuration: ${name}: ${issue.message}`);
  }
  return parsed.data;
}
