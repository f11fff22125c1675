CREATE INDEX "assets_rotation_in_flight_idx" ON "assets" USING btree ("rotation_deadline") WHERE "assets"."rotation_state" = 'IN_FLIGHT';--> statement-breakpoint
-- Changes whose waiting replica died before this version were resolved (by a login or a forced
-- change) without their UNCONFIRMED outcome: it is the outcome they had (docs/rotation.md).
UPDATE "asset_password_changes" SET "outcome" = 'UNCONFIRMED' WHERE "outcome" IS NULL AND "resolution" IS NOT NULL;
