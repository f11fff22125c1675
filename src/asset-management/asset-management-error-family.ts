// The asset-management family's errors: the `{ type, code, message }` family
// (http/errors/typed-error-family.ts) under /asset-management/, its operations' responses, and
// the 409 of an Idempotency-Key still in use.
import type { z } from 'zod';
import { IDEMPOTENCY_KEY_IN_USE } from '../http/idempotency/idempotency-rules.js';
import { TYPED_ERRORS, typedErrorFamily, typedErrorResponses, type OwnAnswer } from '../http/errors/typed-error-family.js';

export const ASSET_MANAGEMENT_ERRORS = TYPED_ERRORS;

const KEY_IN_USE = { code: IDEMPOTENCY_KEY_IN_USE, means: 'the first request with this Idempotency-Key is still being processed' } as const;

// An operation's responses: its success, the family's answers of every operation, its own 404 and
// 409 with the codes they carry there, and the 422 of a reused Idempotency-Key where it takes one.
export function assetManagementResponses<Success extends Record<number, z.ZodType>>(
  success: Success,
  own: { 404?: OwnAnswer; 409?: OwnAnswer; idempotencyKey?: boolean } = {},
) {
  const { idempotencyKey, ...answers } = own;
  return typedErrorResponses(success, { ...answers, ...(idempotencyKey ? { idempotencyKey: KEY_IN_USE } : {}) });
}

// Every URL under /asset-management/, a version no route serves included.
export const ASSET_MANAGEMENT_ERROR_FAMILY = typedErrorFamily('asset-management', '/asset-management/');
