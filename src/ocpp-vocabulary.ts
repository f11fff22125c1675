// Words of OCPP that more than one part of the service speaks: the configuration (the network's
// minimum), the asset catalogue (an asset's profile) and the stations (what a login must meet).

// OCPP security profiles: 1 is Basic Auth over plain ws://, 2 Basic Auth over TLS, 3 client certificates.
export const SECURITY_PROFILES = [1, 2, 3] as const;
export type SecurityProfile = (typeof SECURITY_PROFILES)[number];
