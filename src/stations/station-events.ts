// The stations' events (docs/stations.md, "Events"): `station.connected` and
// `station.disconnected`, appended to the outbox by the very statements that claim and release
// the stations' rows, as one more statement in their WITH list: a storm of 2,000 stations costs
// no round trip more, and an event exists exactly when its change committed.
import { sql, type SQL } from 'drizzle-orm';
import { appendEventsSql, isoTimeSql, signalNewEvents } from '../events/events-service.js';
import type { StationEventSql } from './station-sql.js';

function append(type: 'station.connected' | 'station.disconnected', rows: SQL): SQL {
  return appendEventsSql({
    type,
    from: sql`${rows} as e`,
    network: sql`e.network`,
    data: sql`json_build_object('assetId', e.asset_id, 'network', e.network, 'protocol', e.protocol, 'at', ${isoTimeSql(sql`e.at`)})`,
  });
}

export const stationEvents: StationEventSql = {
  connected: (rows) => append('station.connected', rows),
  disconnected: (rows) => append('station.disconnected', rows),
  appended: signalNewEvents,
};
