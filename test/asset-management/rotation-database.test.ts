// The rotation state machine held against the real database: random interleavings of API changes
// (with every kind of station answer), station logins, disconnects, forced changes, rollbacks,
// replicas that die mid-change and the sweep that records such changes go through the service and
// the login check, and after each step every credential an honest station may hold still logs in
// (the database never refuses what the station has; docs/rotation.md).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hashAssetPassword, verifyPassword } from '../../src/asset-management/password-hashing.js';
import { rollBackAssetPassword } from '../../src/asset-management/password-rollback-service.js';
import { ABANDONED_MARGIN_MS, changeAssetPassword, settleAbandonedRotations } from '../../src/asset-management/password-rotation-service.js';
import { generatePassword } from '../../src/asset-management/password-rules.js';
import { acceptedCredentials, effectiveState, loginSlots, step, type Slots, type StationAnswer, type StepEffect } from '../../src/asset-management/rotation.js';
import { checkStationCredential, readStationLogins, type StationLink } from '../../src/asset-management/station-credentials-service.js';
import { stationEvents } from '../../src/stations/station-events.js';
import { claimStations, releaseStations } from '../../src/stations/stations-repository.js';
import { useTestApp } from '../helpers/test-app.js';
import { createAsset, inFlightChange } from '../helpers/asset-factory.js';
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
            epoch = (await claimStations(db, [{ assetId: asset.id, replicaId: t.app.stations.replicaId, network: asset.network, protocol: 'ocpp2.0.1' }], stationEvents))[0]!;
          } else if (action.type === 'disconnect' && epoch !== null) {
            await releaseStations(db, [{ assetId: asset.id, epoch, lastSeenAt: new Date() }], stationEvents);
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

type Move =
  | { type: 'request'; force: boolean; answer: StationAnswer }
  | { type: 'connect'; pick: number }
  | { type: 'disconnect' }
  | { type: 'rollback' }
  // A change sent to the station by a replica that then died: claimed, never settled, its
  // deadline and the sweep's margin long past (docs/rotation.md, "A change whose replica died").
  | { type: 'replicaDies' }
  // Every replica's sweep of such changes.
  | { type: 'sweep' };

// A replica dies only in a change that is sent, to a connected station with no change open:
// logins and deaths weigh more, so that enough scripts reach one.
const moves: fc.Arbitrary<Move> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ type: fc.constant('request' as const), force: fc.boolean(), answer: fc.oneof(fc.constant({ kind: 'status' as const, status: 'Accepted' }), answers) }) },
  { weight: 3, arbitrary: fc.record({ type: fc.constant('connect' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.constant({ type: 'disconnect' as const }) },
  { weight: 1, arbitrary: fc.constant({ type: 'rollback' as const }) },
  { weight: 3, arbitrary: fc.constant({ type: 'replicaDies' as const }) },
  { weight: 2, arbitrary: fc.constant({ type: 'sweep' as const }) },
);

// The API's answer as the machine's effect says it should be: a status, or a 409's code.
function expectedAnswer(effect: StepEffect): number | string {
  if (effect.kind === 'rollback') return effect.decision.kind === 'rollBack' ? 200 : effect.decision.code;
  if (effect.kind === 'request') return effect.decision.kind === 'refuse' ? effect.decision.code : 200;
  if (effect.kind !== 'answer' || effect.outcome === 'IGNORED') throw new Error(`no answer for ${JSON.stringify(effect)}`);
  return { ACCEPTED: 200, REJECTED: 'STATION_REJECTED', UNCONFIRMED: 202, NOT_SENT: 'STATION_OFFLINE' }[effect.outcome];
}

describe('the database follows the rotation state machine', () => {
  it('property: changes with every kind of answer, logins, disconnects, rollbacks and replicas that die mid-change answer, accept and refuse exactly as rotation.ts decides', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(moves, { minLength: 1, maxLength: 14 }), async (script) => {
        const db = t.database.db;
        const asset = await createAsset(t);
        const sent: { password: string | null } = { password: null };
        let scripted: StationAnswer = { kind: 'timeout' };
        const port: StationLink = {
          views: (ids) => t.app.stations.views(ids),
          async sendPasswordChange(command) {
            sent.password = command.password;
            return scripted;
          },
          isConnected: async () => true,
        };
        const deps = { stations: port, callTimeoutMs: 1000, passwordHashParams: CHEAP_HASH };
        let slots: Slots<string> = { active: null, pending: null, replaced: null, rotation: null };
        // Every password the service made, and one it never did.
        const issued = ['Never:issued-password-0'];
        let everLoggedIn = false;
        let epoch: number | null = null;
        const first = await changeAssetPassword(db, deps, actor, { id: asset.id });
        slots = step(slots, { type: 'request', id: 'r0', credential: first.data.password!, reach: 'never', force: false }).slots;
        issued.push(first.data.password!);

        for (const [index, move] of script.entries()) {
          if (move.type === 'request') {
            sent.password = null;
            scripted = move.answer;
            const result = await changeAssetPassword(db, deps, actor, { id: asset.id, force: move.force }).catch((error: { code?: string }) => error);
            const got = 'status' in result ? result.status : result.code;
            const credential = sent.password ?? ('data' in result ? result.data.password : undefined) ?? `unused-${index}`;
            issued.push(credential);
            const reach = !everLoggedIn ? 'never' : epoch !== null ? 'connected' : 'offline';
            const requested = step(slots, { type: 'request', id: `r${index + 1}`, credential, reach, force: move.force });
            slots = requested.slots;
            let effect = requested.effect;
            if (effect.kind === 'request' && effect.decision.kind === 'send') {
              const answered = step(slots, { type: 'answer', id: `r${index + 1}`, answer: move.answer });
              slots = answered.slots;
              effect = answered.effect;
            }
            expect(got).toBe(expectedAnswer(effect));
          } else if (move.type === 'connect') {
            const credential = issued[move.pick % issued.length]!;
            const row = (await readStationLogins(db, [asset.id]))[0]!;
            const matched = await checkStationCredential(db, row, Buffer.from(credential), { log: t.app.log });
            const { slots: next, effect } = step(slots, { type: 'login', credential });
            slots = next;
            expect(effect).toEqual({ kind: 'login', accepted: matched === 'active' || matched === 'pending', replacedTried: matched === 'replaced' });
            if (matched === 'active' || matched === 'pending') {
              everLoggedIn = true;
              epoch = (await claimStations(db, [{ assetId: asset.id, replicaId: t.app.stations.replicaId, network: asset.network, protocol: 'ocpp2.0.1' }], stationEvents))[0]!;
            }
          } else if (move.type === 'disconnect' && epoch !== null) {
            await releaseStations(db, [{ assetId: asset.id, epoch, lastSeenAt: new Date() }], stationEvents);
            epoch = null;
          } else if (move.type === 'replicaDies') {
            // What the replica wrote before it sent the command, when the machine would send one:
            // to the station, the same as an answer that never came.
            const reach = !everLoggedIn ? 'never' : epoch !== null ? 'connected' : 'offline';
            const credential = generatePassword(asset.ocppVersion);
            const requested = step(slots, { type: 'request', id: `r${index + 1}`, credential, reach, force: false });
            if (requested.effect.kind === 'request' && requested.effect.decision.kind === 'send') {
              const pendingPasswordHash = await hashAssetPassword(asset.ocppVersion, credential, { generated: true });
              await inFlightChange(db, asset, { deadlineMs: -(ABANDONED_MARGIN_MS + 60_000), pendingPasswordHash, actorClientId: actor.clientId });
              issued.push(credential);
              slots = step(requested.slots, { type: 'answer', id: `r${index + 1}`, answer: { kind: 'timeout' } }).slots;
            }
          } else if (move.type === 'sweep') {
            // Records what it finds; the machine has nothing to change.
            await settleAbandonedRotations(db, 100);
          } else if (move.type === 'rollback') {
            const result = await rollBackAssetPassword(db, actor, asset.id).then(
              () => 200,
              (error: { code?: string }) => error.code,
            );
            const { slots: next, effect } = step(slots, { type: 'rollback', id: `b${index}` });
            slots = next;
            expect(result).toBe(expectedAnswer(effect));
          }
          const row = (await readStationLogins(db, [asset.id]))[0]!;
          expect(row.rotationState && effectiveState(row.rotationState, row.deadlinePassed)).toBe(slots.rotation?.state);
          const expected = acceptedCredentials(slots);
          for (const credential of issued) expect(await accepted(asset.id, credential), credential).toBe(expected.includes(credential));
        }
      }),
      { numRuns: 40 },
    );
  }, 180_000);
});
