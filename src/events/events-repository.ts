import { sql, type SQL } from 'drizzle-orm';
import type { Executor } from '../db/database.js';
import type { EventType } from './event-types.js';
import { events } from './events-tables.js';

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
