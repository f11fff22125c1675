// The plugins that a plugin with routes of its own is registered after, by the names they declare
// (fastify-plugin's `name`): Fastify refuses at registration a plugin whose dependencies are not
// registered yet, so an order that breaks one of these fails the start instead of a request.
//
// Why routes need them first: a plugin context copies the root hooks there are when it is made,
// so a family registered earlier would miss a later plugin's request hooks; and an onRoute hook
// sees only the routes added after it.

// Hooks of every request, in this order: the closing 503 and the table of known routes (405s);
// compression of the answer; the request log line and duration; the rate limit, which counts
// before authentication refuses; authentication (request.principal, or a 401).
export const REQUEST_PIPELINE = ['error-handler', '@fastify/compress', 'observability', 'rate-limit', 'authentication'];

// What completes each route that asks for it as it is added (Idempotency-Key, ETag) and
// documents it (the OpenAPI document).
const ROUTE_COMPLETERS = ['idempotency', 'etag', 'openapi'];

// The dependencies of an API family's routes.
export const API_ROUTES_NEED = [...REQUEST_PIPELINE, ...ROUTE_COMPLETERS];
