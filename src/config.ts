import { z } from 'zod';

const booleanString = z
  .enum(['true', 'false', '1', '0'])
  .transform((v) => v === 'true' || v === '1');

const optionalUrl = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional();

const envSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  HOST: z.string().min(1).default('127.0.0.1'),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  TRUST_PROXY: booleanString.default(false),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
    .optional(),
  DATABASE_POOL_MAX: z.coerce.number().int().min(1).max(500).default(10),
  DATABASE_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(100).max(3_600_000).default(5000),
  DATABASE_ACQUIRE_TIMEOUT_MS: z.coerce.number().int().min(100).max(3_600_000).default(5000),
  DATA_DIR: z.string().min(1).default('./data'),
  AUTH_JWKS_URL: optionalUrl,
  AUTH_ISSUER: z.string().min(1).optional(),
  AUTH_AUDIENCE: z.string().min(1).optional(),
  AUTH_NETWORK_CLAIM: z.string().min(1).default('network'),
  AUTH_ROLES_CLAIM: z.string().min(1).default('roles'),
  AUTH_TOKEN_TTL_SECONDS: z.coerce.number().int().min(60).max(86_400).default(3600),
  AUTH_SIGNING_ALG: z.enum(['ES256', 'RS256']).default('ES256'),
  AUTH_JWKS_CACHE_TTL_SECONDS: z.coerce.number().int().min(1).max(86_400).default(600),
  AUTH_JWKS_REFETCH_INTERVAL_SECONDS: z.coerce.number().int().min(0).max(3600).default(30),
  // Contract §9: a revoked client's tokens stop working within 30 s.
  AUTH_REVOCATION_REFRESH_SECONDS: z.coerce.number().int().min(1).max(30).default(10),
  OCPP_MIN_SECURITY_PROFILE: z.coerce.number().int().min(1).max(3).default(2),
  RATE_LIMIT_MAX: z.coerce.number().int().min(0).default(6000),
  RATE_LIMIT_WINDOW_SECONDS: z.coerce.number().int().min(1).default(60),
  REDIS_URL: z.string().regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL').optional(),
  SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().min(100).default(10_000),
  REQUEST_TIMEOUT_MS: z.coerce.number().int().min(1000).default(30_000),
  OCPP_HEARTBEAT_INTERVAL_SECONDS: z.coerce.number().int().min(1).max(86_400).default(300),
  // A socket that misses one ping is closed at the next: dead within twice this (contract §8.1: 60 s).
  OCPP_PING_INTERVAL_SECONDS: z.coerce.number().int().min(1).max(30).default(30),
  // A replica that dies reads disconnected once its lease runs out (contract §8.3: within 60 s).
  OCPP_LEASE_SECONDS: z.coerce.number().int().min(1).max(60).default(30),
  OCPP_TLS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  OCPP_TLS_CERT_FILE: z.string().min(1).optional(),
  OCPP_TLS_KEY_FILE: z.string().min(1).optional(),
});

export type Env = z.infer<typeof envSchema>;

export interface AppConfig {
  env: Env['NODE_ENV'];
  host: string;
  port: number;
  logLevel: Env['LOG_LEVEL'];
  trustProxy: boolean;
  database: {
    url?: string | undefined;
    poolMax: number;
    dataDir: string;
    statementTimeoutMs: number;
    acquireTimeoutMs: number;
  };
  auth: {
    mode: 'embedded' | 'external';
    jwksUrl?: string | undefined;
    issuer: string;
    audience: string;
    networkClaim: string;
    rolesClaim: string;
    tokenTtlSeconds: number;
    signingAlg: 'ES256' | 'RS256';
    jwksCacheTtlSeconds: number;
    jwksRefetchIntervalSeconds: number;
    revocationRefreshSeconds: number;
  };
  ocppMinSecurityProfile: 1 | 2 | 3;
  rateLimit: { max: number; windowSeconds: number; redisUrl?: string | undefined };
  shutdownTimeoutMs: number;
  // Longest time for a request's headers and body to arrive (never bounds a handler's work).
  requestTimeoutMs: number;
  ocpp: {
    heartbeatIntervalSeconds: number;
    pingIntervalSeconds: number;
    leaseSeconds: number;
    // The service's own TLS listener for OCPP security profile 2; unset without OCPP_TLS_PORT.
    tls?: { port: number; certFile: string; keyFile: string } | undefined;
  };
}

export class ConfigError extends Error {}

const DEFAULT_AUDIENCE = 'charging-network-api';

export function loadConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  // Empty strings in .env files mean "unset", not "invalid".
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = envSchema.safeParse(cleaned);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const name = String(issue.path[0] ?? 'environment');
    throw new ConfigError(`invalid configuration: ${name}: ${issue.message}`);
  }
  const e = parsed.data;
  const external = e.AUTH_JWKS_URL !== undefined;
  const tlsVariables = [e.OCPP_TLS_PORT, e.OCPP_TLS_CERT_FILE, e.OCPP_TLS_KEY_FILE].filter((v) => v !== undefined).length;
  if (tlsVariables !== 0 && tlsVariables !== 3) {
    throw new ConfigError('invalid configuration: OCPP_TLS_PORT: OCPP_TLS_PORT, OCPP_TLS_CERT_FILE and OCPP_TLS_KEY_FILE go together');
  }
  if (external && !e.AUTH_ISSUER) {
    throw new ConfigError('invalid configuration: AUTH_ISSUER: required when AUTH_JWKS_URL is set');
  }
  return {
    env: e.NODE_ENV,
    host: e.HOST,
    port: e.PORT,
    logLevel: e.LOG_LEVEL,
    trustProxy: e.TRUST_PROXY,
    database: {
      url: e.DATABASE_URL,
      poolMax: e.DATABASE_POOL_MAX,
      dataDir: e.DATA_DIR,
      statementTimeoutMs: e.DATABASE_STATEMENT_TIMEOUT_MS,
      acquireTimeoutMs: e.DATABASE_ACQUIRE_TIMEOUT_MS,
    },
    auth: {
      mode: external ? 'external' : 'embedded',
      jwksUrl: e.AUTH_JWKS_URL,
      issuer: e.AUTH_ISSUER ?? `http://localhost:${e.PORT}`,
      audience: e.AUTH_AUDIENCE ?? DEFAULT_AUDIENCE,
      networkClaim: e.AUTH_NETWORK_CLAIM,
      rolesClaim: e.AUTH_ROLES_CLAIM,
      tokenTtlSeconds: e.AUTH_TOKEN_TTL_SECONDS,
      signingAlg: e.AUTH_SIGNING_ALG,
      jwksCacheTtlSeconds: e.AUTH_JWKS_CACHE_TTL_SECONDS,
      jwksRefetchIntervalSeconds: e.AUTH_JWKS_REFETCH_INTERVAL_SECONDS,
      revocationRefreshSeconds: e.AUTH_REVOCATION_REFRESH_SECONDS,
    },
    ocppMinSecurityProfile: e.OCPP_MIN_SECURITY_PROFILE as 1 | 2 | 3,
    rateLimit: { max: e.RATE_LIMIT_MAX, windowSeconds: e.RATE_LIMIT_WINDOW_SECONDS, redisUrl: e.REDIS_URL },
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
    ocpp: {
      heartbeatIntervalSeconds: e.OCPP_HEARTBEAT_INTERVAL_SECONDS,
      pingIntervalSeconds: e.OCPP_PING_INTERVAL_SECONDS,
      leaseSeconds: e.OCPP_LEASE_SECONDS,
      tls:
        e.OCPP_TLS_PORT !== undefined ? { port: e.OCPP_TLS_PORT, certFile: e.OCPP_TLS_CERT_FILE!, keyFile: e.OCPP_TLS_KEY_FILE! } : undefined,
    },
  };
}
