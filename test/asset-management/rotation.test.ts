// The rotation state machine of docs/rotation.md, driven by random interleavings of API requests,
// station answers, logins, disconnects and replica deaths, against a model of what an honest
// station may hold.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  acceptedCredentials,
  answerOutcome,
  decideRequest,
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
