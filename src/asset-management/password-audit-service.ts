// What the service records of a password change, in the transaction of the change itself: the
// audit row, and the event that reports each outcome and resolution the row records
// (docs/rotation.md, "Events"). Every write of an outcome or a resolution goes through here, so
// none is recorded without its event, and an event never exists for a change that rolled back.
// Never a password or hash in an event: only the asset, its network, the change and the outcome.
import type { Executor } from '../db/database.js';
import { appendEvents, type NewEvent } from '../events/events-service.js';
import { insertPasswordChange, markStaleLogin, markUnconfirmed, updatePasswordChange } from './assets-repository.js';
import type { RotationOutcome, RotationResolution, RotationState } from './rotation.js';

// A change of an asset's password, as its audit row and its events name it.
export type ChangeRef = { rotationId: string; assetId: string; network: string };

function passwordChanged(change: ChangeRef, outcome: RotationOutcome | RotationResolution, at: Date): NewEvent {
  const { rotationId, assetId, network } = change;
  return { type: 'asset.password.changed', network, data: { assetId, network, rotationId, outcome, at: at.toISOString() } };
}

// The audit row of a new change; with an outcome already known (stored at once, a rollback), its
// event, dated with the change.
export async function recordPasswordChange(
  tx: Executor,
  audit: ChangeRef & { actorClientId: string; generated: boolean | null; changedAt: Date; outcome: RotationOutcome | null },
): Promise<void> {
  const { rotationId, changedAt, outcome, ...rest } = audit;
  await insertPasswordChange(tx, { id: rotationId, changedAt, outcome, ...rest });
  if (outcome !== null) await appendEvents(tx, [passwordChanged(audit, outcome, changedAt)]);
}

// The outcome of a change whose command went to the station, and its event; nothing when the
// change has one already (an outcome is recorded once). `at`: when it took effect (the switch's
// passwordChangedAt); by default the database's time of the update.
export async function recordOutcome(tx: Executor, change: ChangeRef, outcome: RotationOutcome, at?: Date): Promise<void> {
  const updatedAt = await updatePasswordChange(tx, change.rotationId, { outcome });
  if (updatedAt) await appendEvents(tx, [passwordChanged(change, outcome, at ?? updatedAt)]);
}

// An IN_FLIGHT change past its deadline lost the replica that waited for the station's answer
// (docs/rotation.md, "A change whose replica died"). Whoever finds it first under the row's lock
// (the sweep, a login that resolves it, a forced change that replaces it) records the UNCONFIRMED
// outcome that replica would have recorded, with its event, before anything resolves it.
export async function recordAbandoned(tx: Executor, change: ChangeRef): Promise<void> {
  await markUnconfirmed(tx, { id: change.assetId, rotationId: change.rotationId });
  await recordOutcome(tx, change, 'UNCONFIRMED');
}

// Whether a locked rotation row is such a change.
export function isAbandoned(row: { rotationState: RotationState | null; deadlinePassed: boolean }): boolean {
  return row.rotationState === 'IN_FLIGHT' && row.deadlinePassed;
}

// How an UNCONFIRMED change ended: an event of its own, under that change's id. `at` as for
// recordOutcome: the switch's passwordChangedAt when the new password became the only one.
export async function recordResolution(tx: Executor, change: ChangeRef, resolution: RotationResolution, at?: Date): Promise<void> {
  const resolvedAt = await updatePasswordChange(tx, change.rotationId, { resolution });
  await appendEvents(tx, [passwordChanged(change, resolution, at ?? resolvedAt ?? new Date())]);
}

// A station tried the password that the switch `rotationId` retired: the rotation's staleLoginAt,
// and on the first such login of that rotation an `asset.password.ignored` event. Later tries
// update the time only, so a station that retries for days raises one event, not one per try.
// Nothing when another rotation has followed since the login was checked.
export async function recordReplacedLogin(tx: Executor, assetId: string, rotationId: string): Promise<void> {
  const marked = await markStaleLogin(tx, assetId, rotationId);
  if (!marked?.first) return;
  const { network, staleLoginAt } = marked;
  await appendEvents(tx, [{ type: 'asset.password.ignored', network, data: { assetId, network, rotationId, at: staleLoginAt.toISOString() } }]);
}
