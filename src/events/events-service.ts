import type { Executor } from '../db/database.js';
import type { NewEvent } from './event-types.js';
import { insertEvents } from './events-repository.js';
import { signalNewEvents } from './new-event-signal.js';

// The events area's entry for the other areas (docs/events.md, "Delivery").

// Appends events to the outbox inside the caller's transaction: they exist if and only if it
// commits. Only the outbox rows are written here; the delivery worker fans them out.
export async function appendEvents(tx: Executor, batch: readonly NewEvent[]): Promise<void> {
  if (batch.length === 0) return;
  await insertEvents(
    tx,
    batch.map((event) => ({ network: event.network, type: event.type, data: JSON.stringify(event.data) })),
  );
  signalNewEvents();
}

// For a statement that writes the change itself (a payment, the stations' batched claims and
// releases): an INSERT into the outbox to
// put in its WITH list, e.g.
//   WITH claimed AS (UPDATE … RETURNING asset_id, network, protocol, connected_at),
//        appended AS (${appendEventsSql({ type: 'station.connected', from: sql`claimed`,
//          network: sql`claimed.network`, data: sql`json_build_object('assetId', claimed.asset_id, …,
//          'at', ${isoTimeSql(sql`claimed.connected_at`)})` })})
//   SELECT … FROM claimed
// The caller calls signalNewEvents() after it when the statement appended rows.
export { appendEventsSql, isoTimeSql } from './events-repository.js';
export { signalNewEvents };
export type { NewEvent } from './event-types.js';
