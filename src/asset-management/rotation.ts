// The rotation of a station's password as a state machine, without I/O. The
// service, the station login and the repository's guarded statements take their decisions from
// here; `step` composes them so that a property test can drive every interleaving.
//
// An asset has two credential slots: `active` and, while a rotation is open, `pending`. A third,
// `replaced`, keeps the credential the last switch retired: never accepted, only recognised, so a
// station that keeps trying it can be reported (the station that answers Accepted and ignores it),
// and an operator can roll the switch back to it.

export const ROTATION_STATES = [
  'IN_FLIGHT',
  'UNCONFIRMED',
  'ACCEPTED',
  'REJECTED',
  'FORCED',
  'PROVISIONED',
  'CONFIRMED',
  'DISCARDED',
  'ROLLED_BACK',
] as const;
export type RotationState = (typeof ROTATION_STATES)[number];

// What the audit row records as the outcome of the API call.
export const ROTATION_OUTCOMES = ['ACCEPTED', 'REJECTED', 'UNCONFIRMED', 'FORCED', 'PROVISIONED', 'ROLLED_BACK'] as const;
export type RotationOutcome = (typeof ROTATION_OUTCOMES)[number];

// How an UNCONFIRMED rotation ended: a login with the new credential, with the old one, or a
// forced change over it.
export const ROTATION_RESOLUTIONS = ['NEW_USED', 'OLD_USED', 'FORCED'] as const;
export type RotationResolution = (typeof ROTATION_RESOLUTIONS)[number];

// The station may hold either credential: both are accepted, and no other change may start.
export const OPEN_STATES = ['IN_FLIGHT', 'UNCONFIRMED'] as const satisfies readonly RotationState[];

export function isOpen(state: RotationState | null): boolean {
  return state === 'IN_FLIGHT' || state === 'UNCONFIRMED';
}

// An IN_FLIGHT rotation whose deadline has passed lost the replica that waited for the answer:
// nobody will settle it, so it reads, and is resolved, as UNCONFIRMED.
export function effectiveState(state: RotationState, deadlinePassed: boolean): RotationState {
  return state === 'IN_FLIGHT' && deadlinePassed ? 'UNCONFIRMED' : state;
}

export type StationReach = 'never' | 'connected' | 'offline';

export type RequestDecision =
  | { kind: 'store'; outcome: 'PROVISIONED' | 'FORCED' }
  | { kind: 'send' }
  | { kind: 'refuse'; code: 'STATION_OFFLINE' | 'PASSWORD_CHANGE_IN_PROGRESS' };

// An API change request, given where the station is and the asset's latest rotation.
export function decideRequest(input: { reach: StationReach; force: boolean; state: RotationState | null; deadlinePassed: boolean }): RequestDecision {
  const state = input.state === null ? null : effectiveState(input.state, input.deadlinePassed);
  if (state === 'IN_FLIGHT') return { kind: 'refuse', code: 'PASSWORD_CHANGE_IN_PROGRESS' };
  if (state === 'UNCONFIRMED') {
    // The operator's way out of a rotation whose station never came back: configure it by hand.
    return input.reach === 'offline' && input.force ? { kind: 'store', outcome: 'FORCED' } : { kind: 'refuse', code: 'PASSWORD_CHANGE_IN_PROGRESS' };
  }
  if (input.reach === 'never') return { kind: 'store', outcome: 'PROVISIONED' };
  if (input.reach === 'connected') return { kind: 'send' };
  return input.force ? { kind: 'store', outcome: 'FORCED' } : { kind: 'refuse', code: 'STATION_OFFLINE' };
}

// What came back for the command: the station's status, a CALLERROR, nothing in time, a socket
// that closed mid-call, or no socket to send it on (never sent).
export type StationAnswer =
  | { kind: 'status'; status: string }
  | { kind: 'callError'; code: string }
  | { kind: 'timeout' }
  | { kind: 'dropped' }
  | { kind: 'notSent' };

export type AnswerOutcome = 'ACCEPTED' | 'REJECTED' | 'UNCONFIRMED' | 'NOT_SENT';

export function answerOutcome(answer: StationAnswer): AnswerOutcome {
  switch (answer.kind) {
    case 'status':
      if (answer.status === 'Accepted') return 'ACCEPTED';
      // The station took it but applies it later: it may hold either until it logs in again.
      if (answer.status === 'RebootRequired') return 'UNCONFIRMED';
      return 'REJECTED';
    case 'callError':
      return 'REJECTED';
    case 'timeout':
    case 'dropped':
      return 'UNCONFIRMED';
    case 'notSent':
      return 'NOT_SENT';
  }
}

// The state an IN_FLIGHT rotation moves to once its command has an outcome. A command never sent
// changed nothing on the station, exactly like a refusal; it also shows the station was offline
// whatever the connection table said when the request was decided (a stale row), so a forced
// request is stored as forced, the way decideRequest stores it for a station known offline.
export function stateAfterAnswer(outcome: AnswerOutcome, force: boolean): 'ACCEPTED' | 'REJECTED' | 'UNCONFIRMED' | 'FORCED' {
  if (outcome === 'NOT_SENT') return force ? 'FORCED' : 'REJECTED';
  return outcome;
}

export function describeAnswer(answer: StationAnswer): string {
  switch (answer.kind) {
    case 'status':
      return `the station answered ${answer.status}`;
    case 'callError':
      return `the station answered with the CALLERROR ${answer.code}`;
    case 'timeout':
      return 'the station did not answer in time';
    case 'dropped':
      return 'the station’s connection closed before it answered';
    case 'notSent':
      return 'the station is not connected';
  }
}

export type Slot = 'active' | 'pending';

// The states a switch leaves: the new credential became the only one and the one before it is
// kept as `replaced`. A station's login never moves them on; the next API change does.
const SWITCHED_STATES = ['ACCEPTED', 'CONFIRMED', 'FORCED', 'PROVISIONED'] as const satisfies readonly RotationState[];

// After a switch of a station that has logged in before, a login with the credential it retired is
// refused and reported: the station most likely acknowledged the change and kept the old one.
// (PROVISIONED is left out: that station has never logged in, so it kept nothing.)
export const REPORTING_STATES = ['ACCEPTED', 'CONFIRMED', 'FORCED'] as const satisfies readonly (typeof SWITCHED_STATES)[number][];

export function reportsReplacedLogin(state: RotationState | null): boolean {
  return (REPORTING_STATES as readonly (RotationState | null)[]).includes(state);
}

export type RollbackDecision = { kind: 'rollBack' } | { kind: 'refuse'; code: 'NOTHING_TO_ROLL_BACK' | 'PASSWORD_CHANGE_IN_PROGRESS' };

// An operator's rollback: the credential the latest switch replaced becomes the only one again.
// Only a switch can be undone, and only the latest: after a refusal, a discarded change or a
// rollback the credential kept as `replaced` (if any) is an older one the station was told to
// drop, so restoring it would undo more than the operator saw. An open rotation has switched
// nothing yet, and how it ends is the station's to say: the rollback waits, like a change.
// PROVISIONED counts: a second provisioning of a station that was configured by hand with the
// first password is undone the same way.
export function decideRollback(input: { state: RotationState | null; deadlinePassed: boolean; hasReplaced: boolean }): RollbackDecision {
  if (input.state === null) return { kind: 'refuse', code: 'NOTHING_TO_ROLL_BACK' };
  if (isOpen(effectiveState(input.state, input.deadlinePassed))) return { kind: 'refuse', code: 'PASSWORD_CHANGE_IN_PROGRESS' };
  const switched = (SWITCHED_STATES as readonly RotationState[]).includes(input.state);
  return switched && input.hasReplaced ? { kind: 'rollBack' } : { kind: 'refuse', code: 'NOTHING_TO_ROLL_BACK' };
}

// The slots a login may match, in the order to try them.
export function loginSlots(state: RotationState | null): Slot[] {
  return isOpen(state) ? ['active', 'pending'] : ['active'];
}

// What a successful login does to the rotation: an unconfirmed one is resolved by whichever
// credential the station used; an IN_FLIGHT one waits for its answer (the station may switch
// after a reconnect, and both stay accepted meanwhile).
export function afterLogin(state: RotationState | null, deadlinePassed: boolean, matched: Slot): 'CONFIRMED' | 'DISCARDED' | null {
  if (state === null || effectiveState(state, deadlinePassed) !== 'UNCONFIRMED') return null;
  return matched === 'pending' ? 'CONFIRMED' : 'DISCARDED';
}

// The whole machine over abstract credentials, for tests and for reading the rules in one place.
export interface Slots<C> {
  active: C | null;
  pending: C | null;
  replaced: C | null;
  // force: the request that opened it was forced (it was sent because the station read connected).
  rotation: { id: string; state: RotationState; deadlinePassed: boolean; force?: boolean } | null;
}

export type RotationEvent<C> =
  | { type: 'request'; id: string; credential: C; reach: StationReach; force: boolean }
  | { type: 'answer'; id: string; answer: StationAnswer }
  // The replica waiting for the answer died: its deadline passes with nobody to settle it.
  | { type: 'replicaDied'; id: string }
  | { type: 'login'; credential: C }
  | { type: 'rollback'; id: string };

export type StepEffect =
  | { kind: 'request'; decision: RequestDecision }
  | { kind: 'rollback'; decision: RollbackDecision }
  | { kind: 'answer'; outcome: AnswerOutcome | 'IGNORED' }
  | { kind: 'login'; accepted: boolean; replacedTried: boolean };

function switched<C>(slots: Slots<C>, credential: C, rotation: Slots<C>['rotation']): Slots<C> {
  return { active: credential, pending: null, replaced: slots.active, rotation };
}

export function step<C>(slots: Slots<C>, event: RotationEvent<C>): { slots: Slots<C>; effect: StepEffect } {
  const r = slots.rotation;
  switch (event.type) {
    case 'request': {
      const decision = decideRequest({ reach: event.reach, force: event.force, state: r?.state ?? null, deadlinePassed: r?.deadlinePassed ?? false });
      const rotation = (state: RotationState) => ({ id: event.id, state, deadlinePassed: false });
      if (decision.kind === 'store') return { slots: switched(slots, event.credential, rotation(decision.outcome)), effect: { kind: 'request', decision } };
      if (decision.kind === 'send') {
        return { slots: { ...slots, pending: event.credential, rotation: { ...rotation('IN_FLIGHT'), force: event.force } }, effect: { kind: 'request', decision } };
      }
      return { slots, effect: { kind: 'request', decision } };
    }
    case 'answer': {
      // Only the rotation it belongs to, and only while nobody else has settled it.
      if (!r || r.id !== event.id || r.state !== 'IN_FLIGHT') return { slots, effect: { kind: 'answer', outcome: 'IGNORED' } };
      const outcome = answerOutcome(event.answer);
      const state = stateAfterAnswer(outcome, r.force === true);
      const rotation = { ...r, state };
      if (state === 'ACCEPTED' || state === 'FORCED') return { slots: switched(slots, slots.pending as C, rotation), effect: { kind: 'answer', outcome } };
      if (state === 'REJECTED') return { slots: { ...slots, pending: null, rotation }, effect: { kind: 'answer', outcome } };
      return { slots: { ...slots, rotation }, effect: { kind: 'answer', outcome } };
    }
    case 'replicaDied': {
      if (!r || r.id !== event.id || r.state !== 'IN_FLIGHT') return { slots, effect: { kind: 'answer', outcome: 'IGNORED' } };
      return { slots: { ...slots, rotation: { ...r, deadlinePassed: true } }, effect: { kind: 'answer', outcome: 'IGNORED' } };
    }
    case 'login': {
      const state = r?.state ?? null;
      const matched = loginSlots(state).find((slot) => slots[slot] !== null && slots[slot] === event.credential);
      if (!matched) {
        const replacedTried = reportsReplacedLogin(state) && slots.replaced !== null && slots.replaced === event.credential;
        return { slots, effect: { kind: 'login', accepted: false, replacedTried } };
      }
      const next = afterLogin(state, r?.deadlinePassed ?? false, matched);
      if (!next || !r) return { slots, effect: { kind: 'login', accepted: true, replacedTried: false } };
      const rotation = { ...r, state: next, deadlinePassed: false };
      const after = next === 'CONFIRMED' ? switched(slots, slots.pending as C, rotation) : { ...slots, pending: null, rotation };
      return { slots: after, effect: { kind: 'login', accepted: true, replacedTried: false } };
    }
    case 'rollback': {
      const decision = decideRollback({ state: r?.state ?? null, deadlinePassed: r?.deadlinePassed ?? false, hasReplaced: slots.replaced !== null });
      if (decision.kind === 'refuse') return { slots, effect: { kind: 'rollback', decision } };
      // The credential the rollback undoes is forgotten, not kept as `replaced`: a second rollback
      // has nothing to restore, and a login with it is an ordinary refusal.
      const rotation = { id: event.id, state: 'ROLLED_BACK' as const, deadlinePassed: false };
      return { slots: { active: slots.replaced, pending: null, replaced: null, rotation }, effect: { kind: 'rollback', decision } };
    }
  }
}

// The credentials a login is accepted with in this state.
export function acceptedCredentials<C>(slots: Slots<C>): C[] {
  return loginSlots(slots.rotation?.state ?? null)
    .map((slot) => slots[slot])
    .filter((c): c is C => c !== null);
}
