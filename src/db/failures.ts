import { DrizzleQueryError } from 'drizzle-orm/errors';
import { AppError, ServiceUnavailableError } from '../kernel/errors.js';
import { causeChain } from '../kernel/error-causes.js';

// What a database failure means: a rule the database enforced (a unique violation), "unavailable,
// retry" (a 503), a class for the metrics, and what of it a log line may show.

// Every way Node reports that the database could not be reached, or was lost, at the network:
// its name does not resolve (ENOTFOUND: no such name, as when a compose service is stopped;
// EAI_AGAIN, EAI_FAIL: the resolver failed), nobody listens, no route, the route times out, the
// peer or the network went away. Each may pass on its own, so each is "unavailable, retry".
export const NETWORK_FAILURE_CODES: readonly string[] = [
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENETRESET',
  'EADDRNOTAVAIL',
];
const NETWORK_FAILURES = new Set(NETWORK_FAILURE_CODES);

// A Node error that says the database cannot be reached now. ENOENT counts only for a connect: a
// Unix socket path (host=/var/run/postgresql) whose server is not running.
function isNetworkFailure(error: object): boolean {
  const { code, syscall } = error as { code?: unknown; syscall?: unknown };
  if (typeof code !== 'string') return false;
  return NETWORK_FAILURES.has(code) || (code === 'ENOENT' && syscall === 'connect');
}

export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  const e = findPgError(error);
  return e?.code === '23505' && (constraint === undefined || e.constraint === constraint);
}

export function findPgError(error: unknown): { code?: string; constraint?: string } | undefined {
  for (const e of causeChain(error)) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return e as { code: string; constraint?: string };
  }
  return undefined;
}

// SQLSTATEs after which the same request may succeed if sent again: the statement was cancelled
// (statement timeout), the connection was lost or refused, the server is starting or stopping,
// it has no connection slot free, or a concurrent transaction made this one give up (deadlock,
// serialization failure, lock not available). Class 08 (connection exception) is added below.
// Everything else (constraint violations, bad SQL) is a bug or a rule and is not retried.
const UNAVAILABLE_SQLSTATES = new Set(['57014', '57P01', '57P02', '57P03', '53300', '40001', '40P01', '55P03', '25P03']);
// pg, pg-pool and PGlite report these without a code; the first two are timeouts.
const TIMEOUT_MESSAGES = [/^timeout exceeded when trying to connect/i, /^Query read timeout/];
const UNAVAILABLE_MESSAGES = [...TIMEOUT_MESSAGES, /^Connection terminated/, /is not queryable/, /^Cannot use a pool after calling end/, /^PGlite is closed/];

function unavailableMessage(code: string | undefined): string {
  if (code === '57014') return 'The database did not answer in time; retry later';
  if (code === '53300') return 'The database has no free connection; retry later';
  if (code === '40001' || code === '40P01' || code === '55P03') return 'A concurrent change got in the way; retry';
  return 'The database is unavailable; retry later';
}

// The one place that decides which database failures are "unavailable, retry" (503): it walks the
// cause chain, since drizzle wraps the driver's error. null means the error is not one of them.
// The socket codes are not the database's alone; the service's other network calls (key server,
// Redis) handle their own failures and never let a raw socket error reach a request.
export function classifyDatabaseError(error: unknown): ServiceUnavailableError | null {
  for (const e of causeChain(error)) {
    if (e instanceof ServiceUnavailableError) return e;
    // An error that already says what it means to the client (a domain error, an HTTP error) was
    // decided where it was thrown, whatever its cause: a 401 for an unreachable key server stays 401.
    if (e instanceof AppError || typeof (e as { statusCode?: unknown }).statusCode === 'number') return null;
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') {
      if (isNetworkFailure(e)) return new ServiceUnavailableError(unavailableMessage(undefined), { cause: e });
      if (/^[0-9A-Z]{5}$/.test(code) && (UNAVAILABLE_SQLSTATES.has(code) || code.startsWith('08'))) {
        return new ServiceUnavailableError(unavailableMessage(code), { cause: e, timedOut: code === '57014' });
      }
    }
    const message = (e as { message?: unknown }).message;
    if (typeof message === 'string' && UNAVAILABLE_MESSAGES.some((pattern) => pattern.test(message))) {
      return new ServiceUnavailableError(unavailableMessage(undefined), { cause: e, timedOut: TIMEOUT_MESSAGES.some((pattern) => pattern.test(message)) });
    }
  }
  return null;
}

// For the /metrics counter of database errors, a label of three values: the database did not
// answer in time, was otherwise unavailable (the 503s of classifyDatabaseError), or refused the
// statement (any other SQL error). null: not a database error (a shutdown 503 included).
export type DatabaseErrorClass = 'timeout' | 'unavailable' | 'other';

export function databaseErrorClass(error: unknown): DatabaseErrorClass | null {
  const unavailable = classifyDatabaseError(error);
  if (unavailable) return unavailable.code !== 'DATABASE_UNAVAILABLE' ? null : unavailable.timedOut ? 'timeout' : 'unavailable';
  return findPgError(error) || [...causeChain(error)].some((e) => e instanceof DrizzleQueryError) ? 'other' : null;
}

// What a failed query may put in a log line. drizzle's wrapper lists the query's parameters in
// its message (a password hash, a client's network), and the driver's error carries them too
// (`params`), as do its `detail` (Key (x)=(value)) and the quoted input in its message: a line
// keeps the SQL text, the SQLSTATE and where the server raised it, with quoted values masked.
export function loggableError(error: unknown): unknown {
  if (error instanceof DrizzleQueryError) return { type: 'DrizzleQueryError', query: error.query, cause: loggableError(error.cause) };
  const driver = findPgError(error);
  if (driver && driver === error) {
    const e = error as { name?: unknown; message?: unknown; severity?: unknown; constraint?: unknown; table?: unknown; column?: unknown; routine?: unknown };
    return {
      type: typeof e.name === 'string' ? e.name : 'DatabaseError',
      code: driver.code,
      message: typeof e.message === 'string' ? e.message.replace(/"[^"]*"/g, '"…"') : undefined,
      severity: e.severity,
      constraint: e.constraint,
      table: e.table,
      column: e.column,
      routine: e.routine,
    };
  }
  return error;
}
