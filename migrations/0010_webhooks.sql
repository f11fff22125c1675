CREATE TABLE "events" (
	"id" text PRIMARY KEY DEFAULT ('evt_' || lpad(to_hex(floor(extract(epoch from clock_timestamp()) * 1000)::bigint), 12, '0') || substr(replace(gen_random_uuid()::text, '-', ''), 1, 20)) NOT NULL,
	"network" text,
	"type" text NOT NULL,
	"data" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"dispatched_at" timestamp (3) with time zone,
	CONSTRAINT "events_type_enum" CHECK ("events"."type" IN ('payment.recorded', 'payment.collected', 'station.connected', 'station.disconnected', 'asset.password.changed', 'asset.password.ignored', 'webhook.test'))
);
--> statement-breakpoint
CREATE TABLE "webhook_deliveries" (
	"event_id" text NOT NULL,
	"subscription_id" text NOT NULL,
	"state" text DEFAULT 'PENDING' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp (3) with time zone,
	"lease_until" timestamp (3) with time zone,
	"last_attempt_at" timestamp (3) with time zone,
	"last_status" integer,
	"last_error" text,
	"last_duration_ms" integer,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "webhook_deliveries_pkey" PRIMARY KEY("event_id","subscription_id"),
	CONSTRAINT "webhook_deliveries_state_enum" CHECK ("webhook_deliveries"."state" IN ('PENDING', 'SUCCEEDED', 'FAILED')),
	CONSTRAINT "webhook_deliveries_due_when_pending" CHECK (("webhook_deliveries"."state" = 'PENDING') = ("webhook_deliveries"."next_attempt_at" IS NOT NULL))
);
--> statement-breakpoint
CREATE TABLE "webhook_subscriptions" (
	"id" text PRIMARY KEY NOT NULL,
	"network" text,
	"url" text NOT NULL,
	"events" text[] NOT NULL,
	"status" text DEFAULT 'ENABLED' NOT NULL,
	"description" text,
	"secret" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "webhook_subscriptions_status_enum" CHECK ("webhook_subscriptions"."status" IN ('ENABLED', 'DISABLED'))
);
--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_event_fk" FOREIGN KEY ("event_id") REFERENCES "public"."events"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_subscription_fk" FOREIGN KEY ("subscription_id") REFERENCES "public"."webhook_subscriptions"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "events_undispatched_idx" ON "events" USING btree ("created_at") WHERE "events"."dispatched_at" IS NULL;--> statement-breakpoint
CREATE INDEX "webhook_deliveries_due_idx" ON "webhook_deliveries" USING btree ("next_attempt_at") WHERE "webhook_deliveries"."state" = 'PENDING';--> statement-breakpoint
CREATE INDEX "webhook_deliveries_subscription_idx" ON "webhook_deliveries" USING btree ("subscription_id","last_attempt_at");--> statement-breakpoint
CREATE INDEX "webhook_subscriptions_network_id_idx" ON "webhook_subscriptions" USING btree ("network","id");