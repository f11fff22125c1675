import { sql, type SQL } from 'drizzle-orm';
import { rowsOf, type Executor } from '../db/database.js';
import type { EventType } from './event-types.js';
import { eventIdTimeSql, events } from './events-tables.js';

export interface OutboxRow {
  network: string | null;
  type: EventType;
  data: string;
}

// One multi-row INSERT: the outbox row only, no fan-out, so the caller's transaction stays short.
export async function insertEvents(db: Executor, rows: readonly OutboxRow[]): Promise<void> {
  if (rows.length === 0) return;
  await db.insert(events).values([...rows]);
}

// The same append as an SQL statement to put in a batched statement's WITH list:
// `appended AS (${appendEventsSql(...)})`. `from` names the rows (a CTE, a table), `network` and
// `data` are expressions over them; `data` must be JSON (json, jsonb or JSON text).
export function appendEventsSql(input: { type: EventType; from: SQL; network: SQL; data: SQL }): SQL {
  return sql`INSERT INTO events (network, type, data) SELECT ${input.network}, ${input.type}, (${input.data})::text FROM ${input.from}`;
}

// A timestamp as the body's times are spelled (JavaScript's toISOString: UTC, milliseconds, Z).
export function isoTimeSql(timestamp: SQL): SQL {
  return sql`to_char((${timestamp}) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
}

// Deletes up to `limit` events older than `retentionDays` that were fanned out and have no
// delivery pending (their deliveries go with them), oldest first; answers how many. The age is
// read from the id (time-ordered, EVENT_ID_DEFAULT), so the primary key finds them. Rows another
// replica's sweep holds are skipped. "A delivery pending" is a due time being set, as in the
// delivery worker's writes: the lookup goes by the event's key, never through the due
// deliveries' partial index (docs/events.md, "Delivery and retries").
export async function deleteSettledEvents(db: Executor, retentionDays: number, limit: number): Promise<number> {
  const cutoffId = sql`'evt_' || ${eventIdTimeSql(sql`now() - make_interval(days => ${retentionDays})`)}`;
  const rows = await rowsOf<{ n: number }>(
    db,
    sql`WITH gone AS (
      DELETE FROM events WHERE id IN (
        SELECT e.id FROM events e
        WHERE e.id < ${cutoffId} AND e.dispatched_at IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id AND d.next_attempt_at IS NOT NULL)
        ORDER BY e.id LIMIT ${limit}
        FOR UPDATE SKIP LOCKED)
      RETURNING 1)
    SELECT count(*)::int AS n FROM gone`,
  );
  return rows[0]?.n ?? 0;
}
