// An answer that reaches the waiting replica after its change was recorded UNCONFIRMED without it
// (docs/rotation.md, "A change whose replica died"): a replica that stalled past the deadline and
// the sweep's margin. The answer changes nothing and records nothing; the API answers where the
// change stands by then. Real stations (`ocpp-rpc` clients); the stall is the deadline moved back.
import { sql } from 'drizzle-orm';
import { describe, expect, it, vi } from 'vitest';
import { settleAbandonedRotations } from '../../src/asset-management/password-rotation-service.js';
import { rowsOf } from '../../src/db/database.js';
import { subprotocolOf } from '../../src/kernel/ocpp-vocabulary.js';
import { ASSET_WRITER } from '../helpers/asset-factory.js';
import { PASSWORD_COMMAND, loginStatus, passwordCommandAnswer, provisionStation, stationClient, useStationApp, wirePassword } from '../helpers/station-factory.js';

// The app's own sweep waits an hour: each test runs it once, at the point it chooses.
const t = useStationApp({ abandonedRotationsSweepMs: 3_600_000 });

async function rotationState(id: string): Promise<string> {
  const res = await t.app.inject({ url: `/asset-management/v1/assets/${id}`, headers: { authorization: t.bearer({ scopes: ['read:asset'] }) } });
  return res.json().data.rotation.state;
}

async function outcomes(assetId: string): Promise<string[]> {
  const rows = await rowsOf<{ data: string }>(t.database.db, sql`SELECT data FROM events WHERE type = 'asset.password.changed' AND (data::json)->>'assetId' = ${assetId}`);
  // Events of one transaction have no order (docs/events.md): compared as a sorted list.
  return rows.map((r) => JSON.parse(r.data).outcome as string).sort();
}

describe('an answer that comes after the change was recorded without it', () => {
  for (const between of ['nothing', 'a login with the old password', 'a login with the new password'] as const) {
    it(`with ${between} in between`, async () => {
      const s = await provisionStation(t, { ocppVersion: '2.0.1' });
      const client = stationClient(t.endpoint, { identity: s.id, password: wirePassword('2.0.1', s.password), protocols: [subprotocolOf('2.0.1')] });
      t.open.push(client);
      await client.connect();
      let answer!: (value: Record<string, unknown>) => void;
      let sent: { setVariableData: Array<{ attributeValue: string }> } | undefined;
      client.handle(PASSWORD_COMMAND['2.0.1'], ({ params }: { params?: unknown }) => {
        sent = params as typeof sent;
        return new Promise<Record<string, unknown>>((resolve) => (answer = resolve));
      });
      const pending = t.app.inject({ method: 'POST', url: '/asset-management/v1/assets/change-password', headers: { authorization: t.bearer(ASSET_WRITER) }, payload: { id: s.id } });
      await vi.waitFor(() => expect(sent).toBeDefined());
      const newPassword = sent!.setVariableData[0]!.attributeValue;

      // The waiting replica stalls past its deadline and the margin: the sweep records the change.
      await t.database.db.execute(sql`UPDATE assets SET rotation_deadline = now() - interval '60 seconds' WHERE id = ${s.id}`);
      expect(await settleAbandonedRotations(t.database.db, 100)).toBe(1);
      expect(await outcomes(s.id)).toEqual(['PROVISIONED', 'UNCONFIRMED']);
      // A second connection takes the station over: the first one's command then ends unanswered.
      if (between === 'a login with the old password') expect(await loginStatus(t.endpoint, { id: s.id, version: '2.0.1', password: s.password })).toBe(101);
      if (between === 'a login with the new password') expect(await loginStatus(t.endpoint, { id: s.id, version: '2.0.1', password: newPassword })).toBe(101);
      answer(passwordCommandAnswer('2.0.1', 'Accepted', sent));
      const res = await pending;

      if (between === 'nothing') {
        expect(res.statusCode, res.body).toBe(202);
        expect(res.json().data).toMatchObject({ id: s.id, status: 'UNCONFIRMED', password: newPassword });
        expect(await rotationState(s.id)).toBe('UNCONFIRMED');
        expect(await outcomes(s.id)).toEqual(['PROVISIONED', 'UNCONFIRMED']);
      } else if (between === 'a login with the old password') {
        expect(res.statusCode, res.body).toBe(409);
        expect(res.json()).toMatchObject({ type: 'CONFLICT', code: 'STATION_REJECTED' });
        expect(res.json().message).toContain('logged in with its old password');
        expect(await rotationState(s.id)).toBe('DISCARDED');
        expect(await outcomes(s.id)).toEqual(['OLD_USED', 'PROVISIONED', 'UNCONFIRMED']);
      } else {
        expect(res.statusCode, res.body).toBe(200);
        expect(res.json().data).toMatchObject({ id: s.id, passwordChangedAt: expect.any(String), password: newPassword });
        expect(await rotationState(s.id)).toBe('CONFIRMED');
        expect(await outcomes(s.id)).toEqual(['NEW_USED', 'PROVISIONED', 'UNCONFIRMED']);
      }
    });
  }
});
