import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import { sql, type SQL } from 'drizzle-orm';
import { DrizzleQueryError } from 'drizzle-orm/errors';
import { drizzle as drizzlePg, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import pg from 'pg';
import { AppError, ServiceUnavailableError } from '../errors.js';
import { folderProblem, lockDataDir, type DataDirHolder } from './data-dir-lock.js';
import { isNetworkFailure } from './network-failures.js';
import { DEFAULT_TEMPLATE_DIR, PGLITE_INITDB_PARAMS, PGLITE_START_PARAMS, seedFromTemplate } from './pglite-template.js';
import { limitPgliteWasmTiering } from './pglite-wasm-tiering.js';
import * as schema from './schema.js';

export type Schema = typeof schema;
export type Db = PgDatabase<PgQueryResultHKT, Schema>;
export type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];
export type Executor = Db | Tx;

// The rows of a raw statement. Both drivers answer db.execute with `{ rows }` (column names as
// written, values as the driver parses them), which drizzle's type for it does not say.
export async function rowsOf<T>(db: Executor, query: SQL): Promise<T[]> {
  return ((await db.execute(query)) as unknown as { rows: T[] }).rows;
}

export interface Database {
  db: Db;
  kind: 'postgres' | 'pglite';
  // PostgreSQL: for a dedicated connection of its own (LISTEN), outside the pool.
  connectionString?: string;
  ping(): Promise<void>;
  // Runs fn while holding a cluster-wide advisory lock: start-up work (migrations, signing key,
  // bootstrap client) must happen once even when several replicas start together.
  withStartupLock<T>(fn: (db: Db) => Promise<T>): Promise<T>;
  close(): Promise<void>;
  // PGlite only: the data directory as a tarball (test snapshots)
  dumpDataDir?(): Promise<Blob>;
  // PostgreSQL only: the request pool's connections now (PGlite has one in-process connection
  // and no pool).
  poolStats?(): PoolStats;
}

export interface PoolStats {
  // open connections, idle or in use
  total: number;
  idle: number;
  // queries waiting for a connection
  waiting: number;
}

export interface DatabaseOptions {
  url?: string | undefined;
  // PostgreSQL: the password, when it is not in the URL (DATABASE_PASSWORD(_FILE)).
  password?: string | undefined;
  poolMax?: number;
  // PGlite data directory; undefined means in memory (tests)
  dataDir?: string | undefined;
  // Who takes the data directory's lock, named to a second process that is refused (PGlite only).
  holder?: DataDirHolder | undefined;
  // An in-memory PGlite starts from this dumped data directory instead of running initdb (tests
  // start hundreds of databases; initdb is ~3 s of each, loading a migrated snapshot ~0.5 s).
  pgliteSnapshot?: Blob | undefined;
  // An empty dataDir is copied from this pre-initialised data directory (see pglite-template.ts);
  // without a usable one there, PGlite runs initdb. Default: the one `npm run build` makes.
  pgliteTemplateDir?: string | undefined;
  // PostgreSQL only (PGlite cannot interrupt a running statement, nor has it a pool to wait for).
  // Unset means no limit: the service passes its configuration, tools (seeding, CLI) may run long.
  statementTimeoutMs?: number | undefined;
  acquireTimeoutMs?: number | undefined;
}

const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../migrations', import.meta.url));
// Arbitrary but fixed: identifies this service's start-up lock in pg_locks.
export const STARTUP_LOCK_KEY = 7_240_311_902;

export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  return options.url
    ? openPostgres(withPassword(options.url, options.password), {
        poolMax: options.poolMax ?? 10,
        statementTimeoutMs: options.statementTimeoutMs,
        acquireTimeoutMs: options.acquireTimeoutMs,
      })
    : openPglite(options.dataDir, {
        snapshot: options.pgliteSnapshot,
        templateDir: options.pgliteTemplateDir ?? DEFAULT_TEMPLATE_DIR,
        holder: options.holder ?? 'server',
      });
}

// The password goes into the URL here, percent-encoded, so whatever characters it holds reach
// pg intact (pg decodes it); the operator's URL never needs escaping.
export function withPassword(url: string, password: string | undefined): string {
  if (password === undefined) return url;
  const parsed = new URL(url);
  parsed.password = encodeURIComponent(password);
  return parsed.toString();
}

// /readyz must answer within 2 s; this leaves room for the rest of the request.
const PING_TIMEOUT_MS = 1500;
// Beyond the statement timeout (which the server enforces), the client gives up on a query whose
// answer never comes: a server that vanished without closing the socket must not hold a request.
const QUERY_TIMEOUT_MARGIN_MS = 1000;
const APPLICATION_NAME = 'charging-network-service';

function ignore(): void {}

// A checked-out client has no 'error' listener of the pool's, so a connection lost between two
// queries of a request would be an unhandled 'error' event: an uncaught exception that stops the
// process. The query in flight is rejected anyway, and the pool discards a client that is no
// longer queryable when it is released.
function neverCrashOnLostConnections(pool: pg.Pool): void {
  pool.on('error', ignore);
  pool.on('connect', (client) => client.on('error', ignore));
}

async function openPostgres(
  url: string,
  limits: { poolMax: number; statementTimeoutMs: number | undefined; acquireTimeoutMs: number | undefined },
): Promise<Database> {
  const pool = new pg.Pool({
    connectionString: url,
    application_name: APPLICATION_NAME,
    max: limits.poolMax,
    // Bounds both the wait for a free client and the opening of a new connection.
    ...(limits.acquireTimeoutMs ? { connectionTimeoutMillis: limits.acquireTimeoutMs } : {}),
    ...(limits.statementTimeoutMs
      ? { statement_timeout: limits.statementTimeoutMs, query_timeout: limits.statementTimeoutMs + QUERY_TIMEOUT_MARGIN_MS }
      : {}),
    keepAlive: true,
  });
  neverCrashOnLostConnections(pool);
  // Readiness has a connection of its own: a pool full of requests waiting on a lock says nothing
  // about whether the database answers, and must not make the probe wait behind them.
  const probe = new pg.Pool({
    connectionString: url,
    application_name: `${APPLICATION_NAME}/readiness`,
    max: 1,
    connectionTimeoutMillis: PING_TIMEOUT_MS,
    statement_timeout: PING_TIMEOUT_MS,
    query_timeout: PING_TIMEOUT_MS,
    keepAlive: true,
  });
  neverCrashOnLostConnections(probe);

  const db = drizzlePg(pool, { schema }) as unknown as Db;
  const clientDbs = new WeakMap<pg.PoolClient, Db>();
  // drizzle's own pool transaction sends BEGIN outside its try (a failed BEGIN leaks the client)
  // and always returns the client to the pool, broken or not. This one checks a client out itself,
  // lets drizzle run the transaction on that client alone, and discards the client after any
  // failure other than a domain error (which drizzle has rolled back on a healthy connection).
  db.transaction = (async (fn: Parameters<Db['transaction']>[0], config?: Parameters<Db['transaction']>[1]) => {
    const client = await pool.connect();
    let failure: Error | undefined;
    try {
      let clientDb = clientDbs.get(client);
      if (!clientDb) {
        clientDb = drizzlePg(client, { schema }) as unknown as Db;
        clientDbs.set(client, clientDb);
      }
      return await clientDb.transaction(fn, config);
    } catch (error) {
      if (!(error instanceof AppError)) failure = error instanceof Error ? error : new Error(String(error));
      throw error;
    } finally {
      client.release(failure);
    }
  }) as Db['transaction'];

  return {
    db,
    kind: 'postgres',
    connectionString: url,
    async ping() {
      await withDeadline(probe.query('select 1'), PING_TIMEOUT_MS);
    },
    async withStartupLock(fn) {
      // A connection of its own, without the statement and query timeouts: waiting while another
      // replica migrates, and migrating, may take longer than any request may. The advisory lock
      // is the session's, so ending the connection releases it whatever happened.
      const client = new pg.Client({ connectionString: url, application_name: APPLICATION_NAME, keepAlive: true });
      client.on('error', ignore);
      await client.connect();
      try {
        await client.query('select pg_advisory_lock($1)', [STARTUP_LOCK_KEY]);
        const lockedDb = drizzlePg(client, { schema });
        await migratePg(lockedDb as NodePgDatabase<Schema>, { migrationsFolder: MIGRATIONS_FOLDER });
        return await fn(lockedDb as unknown as Db);
      } finally {
        await client.end().catch(ignore);
      }
    },
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    async close() {
      await Promise.all([pool.end(), probe.end()]);
    },
  };
}

// Rejects when the promise has not settled in time; the work itself is left to finish (or fail)
// on its own, its outcome ignored.
async function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new ServiceUnavailableError(`The database did not answer within ${ms} ms`, { timedOut: true })), ms);
  });
  work.catch(ignore);
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

async function openPglite(
  dataDir: string | undefined,
  { snapshot, templateDir, holder }: { snapshot: Blob | undefined; templateDir: string; holder: DataDirHolder },
): Promise<Database> {
  const lock = dataDir ? lockDataDir(dataDir, holder, (line) => process.stderr.write(`${line}\n`)) : undefined;
  let client: PGlite;
  try {
    const settings = { startParams: PGLITE_START_PARAMS, initDbStartParams: PGLITE_INITDB_PARAMS };
    if (dataDir) {
      try {
        seedFromTemplate(dataDir, templateDir);
      } catch (error) {
        throw folderProblem(dataDir, error);
      }
    }
    limitPgliteWasmTiering();
    client = dataDir ? new PGlite(dataDir, settings) : new PGlite({ ...settings, ...(snapshot ? { loadDataDir: snapshot } : {}) });
    await client.waitReady;
  } catch (error) {
    lock?.release();
    // PGlite reports file system failures as bare errno objects ("[object Object]" as text).
    throw dataDir && !(error instanceof Error) ? folderProblem(dataDir, error) : error;
  }
  const db = drizzlePglite(client, { schema });
  return {
    db: db as unknown as Db,
    kind: 'pglite',
    async ping() {
      // One connection, one statement at a time: the probe queues behind the requests' statements.
      await withDeadline(client.query('select 1'), PING_TIMEOUT_MS);
    },
    async withStartupLock(fn) {
      // PGlite is single-connection and single-process: there is nobody to race with.
      await migratePglite(db, { migrationsFolder: MIGRATIONS_FOLDER });
      return fn(db as unknown as Db);
    },
    async close() {
      try {
        if (!client.closed) await client.close();
      } finally {
        lock?.release();
      }
    },
    async dumpDataDir() {
      return client.dumpDataDir('none');
    },
  };
}

export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  const e = findPgError(error);
  return e?.code === '23505' && (constraint === undefined || e.constraint === constraint);
}

// An error and its causes, outermost first: drizzle wraps the driver's error, which is on `cause`.
function* causeChain(error: unknown): Generator<object> {
  const seen = new Set<unknown>();
  for (let e = error; typeof e === 'object' && e !== null && !seen.has(e); e = (e as { cause?: unknown }).cause) {
    seen.add(e);
    yield e;
  }
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

export { sql };
