CREATE TABLE "station_connections" (
	"asset_id" text PRIMARY KEY NOT NULL,
	"replica_id" text,
	"epoch" bigint NOT NULL,
	"protocol" text NOT NULL,
	"connected_at" timestamp (3) with time zone NOT NULL,
	"last_seen_at" timestamp (3) with time zone NOT NULL,
	"disconnected_at" timestamp (3) with time zone,
	"vendor" text,
	"model" text,
	"serial_number" text,
	"firmware_version" text,
	"booted_at" timestamp (3) with time zone,
	"connector_statuses" jsonb DEFAULT '{}'::jsonb NOT NULL
);
--> statement-breakpoint
CREATE TABLE "station_replicas" (
	"id" text PRIMARY KEY NOT NULL,
	"started_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"lease_expires_at" timestamp (3) with time zone NOT NULL
);
--> statement-breakpoint
CREATE INDEX "station_connections_replica_idx" ON "station_connections" USING btree ("replica_id");