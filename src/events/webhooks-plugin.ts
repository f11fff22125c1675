import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge } from 'prom-client';
import { backlogStats, type BacklogStats } from './delivery-repository.js';
import { createDeliveryWorker } from './delivery-worker.js';
import { startOutboxRetention } from './outbox-retention.js';
import { targetLookups, type TargetLookups } from './target-lookups.js';
import { resolveWithSystem, type ResolveHost } from './target-rules.js';
import { createWebhookClient } from './webhook-client.js';

declare module 'fastify' {
  interface FastifyInstance {
    // The replica's host name lookups, the deliveries' and the subscription checks' (target-lookups.ts).
    webhookLookups: TargetLookups;
  }
}

export interface WebhooksPluginOptions {
  // The waits between attempts (delivery-schedule.ts); tests shorten them.
  retryDelaysMs?: readonly number[] | undefined;
  pollIntervalMs?: number | undefined;
  // The resolver of target host names (default: the system's); tests pass their own.
  resolveHost?: ResolveHost | undefined;
}

const SCRAPE_REUSE_MS = 1_000;

// The delivery worker of this replica, started once the app is ready and stopped before the
// database closes, and its figures on /metrics.
async function webhooksPlugin(app: FastifyInstance, options: WebhooksPluginOptions): Promise<void> {
  const { config, database } = app;
  const lookups = targetLookups(options.resolveHost ?? resolveWithSystem);
  app.decorate('webhookLookups', lookups);
  const deliveries = new Counter({
    name: 'webhook_deliveries_total',
    help: 'Webhook attempts by outcome: succeeded, retrying (failed, to be made again), failed (the last retry failed)',
    labelNames: ['outcome'],
    registers: [app.metrics],
  });
  // Every outcome is exported from the start, so rate() sees the first of each.
  for (const outcome of ['succeeded', 'retrying', 'failed']) deliveries.inc({ outcome }, 0);
  // One query a scrape for both gauges. A database that cannot answer now leaves the last
  // figures; /metrics still answers.
  let scrape: Promise<BacklogStats | undefined> | null = null;
  const stats = () => {
    scrape ??= backlogStats(database.db)
      .catch(() => undefined)
      .finally(() => setTimeout(() => (scrape = null), SCRAPE_REUSE_MS).unref());
    return scrape;
  };
  new Gauge({
    name: 'webhook_backlog',
    help: 'Webhook deliveries to make (kind="deliveries"), deliveries held by a DISABLED subscription (kind="held"), and events not yet fanned out to their subscriptions (kind="events")',
    labelNames: ['kind'],
    registers: [app.metrics],
    async collect() {
      const now = await stats();
      if (!now) return;
      this.set({ kind: 'deliveries' }, now.pendingDeliveries);
      this.set({ kind: 'held' }, now.heldDeliveries);
      this.set({ kind: 'events' }, now.undispatchedEvents);
    },
  });
  new Gauge({
    name: 'webhook_oldest_pending_event_age_seconds',
    help: 'Age of the oldest event with a delivery to make (not one held by a DISABLED subscription) or not yet fanned out; 0 when none waits',
    registers: [app.metrics],
    async collect() {
      const now = await stats();
      if (now) this.set(now.oldestPendingAgeSeconds);
    },
  });

  const client = createWebhookClient({ allowPrivateTargets: config.webhooks.allowPrivateTargets, lookups });
  const worker = createDeliveryWorker({
    db: database.db,
    client,
    log: app.log.child({ component: 'webhooks' }),
    retryDelaysMs: options.retryDelaysMs,
    pollIntervalMs: options.pollIntervalMs,
    onOutcome: (outcome) => deliveries.inc({ outcome }),
  });
  let retention: ReturnType<typeof startOutboxRetention> | undefined;
  app.addHook('onReady', async () => {
    worker.start();
    retention = startOutboxRetention({ db: database.db, log: app.log.child({ component: 'outbox-retention' }), retentionDays: config.webhooks.retentionDays });
  });
  // While the database is still open.
  app.addHook('preClose', async () => {
    await Promise.all([worker.stop(), retention?.stop()]);
    await client.close();
  });
}

export default fp(webhooksPlugin, { name: 'webhooks', dependencies: ['database', 'observability'], decorators: { fastify: ['database', 'config'] } });
