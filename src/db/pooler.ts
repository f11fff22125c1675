import pg from 'pg';

// How the service's pools talk to PostgreSQL, straight or through a transaction-mode pooler
// (PgBouncer with pool_mode = transaction, and the managed poolers that work the same way).
//
// Such a pooler lends a server session to a client for one transaction at a time: the client's
// next transaction may run on another session, one that another client used a moment before. So
// on connections through it:
// - no startup parameter beyond the few the pooler tracks itself: statement_timeout in the
//   startup packet is refused ("unsupported startup parameter");
// - no statement names: a statement prepared in one transaction is unknown to the session the
//   next one gets ("does not exist"), or that session holds another client's statement of the
//   same name ("already exists");
// - no session state: a plain SET would stay on a session other clients get next, so the
//   statement timeout is set for one transaction only (set_config(…, true)), sent in the same
//   round trip as the statement it limits.

export interface TimeLimits {
  // server-side limit of one statement; undefined: none
  statementTimeoutMs: number | undefined;
  // pg's client gives up on an answer after this, with a timer per query that keeps each query
  // and its rows alive past minor collections: for rare queries only (the readiness probe; the
  // service's pool has silent-connections.ts instead); undefined: never
  queryTimeoutMs: number | undefined;
}

// The part of a pool's (or a client's) pg settings that the time limits and the pooler decide.
export function connectionSettings(limits: TimeLimits, behindPooler: boolean): Pick<pg.PoolConfig, 'statement_timeout' | 'query_timeout' | 'Client'> {
  const queryTimeout = limits.queryTimeoutMs ? { query_timeout: limits.queryTimeoutMs } : {};
  if (!behindPooler) return { ...(limits.statementTimeoutMs ? { statement_timeout: limits.statementTimeoutMs } : {}), ...queryTimeout };
  return { Client: transactionModeClient(limits.statementTimeoutMs), ...queryTimeout };
}

// What this module uses of pg's Query beyond its declared type: the steps of an extended query
// and the handlers the client calls with the server's messages (lib/query.js).
interface QueryInternals {
  queryMode?: string;
  callback?: Callback;
  query_timeout?: number;
  submit(connection: ProtocolConnection): Error | null;
  prepare(connection: ProtocolConnection): void;
  handleDataRow(message: unknown): void;
  handleCommandComplete(message: unknown, connection: ProtocolConnection): void;
}

interface ProtocolConnection {
  parse(query: { text: string }): void;
  bind(config: object): void;
  execute(config: object): void;
}

type QueryConfig = pg.QueryConfig & { query_timeout?: number };
type Callback = (error: Error | null | undefined, result?: unknown) => void;

// A pg Client whose every query goes out unnamed and, when it starts a transaction (a single
// statement runs in a transaction of its own, BEGIN opens one), behind the statement timeout of
// that transaction. Submittables (cursors, streams) pass as they are.
function transactionModeClient(statementTimeoutMs: number | undefined): typeof pg.Client {
  const setTimeoutLocally = statementTimeoutMs ? `select set_config('statement_timeout', '${Math.trunc(statementTimeoutMs)}', true)` : null;
  const baseQuery = pg.Client.prototype.query as (this: pg.Client, config: unknown, values?: unknown, callback?: unknown) => unknown;

  // Not "Pool…": drizzle takes a client whose class name contains "Pool" for a pool.
  class TransactionModeClient extends pg.Client {}
  // pg.Client's query has a dozen overloads; this one implementation serves them all.
  TransactionModeClient.prototype.query = function query(this: pg.Client, config: unknown, values?: unknown, callback?: unknown): unknown {
    const plain = typeof config === 'string' || (typeof config === 'object' && config !== null && typeof (config as { submit?: unknown }).submit !== 'function');
    if (!plain) return baseQuery.call(this, config, values, callback);
    const { name: _name, ...unnamed } = typeof config === 'string' ? { text: config } : (config as QueryConfig);
    // pg's Query sorts out (values, callback), (callback) and a callback inside the config
    const query = new pg.Query(unnamed, values as unknown[] | undefined, callback as Callback | undefined) as unknown as QueryInternals;
    if (unnamed.query_timeout) query.query_timeout = unnamed.query_timeout;
    if (setTimeoutLocally) timeoutFirst(query, setTimeoutLocally, () => this.getTransactionStatus());
    if (query.callback) {
      baseQuery.call(this, query);
      return undefined;
    }
    return new Promise((resolve, reject) => {
      query.callback = (error, result) => (error ? reject(error) : resolve(result));
      baseQuery.call(this, query);
    });
  } as pg.Client['query'];
  return TransactionModeClient;
}

// Makes the query send `setting` (a one-row select) ahead of itself in the same pipeline, up
// to one Sync, when the session is idle: both then run in one transaction (the implicit one of
// the extended protocol, or the one the query's BEGIN opens), so the timeout holds for the query
// and ends with that transaction. Inside a transaction it has been set already, and after an
// error only a ROLLBACK may run. The status is read when the query is sent, not when queued.
// So such a pool takes one statement per query, and none that refuses to run in a pipeline
// (VACUUM, CREATE DATABASE): the service sends neither through it.
function timeoutFirst(query: QueryInternals, setting: string, transactionStatus: () => string | null): void {
  const { submit, prepare, handleDataRow, handleCommandComplete } = query;
  // true from sending until the setting's own answer (its row and its CommandComplete) is past
  let settingFirst = false;
  query.submit = function (connection) {
    const status = transactionStatus();
    settingFirst = status !== 'T' && status !== 'E';
    if (settingFirst) query.queryMode = 'extended';
    return submit.call(this, connection);
  };
  query.prepare = function (connection) {
    if (settingFirst) {
      connection.parse({ text: setting });
      connection.bind({});
      connection.execute({});
    }
    prepare.call(this, connection);
  };
  query.handleDataRow = function (message) {
    if (!settingFirst) handleDataRow.call(this, message);
  };
  query.handleCommandComplete = function (message, connection) {
    if (settingFirst) settingFirst = false;
    else handleCommandComplete.call(this, message, connection);
  };
}
