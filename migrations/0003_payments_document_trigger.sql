-- Renders each session payment's SessionPayment JSON (the published field order, fee keys
-- omitted without a fee, date-times ISO 8601 UTC with milliseconds) into session_payments.document
-- whenever the row is written. The list endpoint, polled by finance systems with 100 IDs, then
-- concatenates stored text instead of formatting ~35 columns per row on every read.
-- taxConfig is the stored jsonb as text: jsonb orders keys by length, which is the published order.
-- test/payments/payment-json.test.ts holds this rendering equal to src/payments/payments-repository.ts toSessionPayment.
CREATE FUNCTION session_payments_render() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.document := '{"id":' || to_json(NEW.id)::text
    || ',"network":' || to_json(NEW.network)::text
    || ',"session":' || to_json(NEW.session)::text
    || ',"sitePartners":' || to_json(NEW.site_partners)::text
    || ',"location":' || to_json(NEW.location)::text
    || ',"currency":' || to_json(NEW.currency)::text
    || ',"status":' || to_json(NEW.status)::text
    || ',"paymentType":' || to_json(NEW.payment_type)::text
    || ',"costs":{"energy":' || NEW.cost_energy::text || ',"idle":' || NEW.cost_idle::text
      || ',"flat":' || NEW.cost_flat::text || ',"time":' || NEW.cost_time::text
    || '},"usages":{"energy":' || to_json(NEW.usage_energy_wh)::text || ',"time":' || to_json(NEW.usage_time_seconds)::text
      || ',"idle":' || to_json(NEW.usage_idle_seconds)::text
    || '},"taxConfig":' || coalesce(NEW.tax_config::text, 'null')
    || ',"preTaxChargingSessionCost":' || NEW.pre_tax_charging_session_cost::text
    || ',"preTaxCosts":{"energy":' || NEW.pre_tax_energy::text || ',"idle":' || NEW.pre_tax_idle::text
      || ',"flat":' || NEW.pre_tax_flat::text || ',"time":' || NEW.pre_tax_time::text || '}'
    || CASE WHEN NEW.additional_fee IS NULL THEN ''
       ELSE ',"additionalFee":' || NEW.additional_fee::text || ',"preTaxAdditionalFee":' || NEW.pre_tax_additional_fee::text END
    || ',"priceAdjustment":' || CASE WHEN NEW.price_adjustment_id IS NULL THEN 'null'
       ELSE '{"id":' || to_json(NEW.price_adjustment_id)::text || ',"amount":' || to_json(NEW.price_adjustment_amount)::text
         || ',"maxAdjustment":' || coalesce(to_json(NEW.price_adjustment_max)::text, 'null')
         || ',"calculatedAdjustment":' || NEW.calculated_adjustment::text || '}' END
    || ',"taxes":{"totalPercentSalesTax":' || NEW.tax_sales::text || ',"energyPerKwhExciseTax":' || NEW.tax_excise::text
    || '},"totalTaxAmount":' || NEW.total_tax_amount::text
    || ',"billedAmount":' || NEW.billed_amount::text
    || ',"recordedAt":"' || to_char(NEW.recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
    || '","collectedAt":' || coalesce('"' || to_char(NEW.collected_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '"', 'null')
    || ',"createdAt":"' || to_char(NEW.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
    || '","updatedAt":"' || to_char(NEW.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '"}';
  RETURN NEW;
END
$$;
--> statement-breakpoint
CREATE TRIGGER session_payments_render BEFORE INSERT OR UPDATE ON session_payments
  FOR EACH ROW EXECUTE FUNCTION session_payments_render();
--> statement-breakpoint
UPDATE session_payments SET document = '';
--> statement-breakpoint
ALTER TABLE session_payments ADD CONSTRAINT session_payments_document_rendered CHECK (document <> '');
