import { GENERATION_STATUSES, type GenerationStatus } from '../domain/types.js';
import { badQuery } from './respond.js';
import type { QueryParam, QuerySpec } from './route.js';
import { LIST_LIMITS } from './schemas.js';

/** The parsed values of a set of query parameters: each one present only when it was given. */
export type QueryValues<S extends Record<string, QueryParam<unknown>>> = { [K in keyof S]?: ReturnType<S[K]['parse']> };

/**
 * A query of named parameters: each read with its own `parse`, in the order given (which is also the document's).
 * `repeated: 'refused'` answers a parameter given twice with a 400; `'first'` takes its first value. Parameters not
 * named are ignored.
 */
export function querySchema<S extends Record<string, QueryParam<unknown>>>(params: S, repeated: 'refused' | 'first'): QuerySpec<QueryValues<S>> {
  const names = Object.keys(params);
  return {
    params: Object.values(params),
    read(query) {
      const search = new URLSearchParams(query);
      const out: Record<string, unknown> = {};
      for (const name of names) {
        const all = search.getAll(name);
        if (all.length === 0) continue;
        if (all.length > 1 && repeated === 'refused') throw badQuery(name, 'must be given once');
        out[name] = params[name]!.parse(all[0]!);
      }
      return out as QueryValues<S>;
    },
  };
}

/** A query parameter's OpenAPI object. */
function doc(name: string, description: string, schema: Record<string, unknown>, required = false): Record<string, unknown> {
  return { name, in: 'query', required, description, schema };
}

/**
 * `limit` of a page of generations (GET /v1/generations, GET /v1/batches/{id}/generations): a whole number from 1 to
 * `LIST_LIMITS.max`. The one reading of it: every route that pages generations names this parameter.
 */
export const pageLimit: QueryParam<number> = {
  doc: doc('limit', 'Items per page', { type: 'integer', minimum: 1, maximum: LIST_LIMITS.max, default: LIST_LIMITS.default }),
  parse(value) {
    const n = Number(value);
    if (!/^\d{1,3}$/.test(value) || n < 1 || n > LIST_LIMITS.max) throw badQuery('limit', `must be a whole number from 1 to ${LIST_LIMITS.max}`);
    return n;
  },
};

/** `cursor`: a previous page's `nextCursor`, as given (the use case checks it). */
export const pageCursor: QueryParam<string> = text('cursor', 'The nextCursor of the previous page');

/** A parameter taken as it is, checked (if at all) by the use case it is handed to. */
export function text(name: string, description: string, schema: Record<string, unknown> = { type: 'string' }, required = false): QueryParam<string> {
  return { doc: doc(name, description, schema, required), parse: (value) => value };
}

/** `status` of the generation list. */
export const statusFilter: QueryParam<GenerationStatus> = {
  doc: doc('status', 'Only this status', { type: 'string', enum: [...GENERATION_STATUSES] }),
  parse(value) {
    if (!(GENERATION_STATUSES as readonly string[]).includes(value)) throw badQuery('status', 'must be one of pending, processing, completed, failed');
    return value as GenerationStatus;
  },
};

/** `modelId` of the generation list. */
export const modelFilter: QueryParam<string> = {
  doc: doc('modelId', 'Only this model', { type: 'string' }),
  parse(value) {
    if (value.length < 1 || value.length > 200) throw badQuery('modelId', 'must be 1 to 200 characters');
    return value;
  },
};
