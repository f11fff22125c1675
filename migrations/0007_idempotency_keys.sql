CREATE TABLE "idempotency_keys" (
	"client_id" text NOT NULL,
	"network" text NOT NULL,
	"key" text NOT NULL,
	"fingerprint" text NOT NULL,
	"state" text NOT NULL,
	"claim_id" text NOT NULL,
	"locked_until" timestamp (3) with time zone,
	"response_status" integer,
	"response_headers" jsonb,
	"response_body" text,
	"created_at" timestamp (3) with time zone NOT NULL,
	"expires_at" timestamp (3) with time zone NOT NULL,
	CONSTRAINT "idempotency_keys_pkey" PRIMARY KEY("client_id","network","key"),
	CONSTRAINT "idempotency_keys_state_check" CHECK ("idempotency_keys"."state" IN ('IN_FLIGHT', 'COMPLETED')),
	CONSTRAINT "idempotency_keys_state_fields_check" CHECK (("idempotency_keys"."state" = 'IN_FLIGHT' AND "idempotency_keys"."locked_until" IS NOT NULL AND "idempotency_keys"."response_status" IS NULL)
        OR ("idempotency_keys"."state" = 'COMPLETED' AND "idempotency_keys"."locked_until" IS NULL AND "idempotency_keys"."response_status" IS NOT NULL AND "idempotency_keys"."response_headers" IS NOT NULL AND "idempotency_keys"."response_body" IS NOT NULL))
);
--> statement-breakpoint
CREATE INDEX "idempotency_keys_expires_at_idx" ON "idempotency_keys" USING btree ("expires_at");