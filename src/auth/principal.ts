export interface Principal {
  clientId: string;
  scopes: ReadonlySet<string>;
  // null: the token may act on every network
  network: string | null;
  isAdmin: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal;
  }
  interface FastifyContextConfig {
    // Routes are authenticated unless they opt out here; there is no URL-prefix allow list.
    public?: boolean;
  }
}
