import { inArray, sql } from 'drizzle-orm';
import { rowsOf, type Executor } from '../db/database.js';
import type { OcppSubprotocol } from '../kernel/ocpp-vocabulary.js';
import { LAPSED_AT, changeWithEvents, ofCurrentEpochRows, stationRows, type StationEventSql } from './station-sql.js';
import { stationConnections, stationReplicas, type ConnectorStatusRecord } from './stations-tables.js';

// The statements every connecting station runs (claim, boot, connector status, release) take many
// stations at once (src/stations/batching.ts gathers them): one statement of constant text with arrays for
// parameters, so a storm of 2,000 stations is a few dozen statements, not 8,000.

export interface StationClaim {
  assetId: string;
  replicaId: string;
  network: string;
  protocol: OcppSubprotocol;
}

// Takes each station for its replica with a new epoch: any older connection, here or on another
// replica, is no longer the station's from this statement on. The ids must be distinct (a
// statement cannot update one row twice). Epochs in the order of claims.
// The same statement appends the events of what changed (docs/stations.md, "Events"): a station
// that was not connected (no row, a released one, or one naming a replica whose lease ran out)
// is `station.connected`; a takeover from a live connection is no event; a row whose replica's
// lease ran out yields the `station.disconnected` nobody wrote yet, at the lease's end. `prior`
// locks the rows first (the insert reads it), so it sees what the claim replaces, also when
// another statement changed it meanwhile.
export async function claimStations(db: Executor, claims: StationClaim[], events: StationEventSql): Promise<number[]> {
  const ids = sql`${sql.param(claims.map((c) => c.assetId))}::text[]`;
  const rows = await rowsOf<{ asset_id: string; epoch: string; connected: boolean }>(
    db,
    sql`
    with prior as (
      select s.asset_id, s.network, s.protocol, s.replica_id is not null and coalesce(r.lease_expires_at > now(), false) as live,
             ${LAPSED_AT} as lapsed_at
        from station_connections s left join station_replicas r on r.id = s.replica_id
       where s.asset_id = any(${ids})
         for update of s),
    claimed as (
      insert into station_connections (asset_id, replica_id, network, epoch, protocol, connected_at, last_seen_at)
      select c.asset_id, c.replica_id, c.network, 1, c.protocol, now(), now()
        from unnest(${ids}, ${sql.param(claims.map((c) => c.replicaId))}::text[], ${sql.param(claims.map((c) => c.network))}::text[],
                    ${sql.param(claims.map((c) => c.protocol))}::text[]) as c(asset_id, replica_id, network, protocol)
        left join prior p on p.asset_id = c.asset_id
      on conflict (asset_id) do update
         set replica_id = excluded.replica_id, network = excluded.network, epoch = station_connections.epoch + 1, protocol = excluded.protocol,
             connected_at = now(), last_seen_at = now(), disconnected_at = null
      returning asset_id, network, protocol, epoch, connected_at),
    lapsed as (${events.disconnected(sql`(select p.asset_id, p.network, p.protocol, p.lapsed_at as at from prior p join claimed using (asset_id) where p.lapsed_at is not null)`)}),
    connected as (${events.connected(sql`(select c.asset_id, c.network, c.protocol, c.connected_at as at from claimed c left join prior p using (asset_id) where p.live is not true)`)})
    select c.asset_id, c.epoch::text as epoch, p.live is not true as connected from claimed c left join prior p using (asset_id)`,
  );
  if (rows.some((r) => r.connected)) events.appended();
  const byId = new Map(rows.map((r) => [r.asset_id, Number(r.epoch)]));
  return claims.map((c) => {
    const epoch = byId.get(c.assetId);
    if (epoch === undefined) throw new Error(`claim of ${c.assetId} returned no epoch`);
    return epoch;
  });
}

export interface StationRelease {
  assetId: string;
  epoch: number;
  lastSeenAt: Date;
}

// A row already released (by the sweep of a lapsed lease) is left as it is: its event was written.
export async function releaseStations(db: Executor, releases: StationRelease[], events: StationEventSql): Promise<void> {
  await changeWithEvents(
    db,
    'disconnected',
    sql`
    update station_connections c
       set replica_id = null, disconnected_at = now(), last_seen_at = greatest(c.last_seen_at, r.seen)
    ${ofCurrentEpochRows(releases, { seen: ['timestamptz', (r) => r.lastSeenAt.toISOString()] })} and c.replica_id is not null
    returning c.asset_id, c.network, c.protocol, c.disconnected_at as at`,
    events,
  );
}

// The rows naming this replica connected that no claim of it stands behind any more: a release
// whose write was lost, or a claim whose answer was (the station was refused and never opened a
// socket). `held` are the claims of this replica whose TCP connections are still open, at their
// epochs; `claiming` the stations whose claim statements were under way when `held` was read; and
// only rows claimed a second before `before` (a time the database gave before `held` was read) are
// looked at: a claim sent after that read commits later, so a login between its claim and its
// socket opening is never released under it. The second absorbs the rows' millisecond rounding.
// Bytewise comparison ("C") is the same equality and makes the anti-join's sorts cheap: ~30 ms for
// 10,000 held stations, where the database's collation took twice that.
export async function releaseUnheldStations(
  db: Executor,
  replicaId: string,
  before: string,
  held: Array<{ assetId: string; epoch: number }>,
  claiming: string[],
  events: StationEventSql,
): Promise<string[]> {
  return changeWithEvents(
    db,
    'disconnected',
    sql`
    update station_connections c
       set replica_id = null, disconnected_at = now()
     where c.replica_id = ${replicaId}
       and c.connected_at < ${before}::timestamptz - interval '1 second'
       and c.asset_id <> all(${sql.param(claiming)}::text[])
       and not exists (select 1 from ${stationRows(held)} where r.asset_id = c.asset_id collate "C" and r.epoch = c.epoch)
    returning c.asset_id, c.network, c.protocol, c.disconnected_at as at`,
    events,
  );
}

export interface StationBoot {
  assetId: string;
  epoch: number;
  vendor: string | null;
  model: string | null;
  serialNumber: string | null;
  firmwareVersion: string | null;
}

export async function recordBoots(db: Executor, boots: StationBoot[]): Promise<void> {
  await db.execute(sql`
    update station_connections c
       set vendor = r.vendor, model = r.model, serial_number = r.serial_number, firmware_version = r.firmware_version,
           booted_at = now(), last_seen_at = now()
    ${ofCurrentEpochRows(boots, {
      vendor: ['text', (b) => b.vendor],
      model: ['text', (b) => b.model],
      serial_number: ['text', (b) => b.serialNumber],
      firmware_version: ['text', (b) => b.firmwareVersion],
    })}`);
}

export interface StationConnectorStatus {
  assetId: string;
  epoch: number;
  key: string;
  status: ConnectorStatusRecord;
}

// 'stored'; 'full' when the station already has `maxKeys` connectors stored and this is a new
// one; 'stale' when the connection is no longer the station's newest.
export type ConnectorStatusOutcome = 'stored' | 'full' | 'stale';

// Merged into the stored statuses in the statement itself: notifications for other connectors of
// the station cannot lose each other. The bound is checked there too, against the stored row, so
// it holds across reconnects and replicas: a known connector is always updated, a new one only
// while the station has fewer than `maxKeys`. The asset ids must be distinct.
export async function recordConnectorStatuses(db: Executor, updates: StationConnectorStatus[], maxKeys: number): Promise<ConnectorStatusOutcome[]> {
  const rows = await rowsOf<{ asset_id: string; stored: boolean }>(
    db,
    sql`
    update station_connections c
       set connector_statuses = case
             when c.connector_statuses ? r.key or (select count(*) from jsonb_object_keys(c.connector_statuses)) < ${maxKeys}
             then c.connector_statuses || jsonb_build_object(r.key, r.status)
             else c.connector_statuses end
    ${ofCurrentEpochRows(updates, { key: ['text', (u) => u.key], status: ['jsonb', (u) => JSON.stringify(u.status)] })}
    returning r.asset_id, c.connector_statuses ? r.key as stored`,
  );
  const byId = new Map(rows.map((r) => [r.asset_id, r.stored]));
  return updates.map((u) => {
    const stored = byId.get(u.assetId);
    return stored === undefined ? 'stale' : stored ? 'stored' : 'full';
  });
}

// lastSeenAt of many stations in one statement (heartbeats are batched).
export async function touchStations(db: Executor, seen: Array<{ assetId: string; epoch: number; lastSeenAt: Date }>): Promise<void> {
  if (seen.length === 0) return;
  await db.execute(sql`
    update station_connections c
       set last_seen_at = greatest(c.last_seen_at, r.seen)
    ${ofCurrentEpochRows(seen, { seen: ['timestamptz', (s) => s.lastSeenAt.toISOString()] })}`);
}

export interface StationRow {
  assetId: string;
  connected: boolean;
  protocol: OcppSubprotocol;
  connectedAt: Date;
  lastSeenAt: Date;
  vendor: string | null;
  model: string | null;
  serialNumber: string | null;
  firmwareVersion: string | null;
}

export async function findStations(db: Executor, assetIds: string[]): Promise<StationRow[]> {
  if (assetIds.length === 0) return [];
  // Connected while the holding replica's lease runs: a replica that died stops renewing it.
  const live = sql<boolean>`coalesce((select ${stationReplicas.leaseExpiresAt} > now() from ${stationReplicas} where ${stationReplicas.id} = ${stationConnections.replicaId}), false)`;
  return db
    .select({
      assetId: stationConnections.assetId,
      connected: live,
      protocol: stationConnections.protocol,
      connectedAt: stationConnections.connectedAt,
      lastSeenAt: stationConnections.lastSeenAt,
      vendor: stationConnections.vendor,
      model: stationConnections.model,
      serialNumber: stationConnections.serialNumber,
      firmwareVersion: stationConnections.firmwareVersion,
    })
    .from(stationConnections)
    .where(inArray(stationConnections.assetId, assetIds));
}
