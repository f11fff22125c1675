CREATE TABLE "session_payments" (
	"id" text PRIMARY KEY NOT NULL,
	"network" text NOT NULL,
	"session" text NOT NULL,
	"site_partners" text[] NOT NULL,
	"location" text NOT NULL,
	"currency" text NOT NULL,
	"status" text DEFAULT 'PENDING' NOT NULL,
	"payment_type" text NOT NULL,
	"cost_energy" integer NOT NULL,
	"cost_idle" integer NOT NULL,
	"cost_flat" integer NOT NULL,
	"cost_time" integer NOT NULL,
	"usage_energy_wh" double precision NOT NULL,
	"usage_time_seconds" double precision NOT NULL,
	"usage_idle_seconds" double precision NOT NULL,
	"tax_config" jsonb,
	"pre_tax_charging_session_cost" integer NOT NULL,
	"pre_tax_energy" integer NOT NULL,
	"pre_tax_idle" integer NOT NULL,
	"pre_tax_flat" integer NOT NULL,
	"pre_tax_time" integer NOT NULL,
	"additional_fee" integer,
	"pre_tax_additional_fee" integer,
	"price_adjustment_id" text,
	"price_adjustment_amount" numeric,
	"price_adjustment_max" numeric,
	"calculated_adjustment" integer,
	"tax_sales" integer NOT NULL,
	"tax_excise" integer NOT NULL,
	"total_tax_amount" integer NOT NULL,
	"billed_amount" integer NOT NULL,
	"recorded_at" timestamp (3) with time zone NOT NULL,
	"collected_at" timestamp (3) with time zone,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "session_payments_status_enum" CHECK ("session_payments"."status" IN ('PENDING', 'COLLECTED')),
	CONSTRAINT "session_payments_payment_type_enum" CHECK ("session_payments"."payment_type" IN ('GUEST', 'PAYMENT_TERMINAL', 'ROAMING', 'FREE', 'UNKNOWN', 'DRIVER_ACCOUNT')),
	CONSTRAINT "session_payments_collected_state" CHECK (("session_payments"."status" = 'PENDING') = ("session_payments"."collected_at" IS NULL)),
	CONSTRAINT "session_payments_billed_invariant" CHECK ("session_payments"."billed_amount" = "session_payments"."pre_tax_charging_session_cost" + coalesce("session_payments"."pre_tax_additional_fee", 0) - coalesce("session_payments"."calculated_adjustment", 0) + "session_payments"."total_tax_amount"),
	CONSTRAINT "session_payments_tax_sum" CHECK ("session_payments"."total_tax_amount" = "session_payments"."tax_sales" + "session_payments"."tax_excise"),
	CONSTRAINT "session_payments_amounts_non_negative" CHECK ("session_payments"."cost_energy" >= 0 AND "session_payments"."cost_idle" >= 0 AND "session_payments"."cost_flat" >= 0 AND "session_payments"."cost_time" >= 0 AND "session_payments"."billed_amount" >= 0 AND "session_payments"."tax_sales" >= 0 AND "session_payments"."tax_excise" >= 0 AND "session_payments"."pre_tax_charging_session_cost" >= 0),
	CONSTRAINT "session_payments_fee_pair" CHECK (("session_payments"."additional_fee" IS NULL) = ("session_payments"."pre_tax_additional_fee" IS NULL)),
	CONSTRAINT "session_payments_adjustment_complete" CHECK (("session_payments"."price_adjustment_id" IS NULL) = ("session_payments"."calculated_adjustment" IS NULL) AND ("session_payments"."price_adjustment_id" IS NULL) = ("session_payments"."price_adjustment_amount" IS NULL))
);
--> statement-breakpoint
CREATE TABLE "asset_password_changes" (
	"id" text PRIMARY KEY NOT NULL,
	"asset_id" text NOT NULL,
	"network" text NOT NULL,
	"actor_client_id" text NOT NULL,
	"generated" boolean NOT NULL,
	"changed_at" timestamp (3) with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "assets" (
	"id" text PRIMARY KEY NOT NULL,
	"network" text NOT NULL,
	"name" text,
	"charging_station_model_id" text,
	"ocpp_version" text NOT NULL,
	"security_profile" integer NOT NULL,
	"password_hash" text,
	"password_changed_at" timestamp (3) with time zone,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "assets_ocpp_version_enum" CHECK ("assets"."ocpp_version" IN ('1.6', '2.0.1')),
	CONSTRAINT "assets_security_profile_range" CHECK ("assets"."security_profile" BETWEEN 1 AND 3),
	CONSTRAINT "assets_password_pair" CHECK (("assets"."password_hash" IS NULL) = ("assets"."password_changed_at" IS NULL))
);
--> statement-breakpoint
CREATE TABLE "charging_station_models" (
	"id" text PRIMARY KEY NOT NULL,
	"vendor" text NOT NULL,
	"model" text NOT NULL,
	"power_type" text NOT NULL,
	"connectors" jsonb NOT NULL,
	"ocpp_url" text,
	"friendly_name" text NOT NULL,
	"image_url" text,
	"is_archived" boolean DEFAULT false NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "charging_station_models_power_type_enum" CHECK ("charging_station_models"."power_type" IN ('AC_1_PHASE', 'AC_3_PHASE', 'DC'))
);
--> statement-breakpoint
ALTER TABLE "asset_password_changes" ADD CONSTRAINT "asset_password_changes_asset_fk" FOREIGN KEY ("asset_id") REFERENCES "public"."assets"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "assets" ADD CONSTRAINT "assets_charging_station_model_fk" FOREIGN KEY ("charging_station_model_id") REFERENCES "public"."charging_station_models"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "session_payments_session_key" ON "session_payments" USING btree ("session");--> statement-breakpoint
CREATE INDEX "session_payments_network_session_idx" ON "session_payments" USING btree ("network","session");--> statement-breakpoint
CREATE INDEX "asset_password_changes_asset_idx" ON "asset_password_changes" USING btree ("asset_id","changed_at");--> statement-breakpoint
CREATE INDEX "assets_network_id_idx" ON "assets" USING btree ("network","id");--> statement-breakpoint
CREATE UNIQUE INDEX "charging_station_models_vendor_model_key" ON "charging_station_models" USING btree (lower(btrim("vendor")),lower(btrim("model")));