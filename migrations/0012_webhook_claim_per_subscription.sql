DROP INDEX "webhook_deliveries_due_idx";--> statement-breakpoint
CREATE INDEX "events_test_idx" ON "events" USING btree ("id") WHERE "events"."type" = 'webhook.test';--> statement-breakpoint
CREATE INDEX "webhook_deliveries_subscription_due_idx" ON "webhook_deliveries" USING btree ("subscription_id","next_attempt_at") WHERE "webhook_deliveries"."state" = 'PENDING';