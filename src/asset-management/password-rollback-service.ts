// Rolling back the latest switch of an asset's password: the answer to a station that acknowledged
// a change and kept its old password. Nothing is sent to the station (the service never keeps a
// plaintext password to send); the credential the station kept becomes the only one again, in one
// row-locked transaction that decides with rotation.ts, like every other change of the slots.
import type { Principal } from '../auth/principal.js';
import type { Db } from '../db/database.js';
import { ConflictError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { NetworkScope } from '../kernel/network-scope.js';
import { profileUsesClientCertificates } from '../kernel/ocpp-vocabulary.js';
import { lockRotation, restoreReplaced } from './assets-repository.js';
import { assetNotFound } from './assets-service.js';
import { recordPasswordChange } from './password-audit-service.js';
import { PASSWORD_CHANGE_IN_PROGRESS } from './password-rotation-service.js';
import { decideRollback } from './rotation.js';
import { noPasswordOnProfile3 } from './security-profiles.js';

export const NOTHING_TO_ROLL_BACK = 'NOTHING_TO_ROLL_BACK';

type Actor = NetworkScope & Pick<Principal, 'clientId'>;

function nothingToRollBack(id: string): ConflictError {
  return new ConflictError(
    `Asset ${id} has no password change to roll back: its latest change did not replace a password, or was rolled back already`,
    NOTHING_TO_ROLL_BACK,
  );
}

export async function rollBackAssetPassword(db: Db, actor: Actor, id: string): Promise<{ id: string; passwordChangedAt: string }> {
  // The restored credential, its audit row and whatever else records the rollback commit together,
  // or not at all.
  return db.transaction(async (tx) => {
    const row = await lockRotation(tx, actor, id);
    if (!row) throw assetNotFound(id);
    if (profileUsesClientCertificates(row.securityProfile)) throw noPasswordOnProfile3(row.id);
    const decision = decideRollback({ state: row.rotationState, deadlinePassed: row.deadlinePassed, hasReplaced: row.replacedPasswordHash !== null });
    if (decision.kind === 'refuse') {
      if (decision.code === 'NOTHING_TO_ROLL_BACK') throw nothingToRollBack(row.id);
      throw new ConflictError(
        `A password change of asset ${row.id} is waiting for its station; nothing was switched yet, so there is nothing to roll back until it ends`,
        PASSWORD_CHANGE_IN_PROGRESS,
      );
    }
    const rotationId = newId('apc');
    const changedAt = await restoreReplaced(tx, { id: row.id, network: row.network, rotationId });
    // The row is locked and was read with a replaced credential: the update cannot miss it.
    if (!changedAt) throw nothingToRollBack(row.id);
    // Its audit row and its event (asset.password.changed, ROLLED_BACK) commit with it.
    await recordPasswordChange(tx, {
      rotationId,
      assetId: row.id,
      network: row.network,
      actorClientId: actor.clientId,
      generated: null,
      changedAt,
      outcome: 'ROLLED_BACK',
    });
    return { id: row.id, passwordChangedAt: changedAt.toISOString() };
  });
}
