import { randomBytes } from 'node:crypto';
import type { Executor } from '../db/database.js';
import { BadRequestError, ConflictError, NotFoundError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { NetworkScope } from '../kernel/network-scope.js';
import type { WebhookTestData } from './event-types.js';
import * as subscriptions from './subscriptions-repository.js';
import type { DeliveryView, SubscriptionRow } from './subscriptions-repository.js';
import type { TargetLookups } from './target-lookups.js';
import { checkTargetUrl } from './target-rules.js';
import { signalNewEvents } from './new-event-signal.js';
import { DELIVERIES_SHOWN, type CreateSubscriptionInput, type DeliveryOutput, type SubscriptionOutput, type UpdateSubscriptionInput } from './webhooks-schemas.js';

// The webhook subscriptions of a caller (docs/events.md, "Subscribing"): a network-scoped token
// manages its network's only, and they receive that network's events only; a token without a
// network claim makes subscriptions of every network (network null). Another network's is a 404.

export const SUBSCRIPTION_NOT_FOUND = 'SUBSCRIPTION_NOT_FOUND';
export const SUBSCRIPTION_LIMIT_REACHED = 'SUBSCRIPTION_LIMIT_REACHED';

// Each event is delivered once to every subscription of its network: the subscriptions a network
// may have bound the deliveries one event makes, and the rows one fan-out writes (docs/events.md,
// "Subscribing"). Those made without a network claim (network null) count as one more network.
export const MAX_SUBSCRIPTIONS_PER_NETWORK = 16;

export interface TargetPolicy {
  allowPrivateTargets: boolean;
  // The replica's lookups, taken in turn by network (target-lookups.ts), and how long a request
  // waits for its own.
  lookups: TargetLookups;
  lookupTimeoutMs: number;
}

// `whsec_` + base64 of 32 random bytes (Standard Webhooks' form of a symmetric key).
function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

function toOutput(row: SubscriptionRow): SubscriptionOutput {
  return {
    id: row.id,
    url: row.url,
    events: row.events as SubscriptionOutput['events'],
    network: row.network,
    status: row.status,
    description: row.description,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

function notFound(id: string): NotFoundError {
  return new NotFoundError(`No webhook subscription ${id}`, SUBSCRIPTION_NOT_FOUND);
}

async function requireAllowedTarget(url: string, policy: TargetPolicy, scope: NetworkScope): Promise<void> {
  const verdict = await checkTargetUrl(url, { allowPrivateTargets: policy.allowPrivateTargets, resolve: policy.lookups.forCheck(scope.network, policy.lookupTimeoutMs) });
  if (!verdict.ok) {
    const message = `url is not an allowed target: ${verdict.reason}`;
    throw new BadRequestError(message, [{ code: 'custom', message, path: ['url'] }]);
  }
}

export async function createSubscription(
  db: Executor,
  policy: TargetPolicy,
  scope: NetworkScope,
  input: CreateSubscriptionInput,
): Promise<SubscriptionOutput & { secret: string }> {
  await requireAllowedTarget(input.url, policy, scope);
  const made = { id: newId('whk'), network: scope.network, url: input.url, events: input.events, description: input.description ?? null, secret: newSecret() };
  const row = await db.transaction((tx) => subscriptions.insertSubscriptionWithin(tx, made, MAX_SUBSCRIPTIONS_PER_NETWORK));
  if (!row) {
    throw new ConflictError(
      scope.network === null
        ? `At most ${MAX_SUBSCRIPTIONS_PER_NETWORK} webhook subscriptions may be made without a network; delete one first`
        : `Network ${scope.network} may have at most ${MAX_SUBSCRIPTIONS_PER_NETWORK} webhook subscriptions; delete one first`,
      SUBSCRIPTION_LIMIT_REACHED,
    );
  }
  return { ...toOutput(row), secret: row.secret };
}

export async function listSubscriptionsPage(
  db: Executor,
  scope: NetworkScope,
  options: { limit: number; startingAfter?: string | undefined },
): Promise<{ items: SubscriptionOutput[]; hasMore: boolean }> {
  // One row more than the page holds answers hasMore without a count.
  const rows = await subscriptions.listSubscriptions(db, scope, { limit: options.limit + 1, startingAfter: options.startingAfter });
  return { items: rows.slice(0, options.limit).map(toOutput), hasMore: rows.length > options.limit };
}

export async function getSubscription(db: Executor, scope: NetworkScope, id: string): Promise<SubscriptionOutput> {
  const row = await subscriptions.findSubscription(db, scope, id);
  if (!row) throw notFound(id);
  return toOutput(row);
}

export async function updateSubscription(
  db: Executor,
  policy: TargetPolicy,
  scope: NetworkScope,
  id: string,
  input: UpdateSubscriptionInput,
): Promise<SubscriptionOutput> {
  // A 404 before the target's check: the caller learns nothing of a subscription it cannot see.
  if (!(await subscriptions.findSubscription(db, scope, id))) throw notFound(id);
  if (input.url !== undefined) await requireAllowedTarget(input.url, policy, scope);
  const row = await subscriptions.updateSubscription(db, scope, id, {
    ...(input.url !== undefined ? { url: input.url } : {}),
    ...(input.events !== undefined ? { events: input.events } : {}),
    ...(input.description !== undefined ? { description: input.description } : {}),
    ...(input.status !== undefined ? { status: input.status } : {}),
  });
  if (!row) throw notFound(id);
  return toOutput(row);
}

export async function deleteSubscription(db: Executor, scope: NetworkScope, id: string): Promise<void> {
  if (!(await subscriptions.deleteSubscription(db, scope, id))) throw notFound(id);
}

// The old secret stops signing at once: deliveries made from now on are signed with the new one.
export async function rotateSubscriptionSecret(db: Executor, scope: NetworkScope, id: string): Promise<SubscriptionOutput & { secret: string }> {
  const row = await subscriptions.updateSubscription(db, scope, id, { secret: newSecret() });
  if (!row) throw notFound(id);
  return { ...toOutput(row), secret: row.secret };
}

// A webhook.test event delivered to this subscription only, whatever its events, even DISABLED.
// Found and written in one transaction: a DELETE of the subscription at the same moment waits for
// it, or makes it a 404, never a delivery that refers to no subscription.
export async function sendTestEvent(db: Executor, scope: NetworkScope, id: string): Promise<{ eventId: string }> {
  const eventId = await db.transaction(async (tx) => {
    const row = await subscriptions.findSubscription(tx, scope, id, { keep: true });
    if (!row) return undefined;
    const data: WebhookTestData = { subscriptionId: row.id, at: new Date().toISOString() };
    return subscriptions.insertTestEvent(tx, row, JSON.stringify(data));
  });
  if (eventId === undefined) throw notFound(id);
  signalNewEvents();
  return { eventId };
}

function toDeliveryOutput(view: DeliveryView): DeliveryOutput {
  return {
    eventId: view.eventId,
    eventType: view.eventType,
    state: view.state,
    attempts: view.attempts,
    lastStatus: view.lastStatus,
    lastError: view.lastError,
    lastDurationMs: view.lastDurationMs,
    lastAttemptAt: view.lastAttemptAt?.toISOString() ?? null,
    nextAttemptAt: view.nextAttemptAt?.toISOString() ?? null,
  };
}

export async function listSubscriptionDeliveries(db: Executor, scope: NetworkScope, id: string): Promise<DeliveryOutput[]> {
  if (!(await subscriptions.findSubscription(db, scope, id))) throw notFound(id);
  return (await subscriptions.listDeliveries(db, scope, id, DELIVERIES_SHOWN)).map(toDeliveryOutput);
}
