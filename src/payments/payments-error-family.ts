// The payments family's errors: the renderer that writes them, registered under /payments/.
import { familyRenderer } from '../plugins/errors/error-rendering.js';
import type { ErrorFamily } from '../plugins/errors/error-families.js';

const PAYMENT_CODES: Record<number, string> = {
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  409: 'CONFLICT',
  422: 'IDEMPOTENCY_KEY_REUSED',
  500: 'INTERNAL_SERVER_ERROR',
  408: 'REQUEST_TIMEOUT',
  503: 'SERVICE_UNAVAILABLE',
};

const renderPaymentsError = familyRenderer<unknown>({
  unavailable: (error) => ({ code: PAYMENT_CODES[503], message: error.message, status: 503 }),
  body: (r) =>
    r.status === 400
      ? { success: false, error: { name: 'ZodError', issues: r.issues ?? [{ code: 'custom', message: r.message, path: [] }] } }
      : { code: PAYMENT_CODES[r.status] ?? 'ERROR', message: r.message, status: r.status },
});

// Every URL under /payments/, a version no route serves included.
export const PAYMENTS_ERROR_FAMILY: ErrorFamily = { name: 'payments', prefix: '/payments/', render: renderPaymentsError };
