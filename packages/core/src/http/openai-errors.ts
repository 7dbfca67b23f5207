import { openAiError } from '../openai/errors.js';
import type { HttpResponse } from './types.js';

/**
 * An error answer in OpenAI's shape (`{error: {message, type, param, code}}`), same status and headers (Retry-After,
 * WWW-Authenticate, Allow): the one place the OpenAI surface's errors are rendered, read from the native error body
 * every refusal and domain error is answered with. An answer that carries no native error body stays as it is.
 */
export function openAiAnswer(res: HttpResponse): HttpResponse {
  if (typeof res.body !== 'string' || res.body === '') return res;
  let parsed: unknown;
  try {
    parsed = JSON.parse(res.body);
  } catch {
    return res;
  }
  const error = (parsed as { error?: { code?: unknown; message?: unknown; details?: unknown } } | null)?.error;
  if (!error || typeof error.code !== 'string' || typeof error.message !== 'string') return res;
  const details = Array.isArray(error.details) ? error.details : undefined;
  return { status: res.status, headers: res.headers, body: JSON.stringify({ error: openAiError(error.code, error.message, details) }) };
}
