// The asset-management family's errors: the renderer that writes them, registered under
// /asset-management/.
import { familyRenderer } from '../plugins/errors/error-rendering.js';
import type { ErrorFamily } from '../plugins/errors/error-families.js';

const ASSET_TYPES: Record<number, string> = {
  400: 'BAD_REQUEST',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  409: 'CONFLICT',
  422: 'UNPROCESSABLE_ENTITY',
  500: 'INTERNAL_ERROR',
  408: 'REQUEST_TIMEOUT',
  503: 'SERVICE_UNAVAILABLE',
};

const renderAssetManagementError = familyRenderer<unknown>({
  unavailable: (error) => ({ type: ASSET_TYPES[503], code: error.code, message: error.message }),
  body: (r) => {
    if (r.status === 403) return { message: r.message };
    const defaultCode = r.status === 400 ? 'INVALID_REQUEST_PARAMETERS' : r.status === 500 ? 'INTERNAL_SERVER_ERROR' : 'NOT_FOUND';
    return { type: ASSET_TYPES[r.status] ?? 'ERROR', code: r.status === 500 ? 'INTERNAL_SERVER_ERROR' : (r.code ?? defaultCode), message: r.message };
  },
});

// Every URL under /asset-management/, a version no route serves included.
export const ASSET_MANAGEMENT_ERROR_FAMILY: ErrorFamily = { name: 'asset-management', prefix: '/asset-management/', render: renderAssetManagementError };
