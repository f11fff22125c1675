// The OCPP words the service speaks, each written here once: the versions an asset may use, the
// WebSocket subprotocol each version is spoken under, and the security profiles. The value lists of
// the tables, the Zod enums, the per-version codecs and the login's checks derive from these; the
// linter refuses a version string written anywhere else in src/ (eslint.config.js).

export const OCPP_1_6 = '1.6';
export const OCPP_2_0_1 = '2.0.1';
// In the order of the assets table's CHECK constraint.
export const OCPP_VERSIONS = [OCPP_1_6, OCPP_2_0_1] as const;
export type OcppVersion = (typeof OCPP_VERSIONS)[number];

// OCPP-J names each version's subprotocol `ocpp` followed by the version.
export type OcppSubprotocol = `ocpp${OcppVersion}`;

export function subprotocolOf(version: OcppVersion): OcppSubprotocol {
  return `ocpp${version}`;
}

// Newest first: the order the endpoint offers them to the library in, and the API documents them in.
export const OCPP_SUBPROTOCOLS = [subprotocolOf(OCPP_2_0_1), subprotocolOf(OCPP_1_6)] as const;

// The version a subprotocol the library agreed on stands for; undefined for none.
export function versionOfSubprotocol(protocol: string | undefined): OcppVersion | undefined {
  return OCPP_VERSIONS.find((version) => subprotocolOf(version) === protocol);
}

// 1 is Basic Auth over plain ws://, 2 Basic Auth over TLS, 3 TLS with client certificates (no
// password at all).
export const SECURITY_PROFILES = [1, 2, 3] as const;
export type SecurityProfile = (typeof SECURITY_PROFILES)[number];

export function profileNeedsTls(profile: number): boolean {
  return profile >= 2;
}

export function profileUsesClientCertificates(profile: number): boolean {
  return profile >= 3;
}
