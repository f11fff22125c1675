import { and, eq, sql } from 'drizzle-orm';
import { rowsOf, type Executor } from '../db/database.js';
import { changeWithEvents, ofCurrentEpochRows, stationRows, type StationEventSql } from './station-sql.js';
import { stationConnections, stationReplicas, stationTakeovers } from './stations-tables.js';

// The replicas' leases, the takeover notices between them, and what happens to the stations of a
// replica that stops or whose lease runs out.

// Resolves with the database's time of the renewal, as PostgreSQL's text (passed back unparsed),
// and whether the lease had run out (or was never taken) before it. A lease that ran out is not
// taken up silently: the stations its rows still name read disconnected since it ran out, so the
// same statement releases them with their events, at that time (docs/stations.md, "Events"), and
// the replica takes back those it still holds (reattachStations).
export async function renewReplicaLease(
  db: Executor,
  replicaId: string,
  leaseSeconds: number,
  publicKey: string,
  events: StationEventSql,
): Promise<{ now: string; lapsed: boolean }> {
  const [row] = await rowsOf<{ now: string; lapsed: boolean; released: number }>(
    db,
    sql`
    with previous as (select lease_expires_at from station_replicas where id = ${replicaId}),
    released as (
      update station_connections c set replica_id = null, disconnected_at = p.lease_expires_at
        from previous p
       where p.lease_expires_at <= now() and c.replica_id = ${replicaId}
      returning c.asset_id, c.network, c.protocol, p.lease_expires_at as at),
    appended as (${events.disconnected(sql`released`)}),
    renewed as (
      insert into station_replicas (id, lease_expires_at, public_key) values (${replicaId}, now() + make_interval(secs => ${leaseSeconds}), ${publicKey})
      on conflict (id) do update set lease_expires_at = excluded.lease_expires_at, public_key = excluded.public_key
      returning id)
    select now()::text as now, not exists (select 1 from previous where lease_expires_at > now()) as lapsed,
           (select count(*)::int from released) as released, (select count(*) from renewed) as renewed`,
  );
  if (row!.released > 0) events.appended();
  return { now: row!.now, lapsed: row!.lapsed };
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

// Every station of a replica that stops reads disconnected at once, each with its event.
export async function endReplica(db: Executor, replicaId: string, events: StationEventSql): Promise<void> {
  await changeWithEvents(
    db,
    'disconnected',
    sql`
    update station_connections c set replica_id = null, disconnected_at = now()
     where c.replica_id = ${replicaId}
    returning c.asset_id, c.network, c.protocol, c.disconnected_at as at`,
    events,
  );
  await db.delete(stationTakeovers).where(eq(stationTakeovers.replicaId, replicaId));
  await db.delete(stationReplicas).where(eq(stationReplicas.id, replicaId));
}

// The rows of replicas whose lease has run out (a replica killed, or cut off from the database
// for a lease): released in one statement, with a `station.disconnected` each, at the lease's
// end, when `connected` turned false. Any replica runs it; a row is released once, whoever runs
// it. The replica rows are locked first: a renewal of one of them waits for this statement, or
// this statement finds it renewed and leaves its stations alone. How many.
export async function releaseLapsedReplicas(db: Executor, events: StationEventSql): Promise<number> {
  const released = await changeWithEvents(
    db,
    'disconnected',
    sql`
    update station_connections c set replica_id = null, disconnected_at = g.lease_expires_at
      from (select r.id, r.lease_expires_at from station_replicas r
             where r.lease_expires_at <= now() and exists (select 1 from station_connections s where s.replica_id = r.id)
               for update of r) g
     where c.replica_id = g.id
    returning c.asset_id, c.network, c.protocol, g.lease_expires_at as at`,
    events,
  );
  return released.length;
}

// A replica whose lease ran out while it kept its sockets (it could not reach the database for a
// lease): the rows another replica released meanwhile, at the epochs it still holds, are its
// again, each with a `station.connected`. How many.
export async function reattachStations(db: Executor, replicaId: string, held: Array<{ assetId: string; epoch: number }>, events: StationEventSql): Promise<number> {
  if (held.length === 0) return 0;
  const back = await changeWithEvents(
    db,
    'connected',
    sql`
    update station_connections c set replica_id = ${replicaId}, disconnected_at = null
    ${ofCurrentEpochRows(held, {})} and c.replica_id is null
    returning c.asset_id, c.network, c.protocol, now() as at`,
    events,
  );
  return back.length;
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

