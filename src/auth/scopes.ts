// The scope names of the token issuer (docs/api.md, "Operations and scopes"). The CLI and the token endpoint refuse others.
export const SCOPES = [
  'read:asset',
  'write:asset',
  'read:assetgroup',
  'write:assetgroup',
  'read:assetstatus',
  'read:chargingstationmodel',
  'write:chargingstationmodel',
  'write:network',
  'read:sitepartner',
  'write:sitepartner',
  'read:sitepartneruser',
  'write:sitepartneruser',
  'read:networkaccessprofile',
  'write:paymentprofile',
  'read:paymentprofile',
  'write:onboardinglink',
  'read:invoice',
  'read:invoiceitem',
  'write:session',
  'read:session',
  'abort:session',
  'write:ticket',
  'write:verificationcode',
  'write:driver',
  'read:driver',
  'write:token',
  'read:token',
  'read:tokenvalue',
  'write:invitecode',
  'write:invitation',
  'read:invitation',
  'read:payment_terminals_payment',
  'write:ocpp',
  'write:ocpp.raw_request',
  'write:notification.email',
  'read:subscription',
  'write:plugandcharge_enrollment',
  'write:projects',
  'read:projects',
  'write:project_stations',
  'write:panel',
  'read:panel',
  'write:webhooks',
  'read:webhooks',
  'read:incident',
  'write:incident',
  'read:sessionpayment',
  'write:sessionpayment',
] as const;

export type Scope = (typeof SCOPES)[number];

const known: ReadonlySet<string> = new Set(SCOPES);

export function isScope(name: string): name is Scope {
  return known.has(name);
}

export function parseScopeList(value: string): string[] {
  return [...new Set(value.split(/[\s,]+/).filter((s) => s.length > 0))];
}
