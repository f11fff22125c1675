import { sql } from 'drizzle-orm';
import { rowsOf, type Executor } from '../db/database.js';

// The delivery worker's statements (docs/events.md, "Delivery and retries"). Each is one
// statement; the row locks (FOR UPDATE SKIP LOCKED) let every replica run them at once, each
// taking rows no other is taking.

// Fans a batch of undispatched events out to the ENABLED subscriptions whose events list their
// type and whose network is theirs (or null): one PENDING delivery each, due now.
export async function fanOutEvents(db: Executor, limit: number): Promise<{ events: number; deliveries: number }> {
  const [row] = await rowsOf<{ events: number; deliveries: number }>(
    db,
    sql`
      WITH batch AS (
        SELECT id, network, type FROM events WHERE dispatched_at IS NULL
        ORDER BY created_at LIMIT ${limit} FOR UPDATE SKIP LOCKED
      ),
      made AS (
        INSERT INTO webhook_deliveries (event_id, subscription_id, next_attempt_at)
        SELECT batch.id, s.id, now() FROM batch
        JOIN webhook_subscriptions s
          ON s.status = 'ENABLED' AND batch.type = ANY (s.events) AND (s.network IS NULL OR s.network = batch.network)
        ON CONFLICT DO NOTHING
        RETURNING 1
      ),
      marked AS (
        UPDATE events SET dispatched_at = now() FROM batch WHERE events.id = batch.id RETURNING 1
      )
      SELECT (SELECT count(*) FROM marked)::int AS events, (SELECT count(*) FROM made)::int AS deliveries`,
  );
  return row ?? { events: 0, deliveries: 0 };
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
}

// Takes up to `limit` due deliveries: each attempt is counted and the delivery leased for
// `leaseMs` (its next attempt is due then, should this one never report).
export async function claimDueDeliveries(db: Executor, limit: number, leaseMs: number): Promise<ClaimedDelivery[]> {
  const rows = await rowsOf<Omit<ClaimedDelivery, 'createdAt'> & { createdAt: string | Date }>(
    db,
    sql`
      WITH due AS (
        SELECT d.event_id, d.subscription_id FROM webhook_deliveries d
        JOIN webhook_subscriptions s ON s.id = d.subscription_id
        JOIN events e ON e.id = d.event_id
        WHERE d.state = 'PENDING' AND d.next_attempt_at <= now()
          AND (s.status = 'ENABLED' OR e.type = 'webhook.test')
        ORDER BY d.next_attempt_at LIMIT ${limit}
        FOR UPDATE OF d SKIP LOCKED
      )
      UPDATE webhook_deliveries d
      SET attempts = d.attempts + 1,
          lease_until = now() + ${leaseMs} * interval '1 millisecond',
          next_attempt_at = now() + ${leaseMs} * interval '1 millisecond'
      FROM due, events e, webhook_subscriptions s
      WHERE d.event_id = due.event_id AND d.subscription_id = due.subscription_id
        AND e.id = d.event_id AND s.id = d.subscription_id
      RETURNING d.event_id AS "eventId", d.subscription_id AS "subscriptionId", d.attempts,
        e.type, e.data, e.created_at AS "createdAt", s.url, s.secret`,
  );
  return rows.map((row) => ({ ...row, createdAt: new Date(row.createdAt) }));
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

// Writes the results of finished attempts, in one statement. An attempt whose lease was taken
// over meanwhile (its number is no longer the delivery's) writes nothing.
export async function recordAttempts(db: Executor, results: readonly AttemptResult[]): Promise<void> {
  if (results.length === 0) return;
  const json = JSON.stringify(
    results.map((r) => ({
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
  await db.execute(sql`
    UPDATE webhook_deliveries d
    SET state = r.state,
        next_attempt_at = CASE WHEN r.state = 'PENDING' THEN now() + r.retry_in_ms * interval '1 millisecond' END,
        lease_until = NULL,
        last_attempt_at = r.attempted_at,
        last_status = r.status,
        last_error = r.error,
        last_duration_ms = r.duration_ms
    FROM jsonb_to_recordset(${json}::jsonb) AS r(event_id text, subscription_id text, attempts int, state text,
      retry_in_ms bigint, attempted_at timestamptz, status int, error text, duration_ms int)
    WHERE d.event_id = r.event_id AND d.subscription_id = r.subscription_id AND d.attempts = r.attempts AND d.state = 'PENDING'`);
}

export interface BacklogStats {
  // Deliveries not yet made, and events not yet fanned out.
  pendingDeliveries: number;
  undispatchedEvents: number;
  // Seconds since the oldest of the events either waits for; 0 when none waits.
  oldestPendingAgeSeconds: number;
}

export async function backlogStats(db: Executor): Promise<BacklogStats> {
  const [row] = await rowsOf<{ pending: number; undispatched: number; age: number | null }>(
    db,
    sql`
      SELECT
        (SELECT count(*) FROM webhook_deliveries WHERE state = 'PENDING')::int AS pending,
        (SELECT count(*) FROM events WHERE dispatched_at IS NULL)::int AS undispatched,
        extract(epoch FROM now() - LEAST(
          (SELECT min(created_at) FROM events WHERE dispatched_at IS NULL),
          (SELECT min(e.created_at) FROM webhook_deliveries d JOIN events e ON e.id = d.event_id WHERE d.state = 'PENDING')
        ))::float8 AS age`,
  );
  return { pendingDeliveries: row?.pending ?? 0, undispatchedEvents: row?.undispatched ?? 0, oldestPendingAgeSeconds: Math.max(0, row?.age ?? 0) };
}
