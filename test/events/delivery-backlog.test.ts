import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rowsOf, type Database } from '../../src/db/database.js';
import { fanOutEvents, settleAndClaim, settleAndClaimStatement, type AttemptResult, type SettleAndClaim } from '../../src/events/delivery-repository.js';
import { createDeliveryWorker } from '../../src/events/delivery-worker.js';
import { insertEvents } from '../../src/events/events-repository.js';
import { uniqueNetwork } from '../helpers/asset-factory.js';
import { eventually } from '../helpers/eventually.js';
import { createTestDatabase } from '../helpers/test-database.js';
import { insertSubscription } from '../helpers/webhook-factory.js';

// A backlog costs a delivery round the rows it touches, not its size (docs/events.md, "Delivery
// and retries"): the statement that writes finished attempts and claims new ones finds each
// result's row by its key, even with statistics taken while the backlog was small, which is when
// a backlog builds up (an outage of the receiver, a pause of every worker).

const BACKLOG = 20_000;
const SETTLED = 64;
let database: Database;

beforeAll(async () => {
  database = await createTestDatabase();
  await database.migrate();
});
afterAll(() => database.close());

const subscription = (network: string) => insertSubscription(database.db, network);

// `count` fanned-out events of `network`, each with a delivery to `subscriptionId` in `state`.
async function deliveries(network: string, subscriptionId: string, count: number, state: 'PENDING' | 'SUCCEEDED'): Promise<void> {
  const tag = randomBytes(4).toString('hex');
  await database.db.execute(sql`
    WITH made AS (
      INSERT INTO events (id, network, type, data, dispatched_at)
      SELECT 'evt_' || ${tag} || lpad(i::text, 8, '0'), ${network}, 'payment.recorded', '{}', now()
      FROM generate_series(1, ${count}) AS i
      RETURNING id
    )
    INSERT INTO webhook_deliveries (event_id, subscription_id, state, attempts, next_attempt_at, last_attempt_at)
    SELECT id, ${subscriptionId}, ${state}, ${state === 'PENDING' ? 0 : 1},
      ${state === 'PENDING' ? sql`now() - interval '1 minute'` : sql`NULL`}, ${state === 'PENDING' ? sql`NULL` : sql`now()`}
    FROM made`);
}

// A round of one replica with nothing in flight: `results` written, up to `limit` claimed.
function work(results: AttemptResult[], limit: number): SettleAndClaim {
  return { results, limit, perSubscription: limit, perNetwork: limit, held: new Map(), leaseMs: 30_000 };
}

interface PlanNode {
  'Subplan Name'?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

function findNode(node: PlanNode, name: string): PlanNode | undefined {
  if (node['Subplan Name'] === name) return node;
  for (const child of node.Plans ?? []) {
    const found = findNode(child, name);
    if (found) return found;
  }
  return undefined;
}

// A statement parameter (text or number) written as an SQL literal.
function literal(value: unknown): string {
  return typeof value === 'number' ? String(value) : `'${String(value).replaceAll("'", "''")}'`;
}

function indexNames(node: PlanNode): string[] {
  return [...(node['Index Name'] ? [node['Index Name']] : []), ...(node.Plans ?? []).flatMap(indexNames)];
}

describe('a delivery round over a backlog', () => {
  it(`writes ${SETTLED} finished attempts finding their rows by key, never by walking the ${BACKLOG.toLocaleString('en')} deliveries waiting behind them`, async () => {
    const network = uniqueNetwork();
    const subscriptionId = await subscription(network);
    // Statistics taken when the deliveries were mostly settled and few waited.
    await deliveries(network, subscriptionId, 5_000, 'SUCCEEDED');
    await database.db.execute(sql`ANALYZE webhook_deliveries`);
    await database.db.execute(sql`ANALYZE events`);
    await deliveries(network, subscriptionId, BACKLOG, 'PENDING');

    const claimed = await settleAndClaim(database.db, work([], SETTLED));
    expect(claimed).toHaveLength(SETTLED);
    const results: AttemptResult[] = claimed.map((d) => ({
      eventId: d.eventId,
      subscriptionId: d.subscriptionId,
      attempts: d.attempts,
      state: 'SUCCEEDED',
      retryInMs: null,
      attemptedAt: new Date(),
      status: 204,
      error: null,
      durationMs: 3,
    }));

    // The indexes the write reads through, in its plan (EXPLAIN only: nothing runs), with the
    // planner's own choices and with lookups forced (hash and merge joins and whole-table scans off:
    // the kind of plan a real backlog got, with statistics from when almost nothing was pending);
    // each as planned for these values, and as the generic plan the named statement runs once the
    // server prefers it, planned without them (SQL's PREPARE stands for the protocol's, which the
    // worker uses).
    const statement = new PgDialect().sqlToQuery(settleAndClaimStatement(work(results, 0)));
    for (const forced of [false, true]) {
      for (const generic of [false, true]) {
        const indexes = await database.db.transaction(async (tx) => {
          if (forced) {
            await tx.execute(sql`SET LOCAL enable_hashjoin = off`);
            await tx.execute(sql`SET LOCAL enable_mergejoin = off`);
            await tx.execute(sql`SET LOCAL enable_seqscan = off`);
          }
          let explain = sql`EXPLAIN (FORMAT JSON) ${settleAndClaimStatement(work(results, 0))}`;
          if (generic) {
            await tx.execute(sql`SET LOCAL plan_cache_mode = force_generic_plan`);
            await tx.execute(sql.raw(`PREPARE settle_generic AS ${statement.sql}`));
            // EXECUTE's arguments are written out: a utility statement takes no bound parameters.
            explain = sql.raw(`EXPLAIN (FORMAT JSON) EXECUTE settle_generic(${statement.params.map(literal).join(', ')})`);
          }
          const [row] = await rowsOf<{ 'QUERY PLAN': [{ Plan: PlanNode }] | string }>(tx, explain);
          if (generic) {
            const [prepared] = await rowsOf<{ generic: number }>(tx, sql`SELECT generic_plans::int AS generic FROM pg_prepared_statements WHERE name = 'settle_generic'`);
            expect(prepared?.generic, 'the plan read is the generic one').toBe(1);
            await tx.execute(sql`DEALLOCATE settle_generic`);
          }
          const raw = row!['QUERY PLAN'];
          const plan = (typeof raw === 'string' ? JSON.parse(raw) : raw)[0].Plan as PlanNode;
          const recorded = findNode(plan, 'CTE recorded');
          expect(recorded, JSON.stringify(plan)).toBeDefined();
          return indexNames(recorded!);
        });
        // Through the due deliveries' index, by subscription, each result walked the whole
        // backlog; by key, or one pass over the table, the round costs the same whatever waits.
        const which = `forced key lookups: ${forced}, generic plan: ${generic}`;
        expect(indexes, which).not.toContain('webhook_deliveries_subscription_due_idx');
        if (forced) expect(indexes, which).toContain('webhook_deliveries_pkey');
      }
    }

    // And the statement does write them.
    await settleAndClaim(database.db, work(results, 0));
    const [counts] = await rowsOf<{ succeeded: number; pending: number }>(
      database.db,
      sql`SELECT count(*) FILTER (WHERE state = 'SUCCEEDED' AND attempts = 1 AND last_status = 204 AND event_id = ANY(${`{${results.map((r) => r.eventId).join(',')}}`}::text[]))::int AS succeeded,
        count(*) FILTER (WHERE state = 'PENDING')::int AS pending
        FROM webhook_deliveries WHERE subscription_id = ${subscriptionId}`,
    );
    expect(counts).toEqual({ succeeded: SETTLED, pending: BACKLOG - SETTLED });
  });
});

// Registered only with a PostgreSQL server: PGlite plans in the same process and takes no names.
const onServer = process.env.DATABASE_URL ? describe : undefined;
const throughPooler = Boolean(process.env.DATABASE_DIRECT_URL);

onServer?.('the delivery statements on PostgreSQL', () => {
  it(`are named, so that a connection stops planning them on every round once the server prefers a generic plan${throughPooler ? '; through the pooler they go unnamed' : ''} (PostgreSQL)`, async () => {
    // One connection, so that the statements and the view that lists them share a session.
    const single = await createTestDatabase({ poolMax: 1 });
    try {
      await single.migrate();
      const network = uniqueNetwork();
      const subscriptionId = await insertSubscription(single.db, network);
      const take = { limit: 64, perSubscription: 64, perNetwork: 64, held: new Map<string, number>(), leaseMs: 30_000 };
      // The server tries custom plans for a named statement's first five runs.
      for (let round = 0; round < 7; round++) {
        await insertEvents(single.db, [{ network, type: 'payment.recorded', data: '{}' }]);
        const fanned = await fanOutEvents(single.db, 500, take);
        expect(fanned.taken.map((d) => d.subscriptionId)).toEqual([subscriptionId]);
        const { eventId, attempts } = fanned.taken[0]!;
        const result: AttemptResult = { eventId, subscriptionId, attempts, state: 'SUCCEEDED', retryInMs: null, attemptedAt: new Date(), status: 204, error: null, durationMs: 1 };
        expect(await settleAndClaim(single.db, { ...take, results: [result] })).toEqual([]);
      }
      const named = await rowsOf<{ name: string; generic: number }>(
        single.db,
        sql`SELECT name, generic_plans::int AS generic FROM pg_prepared_statements WHERE name IN ('webhook_fan_out', 'webhook_settle_and_claim') ORDER BY name`,
      );
      if (throughPooler) expect(named).toEqual([]);
      else
        expect(named).toEqual([
          { name: 'webhook_fan_out', generic: expect.any(Number) },
          { name: 'webhook_settle_and_claim', generic: expect.any(Number) },
        ]);
      for (const statement of named) expect(statement.generic, statement.name).toBeGreaterThan(0);
      const [delivered] = await rowsOf<{ n: number }>(single.db, sql`SELECT count(*)::int AS n FROM webhook_deliveries WHERE subscription_id = ${subscriptionId} AND state = 'SUCCEEDED'`);
      expect(delivered?.n).toBe(7);
    } finally {
      await single.close();
    }
  });
});

describe('a worker fanning out a backlog of events', () => {
  it('lets the event loop through between its rounds (on PGlite their statements run on the process’s thread)', async () => {
    const own = await createTestDatabase();
    await own.migrate();
    try {
      const network = uniqueNetwork();
      await insertSubscription(own.db, network);
      // Four fan-out batches of events, as a pause of every worker leaves them.
      await own.db.execute(sql`INSERT INTO events (network, type, data) SELECT ${network}, 'payment.recorded', '{}' FROM generate_series(1, 2000)`);
      const undispatched = async () => (await rowsOf<{ n: number }>(own.db, sql`SELECT count(*)::int AS n FROM events WHERE dispatched_at IS NULL`))[0]!.n;
      const worker = createDeliveryWorker({
        db: own.db,
        client: { send: async () => ({ ok: true, status: 204, durationMs: 0 }), close: async () => undefined },
        log: pino({ level: 'silent' }),
        pollIntervalMs: 3_600_000,
      });
      // Queued before the worker starts, it runs at the first turn of the event loop; the count is
      // read then.
      let atTimer: Promise<number> | undefined;
      setImmediate(() => (atTimer = undispatched()));
      worker.start();
      try {
        await eventually(async () => expect(await undispatched()).toBe(0));
      } finally {
        await worker.stop();
      }
      expect(await atTimer).toBeGreaterThan(0);
    } finally {
      await own.close();
    }
  });
});
