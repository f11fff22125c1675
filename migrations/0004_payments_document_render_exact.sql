-- The stored document is the one rendering of a payment that every answer sends (docs/api.md), so
-- it must not depend on the session that happens to write the row. float8 output follows the
-- writer's extra_float_digits: at 0 or below (older drivers and tools set it) usages came out with
-- 15 significant digits, text that parses to a different double than the one stored. The function
-- now pins extra_float_digits = 1 (shortest text that reads back exactly, PostgreSQL 12+).
-- taxConfig is written member by member in the published order, without the spaces jsonb's text
-- output puts after ':' and ',', like the rest of the document; its numbers keep the exact decimal
-- jsonb holds. Everything else is as in 0003.
CREATE OR REPLACE FUNCTION session_payments_render() RETURNS trigger LANGUAGE plpgsql
SET extra_float_digits = 1
AS $$
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
    || '},"taxConfig":' || CASE WHEN NEW.tax_config IS NULL OR jsonb_typeof(NEW.tax_config) <> 'object' THEN coalesce(NEW.tax_config::text, 'null')
       ELSE '{' || concat_ws(',',
         CASE WHEN NEW.tax_config -> 'totalPercentSalesTax' IS NOT NULL THEN '"totalPercentSalesTax":' || (NEW.tax_config -> 'totalPercentSalesTax')::text END,
         CASE WHEN NEW.tax_config -> 'energyPerKwhExciseTax' IS NOT NULL THEN '"energyPerKwhExciseTax":' || (NEW.tax_config -> 'energyPerKwhExciseTax')::text END)
         || '}' END
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
-- Re-render every stored document with the function above (the trigger fires on any update).
UPDATE session_payments SET document = '';
