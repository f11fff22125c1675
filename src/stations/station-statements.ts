// The statements of connecting and connected stations (login read, claim, boot, connector status,
// release, last seen), batched (src/stations/batching.ts) and on the stations' share of the database pool.
import pLimit from 'p-limit';
import { readStationLogins, type StationLoginRow } from '../asset-management/station-credentials-service.js';
import type { Db } from '../db/database.js';
import { createBatcher } from './batching.js';
import { MAX_CONNECTOR_STATUSES } from './station-bounds.js';
import { stationEvents } from './station-events.js';
import {
  claimStations,
  recordBoots,
  recordConnectorStatuses,
  releaseStations,
  touchStations,
  type ConnectorStatusOutcome,
  type StationBoot,
  type StationClaim,
  type StationConnectorStatus,
  type StationRelease,
} from './stations-repository.js';

// How many of the stations' statements may be in the database pool at once: half of it. The pool
// hands out connections in arrival order, so in a reconnect storm the API's queries waited behind
// thousands of the stations': the 100-ID list's p99 went to 5x its figure without a storm.
// Bounded, the stations queue here and the API always has the other half of the pool.
export function stationStatementLimit(poolMax: number): number {
  return Math.max(1, Math.floor(poolMax / 2));
}

// Most stations one statement takes: its arrays stay well under PostgreSQL's limits and a batch
// runs in milliseconds.
const STATION_BATCH_MAX = 500;

export interface SeenWrite {
  assetId: string;
  epoch: number;
  lastSeenAt: Date;
}

export interface StationStatements {
  readLogin(identity: string): Promise<StationLoginRow | undefined>;
  // Resolves with the claim's epoch.
  claim(item: StationClaim): Promise<number>;
  boot(item: StationBoot): Promise<void>;
  connectorStatus(item: StationConnectorStatus): Promise<ConnectorStatusOutcome>;
  release(item: StationRelease): Promise<void>;
  // The lastSeenAt of many stations, a statement per STATION_BATCH_MAX of them; `written` learns of
  // each batch once it has been stored.
  writeSeen<T extends SeenWrite>(items: T[], written: (batch: T[]) => void): Promise<void>;
  // A statement of the stations' own on their share of the pool.
  inTurn<T>(task: () => Promise<T>): Promise<T>;
}

// `guardClaims` runs each claim statement, with the ids it claims (connection-healing.ts keeps
// track of what is being claimed).
export function createStationStatements(
  db: Db,
  poolMax: number,
  guardClaims: (ids: string[], run: () => Promise<number[]>) => Promise<number[]>,
): StationStatements {
  const inTurn = pLimit(stationStatementLimit(poolMax));
  const batched = <I, O>(run: (items: I[]) => Promise<O[]>, key?: (item: I) => string) =>
    createBatcher<I, O>({ maxSize: STATION_BATCH_MAX, run, key, schedule: inTurn });
  const forEach = <I>(write: (items: I[]) => Promise<void>) => async (items: I[]) => {
    await write(items);
    return items.map(() => undefined);
  };
  const byAsset = (item: { assetId: string }) => item.assetId;
  const logins = batched((ids: string[]) => readStationLogins(db, ids));
  const claims = batched((items: StationClaim[]) => guardClaims(items.map(byAsset), () => claimStations(db, items, stationEvents)), byAsset);
  const boots = batched(forEach((items: StationBoot[]) => recordBoots(db, items)), byAsset);
  const statuses = batched((items: StationConnectorStatus[]) => recordConnectorStatuses(db, items, MAX_CONNECTOR_STATUSES), byAsset);
  const releases = batched(forEach((items: StationRelease[]) => releaseStations(db, items, stationEvents)), byAsset);
  return {
    readLogin: (identity) => logins.push(identity),
    claim: (item) => claims.push(item),
    boot: (item) => boots.push(item),
    connectorStatus: (item) => statuses.push(item),
    release: (item) => releases.push(item),
    async writeSeen(items, written) {
      for (let from = 0; from < items.length; from += STATION_BATCH_MAX) {
        const batch = items.slice(from, from + STATION_BATCH_MAX);
        await inTurn(() => touchStations(db, batch));
        written(batch);
      }
    },
    inTurn: (task) => inTurn(task),
  };
}
