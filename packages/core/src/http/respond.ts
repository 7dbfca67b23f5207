import { GENERATION_STATUSES, type GenerationView } from '../domain/types.js';
import type { ErrorCode, ErrorDetail } from '../domain/errors.js';
import { MAX_API_KEY_LENGTH } from '../domain/ids.js';
import { STATUS_OF, errorBody } from './errors.js';
import type { HttpRequest, HttpResponse } from './types.js';

const JSON_HEADERS = {
  'content-type': 'application/json; charset=utf-8',
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
} as const;

export function json(status: number, body: string, extra?: Record<string, string>): HttpResponse {
  // A literal, not a spread of JSON_HEADERS: every answer gets its own headers object (adapters may keep it); `extra`
  // overrides.
  const headers: Record<string, string> = {
    'content-type': JSON_HEADERS['content-type'],
    'cache-control': JSON_HEADERS['cache-control'],
    'x-content-type-options': JSON_HEADERS['x-content-type-options'],
  };
  return { status, headers: extra === undefined ? headers : Object.assign(headers, extra), body };
}

export function fail(code: ErrorCode, message: string, details?: ErrorDetail[], extra?: Record<string, string>): HttpResponse {
  return json(STATUS_OF[code], errorBody(code, message, details), extra);
}

/** Built once: the 401 is the cheapest answer there is, so that bad keys cost the server as little as possible. */
export const UNAUTHORIZED: HttpResponse = fail('unauthorized', 'A valid API key is required (Authorization: Bearer <key>).', undefined, {
  'www-authenticate': 'Bearer',
});
Object.freeze(UNAUTHORIZED.headers);

/**
 * The contract's generation view (`{ status, result?, price? }`, in that key order, as `Views.view` builds it) as
 * JSON, without walking the object generically: the same text JSON.stringify gives for it.
 */
export function viewJson(view: GenerationView): string {
  let out = STATUS_JSON.get(view.status) ?? `{"status":${JSON.stringify(view.status)}`;
  if (view.result !== undefined) out += `,"result":${JSON.stringify(view.result)}`;
  // A finite number's JSON is its String() (-0 included); anything else goes through JSON.stringify.
  if (view.price !== undefined) out += `,"price":${Number.isFinite(view.price) ? String(view.price) : JSON.stringify(view.price)}`;
  return `${out}}`;
}

/** The start of `viewJson` for each status, built once. */
const STATUS_JSON = new Map<string, string>(GENERATION_STATUSES.map((s) => [s, `{"status":${JSON.stringify(s)}`]));

/** One header's value; a repeated header (an array of several) reads as absent. */
export function header(req: HttpRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? (v.length === 1 ? v[0] : undefined) : v;
}

/** A path segment, percent-decoded; null when it does not decode. */
export function decodeSegment(s: string): string | null {
  if (!s.includes('%')) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

/**
 * The request's `Idempotency-Key`: undefined without one, the key when it is 1 to `maxLength` visible ASCII
 * characters, else the 400 to answer (a repeated header too).
 */
export function idempotencyKeyOf(req: HttpRequest, maxLength: number): string | undefined | HttpResponse {
  const given = req.headers['idempotency-key'];
  if (given === undefined) return undefined;
  const k = Array.isArray(given) ? undefined : given;
  if (k && k.length <= maxLength && /^[\x21-\x7e]+$/.test(k)) return k;
  return fail('invalid_request', `Idempotency-Key must be 1 to ${maxLength} visible ASCII characters.`, [
    { field: 'Idempotency-Key', code: 'invalid_value', message: `must be 1 to ${maxLength} visible ASCII characters` },
  ]);
}

/**
 * The key of an `Authorization: Bearer <key>` header (scheme case-insensitive, one or more spaces, 1-512 visible ASCII
 * characters, surrounding whitespace ignored); undefined for anything else. A scan, not a regular expression: every
 * authenticated request passes here.
 */
export function bearerKey(auth: string | undefined): string | undefined {
  if (!auth) return undefined;
  const value = auth.trim();
  // "bearer" in any case: each letter's code with the lower-case bit set.
  if (value.length < 8 || (value.charCodeAt(0) | 0x20) !== 0x62 || (value.charCodeAt(1) | 0x20) !== 0x65 || (value.charCodeAt(2) | 0x20) !== 0x61) return undefined;
  if ((value.charCodeAt(3) | 0x20) !== 0x72 || (value.charCodeAt(4) | 0x20) !== 0x65 || (value.charCodeAt(5) | 0x20) !== 0x72 || value.charCodeAt(6) !== 0x20) return undefined;
  let start = 7;
  while (start < value.length && value.charCodeAt(start) === 0x20) start++;
  const length = value.length - start;
  if (length < 1 || length > MAX_API_KEY_LENGTH) return undefined;
  for (let i = start; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return undefined;
  }
  return value.slice(start);
}

/**
 * An answer thrown by a route's reading of its request (a body, a query parameter, a path segment, a header): the
 * handler stops there, and this is what the request is answered.
 */
export class Refusal extends Error {
  constructor(readonly response: HttpResponse) {
    super('refused');
  }
}

/** A query parameter's 400: `<field> <message>.`, naming the field. */
export function badQuery(field: string, message: string): Refusal {
  return new Refusal(fail('invalid_request', `${field} ${message}.`, [{ field, code: 'invalid_value', message }]));
}
