import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { rowsOf, type Database } from '../../src/db/database.js';
import { appendEvents, appendEventsSql, isoTimeSql } from '../../src/events/events-service.js';
import { createTestDatabase } from '../helpers/test-database.js';
import { uniqueNetwork } from '../helpers/asset-factory.js';

interface EventRow {
  id: string;
  network: string | null;
  type: string;
  data: string;
}

let database: Database;

beforeAll(async () => {
  database = await createTestDatabase();
  await database.migrate();
});
afterAll(() => database.close());

async function eventsOf(network: string): Promise<EventRow[]> {
  return rowsOf<EventRow>(database.db, sql`SELECT id, network, type, data FROM events WHERE network = ${network} ORDER BY id`);
}

describe('the outbox', () => {
  it('appendEvents writes one row per event in the caller’s transaction, with an evt_ identifier', async () => {
    const network = uniqueNetwork();
    await database.db.transaction(async (tx) => {
      await appendEvents(tx, [
        { type: 'station.connected', network, data: { assetId: 'CP-1', network, protocol: 'ocpp2.0.1', at: '2026-11-26T09:00:00.000Z' } },
        { type: 'asset.password.ignored', network, data: { assetId: 'CP-1', network, rotationId: 'apc_1', at: '2026-11-26T10:00:00.000Z' } },
      ]);
    });
    const rows = await eventsOf(network);
    expect(rows.map((r) => r.type).sort()).toEqual(['asset.password.ignored', 'station.connected']);
    for (const row of rows) expect(row.id).toMatch(/^evt_[0-9a-f]{32}$/);
    expect(rows.find((r) => r.type === 'station.connected')?.data).toBe(`{"assetId":"CP-1","network":"${network}","protocol":"ocpp2.0.1","at":"2026-11-26T09:00:00.000Z"}`);
    expect(JSON.parse(rows.find((r) => r.type === 'asset.password.ignored')!.data)).toEqual({ assetId: 'CP-1', network, rotationId: 'apc_1', at: '2026-11-26T10:00:00.000Z' });
  });

  it('writes nothing when the caller’s transaction rolls back', async () => {
    const network = uniqueNetwork();
    await expect(
      database.db.transaction(async (tx) => {
        await appendEvents(tx, [{ type: 'asset.password.ignored', network, data: { assetId: 'CP-1', network, rotationId: 'apc_1', at: '2026-11-26T10:00:00.000Z' } }]);
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(await eventsOf(network)).toEqual([]);
  });

  it('appendEventsSql appends from a batched statement’s rows, in its WITH list', async () => {
    const network = uniqueNetwork();
    await database.db.execute(sql`
      WITH changed AS (
        SELECT * FROM (VALUES ('CP-a', ${network}, 'ocpp2.0.1', timestamptz '2026-11-26 10:00:00.123+00'),
                              ('CP-b', ${network}, 'ocpp1.6', timestamptz '2026-11-26 11:00:00+00')) AS v(asset_id, network, protocol, at)
      ),
      appended AS (${appendEventsSql({
        type: 'station.connected',
        from: sql`changed`,
        network: sql`changed.network`,
        data: sql`json_build_object('assetId', changed.asset_id, 'network', changed.network, 'protocol', changed.protocol, 'at', ${isoTimeSql(sql`changed.at`)})`,
      })})
      SELECT count(*) FROM changed`);
    const rows = await eventsOf(network);
    const appended = rows.map((r) => [r.type, JSON.parse(r.data) as { assetId: string }] as const);
    expect(appended.sort((a, b) => a[1].assetId.localeCompare(b[1].assetId))).toEqual([
      ['station.connected', { assetId: 'CP-a', network, protocol: 'ocpp2.0.1', at: '2026-11-26T10:00:00.123Z' }],
      ['station.connected', { assetId: 'CP-b', network, protocol: 'ocpp1.6', at: '2026-11-26T11:00:00.000Z' }],
    ]);
  });
});
