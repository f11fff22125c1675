// The rotation state machine held against the real database: random interleavings of API changes
// (with every kind of station answer), station logins, disconnects and forced changes go through
// the service and the login check, and after each step every credential an honest station may
// hold still logs in (contract §8.2: the database never refuses what the station has).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { verifyPassword } from '../../src/asset-management/password-hashing.js';
import { changeAssetPassword } from '../../src/asset-management/password-rotation-service.js';
import { loginSlots, type StationAnswer } from '../../src/asset-management/rotation.js';
import { checkStationCredential, readStationLogins, type StationLink } from '../../src/asset-management/station-credentials-service.js';
import { claimStations, releaseStations } from '../../src/stations/stations-repository.js';
import { useTestApp } from '../helpers/test-app.js';
import { createAsset } from '../helpers/asset-factory.js';
import { CHEAP_HASH } from '../helpers/password-hash-params.js';

const t = useTestApp({ passwordHashParams: CHEAP_HASH });
const actor = { clientId: 'cli_property', network: null };

const answers: fc.Arbitrary<StationAnswer> = fc.oneof(
  fc.constantFrom('Accepted', 'Rejected', 'NotSupportedAttributeType', 'RebootRequired').map((status) => ({ kind: 'status' as const, status })),
  fc.constant({ kind: 'callError' as const, code: 'InternalError' }),
  fc.constant({ kind: 'timeout' as const }),
  fc.constant({ kind: 'dropped' as const }),
);

type Action = { type: 'request'; force: boolean; answer: StationAnswer } | { type: 'connect'; pick: number } | { type: 'disconnect' } | { type: 'stray' };

const actions: fc.Arbitrary<Action> = fc.oneof(
  fc.record({ type: fc.constant('request' as const), force: fc.boolean(), answer: answers }),
  fc.record({ type: fc.constant('connect' as const), pick: fc.nat() }),
  fc.constant({ type: 'disconnect' as const }),
  fc.constant({ type: 'stray' as const }),
);

// Whether a login with this credential would be accepted now, read from the row without moving it.
async function accepted(id: string, credential: string): Promise<boolean> {
  const row = (await readStationLogins(t.database.db, [id]))[0]!;
  for (const slot of loginSlots(row.rotationState)) {
    const hash = slot === 'active' ? row.passwordHash : row.pendingPasswordHash;
    if (hash !== null && (await verifyPassword(credential, hash))) return true;
  }
  return false;
}

describe('rotation against the database', () => {
  it('property: no interleaving of changes, answers, logins and disconnects locks an honest station out', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(actions, { minLength: 1, maxLength: 12 }), async (script) => {
        const db = t.database.db;
        const asset = await createAsset(t);
        // What the station was sent by the latest request, if anything.
        const last: { sent: string | null } = { sent: null };
        let scripted: StationAnswer = { kind: 'timeout' };
        const port: StationLink = {
          // Where the station is, from the connection table the steps below write.
          views: (ids) => t.app.stations.views(ids),
          async sendPasswordChange(command) {
            last.sent = command.password;
            return scripted;
          },
          // The scripted station answers whenever its row says connected.
          isConnected: async () => true,
        };
        const deps = { stations: port, callTimeoutMs: 1000, passwordHashParams: CHEAP_HASH };
        const first = await changeAssetPassword(db, deps, actor, { id: asset.id });
        expect(first.status).toBe(200);
        let mayHold = new Set([first.data.password!]);
        let epoch: number | null = null;
        for (const action of script) {
          if (action.type === 'request') {
            last.sent = null;
            scripted = action.answer;
            const result = await changeAssetPassword(db, deps, actor, { id: asset.id, force: action.force }).catch((error: { code?: string }) => error);
            const status = 'status' in result ? result.status : result.code;
            const { sent } = last;
            if (status === 200 && sent === null) mayHold = new Set([(result as { data: { password: string } }).data.password]);
            else if (status === 200 && sent !== null) mayHold = new Set([sent]);
            else if (status === 202) mayHold.add(sent!);
            // Any 409: the station kept what it had.
          } else if (action.type === 'connect') {
            const held = [...mayHold];
            const credential = held[action.pick % held.length]!;
            const row = (await readStationLogins(db, [asset.id]))[0]!;
            const matched = await checkStationCredential(db, row, Buffer.from(credential), { log: t.app.log });
            expect(matched === 'active' || matched === 'pending').toBe(true);
            mayHold = new Set([credential]);
            epoch = (await claimStations(db, [{ assetId: asset.id, replicaId: t.app.stations.replicaId, protocol: 'ocpp2.0.1' }]))[0]!;
          } else if (action.type === 'disconnect' && epoch !== null) {
            await releaseStations(db, [{ assetId: asset.id, epoch, lastSeenAt: new Date() }]);
          } else if (action.type === 'stray') {
            const row = (await readStationLogins(db, [asset.id]))[0]!;
            expect(await checkStationCredential(db, row, Buffer.from('Never:issued-password-0'), { log: t.app.log })).toBeNull();
          }
          for (const credential of mayHold) expect(await accepted(asset.id, credential)).toBe(true);
        }
      }),
      { numRuns: 25 },
    );
  }, 120_000);
});
