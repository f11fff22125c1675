import { and, eq, sql, type SQL, type SQLWrapper } from 'drizzle-orm';
import { rowsOf, type Db, type Executor } from '../db/database.js';
import { inNetwork } from '../db/in-network.js';
import type { NetworkScope } from '../kernel/network-scope.js';
import type { BillingInput, BillingResult } from './billing.js';
import { sessionPayments } from './payments-tables.js';

export type SessionPaymentRow = typeof sessionPayments.$inferSelect;
export type NewSessionPaymentRow = typeof sessionPayments.$inferInsert;

declare const paymentJson: unique symbol;
// A payment's SessionPayment JSON as the database rendered it into the document
// column: the only rendering there is, sent as is by every answer.
export type SessionPaymentJson = string & { readonly [paymentJson]: true };

const p = sessionPayments;

// The billing columns of a payment row: what the client sent and what computeBilling made of it.
export function billedColumns(
  input: BillingInput & { paymentType: NewSessionPaymentRow['paymentType'] },
  billing: BillingResult,
): Omit<NewSessionPaymentRow, 'id' | 'network' | 'session' | 'sitePartners' | 'location' | 'status' | 'recordedAt' | 'collectedAt' | 'createdAt' | 'updatedAt' | 'document'> {
  return {
    currency: input.currency,
    paymentType: input.paymentType,
    costEnergy: input.costs.energy,
    costIdle: input.costs.idle,
    costFlat: input.costs.flat,
    costTime: input.costs.time,
    usageEnergyWh: input.usages.energy,
    usageTimeSeconds: input.usages.time,
    usageIdleSeconds: input.usages.idle,
    taxConfig: input.taxConfig,
    preTaxChargingSessionCost: billing.preTaxChargingSessionCost,
    preTaxEnergy: billing.preTaxCosts.energy,
    preTaxIdle: billing.preTaxCosts.idle,
    preTaxFlat: billing.preTaxCosts.flat,
    preTaxTime: billing.preTaxCosts.time,
    additionalFee: billing.additionalFee ?? null,
    preTaxAdditionalFee: billing.preTaxAdditionalFee ?? null,
    priceAdjustmentId: billing.priceAdjustment?.id ?? null,
    priceAdjustmentAmount: billing.priceAdjustment?.amount ?? null,
    priceAdjustmentMax: billing.priceAdjustment?.maxAdjustment ?? null,
    calculatedAdjustment: billing.priceAdjustment?.calculatedAdjustment ?? null,
    taxSales: billing.taxes.totalPercentSalesTax,
    taxExcise: billing.taxes.energyPerKwhExciseTax,
    totalTaxAmount: billing.totalTaxAmount,
    billedAmount: billing.billedAmount,
  };
}

// The outbox row a payment statement appends about the payment it wrote, as one more statement of
// its WITH list (payments-service.ts builds it with the events area's append; a repository does
// not import a service). `rows` names the written rows, with their network and document.
export type PaymentEventSql = (rows: SQL) => SQL;

// Without a recordedAt the database clock stamps it, the same clock that stamps createdAt and a
// default collectedAt, so replicas with drifting clocks cannot put them out of order. With
// `event`, the payment's event is appended by the same statement: both or neither, in one round
// trip.
export async function insertPayment(
  db: Executor,
  row: Omit<NewSessionPaymentRow, 'recordedAt' | 'document'> & { recordedAt?: Date | undefined },
  event?: PaymentEventSql,
): Promise<SessionPaymentJson> {
  const insert = db
    .insert(p)
    .values({ ...row, recordedAt: row.recordedAt ?? sql`now()` })
    .returning({ network: p.network, document: p.document });
  const [inserted] = event ? await rowsOf<{ document: string }>(db, withEvent(insert, event)) : await insert;
  if (!inserted) throw new Error('insert into session_payments returned no row');
  return inserted.document as SessionPaymentJson;
}

// `written` (an INSERT or UPDATE returning network and document) with `event` appended about its
// rows, answering their documents.
function withEvent(written: SQLWrapper, event: PaymentEventSql): SQL {
  return sql`with written as (${written.getSQL()}), appended as (${event(sql`written`)}) select document from written`;
}

export async function findPaymentJson(db: Executor, scope: NetworkScope, id: string): Promise<SessionPaymentJson | undefined> {
  const rows = await db.select({ document: p.document }).from(p).where(inNetwork(p.network, scope, eq(p.id, id))).limit(1);
  return rows[0]?.document as SessionPaymentJson | undefined;
}

// The state change and its guard are one statement, with its event, so of two concurrent collects
// exactly one finds the row still PENDING, and only that one appends payment.collected. Without a time from the caller the database clock decides (never
// earlier than recordedAt, which a caller may have set slightly ahead of that clock).
export async function collectPayment(
  db: Executor,
  scope: NetworkScope,
  id: string,
  collectedAt: Date | null,
  event: PaymentEventSql,
): Promise<SessionPaymentJson | undefined> {
  const at = collectedAt === null ? sql`greatest(now(), ${p.recordedAt})` : sql`${collectedAt.toISOString()}::timestamptz`;
  const update = db
    .update(p)
    .set({ status: 'COLLECTED', collectedAt: at, updatedAt: sql`now()` })
    .where(inNetwork(p.network, scope, sql`${p.id} = ${id} AND ${p.status} = 'PENDING' AND ${p.recordedAt} <= ${at}`))
    .returning({ network: p.network, document: p.document });
  const [row] = await rowsOf<{ document: string }>(db, withEvent(update, event));
  return row?.document as SessionPaymentJson | undefined;
}

export async function findPaymentState(
  db: Executor,
  scope: NetworkScope,
  id: string,
): Promise<Pick<SessionPaymentRow, 'status' | 'recordedAt'> | undefined> {
  const rows = await db
    .select({ status: p.status, recordedAt: p.recordedAt })
    .from(p)
    .where(inNetwork(p.network, scope, eq(p.id, id)))
    .limit(1);
  return rows[0];
}

// ---------------------------------------------------------------------------------------------
// The SessionPayment JSON is rendered by PostgreSQL into each row's document column
// whenever the row is written (the session_payments_render trigger, migrations/0003 and 0004), and
// every answer sends that text: RETURNING document on writes, the column on reads. No answer
// formats a payment in Node, so the list and the single answers cannot disagree, numbers
// included. test/payments/payment-json.test.ts holds the text equal to an independent account
// of the row. The list, the hot path, only concatenates the stored documents. They come back one
// row each and are joined here rather than by string_agg: one aggregated value of 50-100 KB made
// every query allocate and fault in fresh large buffers (about 50 minor page faults per 100-ID
// list), which cost PostgreSQL more CPU than the join costs Node.

const bySessions = sql`${p.session} = ANY(${sql.placeholder('sessionIds')}::text[])`;

// The two forms of inNetwork(p.network, scope, bySessions), prepared with the network as a
// parameter.
function prepareList(db: Db) {
  return {
    all: db.select({ document: p.document }).from(p).where(bySessions).prepare('session_payments_list'),
    network: db
      .select({ document: p.document })
      .from(p)
      .where(and(bySessions, eq(p.network, sql.placeholder('network'))))
      .prepare('session_payments_list_network'),
  };
}

// The rows of a prepared list as the driver answers them, through the prepared query's all(): both
// drivers' prepared queries have it (drizzle marks it internal, so its type does not show it), and
// it skips drizzle's mapping of every row to the selected fields, which the document, text either
// way, does not need (2.6 % of the service's CPU per list: docs/performance.md, "The list's rows as
// the driver answers them"). test/payments/payment-json.test.ts and the list's
// tests hold the answer on both drivers.
function driverRows(prepared: object, values: Record<string, unknown>): Promise<{ document: string }[]> {
  return (prepared as { all(values: Record<string, unknown>): Promise<{ document: string }[]> }).all(values);
}

// Prepared once per database handle: on PostgreSQL the named statements are parsed and planned
// once per connection instead of on every request. Behind a transaction-mode pooler
// (DATABASE_DIRECT_URL set) the pool's connections send them unnamed (src/db/pooler.ts): a name
// would outlive the transaction that prepared it, on a server session the next one may not get.
const preparedLists = new WeakMap<Db, ReturnType<typeof prepareList>>();

// One statement whatever the number of IDs; the network scope is part of its WHERE clause.
export async function listPaymentsJson(db: Db, scope: NetworkScope, sessionIds: readonly string[]): Promise<string> {
  let prepared = preparedLists.get(db);
  if (!prepared) {
    prepared = prepareList(db);
    preparedLists.set(db, prepared);
  }
  const rows =
    scope.network === null
      ? await driverRows(prepared.all, { sessionIds: [...sessionIds] })
      : await driverRows(prepared.network, { sessionIds: [...sessionIds], network: scope.network });
  let json = '[';
  for (let i = 0; i < rows.length; i++) json += i === 0 ? rows[i]!.document : `,${rows[i]!.document}`;
  return `${json}]`;
}
