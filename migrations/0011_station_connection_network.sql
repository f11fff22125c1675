-- The stations' events carry the asset's network: each claim writes it on the connection row,
-- so a release, a reconciliation or the sweep of a lapsed lease has it without reading the
-- asset tables. Rows written before this migration take it from their asset (assets are never
-- deleted; a row of an asset that does not exist is dropped).
ALTER TABLE "station_connections" ADD COLUMN "network" text;
--> statement-breakpoint
UPDATE "station_connections" c SET "network" = a."network" FROM "assets" a WHERE a."id" = c."asset_id";
--> statement-breakpoint
DELETE FROM "station_connections" WHERE "network" IS NULL;
--> statement-breakpoint
ALTER TABLE "station_connections" ALTER COLUMN "network" SET NOT NULL;
