import { and, eq, inArray, sql } from 'drizzle-orm';
import type { Executor } from '../db/database.js';
import { assets, stationConnections, stationReplicas, type ConnectorStatusRecord } from '../db/schema.js';
import type { RotationState } from '../asset-management/rotation.js';

export interface StationLoginRow {
  id: string;
  ocppVersion: '1.6' | '2.0.1';
  securityProfile: number;
  passwordHash: string | null;
  pendingPasswordHash: string | null;
  replacedPasswordHash: string | null;
  rotationId: string | null;
  rotationState: RotationState | null;
  deadlinePassed: boolean;
}

// The statements every connecting station runs (its login, its claim, its boot, its connector
// statuses), built once per executor and prepared by name: a reconnect storm runs them thousands
// of times a second, and building each one's SQL text anew cost about a quarter of the event
// loop's time per login in a profile of a 2,000-station storm, and PostgreSQL a parse and plan each.
function stationStatements(db: Executor) {
  const id = sql.placeholder('id');
  const epoch = sql.placeholder('epoch');
  const heldBy = and(eq(stationConnections.assetId, id), eq(stationConnections.epoch, epoch));
  return {
    // Not network-scoped: a connecting station presents only its identity.
    findLogin: db
      .select({
        id: assets.id,
        ocppVersion: assets.ocppVersion,
        securityProfile: assets.securityProfile,
        passwordHash: assets.passwordHash,
        pendingPasswordHash: assets.pendingPasswordHash,
        replacedPasswordHash: assets.replacedPasswordHash,
        rotationId: assets.rotationId,
        rotationState: assets.rotationState,
        deadlinePassed: sql<boolean>`coalesce(${assets.rotationDeadline} < now(), false)`,
      })
      .from(assets)
      .where(eq(assets.id, id))
      .limit(1)
      .prepare('station_find_login'),
    // Takes the station for this replica with a new epoch: any older connection, here or on
    // another replica, is no longer the station's from this statement on.
    claim: db
      .insert(stationConnections)
      .values({
        assetId: id,
        replicaId: sql.placeholder('replicaId'),
        epoch: 1,
        protocol: sql.placeholder('protocol'),
        connectedAt: sql`now()`,
        lastSeenAt: sql`now()`,
      })
      .onConflictDoUpdate({
        target: stationConnections.assetId,
        set: {
          replicaId: sql`excluded.replica_id`,
          epoch: sql`${stationConnections.epoch} + 1`,
          protocol: sql`excluded.protocol`,
          connectedAt: sql`now()`,
          lastSeenAt: sql`now()`,
          disconnectedAt: null,
        },
      })
      .returning({ epoch: stationConnections.epoch })
      .prepare('station_claim'),
    recordBoot: db
      .update(stationConnections)
      .set({
        vendor: sql`${sql.placeholder('vendor')}::text`,
        model: sql`${sql.placeholder('model')}::text`,
        serialNumber: sql`${sql.placeholder('serialNumber')}::text`,
        firmwareVersion: sql`${sql.placeholder('firmwareVersion')}::text`,
        bootedAt: sql`now()`,
        lastSeenAt: sql`now()`,
      })
      .where(heldBy)
      .prepare('station_record_boot'),
    // One statement: concurrent notifications for other connectors of the station cannot lose each other.
    recordConnectorStatus: db
      .update(stationConnections)
      .set({
        connectorStatuses: sql`${stationConnections.connectorStatuses} || jsonb_build_object(${sql.placeholder('key')}::text, ${sql.placeholder('status')}::jsonb)`,
      })
      .where(heldBy)
      .prepare('station_record_connector_status'),
  };
}

const statementsByExecutor = new WeakMap<Executor, ReturnType<typeof stationStatements>>();

function statements(db: Executor): ReturnType<typeof stationStatements> {
  let prepared = statementsByExecutor.get(db);
  if (!prepared) {
    prepared = stationStatements(db);
    statementsByExecutor.set(db, prepared);
  }
  return prepared;
}

export async function findStationLogin(db: Executor, id: string): Promise<StationLoginRow | undefined> {
  const [row] = await statements(db).findLogin.execute({ id });
  return row;
}

export async function renewReplicaLease(db: Executor, replicaId: string, leaseSeconds: number, publicKey: string): Promise<void> {
  const expires = sql`now() + make_interval(secs => ${leaseSeconds})`;
  await db
    .insert(stationReplicas)
    .values({ id: replicaId, leaseExpiresAt: expires, publicKey })
    .onConflictDoUpdate({ target: stationReplicas.id, set: { leaseExpiresAt: expires, publicKey } });
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

// Replicas whose lease ran out long ago; their stations already read disconnected.
export async function deleteStaleReplicas(db: Executor): Promise<void> {
  await db.delete(stationReplicas).where(sql`${stationReplicas.leaseExpiresAt} < now() - interval '1 day'`);
}

export async function endReplica(db: Executor, replicaId: string): Promise<void> {
  await db
    .update(stationConnections)
    .set({ replicaId: null, disconnectedAt: sql`now()` })
    .where(eq(stationConnections.replicaId, replicaId));
  await db.delete(stationReplicas).where(eq(stationReplicas.id, replicaId));
}

export async function claimStation(db: Executor, claim: { assetId: string; replicaId: string; protocol: string }): Promise<number> {
  const [row] = await statements(db).claim.execute({ id: claim.assetId, replicaId: claim.replicaId, protocol: claim.protocol });
  return row!.epoch;
}

function held(assetId: string, epoch: number) {
  return and(eq(stationConnections.assetId, assetId), eq(stationConnections.epoch, epoch));
}

export async function releaseStation(db: Executor, release: { assetId: string; epoch: number; lastSeenAt: Date }): Promise<void> {
  await db
    .update(stationConnections)
    .set({ replicaId: null, disconnectedAt: sql`now()`, lastSeenAt: sql`greatest(${stationConnections.lastSeenAt}, ${release.lastSeenAt.toISOString()}::timestamptz)` })
    .where(held(release.assetId, release.epoch));
}

export async function recordBoot(
  db: Executor,
  boot: { assetId: string; epoch: number; vendor: string | null; model: string | null; serialNumber: string | null; firmwareVersion: string | null },
): Promise<void> {
  const { assetId, epoch, ...fields } = boot;
  await statements(db).recordBoot.execute({ id: assetId, epoch, ...fields });
}

export async function recordConnectorStatus(
  db: Executor,
  update: { assetId: string; epoch: number; key: string; status: ConnectorStatusRecord },
): Promise<void> {
  await statements(db).recordConnectorStatus.execute({ id: update.assetId, epoch: update.epoch, key: update.key, status: JSON.stringify(update.status) });
}

// The stations this replica still holds by the database's account, with their epochs.
export async function stationsHeldBy(db: Executor, replicaId: string): Promise<Map<string, number>> {
  const rows = await db
    .select({ assetId: stationConnections.assetId, epoch: stationConnections.epoch })
    .from(stationConnections)
    .where(eq(stationConnections.replicaId, replicaId));
  return new Map(rows.map((r) => [r.assetId, r.epoch]));
}

// lastSeenAt of many stations in one statement (heartbeats are batched, contract §8.1).
export async function touchStations(db: Executor, seen: Array<{ assetId: string; epoch: number; lastSeenAt: Date }>): Promise<void> {
  if (seen.length === 0) return;
  await db.execute(sql`
    update station_connections c
       set last_seen_at = greatest(c.last_seen_at, s.seen)
      from unnest(${sql.param(seen.map((s) => s.assetId))}::text[], ${sql.param(seen.map((s) => s.epoch))}::bigint[],
                  ${sql.param(seen.map((s) => s.lastSeenAt.toISOString()))}::timestamptz[]) as s(asset_id, epoch, seen)
     where c.asset_id = s.asset_id and c.epoch = s.epoch`);
}

export interface StationRow {
  assetId: string;
  connected: boolean;
  protocol: string;
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
