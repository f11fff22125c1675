// The webhooks family's errors: the `{ type, code, message }` family
// (http/errors/typed-error-family.ts), asset management's shape, under /webhooks/.
import { typedErrorFamily } from '../http/errors/typed-error-family.js';

export { TYPED_ERRORS as WEBHOOKS_ERRORS, typedErrorResponses as webhooksResponses } from '../http/errors/typed-error-family.js';

// Every URL under /webhooks/, a version no route serves included.
export const WEBHOOKS_ERROR_FAMILY = typedErrorFamily('webhooks', '/webhooks/');
