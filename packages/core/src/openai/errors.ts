import type { ErrorCode, ErrorDetail } from '../domain/errors.js';

/** OpenAI's error object: `{ error: { message, type, param, code } }`. */
export interface OpenAiError {
  message: string;
  type: string;
  param: string | null;
  code: string | null;
}

/** OpenAI's `type` and `code` for a native error code (the status stays the native one). */
const WORDS: Partial<Record<ErrorCode, { type: string; code?: string | null }>> = {
  unauthorized: { type: 'invalid_request_error', code: 'invalid_api_key' },
  insufficient_funds: { type: 'insufficient_quota', code: 'insufficient_quota' },
  budget_exceeded: { type: 'insufficient_quota', code: 'insufficient_quota' },
  forbidden: { type: 'permission_error' },
  rate_limited: { type: 'requests', code: 'rate_limit_exceeded' },
  internal: { type: 'server_error' },
  unavailable: { type: 'server_error', code: 'service_unavailable' },
  request_timeout: { type: 'server_error', code: 'timeout' },
  not_found: { type: 'invalid_request_error', code: null },
};

/**
 * A native error (code, message, details) in OpenAI's shape: `param` is the first detail's field, `code` the native
 * code unless OpenAI has a word of its own for it (`invalid_api_key`, `insufficient_quota`, `rate_limit_exceeded`).
 */
export function openAiError(code: string, message: string, details?: readonly ErrorDetail[]): OpenAiError {
  const words = WORDS[code as ErrorCode];
  const field = details?.[0]?.field;
  return {
    message,
    type: words?.type ?? 'invalid_request_error',
    param: field === undefined || field === 'body' ? null : field,
    code: words && 'code' in words ? (words.code ?? null) : code,
  };
}
