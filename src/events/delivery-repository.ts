import { sql, type SQL } from 'drizzle-orm';
import { namedRowsOf, rowsOf, type Executor } from '../db/database.js';

// The delivery worker's statements (docs/events.md, "Delivery and retries"). Each is one
// statement; the row locks (FOR UPDATE SKIP LOCKED) let every replica run them at once, each
// taking rows no other is taking.

// Fans a batch of undispatched events out to the ENABLED subscriptions whose events list their
// type and whose network is theirs (or null): one delivery each. Those that `take` has room for
// (the free slots, each subscription's share less what this replica holds of it) are made already
// taken: their first attempt counted and leased, and returned to be sent at once, so a fresh
// delivery is written twice (made, then its outcome) rather than three times. The rest are made
// PENDING and due now, for the claim of a later round, which takes the oldest due first.
export async function fanOutEvents(db: Executor, limit: number, take: Omit<SettleAndClaim, 'results'>): Promise<{ events: number; deliveries: number; taken: ClaimedDelivery[] }> {
  const rows = await namedRowsOf<{ events: number; deliveries: number } & Partial<ClaimedRow>>(
    db,
    'webhook_fan_out',
    sql`
      WITH batch AS (
        SELECT id, network, type, data, created_at FROM events WHERE dispatched_at IS NULL
        ORDER BY created_at LIMIT ${limit} FOR UPDATE SKIP LOCKED
      ),
      targets AS (
        SELECT batch.id AS event_id, s.id AS subscription_id, s.network, batch.created_at,
          row_number() OVER (PARTITION BY s.id ORDER BY batch.created_at, batch.id) AS nth
        FROM batch
        JOIN webhook_subscriptions s
          ON s.status = 'ENABLED' AND batch.type = ANY (s.events) AND (s.network IS NULL OR s.network = batch.network)
      ),
      shares AS (${sharesSql(take)}),
      within_share AS (
        SELECT t.event_id, t.subscription_id, t.created_at,
          t.nth <= r.subscription_room
            AND row_number() OVER (PARTITION BY t.network, t.nth <= r.subscription_room ORDER BY t.created_at, t.event_id, t.subscription_id) <= r.network_room AS fits
        FROM targets t
        JOIN shares r ON r.id = t.subscription_id
      ),
      chosen AS (
        SELECT w.event_id, w.subscription_id,
          w.fits AND row_number() OVER (PARTITION BY w.fits ORDER BY w.created_at, w.event_id, w.subscription_id) <= ${take.limit} AS taken
        FROM within_share w
      ),
      made AS (
        INSERT INTO webhook_deliveries (event_id, subscription_id, attempts, next_attempt_at, lease_until)
        SELECT event_id, subscription_id,
          CASE WHEN taken THEN 1 ELSE 0 END,
          CASE WHEN taken THEN now() + ${take.leaseMs} * interval '1 millisecond' ELSE now() END,
          CASE WHEN taken THEN now() + ${take.leaseMs} * interval '1 millisecond' END
        FROM chosen
        ON CONFLICT DO NOTHING
        RETURNING event_id, subscription_id, attempts, lease_until IS NOT NULL AS taken
      ),
      marked AS (
        UPDATE events SET dispatched_at = now() FROM batch WHERE events.id = batch.id RETURNING 1
      ),
      counts AS (
        SELECT (SELECT count(*) FROM marked)::int AS events, (SELECT count(*) FROM made)::int AS deliveries
      )
      SELECT counts.events, counts.deliveries, t."eventId", t."subscriptionId", t.attempts, t.type, t.data, t."createdAt", t.url, t.secret, t.network
      FROM counts LEFT JOIN (
        SELECT m.event_id AS "eventId", m.subscription_id AS "subscriptionId", m.attempts,
          b.type, b.data, b.created_at AS "createdAt", s.url, s.secret, s.network
        FROM made m
        JOIN batch b ON b.id = m.event_id
        JOIN webhook_subscriptions s ON s.id = m.subscription_id
        WHERE m.taken
      ) t ON true`,
  );
  const first = rows[0];
  // The LEFT JOIN's one row without a delivery when none was taken.
  const taken = rows.filter((row): row is typeof row & ClaimedRow => typeof row.eventId === 'string').map(toClaimed);
  return { events: first?.events ?? 0, deliveries: first?.deliveries ?? 0, taken };
}

// A taken delivery as both statements return it (createdAt as a Date or as text, by driver).
type ClaimedRow = Omit<ClaimedDelivery, 'createdAt'> & { createdAt: string | Date };
const toClaimed = (row: ClaimedRow): ClaimedDelivery => ({ ...row, createdAt: new Date(row.createdAt) });

// What this replica has in flight, by subscription id, as rows (key, n) for the statements'
// shares.
function heldSql(held: ReadonlyMap<string, number>): SQL {
  return sql`(SELECT key, value::int AS n FROM jsonb_each_text(${JSON.stringify(Object.fromEntries(held))}::jsonb))`;
}

// The one reckoning of both statements' shares: for each subscription, the attempts this replica
// may still start for it (its share less what it holds of it) and for its network (the network's
// share less what it holds of all the network's subscriptions; those without a network count as
// one network).
function sharesSql(take: Omit<SettleAndClaim, 'results'>): SQL {
  return sql`
    SELECT id, status, network, ${take.perSubscription} - n AS subscription_room, ${take.perNetwork} - network_n AS network_room
    FROM (
      SELECT s.id, s.status, s.network, coalesce(h.n, 0) AS n, sum(coalesce(h.n, 0)) OVER (PARTITION BY s.network) AS network_n
      FROM webhook_subscriptions s
      LEFT JOIN ${heldSql(take.held)} h ON h.key = s.id
    ) held`;
}

export interface ClaimedDelivery {
  eventId: string;
  subscriptionId: string;
  // This attempt's number: the fence its result is written under.
  attempts: number;
  type: string;
  data: string;
  createdAt: Date;
  url: string;
  secret: string;
  // The subscription's (null: one without a network).
  network: string | null;
}

export interface AttemptResult {
  eventId: string;
  subscriptionId: string;
  attempts: number;
  state: 'PENDING' | 'SUCCEEDED' | 'FAILED';
  // When PENDING: the wait before the next attempt.
  retryInMs: number | null;
  attemptedAt: Date;
  status: number | null;
  error: string | null;
  durationMs: number;
}

export interface SettleAndClaim {
  // The finished attempts to write. An attempt whose lease was taken over meanwhile (its number
  // is no longer the delivery's) writes nothing.
  results: readonly AttemptResult[];
  // Due deliveries to take at most (0: only write the results), and at most `perSubscription`
  // per subscription less what this replica holds of it already (`held`, attempts in flight by
  // subscription id).
  limit: number;
  perSubscription: number;
  // And at most `perNetwork` to the subscriptions of one network (those without a network count as
  // one), less what this replica holds of them, however many subscriptions the network has.
  perNetwork: number;
  held: ReadonlyMap<string, number>;
  // How long each taken delivery is leased (its next attempt is due then, should this one never
  // report).
  leaseMs: number;
}

// Writes the results of finished attempts and takes due deliveries, in one statement: the worker's
// round trip per round. Each subscription's oldest due deliveries are read on its own through
// its index (a LATERAL subquery per subscription, LIMIT its room), so one subscription's backlog
// never fills the claim; the oldest of those are taken, each attempt counted and leased. A
// DISABLED subscription is sent its test events only, read through the test events' index rather
// than its backlog. The deliveries being written are not taken again by the same statement.
//
// A result finds its row by the primary key only. Its "still PENDING" test is spelled
// `next_attempt_at IS NOT NULL` (the same thing, by the table's check constraint) rather than
// `state = 'PENDING'`: with the latter the planner may read the row through the partial index of
// due deliveries instead, by subscription alone, and with statistics taken while the table was
// small it did, walking the whole backlog for each result (docs/events.md, "Delivery and retries").
export async function settleAndClaim(db: Executor, work: SettleAndClaim): Promise<ClaimedDelivery[]> {
  const rows = await namedRowsOf<ClaimedRow>(db, 'webhook_settle_and_claim', settleAndClaimStatement(work));
  return rows.map(toClaimed);
}

// The statement itself, apart for the test that reads its plan.
export function settleAndClaimStatement(work: SettleAndClaim): SQL {
  const results = JSON.stringify(
    work.results.map((r) => ({
      event_id: r.eventId,
      subscription_id: r.subscriptionId,
      attempts: r.attempts,
      state: r.state,
      retry_in_ms: r.retryInMs,
      attempted_at: r.attemptedAt.toISOString(),
      status: r.status,
      error: r.error,
      duration_ms: r.durationMs,
    })),
  );
  return sql`
      WITH finished AS (
        SELECT * FROM jsonb_to_recordset(${results}::jsonb) AS r(event_id text, subscription_id text, attempts int, state text,
          retry_in_ms bigint, attempted_at timestamptz, status int, error text, duration_ms int)
      ),
      recorded AS (
        UPDATE webhook_deliveries d
        SET state = r.state,
            next_attempt_at = CASE WHEN r.state = 'PENDING' THEN now() + r.retry_in_ms * interval '1 millisecond' END,
            lease_until = NULL,
            last_attempt_at = r.attempted_at,
            last_status = r.status,
            last_error = r.error,
            last_duration_ms = r.duration_ms
        FROM finished r
        WHERE d.event_id = r.event_id AND d.subscription_id = r.subscription_id AND d.attempts = r.attempts
          AND d.next_attempt_at IS NOT NULL
        RETURNING 1
      ),
      room AS (
        SELECT id, status, network, network_room, LEAST(subscription_room, network_room, ${work.limit}) AS room
        FROM (${sharesSql(work)}) shares
        WHERE ${work.limit} > 0 AND subscription_room > 0 AND network_room > 0
      ),
      due AS (
        SELECT ranked.event_id, ranked.subscription_id FROM (
        SELECT x.event_id, x.subscription_id, x.next_attempt_at, room.network_room,
          row_number() OVER (PARTITION BY room.network ORDER BY x.next_attempt_at) AS nth
        FROM room CROSS JOIN LATERAL (
          SELECT * FROM (
            SELECT d.event_id, d.subscription_id, d.next_attempt_at FROM webhook_deliveries d
            WHERE room.status = 'ENABLED' AND d.subscription_id = room.id AND d.state = 'PENDING' AND d.next_attempt_at <= now()
              AND NOT EXISTS (SELECT 1 FROM finished f WHERE f.event_id = d.event_id AND f.subscription_id = d.subscription_id)
            ORDER BY d.next_attempt_at LIMIT room.room
            FOR UPDATE OF d SKIP LOCKED
          ) enabled
          UNION ALL
          SELECT * FROM (
            SELECT d.event_id, d.subscription_id, d.next_attempt_at FROM events e
            JOIN webhook_deliveries d ON d.event_id = e.id AND d.subscription_id = room.id
            WHERE room.status <> 'ENABLED' AND e.type = 'webhook.test' AND d.state = 'PENDING' AND d.next_attempt_at <= now()
              AND NOT EXISTS (SELECT 1 FROM finished f WHERE f.event_id = d.event_id AND f.subscription_id = d.subscription_id)
            ORDER BY d.next_attempt_at LIMIT room.room
            FOR UPDATE OF d SKIP LOCKED
          ) tests
        ) x
        ) ranked
        WHERE ranked.nth <= ranked.network_room
        ORDER BY ranked.next_attempt_at LIMIT ${work.limit}
      )
      UPDATE webhook_deliveries d
      SET attempts = d.attempts + 1,
          lease_until = now() + ${work.leaseMs} * interval '1 millisecond',
          next_attempt_at = now() + ${work.leaseMs} * interval '1 millisecond'
      FROM due, events e, webhook_subscriptions s
      WHERE d.event_id = due.event_id AND d.subscription_id = due.subscription_id
        AND e.id = d.event_id AND s.id = d.subscription_id
      RETURNING d.event_id AS "eventId", d.subscription_id AS "subscriptionId", d.attempts,
        e.type, e.data, e.created_at AS "createdAt", s.url, s.secret, s.network`;
}

export interface BacklogStats {
  // Deliveries the worker is to make, deliveries held by a DISABLED subscription (its test events
  // excepted: those are sent), and events not yet fanned out.
  pendingDeliveries: number;
  heldDeliveries: number;
  undispatchedEvents: number;
  // Seconds since the oldest event the worker owes something: one not yet fanned out, or one with
  // a delivery to make. Held deliveries wait for their subscription, not for the worker, so they
  // do not age it (docs/events.md, "Failed deliveries"); 0 when nothing waits.
  oldestPendingAgeSeconds: number;
}

export async function backlogStats(db: Executor): Promise<BacklogStats> {
  const [row] = await rowsOf<{ pending: number; held: number; undispatched: number; age: number | null }>(
    db,
    sql`
      SELECT
        count(*) FILTER (WHERE NOT p.held)::int AS pending,
        count(*) FILTER (WHERE p.held)::int AS held,
        (SELECT count(*) FROM events WHERE dispatched_at IS NULL)::int AS undispatched,
        extract(epoch FROM now() - LEAST(
          (SELECT min(created_at) FROM events WHERE dispatched_at IS NULL),
          min(p.created_at) FILTER (WHERE NOT p.held)
        ))::float8 AS age
      FROM (
        SELECT s.status <> 'ENABLED' AND e.type <> 'webhook.test' AS held, e.created_at
        FROM webhook_deliveries d
        JOIN webhook_subscriptions s ON s.id = d.subscription_id
        JOIN events e ON e.id = d.event_id
        WHERE d.state = 'PENDING'
      ) p`,
  );
  return {
    pendingDeliveries: row?.pending ?? 0,
    heldDeliveries: row?.held ?? 0,
    undispatchedEvents: row?.undispatched ?? 0,
    oldestPendingAgeSeconds: Math.max(0, row?.age ?? 0),
  };
}
