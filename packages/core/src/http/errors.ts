import type { ErrorCode, ErrorDetail } from '../domain/errors.js';

/** The one table from error code to HTTP status. */
export const STATUS_OF: Record<ErrorCode, number> = {
  invalid_json: 400,
  invalid_request: 400,
  invalid_settings: 400,
  unauthorized: 401,
  insufficient_funds: 402,
  budget_exceeded: 402,
  forbidden: 403,
  model_not_found: 404,
  not_found: 404,
  method_not_allowed: 405,
  idempotency_conflict: 409,
  conflict: 409,
  request_timeout: 408,
  payload_too_large: 413,
  unsupported_media_type: 415,
  idempotency_mismatch: 422,
  rate_limited: 429,
  internal: 500,
  unavailable: 503,
};

export function errorBody(code: ErrorCode, message: string, details?: ErrorDetail[]): string {
  return JSON.stringify({ error: { code, message, ...(details && details.length > 0 ? { details } : {}) } });
}
