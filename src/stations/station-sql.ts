import { sql, type SQL } from 'drizzle-orm';
import { rowsOf, type Executor } from '../db/database.js';

// The SQL pieces the stations' statements share (stations-repository.ts, replicas-repository.ts).

// The outbox rows a statement appends about the stations it changed (station-events.ts builds
// them; the events area is not this layer's to import). `rows` is a FROM item with the columns
// asset_id, network, protocol and at; each builds a statement for a WITH list.
export interface StationEventSql {
  connected(rows: SQL): SQL;
  disconnected(rows: SQL): SQL;
  // Called after a statement that appended events committed.
  appended(): void;
}

// `unnest(...) as r(asset_id, epoch, <columns>)`: stations at epochs (and more columns, as
// r.<name>), one row per item, for a statement about many stations at once.
export function stationRows<T extends { assetId: string; epoch: number }>(items: T[], columns: Record<string, [type: string, value: (item: T) => unknown]> = {}): SQL {
  const extra = Object.entries(columns);
  const arrays = [
    sql`${sql.param(items.map((i) => i.assetId))}::text[]`,
    sql`${sql.param(items.map((i) => i.epoch))}::bigint[]`,
    ...extra.map(([, [type, value]]) => sql`${sql.param(items.map(value))}::${sql.raw(type)}[]`),
  ];
  const names = sql.raw(['asset_id', 'epoch', ...extra.map(([name]) => name)].join(', '));
  return sql`unnest(${sql.join(arrays, sql`, `)}) as r(${names})`;
}

// What an update of the stations' connection rows (alias c) reads: each row only while its epoch
// is the one named, so a newer connection's row is left alone.
export function ofCurrentEpochRows<T extends { assetId: string; epoch: number }>(items: T[], columns: Record<string, [type: string, value: (item: T) => unknown]>): SQL {
  return sql`from ${stationRows(items, columns)} where c.asset_id = r.asset_id and c.epoch = r.epoch`;
}

// The rows of replicas whose lease ran out: no longer connected, though they still name it.
export const LAPSED_AT = sql`case when r.lease_expires_at <= now() then r.lease_expires_at end`;

// Runs `change`, an UPDATE of the stations' connection rows returning asset_id, network, protocol
// and at, with one event of `kind` appended for each row it changed, in the same statement.
// Answers the ids of the rows changed.
export async function changeWithEvents(db: Executor, kind: 'connected' | 'disconnected', change: SQL, events: StationEventSql): Promise<string[]> {
  const rows = await rowsOf<{ asset_id: string }>(db, sql`with changed as (${change}), appended as (${events[kind](sql`changed`)}) select asset_id from changed`);
  if (rows.length > 0) events.appended();
  return rows.map((row) => row.asset_id);
}
