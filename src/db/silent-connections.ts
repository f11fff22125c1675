import type pg from 'pg';
import { databaseTimedOut } from './deadline.js';

// A pool's guard against a server that vanished without closing the socket, or stopped
// answering: a connection that has had a query in flight and received nothing for `limitMs` is
// destroyed, so that pg fails its query (a 503, see failures.ts) and the pool drops it.
//
// pg's own guard, `query_timeout`, arms a timer per query whose closure holds the query; a query
// in flight across a minor collection gets that closure promoted, and once the query is done the
// old closure still points at it and its rows, so every answer under load outlives the next
// minor collections (docs/performance.md, "What remains: the service's young objects survive").
// This guard costs nothing per query: one sweep per pool reads, for each connection, whether a
// query is in flight and the socket's count of bytes read, and keeps one small record per
// connection. It counts silence, not the query's age: an answer still arriving is never cut, and
// the server's own statement timeout (shorter than `limitMs`) ends a statement that runs too long.
//
// A query is failed between `limitMs` and `limitMs + sweepMs` after the last byte that arrived
// (or after it was sent). A query cannot end without bytes arriving (its ReadyForQuery), so an
// unchanged count at two sweeps with a query in flight at both means the same query waited
// all along.

// What this module reads of pg's Client beyond its declared type (lib/client.js).
interface ClientInternals {
  // the query sent and not yet answered to its end; null or undefined when idle
  _activeQuery: unknown;
  _queryable: boolean;
  connection: { stream: { bytesRead: number; destroy(error?: Error): void } };
}

interface Watch {
  bytesRead: number;
  // when a sweep first saw the current query in flight with the count as it is; undefined: idle
  silentSince: number | undefined;
}

export function guardSilentConnections(pool: pg.Pool, limitMs: number, sweepMs: number): { stop(): void } {
  const watched = new Map<ClientInternals, Watch>();
  pool.on('connect', (client) => {
    const internals = client as unknown as ClientInternals;
    watched.set(internals, { bytesRead: -1, silentSince: undefined });
    client.once('end', () => watched.delete(internals));
  });
  const check = (watch: Watch, client: ClientInternals) => {
    const now = Date.now();
    if (client._activeQuery == null || !client._queryable) {
      watch.silentSince = undefined;
      return;
    }
    const { stream } = client.connection;
    const bytesRead = stream.bytesRead;
    if (watch.silentSince === undefined || bytesRead !== watch.bytesRead) {
      watch.bytesRead = bytesRead;
      watch.silentSince = now;
    } else if (now - watch.silentSince >= limitMs) {
      watch.silentSince = undefined;
      // pg reports the error to the query in flight and to the client's 'error' listeners (the
      // pool's, and the one every client gets in postgres-database.ts), then 'end' on close.
      stream.destroy(databaseTimedOut(limitMs));
    }
  };
  const sweep = setInterval(() => watched.forEach(check), sweepMs);
  sweep.unref();
  return { stop: () => clearInterval(sweep) };
}
