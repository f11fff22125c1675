ALTER TABLE "asset_password_changes" ADD COLUMN "outcome" text;--> statement-breakpoint
ALTER TABLE "asset_password_changes" ADD COLUMN "resolution" text;--> statement-breakpoint
ALTER TABLE "asset_password_changes" ADD COLUMN "resolved_at" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "assets" ADD COLUMN "pending_password_hash" text;--> statement-breakpoint
ALTER TABLE "assets" ADD COLUMN "replaced_password_hash" text;--> statement-breakpoint
ALTER TABLE "assets" ADD COLUMN "rotation_id" text;--> statement-breakpoint
ALTER TABLE "assets" ADD COLUMN "rotation_state" text;--> statement-breakpoint
ALTER TABLE "assets" ADD COLUMN "rotation_requested_at" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "assets" ADD COLUMN "rotation_deadline" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "assets" ADD COLUMN "rotation_resolved_at" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "assets" ADD COLUMN "stale_login_at" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "station_replicas" ADD COLUMN "public_key" text;--> statement-breakpoint
ALTER TABLE "asset_password_changes" ADD CONSTRAINT "asset_password_changes_outcome_enum" CHECK ("asset_password_changes"."outcome" IN ('ACCEPTED', 'REJECTED', 'UNCONFIRMED', 'FORCED', 'PROVISIONED'));--> statement-breakpoint
ALTER TABLE "asset_password_changes" ADD CONSTRAINT "asset_password_changes_resolution_enum" CHECK ("asset_password_changes"."resolution" IN ('NEW_USED', 'OLD_USED', 'FORCED'));--> statement-breakpoint
ALTER TABLE "assets" ADD CONSTRAINT "assets_rotation_state_enum" CHECK ("assets"."rotation_state" IN ('IN_FLIGHT', 'UNCONFIRMED', 'ACCEPTED', 'REJECTED', 'FORCED', 'PROVISIONED', 'CONFIRMED', 'DISCARDED'));--> statement-breakpoint
ALTER TABLE "assets" ADD CONSTRAINT "assets_pending_only_open" CHECK ("assets"."pending_password_hash" IS NULL OR ("assets"."rotation_state" IS NOT NULL AND "assets"."rotation_state" IN ('IN_FLIGHT', 'UNCONFIRMED')));