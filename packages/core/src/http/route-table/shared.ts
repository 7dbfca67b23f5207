import type { ResolvedServiceOptions } from '../../resolved-options.js';
import { header, json } from '../respond.js';
import type { Json, PathParam, RateRule } from '../route.js';
import type { HttpResponse } from '../types.js';

/** What several entries of the route table share. */

/** `{id}` of a generation's paths. */
export const GENERATION_ID: PathParam = {
  doc: { name: 'id', in: 'path', required: true, description: 'The generationId', schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{22}$' } },
  notFound: 'Generation not found.',
};

/** A read of a generation: with `Prefer` (a long-poll) it counts as a stream, else as a read. */
export const pollRate: RateRule = (req) => (header(req, 'prefer') !== undefined ? 'stream' : 'read');

/** The `Idempotency-Key` header of a create, documented with the length the service takes. */
export function idempotencyKeyHeader(description: string): (options: ResolvedServiceOptions) => Json {
  return (options) => ({ name: 'Idempotency-Key', in: 'header', required: false, description, schema: { type: 'string', maxLength: options.limits.idempotencyKeyLength } });
}

/** A JSON answer of `value`. */
export function jsonOf(status: number, value: unknown): HttpResponse {
  return json(status, JSON.stringify(value));
}

/** The answer of a DELETE (and of revoking a key): nothing. */
export function noContent(): HttpResponse {
  return { status: 204, headers: { 'cache-control': 'no-store' }, body: '' };
}
