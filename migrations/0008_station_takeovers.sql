CREATE TABLE "station_takeovers" (
	"replica_id" text NOT NULL,
	"asset_id" text NOT NULL,
	"epoch" bigint NOT NULL,
	CONSTRAINT "station_takeovers_replica_id_asset_id_pk" PRIMARY KEY("replica_id","asset_id")
);
--> statement-breakpoint
-- A claim that moves a station's connection to another replica (a new epoch, another replica_id)
-- tells the older replica in the same statement: no claim can commit without its notice, and a
-- release (replica_id set to null, same epoch) is not a takeover.
CREATE FUNCTION station_connections_takeover() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO station_takeovers (replica_id, asset_id, epoch) VALUES (OLD.replica_id, NEW.asset_id, NEW.epoch)
  ON CONFLICT (replica_id, asset_id) DO UPDATE SET epoch = greatest(station_takeovers.epoch, EXCLUDED.epoch);
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE TRIGGER station_connections_takeover AFTER UPDATE OF epoch ON station_connections FOR EACH ROW
  WHEN (OLD.replica_id IS NOT NULL AND NEW.epoch <> OLD.epoch AND OLD.replica_id IS DISTINCT FROM NEW.replica_id)
  EXECUTE FUNCTION station_connections_takeover();
