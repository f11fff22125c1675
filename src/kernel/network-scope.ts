// The network a caller is limited to, from its token's network claim (AUTH_NETWORK_CLAIM); null
// when the token carries none and may see and act on every network. Services take this part of
// the principal only, and every repository lookup made for a caller filters by it
// (src/db/in-network.ts).
export interface NetworkScope {
  network: string | null;
}

// Whether the caller may act on records of this network.
export function coversNetwork(scope: NetworkScope, network: string): boolean {
  return scope.network === null || scope.network === network;
}
