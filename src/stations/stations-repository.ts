import { and, eq, inArray, sql, type SQL } from 'drizzle-orm';
import { rowsOf, type Executor } from '../db/database.js';
import type { OcppSubprotocol } from '../kernel/ocpp-vocabulary.js';
import { stationConnections, stationReplicas, stationTakeovers, type ConnectorStatusRecord } from './stations-tables.js';

// The statements every connecting station runs (claim, boot, connector status, release) take many
// stations at once (src/stations/batching.ts gathers them): one statement of constant text with arrays for
// parameters, so a storm of 2,000 stations is a few dozen statements, not 8,000.

export interface StationClaim {
  assetId: string;
  replicaId: string;
  protocol: OcppSubprotocol;
}

// Takes each station for its replica with a new epoch: any older connection, here or on another
// replica, is no longer the station's from this statement on. The ids must be distinct (a
// statement cannot update one row twice). Epochs in the order of claims.
export async function claimStations(db: Executor, claims: StationClaim[]): Promise<number[]> {
  const rows = await rowsOf<{ asset_id: string; epoch: string }>(
    db,
    sql`
    insert into station_connections (asset_id, replica_id, epoch, protocol, connected_at, last_seen_at)
    select c.asset_id, c.replica_id, 1, c.protocol, now(), now()
      from unnest(${sql.param(claims.map((c) => c.assetId))}::text[], ${sql.param(claims.map((c) => c.replicaId))}::text[],
                  ${sql.param(claims.map((c) => c.protocol))}::text[]) as c(asset_id, replica_id, protocol)
    on conflict (asset_id) do update
       set replica_id = excluded.replica_id, epoch = station_connections.epoch + 1, protocol = excluded.protocol,
           connected_at = now(), last_seen_at = now(), disconnected_at = null
    returning asset_id, epoch::text as epoch`,
  );
  const byId = new Map(rows.map((r) => [r.asset_id, Number(r.epoch)]));
  return claims.map((c) => {
    const epoch = byId.get(c.assetId);
    if (epoch === undefined) throw new Error(`claim of ${c.assetId} returned no epoch`);
    return epoch;
  });
}

// Resolves with the database's time of the renewal, as PostgreSQL's text (passed back unparsed).
export async function renewReplicaLease(db: Executor, replicaId: string, leaseSeconds: number, publicKey: string): Promise<string> {
  const expires = sql`now() + make_interval(secs => ${leaseSeconds})`;
  const [row] = await db
    .insert(stationReplicas)
    .values({ id: replicaId, leaseExpiresAt: expires, publicKey })
    .onConflictDoUpdate({ target: stationReplicas.id, set: { leaseExpiresAt: expires, publicKey } })
    .returning({ now: sql<string>`now()::text` });
  return row!.now;
}

// The live replica holding the station's socket, with the key a command to it is sealed to.
export async function findStationHolder(db: Executor, assetId: string): Promise<{ replicaId: string; publicKey: string | null } | undefined> {
  const [row] = await db
    .select({ replicaId: stationReplicas.id, publicKey: stationReplicas.publicKey })
    .from(stationConnections)
    .innerJoin(stationReplicas, eq(stationReplicas.id, stationConnections.replicaId))
    .where(and(eq(stationConnections.assetId, assetId), sql`${stationReplicas.leaseExpiresAt} > now()`))
    .limit(1);
  return row;
}

// Replicas whose lease ran out long ago (their stations already read disconnected), and the
// takeover notices nobody is left to read.
export async function deleteStaleReplicas(db: Executor): Promise<void> {
  await db.delete(stationReplicas).where(sql`${stationReplicas.leaseExpiresAt} < now() - interval '1 day'`);
  await db
    .delete(stationTakeovers)
    .where(sql`not exists (select 1 from ${stationReplicas} where ${stationReplicas.id} = ${stationTakeovers.replicaId})`);
}

export async function endReplica(db: Executor, replicaId: string): Promise<void> {
  await db
    .update(stationConnections)
    .set({ replicaId: null, disconnectedAt: sql`now()` })
    .where(eq(stationConnections.replicaId, replicaId));
  await db.delete(stationTakeovers).where(eq(stationTakeovers.replicaId, replicaId));
  await db.delete(stationReplicas).where(eq(stationReplicas.id, replicaId));
}

// `unnest(...) as r(asset_id, epoch, <columns>)`: stations at epochs (and more columns, as
// r.<name>), one row per item, for a statement about many stations at once.
function stationRows<T extends { assetId: string; epoch: number }>(items: T[], columns: Record<string, [type: string, value: (item: T) => unknown]> = {}): SQL {
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
function ofCurrentEpochRows<T extends { assetId: string; epoch: number }>(items: T[], columns: Record<string, [type: string, value: (item: T) => unknown]>): SQL {
  return sql`from ${stationRows(items, columns)} where c.asset_id = r.asset_id and c.epoch = r.epoch`;
}

export interface StationRelease {
  assetId: string;
  epoch: number;
  lastSeenAt: Date;
}

export async function releaseStations(db: Executor, releases: StationRelease[]): Promise<void> {
  await db.execute(sql`
    update station_connections c
       set replica_id = null, disconnected_at = now(), last_seen_at = greatest(c.last_seen_at, r.seen)
    ${ofCurrentEpochRows(releases, { seen: ['timestamptz', (r) => r.lastSeenAt.toISOString()] })}`);
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
): Promise<string[]> {
  const rows = await rowsOf<{ asset_id: string }>(
    db,
    sql`
    update station_connections c
       set replica_id = null, disconnected_at = now()
     where c.replica_id = ${replicaId}
       and c.connected_at < ${before}::timestamptz - interval '1 second'
       and c.asset_id <> all(${sql.param(claiming)}::text[])
       and not exists (select 1 from ${stationRows(held)} where r.asset_id = c.asset_id collate "C" and r.epoch = c.epoch)
    returning c.asset_id`,
  );
  return rows.map((r) => r.asset_id);
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

// The stations newer connections took from this replica (the claim's trigger writes them,
// migrations/0008), with the newer epochs.
export async function findStationTakeovers(db: Executor, replicaId: string): Promise<Array<{ assetId: string; epoch: number }>> {
  return db
    .select({ assetId: stationTakeovers.assetId, epoch: stationTakeovers.epoch })
    .from(stationTakeovers)
    .where(eq(stationTakeovers.replicaId, replicaId));
}

// The notices acted on; one a later claim raised meanwhile stays for the next read.
export async function deleteStationTakeovers(db: Executor, replicaId: string, read: Array<{ assetId: string; epoch: number }>): Promise<void> {
  if (read.length === 0) return;
  await db.execute(sql`
    delete from station_takeovers t
     using ${stationRows(read)}
     where t.replica_id = ${replicaId} and t.asset_id = r.asset_id and t.epoch <= r.epoch`);
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
