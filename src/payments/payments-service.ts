import { sql } from 'drizzle-orm';
import type { Db, Executor } from '../db/database.js';
import { isUniqueViolation } from '../db/failures.js';
import { appendEventsSql, signalNewEvents } from '../events/events-service.js';
import { BadRequestError, ConflictError, ForbiddenError, NotFoundError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import { hasForbiddenCharacter } from '../kernel/identifiers.js';
import { coversNetwork, type NetworkScope } from '../kernel/network-scope.js';
import { computeBilling, isFreeConsistent } from './billing.js';
import * as payments from './payments-repository.js';
import type { PaymentEventSql, SessionPaymentJson } from './payments-repository.js';
import type { RecordPaymentInput } from './payments-schemas.js';

// A payment's event (docs/events.md, "Event types"): its data is the stored document, the JSON
// text the list answers, appended by the statement that wrote the payment.
function paymentEvent(type: 'payment.recorded' | 'payment.collected'): PaymentEventSql {
  return (rows) => appendEventsSql({ type, from: rows, network: sql`network`, data: sql`document` });
}
const RECORDED = paymentEvent('payment.recorded');
const COLLECTED = paymentEvent('payment.collected');

// Every answer is JSON text as PostgreSQL rendered it when the row was written (one rendering per
// payment); the routes pass it through.
export async function listSessionPaymentsJson(db: Db, scope: NetworkScope, sessionIds: readonly string[]): Promise<string> {
  // A recorded session ID never contains such characters, so an ID that does has no payment; and
  // PostgreSQL could not even take a NUL as a parameter.
  const candidates = sessionIds.filter((id) => !hasForbiddenCharacter(id));
  if (candidates.length === 0) return '[]';
  return payments.listPaymentsJson(db, scope, candidates);
}

export async function getSessionPayment(db: Executor, scope: NetworkScope, id: string): Promise<SessionPaymentJson> {
  const json = await payments.findPaymentJson(db, scope, id);
  // Another network's payment is reported exactly like a missing one: no hint that it exists.
  if (json === undefined) throw new NotFoundError(`No session payment ${id}`);
  return json;
}

// The new payment's ID (for its URL) and its JSON.
export async function recordSessionPayment(
  db: Executor,
  scope: NetworkScope,
  input: RecordPaymentInput,
): Promise<{ id: string; json: SessionPaymentJson }> {
  if (!coversNetwork(scope, input.network)) {
    throw new ForbiddenError(`The access token may record payments for network ${scope.network} only`);
  }
  const billing = computeBilling(input);
  if (!isFreeConsistent(input.paymentType, billing.billedAmount)) {
    const message = `paymentType FREE requires a billed amount of 0, but this session bills ${billing.billedAmount}`;
    throw new BadRequestError(message, [{ code: 'custom', message, path: ['paymentType'] }]);
  }
  const id = newId('pmt');
  try {
    // The payment.recorded event commits with the payment or not at all (docs/events.md).
    const json = await payments.insertPayment(
      db,
      {
        id,
        network: input.network,
        session: input.session,
        sitePartners: input.sitePartners,
        location: input.location,
        status: 'PENDING',
        ...payments.billedColumns(input, billing),
        recordedAt: input.recordedAt,
      },
      RECORDED,
    );
    signalNewEvents();
    return { id, json };
  } catch (error) {
    // The unique index decides, so two concurrent records of one session cannot both succeed.
    if (isUniqueViolation(error, 'session_payments_session_key')) {
      throw new ConflictError(`Session ${input.session} already has a payment`);
    }
    throw error;
  }
}

export async function collectSessionPayment(
  db: Executor,
  scope: NetworkScope,
  id: string,
  collectedAt?: Date,
): Promise<SessionPaymentJson> {
  const json = await payments.collectPayment(db, scope, id, collectedAt ?? null, COLLECTED);
  if (json !== undefined) {
    signalNewEvents();
    return json;
  }

  // The guarded update found nothing to change; this read only chooses the answer.
  const state = await payments.findPaymentState(db, scope, id);
  if (!state) throw new NotFoundError(`No session payment ${id}`);
  if (state.status === 'COLLECTED') throw new ConflictError(`Session payment ${id} is already collected`);
  if (collectedAt !== undefined && state.recordedAt.getTime() > collectedAt.getTime()) {
    const message = `collectedAt must not precede the payment's recordedAt (${state.recordedAt.toISOString()})`;
    throw new BadRequestError(message, [{ code: 'too_small', message, path: ['collectedAt'] }]);
  }
  throw new ConflictError(`Session payment ${id} changed while it was being collected; retry`);
}
