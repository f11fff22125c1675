// The rotation state machine of docs/rotation.md, driven by random interleavings of API requests,
// station answers, logins, disconnects and replica deaths, against a model of what an honest
// station may hold; and the rollback that answers a station which acknowledged a change and kept
// its old password.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  acceptedCredentials,
  answerOutcome,
  decideRequest,
  decideRollback,
  stateAfterAnswer,
  step,
  type RotationState,
  type Slots,
  type StationAnswer,
  type StationReach,
} from '../../src/asset-management/rotation.js';

const answers: fc.Arbitrary<StationAnswer> = fc.oneof(
  fc.constantFrom('Accepted', 'Rejected', 'NotSupported', 'RebootRequired', 'UnknownVariable').map((status) => ({ kind: 'status' as const, status })),
  fc.constantFrom('NotImplemented', 'InternalError', 'FormationViolation').map((code) => ({ kind: 'callError' as const, code })),
  fc.constant({ kind: 'timeout' as const }),
  fc.constant({ kind: 'dropped' as const }),
);

type Action =
  | { type: 'request'; force: boolean }
  | { type: 'answer'; answer: StationAnswer }
  | { type: 'replicaDied' }
  | { type: 'connect'; pick: number }
  | { type: 'disconnect' }
  | { type: 'strayLogin' };

const actions: fc.Arbitrary<Action> = fc.oneof(
  fc.record({ type: fc.constant('request' as const), force: fc.boolean() }),
  fc.record({ type: fc.constant('answer' as const), answer: answers }),
  fc.constant({ type: 'replicaDied' as const }),
  fc.record({ type: fc.constant('connect' as const), pick: fc.nat() }),
  fc.constant({ type: 'disconnect' as const }),
  fc.constant({ type: 'strayLogin' as const }),
);

describe('rotation state machine', () => {
  it('property: every credential an honest station may hold is accepted, the set is never empty, and an answer decides exactly as A01.FR.03/04 say', () => {
    fc.assert(
      fc.property(fc.array(actions, { maxLength: 60 }), (script) => {
        let slots: Slots<string> = { active: 'c0', pending: null, replaced: null, rotation: null };
        // What the station may hold, by what it has told us and what we sent it.
        let mayHold = new Set(['c0']);
        let everLoggedIn = false;
        let connected = false;
        let counter = 0;
        let sent: { id: string; credential: string } | null = null;
        for (const action of script) {
          if (action.type === 'request') {
            const reach: StationReach = !everLoggedIn ? 'never' : connected ? 'connected' : 'offline';
            const credential = `c${++counter}`;
            const id = `r${counter}`;
            const { slots: next, effect } = step(slots, { type: 'request', id, credential, reach, force: action.force });
            slots = next;
            if (effect.kind !== 'request') throw new Error('wrong effect');
            if (effect.decision.kind === 'store') mayHold = new Set([credential]);
            if (effect.decision.kind === 'send') {
              mayHold.add(credential);
              sent = { id, credential };
            }
            if (effect.decision.kind === 'refuse') expect(next).toBe(slots);
          } else if (action.type === 'answer' && sent) {
            const before = slots;
            const { slots: next, effect } = step(slots, { type: 'answer', id: sent.id, answer: action.answer });
            slots = next;
            if (effect.kind === 'answer' && effect.outcome !== 'IGNORED') {
              if (effect.outcome === 'ACCEPTED') {
                mayHold = new Set([sent.credential]);
                // A01.FR.03: from the answer on, the old credential is refused.
                expect(acceptedCredentials(slots)).toEqual([sent.credential]);
                expect(step(slots, { type: 'login', credential: before.active! }).effect).toEqual({ kind: 'login', accepted: false, replacedTried: true });
              } else if (effect.outcome === 'REJECTED') {
                mayHold.delete(sent.credential);
                // A01.FR.04: the old credential stays, and is the only one.
                expect(acceptedCredentials(slots)).toEqual([before.active]);
              } else {
                expect(acceptedCredentials(slots)).toEqual([before.active, sent.credential]);
              }
            }
            if (action.answer.kind === 'dropped') connected = false;
          } else if (action.type === 'replicaDied' && sent) {
            slots = step(slots, { type: 'replicaDied', id: sent.id }).slots;
          } else if (action.type === 'connect') {
            const held = [...mayHold];
            const credential = held[action.pick % held.length]!;
            const { slots: next, effect } = step(slots, { type: 'login', credential });
            // An honest station is never locked out.
            expect(effect).toMatchObject({ kind: 'login', accepted: true });
            slots = next;
            everLoggedIn = true;
            connected = true;
            // Once it has logged in with one, an unconfirmed rotation is over; an in-flight one still
            // waits for its answer and the station may still switch.
            const state = slots.rotation?.state;
            if (state !== 'IN_FLIGHT') mayHold = new Set([credential]);
          } else if (action.type === 'disconnect') {
            connected = false;
          } else if (action.type === 'strayLogin') {
            expect(step(slots, { type: 'login', credential: 'never-issued' }).effect).toEqual({ kind: 'login', accepted: false, replacedTried: false });
          }
          const accepted = acceptedCredentials(slots);
          expect(accepted.length).toBeGreaterThan(0);
          for (const credential of mayHold) expect(accepted).toContain(credential);
          // Two slots at most, and a pending one only while the rotation is open.
          expect(accepted.length).toBeLessThanOrEqual(2);
          if (slots.pending !== null) expect(['IN_FLIGHT', 'UNCONFIRMED']).toContain(slots.rotation?.state);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('a second request while a rotation is open is refused and changes nothing, whatever the station', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<RotationState>('IN_FLIGHT', 'UNCONFIRMED'),
        fc.constantFrom<StationReach>('connected', 'offline'),
        fc.boolean(),
        fc.boolean(),
        (state, reach, force, deadlinePassed) => {
          const decision = decideRequest({ reach, force, state, deadlinePassed });
          const unconfirmed = state === 'UNCONFIRMED' || deadlinePassed;
          // Only a forced change of an offline station ends an unconfirmed rotation.
          const expected = unconfirmed && reach === 'offline' && force ? { kind: 'store', outcome: 'FORCED' } : { kind: 'refuse', code: 'PASSWORD_CHANGE_IN_PROGRESS' };
          expect(decision).toEqual(expected);
        },
      ),
    );
  });

  it.each([
    ['never', false, { kind: 'store', outcome: 'PROVISIONED' }],
    ['never', true, { kind: 'store', outcome: 'PROVISIONED' }],
    ['connected', false, { kind: 'send' }],
    ['connected', true, { kind: 'send' }],
    ['offline', false, { kind: 'refuse', code: 'STATION_OFFLINE' }],
    ['offline', true, { kind: 'store', outcome: 'FORCED' }],
  ] as const)('no open rotation, station %s, force %s', (reach, force, expected) => {
    for (const state of [null, 'ACCEPTED', 'REJECTED', 'FORCED', 'PROVISIONED', 'CONFIRMED', 'DISCARDED'] as const) {
      expect(decideRequest({ reach, force, state, deadlinePassed: false })).toEqual(expected);
    }
  });

  it.each([
    [{ kind: 'status', status: 'Accepted' }, 'ACCEPTED'],
    [{ kind: 'status', status: 'Rejected' }, 'REJECTED'],
    [{ kind: 'status', status: 'NotSupported' }, 'REJECTED'],
    [{ kind: 'status', status: 'UnknownComponent' }, 'REJECTED'],
    [{ kind: 'status', status: 'RebootRequired' }, 'UNCONFIRMED'],
    [{ kind: 'callError', code: 'NotImplemented' }, 'REJECTED'],
    [{ kind: 'timeout' }, 'UNCONFIRMED'],
    [{ kind: 'dropped' }, 'UNCONFIRMED'],
    [{ kind: 'notSent' }, 'NOT_SENT'],
  ] as const)('answer %j is %s', (answer, outcome) => {
    expect(answerOutcome(answer)).toBe(outcome);
  });

  it('a command with no socket to go to (the row said connected, no replica had the station) is a refusal, or with force the forced change', () => {
    expect(stateAfterAnswer('NOT_SENT', false)).toBe('REJECTED');
    expect(stateAfterAnswer('NOT_SENT', true)).toBe('FORCED');
    for (const force of [false, true]) {
      expect(stateAfterAnswer('ACCEPTED', force)).toBe('ACCEPTED');
      expect(stateAfterAnswer('REJECTED', force)).toBe('REJECTED');
      expect(stateAfterAnswer('UNCONFIRMED', force)).toBe('UNCONFIRMED');
    }
    const start: Slots<string> = { active: 'old', pending: null, replaced: null, rotation: null };
    const sent = (force: boolean) => step(start, { type: 'request', id: 'r1', credential: 'new', reach: 'connected', force }).slots;
    const forced = step(sent(true), { type: 'answer', id: 'r1', answer: { kind: 'notSent' } }).slots;
    expect(forced).toMatchObject({ active: 'new', pending: null, replaced: 'old', rotation: { state: 'FORCED' } });
    const refused = step(sent(false), { type: 'answer', id: 'r1', answer: { kind: 'notSent' } }).slots;
    expect(refused).toMatchObject({ active: 'old', pending: null, rotation: { state: 'REJECTED' } });
  });

  it('an unconfirmed rotation is resolved by the next login: the new credential makes it the only one, the old one discards the new', () => {
    const open: Slots<string> = { active: 'old', pending: 'new', replaced: null, rotation: { id: 'r1', state: 'UNCONFIRMED', deadlinePassed: false } };
    const withNew = step(open, { type: 'login', credential: 'new' }).slots;
    expect(withNew).toEqual({ active: 'new', pending: null, replaced: 'old', rotation: { id: 'r1', state: 'CONFIRMED', deadlinePassed: false } });
    const withOld = step(open, { type: 'login', credential: 'old' }).slots;
    expect(withOld).toEqual({ active: 'old', pending: null, replaced: null, rotation: { id: 'r1', state: 'DISCARDED', deadlinePassed: false } });
    // A replica that died mid-call leaves IN_FLIGHT past its deadline: resolved the same way.
    const orphan: Slots<string> = { ...open, rotation: { id: 'r1', state: 'IN_FLIGHT', deadlinePassed: true } };
    expect(step(orphan, { type: 'login', credential: 'new' }).slots.rotation?.state).toBe('CONFIRMED');
    // While the answer is still awaited, a login changes nothing.
    const inFlight: Slots<string> = { ...open, rotation: { id: 'r1', state: 'IN_FLIGHT', deadlinePassed: false } };
    expect(step(inFlight, { type: 'login', credential: 'new' }).slots).toBe(inFlight);
  });
});

// Events of every kind at any time, the station's reach drawn at random too: a walk over every
// state the machine can reach, for the rules that must hold in all of them.
type Walk =
  | { type: 'request'; reach: StationReach; force: boolean }
  | { type: 'answer'; answer: StationAnswer }
  | { type: 'replicaDied' }
  | { type: 'login'; pick: number }
  | { type: 'rollback' };

// Accepted more often than the other answers: most switches a rollback can undo come from it.
const walks: fc.Arbitrary<Walk> = fc.oneof(
  { arbitrary: fc.record({ type: fc.constant('request' as const), reach: fc.constantFrom<StationReach>('never', 'connected', 'offline'), force: fc.boolean() }), weight: 3 },
  { arbitrary: fc.record({ type: fc.constant('answer' as const), answer: fc.oneof(fc.constant({ kind: 'status' as const, status: 'Accepted' }), answers) }), weight: 3 },
  { arbitrary: fc.constant({ type: 'replicaDied' as const }), weight: 1 },
  { arbitrary: fc.record({ type: fc.constant('login' as const), pick: fc.nat() }), weight: 2 },
  { arbitrary: fc.constant({ type: 'rollback' as const }), weight: 2 },
);

describe('rollback', () => {
  it('property: a rollback restores exactly the credential the latest rotation replaced, or refuses and changes nothing; it is never repeated, and a change can follow', () => {
    fc.assert(
      fc.property(fc.array(walks, { maxLength: 60 }), (script) => {
        // A password set before rotations existed: no rotation to roll back yet.
        let slots: Slots<string> = { active: 'c0', pending: null, replaced: null, rotation: null };
        let counter = 0;
        const issued: string[] = ['c0'];
        // Read from outside the machine: the credential the latest rotation's switch retired, or
        // undefined while the latest rotation has switched nothing (or was a rollback).
        let retiredByLatest: string | null | undefined;
        for (const action of script) {
          const before = slots;
          if (action.type === 'request') {
            const credential = `c${++counter}`;
            issued.push(credential);
            slots = step(slots, { type: 'request', id: `r${counter}`, credential, reach: action.reach, force: action.force }).slots;
          } else if (action.type === 'answer' && slots.rotation) {
            slots = step(slots, { type: 'answer', id: slots.rotation.id, answer: action.answer }).slots;
          } else if (action.type === 'replicaDied' && slots.rotation) {
            slots = step(slots, { type: 'replicaDied', id: slots.rotation.id }).slots;
          } else if (action.type === 'login' && issued.length > 0) {
            slots = step(slots, { type: 'login', credential: issued[action.pick % issued.length]! }).slots;
          } else if (action.type === 'rollback') {
            const id = `b${++counter}`;
            const { slots: next, effect } = step(slots, { type: 'rollback', id });
            const open = slots.rotation !== null && (slots.rotation.state === 'IN_FLIGHT' || slots.rotation.state === 'UNCONFIRMED');
            if (open) {
              expect(effect).toEqual({ kind: 'rollback', decision: { kind: 'refuse', code: 'PASSWORD_CHANGE_IN_PROGRESS' } });
              expect(next).toBe(slots);
            } else if (retiredByLatest !== undefined && retiredByLatest !== null) {
              expect(effect).toEqual({ kind: 'rollback', decision: { kind: 'rollBack' } });
              expect(acceptedCredentials(next)).toEqual([retiredByLatest]);
              expect(next).toEqual({ active: retiredByLatest, pending: null, replaced: null, rotation: { id, state: 'ROLLED_BACK', deadlinePassed: false } });
              // The credential it undid is no longer even recognised.
              expect(step(next, { type: 'login', credential: slots.active! }).effect).toEqual({ kind: 'login', accepted: false, replacedTried: false });
              // Undone once: a second rollback finds nothing.
              expect(step(next, { type: 'rollback', id: 'again' }).effect).toEqual({ kind: 'rollback', decision: { kind: 'refuse', code: 'NOTHING_TO_ROLL_BACK' } });
              // A later change is decided as if no rotation had ever been made.
              for (const reach of ['never', 'connected', 'offline'] as const) {
                for (const force of [false, true]) {
                  const decision = step(next, { type: 'request', id: 'later', credential: 'later', reach, force }).effect;
                  expect(decision).toEqual({ kind: 'request', decision: decideRequest({ reach, force, state: null, deadlinePassed: false }) });
                }
              }
            } else {
              expect(effect).toEqual({ kind: 'rollback', decision: { kind: 'refuse', code: 'NOTHING_TO_ROLL_BACK' } });
              expect(next).toBe(slots);
            }
            slots = next;
          }
          // What the walk saw happen: a new rotation has retired nothing yet; the active credential
          // changing under a rotation is its switch (a rollback restores, it does not switch).
          const rotationChanged = slots.rotation?.id !== before.rotation?.id;
          if (slots.rotation?.state === 'ROLLED_BACK') retiredByLatest = undefined;
          else if (slots.active !== before.active) retiredByLatest = before.active;
          else if (rotationChanged) retiredByLatest = undefined;
          // Nothing leaves the asset without a password.
          expect(acceptedCredentials(slots).length).toBeGreaterThan(0);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('property: a station that answers Accepted and keeps its old password is reported at its next login, and after one rollback it logs in with the password it kept; the next change can try again', () => {
    // The station answers every command as drawn; when it answers Accepted it may still keep its
    // old password. It logs in again after every command it acknowledged (a password is checked
    // when a connection opens, so a station reconnects to use a new one), and whenever else the
    // script says. The operator
    // rolls back when, and only when, a refused login is reported as the retired password.
    type Move = { type: 'change'; answer: StationAnswer; ignores: boolean } | { type: 'reconnect' };
    const moves: fc.Arbitrary<Move> = fc.oneof(
      fc.record({ type: fc.constant('change' as const), answer: answers, ignores: fc.boolean() }),
      fc.constant({ type: 'reconnect' as const }),
    );
    fc.assert(
      fc.property(fc.array(moves, { maxLength: 40 }), (script) => {
        let slots: Slots<string> = { active: 'c0', pending: null, replaced: null, rotation: { id: 'r0', state: 'PROVISIONED', deadlinePassed: false } };
        let held = 'c0';
        let connected = true;
        let counter = 0;
        let rollbacks = 0;
        const logIn = () => {
          const { slots: next, effect } = step(slots, { type: 'login', credential: held });
          slots = next;
          if (effect.kind !== 'login') throw new Error('wrong effect');
          if (!effect.accepted) {
            // Locked out, but never silently: the refusal names the retired password.
            expect(effect.replacedTried).toBe(true);
            const undone = step(slots, { type: 'rollback', id: `b${++counter}` });
            expect(undone.effect).toEqual({ kind: 'rollback', decision: { kind: 'rollBack' } });
            slots = undone.slots;
            rollbacks++;
            expect(step(slots, { type: 'login', credential: held }).effect).toMatchObject({ accepted: true });
            slots = step(slots, { type: 'login', credential: held }).slots;
          }
          connected = true;
        };
        for (const move of script) {
          if (move.type === 'reconnect') {
            connected = false;
            logIn();
            continue;
          }
          const credential = `c${++counter}`;
          const requested = step(slots, { type: 'request', id: `r${counter}`, credential, reach: connected ? 'connected' : 'offline', force: false });
          slots = requested.slots;
          if (requested.effect.kind !== 'request' || requested.effect.decision.kind !== 'send') continue;
          const answered = step(slots, { type: 'answer', id: `r${counter}`, answer: move.answer });
          slots = answered.slots;
          if (answered.effect.kind !== 'answer') throw new Error('wrong effect');
          const outcome = answered.effect.outcome;
          if (outcome === 'ACCEPTED' && !move.ignores) held = credential;
          // RebootRequired, a timeout or a dropped socket: the station may have taken it or not.
          if (outcome === 'UNCONFIRMED' && !move.ignores) held = credential;
          if (outcome === 'ACCEPTED' || outcome === 'UNCONFIRMED') {
            connected = false;
            logIn();
          }
        }
        // Each rollback answered one ignored change, never more.
        const ignoredAccepted = script.filter((m) => m.type === 'change' && m.ignores && answerOutcome(m.answer) === 'ACCEPTED').length;
        expect(rollbacks).toBeLessThanOrEqual(ignoredAccepted);
      }),
      { numRuns: 2000 },
    );
  });

  it.each([
    [null, true, 'NOTHING_TO_ROLL_BACK'],
    ['REJECTED', true, 'NOTHING_TO_ROLL_BACK'],
    ['DISCARDED', true, 'NOTHING_TO_ROLL_BACK'],
    ['ROLLED_BACK', true, 'NOTHING_TO_ROLL_BACK'],
    ['ACCEPTED', false, 'NOTHING_TO_ROLL_BACK'],
    ['PROVISIONED', false, 'NOTHING_TO_ROLL_BACK'],
    ['IN_FLIGHT', true, 'PASSWORD_CHANGE_IN_PROGRESS'],
    ['UNCONFIRMED', true, 'PASSWORD_CHANGE_IN_PROGRESS'],
    ['ACCEPTED', true, null],
    ['CONFIRMED', true, null],
    ['FORCED', true, null],
    ['PROVISIONED', true, null],
  ] as const)('latest rotation %s, a replaced credential kept: %s → %s', (state, hasReplaced, refusal) => {
    const decision = decideRollback({ state, deadlinePassed: false, hasReplaced });
    expect(decision).toEqual(refusal === null ? { kind: 'rollBack' } : { kind: 'refuse', code: refusal });
    // An IN_FLIGHT rotation past its deadline is an unconfirmed one: still waiting for the station.
    if (state === 'IN_FLIGHT') expect(decideRollback({ state, deadlinePassed: true, hasReplaced })).toEqual(decision);
  });
});
