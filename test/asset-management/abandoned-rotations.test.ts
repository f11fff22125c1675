// Every replica looks for password changes whose waiting replica died (docs/rotation.md, "The
// state machine"): an IN_FLIGHT change past its deadline is recorded UNCONFIRMED, in its audit row
// and as an `asset.password.changed` event, without a login of the station. What a login or a
// forced change records of such a change is in test/events/password-events.test.ts.
//
// Sweeps of several replicas meet on the same rows: each change is recorded once, by one of them,
// with one event. The last test has three connection pools on one PostgreSQL database stand for
// the replicas' (the sweep is one statement's row locks and one conditional write, nothing held
// in the process), racing in small batches so that they meet often.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordOutcome } from '../../src/asset-management/password-audit-service.js';
import { recordAbandonedRotations } from '../../src/asset-management/abandoned-rotations.js';
import { ABANDONED_MARGIN_MS, settleAbandonedRotations } from '../../src/asset-management/password-rotation-service.js';
import { openDatabase, rowsOf, type Database } from '../../src/db/database.js';
import { createAsset, inFlightChange } from '../helpers/asset-factory.js';
import { eventually } from '../helpers/eventually.js';
import { databaseUrlOf } from '../helpers/test-database.js';
import { useTestApp } from '../helpers/test-app.js';

const t = useTestApp({ abandonedRotationsSweepMs: 50 });

describe('the sweep of changes whose waiting replica died', () => {
  it('records each UNCONFIRMED with its event, once, in the asset’s network; a change within its deadline, or within the margin after it, is left to its replica', async () => {
    const [abandoned, waiting, recent] = [await createAsset(t), await createAsset(t), await createAsset(t)];
    const claim = (asset: { id: string; network: string }, deadlineMs: number) => inFlightChange(t.database.db, asset, { deadlineMs });
    const died = await claim(abandoned, -(ABANDONED_MARGIN_MS + 30_000));
    const alive = await claim(waiting, 3_600_000);
    // Past its deadline, within the margin a slow replica has to record its own answer.
    const late = await claim(recent, -1_000);

    const events = (assetId: string) =>
      rowsOf<{ network: string; data: string }>(t.database.db, sql`SELECT network, data FROM events WHERE type = 'asset.password.changed' AND (data::json)->>'assetId' = ${assetId} ORDER BY id`);
    const rotationOf = async (id: string) => {
      const res = await t.app.inject({ url: `/asset-management/v1/assets/${id}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
      return res.json().data.rotation as { id: string; state: string };
    };

    await eventually(async () => expect((await events(abandoned.id)).length).toBe(1));
    const [event] = await events(abandoned.id);
    expect(event!.network).toBe(abandoned.network);
    expect(JSON.parse(event!.data)).toMatchObject({ assetId: abandoned.id, network: abandoned.network, rotationId: died, outcome: 'UNCONFIRMED' });
    const [audit] = await rowsOf<{ outcome: string | null }>(t.database.db, sql`SELECT outcome FROM asset_password_changes WHERE id = ${died}`);
    expect(audit?.outcome).toBe('UNCONFIRMED');
    expect(await rotationOf(abandoned.id)).toMatchObject({ id: died, state: 'UNCONFIRMED' });

    // An outcome is recorded once: the answer of a replica that only stalled, written after the
    // sweep, changes neither the audit row nor the events (docs/rotation.md).
    await t.database.db.transaction((tx) => recordOutcome(tx, { rotationId: died, assetId: abandoned.id, network: abandoned.network }, 'ACCEPTED'));
    const [again] = await rowsOf<{ outcome: string | null }>(t.database.db, sql`SELECT outcome FROM asset_password_changes WHERE id = ${died}`);
    expect(again?.outcome).toBe('UNCONFIRMED');

    // Several sweeps later: still the one event, and the change within its deadline untouched.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await events(abandoned.id)).toHaveLength(1);
    expect(await events(waiting.id)).toEqual([]);
    expect(await rotationOf(waiting.id)).toMatchObject({ id: alive, state: 'IN_FLIGHT' });
    expect(await events(recent.id)).toEqual([]);
    // It reads UNCONFIRMED all the same; only the recording waits.
    expect(await rotationOf(recent.id)).toMatchObject({ id: late, state: 'UNCONFIRMED' });
    const [lateAudit] = await rowsOf<{ outcome: string | null }>(t.database.db, sql`SELECT outcome FROM asset_password_changes WHERE id = ${late}`);
    expect(lateAudit?.outcome).toBeNull();
  });
});

// `count` changes whose waiting replica died a minute past the margin, each on an asset of its own.
async function abandonedChanges(app: typeof t, count: number): Promise<Array<{ assetId: string; rotationId: string }>> {
  const changes: Array<{ assetId: string; rotationId: string }> = [];
  for (let i = 0; i < count; i++) {
    const asset = await createAsset(app);
    changes.push({ assetId: asset.id, rotationId: await inFlightChange(app.database.db, asset, { deadlineMs: -(ABANDONED_MARGIN_MS + 60_000) }) });
  }
  return changes;
}

describe('a sweep that finds many', () => {
  // The app's own sweep waits an hour: only the sweep below records anything.
  const t = useTestApp({ abandonedRotationsSweepMs: 3_600_000 });

  it('records them in batches and lets the event loop through between two (on PGlite a batch runs on the process’s thread)', async () => {
    await abandonedChanges(t, 45);
    // Queued before the sweep starts, it runs at the first turn of the event loop: before the sweep's
    // end only if the sweep lets one happen before its last batch.
    let firedAt = Infinity;
    setImmediate(() => (firedAt = performance.now()));
    const recorded = await recordAbandonedRotations(t.database.db, { batch: 10 });
    const doneAt = performance.now();
    expect(recorded).toBe(45);
    expect(firedAt).toBeLessThan(doneAt);
    expect(await recordAbandonedRotations(t.database.db, { batch: 10 })).toBe(0);
  });

  it('a batch that fails records none of its changes and appends none of their events; the batches before it stand, and the next sweep records the rest', async () => {
    const changes = await abandonedChanges(t, 25);
    const poisoned = changes[17]!;
    // The database refuses the one event of `poisoned`: its batch's transaction fails at its append.
    await t.database.db.execute(sql.raw(`CREATE FUNCTION refuse_poisoned_event() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused for the test'; END $$`));
    await t.database.db.execute(
      sql.raw(`CREATE TRIGGER refuse_poisoned_event BEFORE INSERT ON events FOR EACH ROW
        WHEN ((NEW.data::json)->>'assetId' = '${poisoned.assetId}') EXECUTE FUNCTION refuse_poisoned_event()`),
    );
    const ids = changes.map((c) => c.rotationId);
    const recordedIds = async () =>
      (await rowsOf<{ id: string }>(t.database.db, sql`SELECT id FROM asset_password_changes WHERE id IN ${ids} AND outcome IS NOT NULL`)).map((r) => r.id).sort();
    const eventIds = async () =>
      (
        await rowsOf<{ id: string }>(
          t.database.db,
          sql`SELECT (data::json)->>'rotationId' AS id FROM events WHERE type = 'asset.password.changed' AND (data::json)->>'rotationId' IN ${ids}`,
        )
      )
        .map((r) => r.id)
        .sort();

    const committed: number[] = [];
    await expect(recordAbandonedRotations(t.database.db, { batch: 10, onRecorded: (n) => committed.push(n) })).rejects.toThrow();
    const afterFailure = await recordedIds();
    // Whole batches only, each with its events, and not the batch that held the refused event.
    expect(afterFailure).not.toContain(poisoned.rotationId);
    expect(afterFailure.length % 10).toBe(0);
    expect(afterFailure.length).toBe(committed.reduce((a, b) => a + b, 0));
    expect(afterFailure.length).toBeLessThan(25);
    expect(await eventIds()).toEqual(afterFailure);

    await t.database.db.execute(sql.raw('DROP TRIGGER refuse_poisoned_event ON events'));
    await t.database.db.execute(sql.raw('DROP FUNCTION refuse_poisoned_event()'));
    expect(await recordAbandonedRotations(t.database.db, { batch: 10 })).toBe(25 - afterFailure.length);
    const all = [...ids].sort();
    expect(await recordedIds()).toEqual(all);
    // One event a change: the failed batch left nothing behind that the retry doubled.
    expect(await eventIds()).toEqual(all);
  });
});

const onServer = process.env.DATABASE_URL ? describe : undefined;

onServer?.('sweeps of several replicas at once (PostgreSQL)', () => {
  // The app's own sweep waits an hour: only the replicas below record anything.
  const t = useTestApp({ abandonedRotationsSweepMs: 3_600_000 });
  const replicas: Database[] = [];
  beforeAll(async () => {
    for (let i = 0; i < 3; i++) replicas.push(await openDatabase({ url: databaseUrlOf(t.database), poolMax: 2 }));
  });
  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.close()));
  });

  it('record each abandoned change once, with one event, whichever replica takes it (PostgreSQL)', async () => {
    const changes = await abandonedChanges(t, 40);

    // Each replica sweeps in batches of 3 until it finds nothing, all three at once, twice over.
    const sweepUntilEmpty = async (replica: Database) => {
      let recorded = 0;
      for (let n = -1; n !== 0; recorded += n) n = await settleAbandonedRotations(replica.db, 3);
      return recorded;
    };
    const first = await Promise.all(replicas.map(sweepUntilEmpty));
    const second = await Promise.all(replicas.map(sweepUntilEmpty));
    expect(first.reduce((a, b) => a + b, 0)).toBe(changes.length);
    expect(second).toEqual([0, 0, 0]);

    const ids = changes.map((c) => c.rotationId);
    const audits = await rowsOf<{ id: string; outcome: string | null }>(t.database.db, sql`SELECT id, outcome FROM asset_password_changes WHERE id IN ${ids}`);
    expect(audits).toHaveLength(changes.length);
    expect(audits.every((a) => a.outcome === 'UNCONFIRMED')).toBe(true);
    const events = await rowsOf<{ rotation_id: string; n: number }>(
      t.database.db,
      sql`SELECT (data::json)->>'rotationId' AS rotation_id, count(*)::int AS n FROM events
          WHERE type = 'asset.password.changed' AND (data::json)->>'rotationId' IN ${ids} GROUP BY 1`,
    );
    expect(events.map((e) => e.rotation_id).sort()).toEqual([...ids].sort());
    expect(events.every((e) => e.n === 1)).toBe(true);
    const assets = await rowsOf<{ state: string }>(t.database.db, sql`SELECT rotation_state AS state FROM assets WHERE id IN ${changes.map((c) => c.assetId)}`);
    expect(assets.map((a) => a.state)).toEqual(changes.map(() => 'UNCONFIRMED'));
  });
});
