import { inject, injectable } from 'tsyringe';
import { Batches, type BatchRequestItem } from '../use-cases/batches.js';
import type { ErrorDetail } from '../domain/errors.js';
import type { Principal } from '../ports/api-keys.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { batchItemSchema, batchRequestSchema } from './batch-schemas.js';
import { readBody } from './request-body.js';
import { decodeSegment, fail, idempotencyKeyOf, json } from './respond.js';
import type { Route } from './routes.js';
import { LIST_LIMITS } from './schemas.js';
import type { HttpRequest, HttpResponse } from './types.js';

export type BatchRoute = Extract<Route, { name: 'createBatch' | 'getBatch' | 'batchGenerations' | 'cancelBatch' }>;

function notFound(): HttpResponse {
  return fail('not_found', 'Batch not found.');
}

/** The first issue of a value against a schema, as the contract's error detail under `field`. */
function detailOf(field: string, issue: { path: readonly PropertyKey[]; message: string; code: string }): ErrorDetail {
  const at = issue.path.length > 0 ? `${field}.${issue.path.map(String).join('.')}` : field;
  return { field: at, code: issue.code === 'invalid_type' && issue.message.includes('undefined') ? 'required' : 'invalid_value', message: `${at}: ${issue.message}` };
}

/** POST /v1/batches, GET /v1/batches/:id, GET /v1/batches/:id/generations, POST /v1/batches/:id/cancel. */
@injectable()
export class BatchRoutes {
  constructor(
    @inject(Batches) private readonly batches: Batches,
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
  ) {}

  answer(route: BatchRoute, req: HttpRequest, principal: Principal, query: string): Promise<HttpResponse> {
    if (route.name === 'createBatch') return this.create(req, principal);
    const id = decodeSegment(route.id);
    if (id === null) return Promise.resolve(notFound());
    const userId = principal.userId;
    if (route.name === 'getBatch') return this.batches.get(userId, id).then((b) => json(200, JSON.stringify(b)));
    if (route.name === 'cancelBatch') return this.batches.cancel(userId, id).then((b) => json(200, JSON.stringify(b)));
    const params = new URLSearchParams(query);
    const limit = params.get('limit');
    if (limit !== null && (!/^\d{1,3}$/.test(limit) || Number(limit) < 1 || Number(limit) > LIST_LIMITS.max)) {
      return Promise.resolve(fail('invalid_request', `limit must be a whole number from 1 to ${LIST_LIMITS.max}.`, [{ field: 'limit', code: 'invalid_value', message: `must be a whole number from 1 to ${LIST_LIMITS.max}` }]));
    }
    const cursor = params.get('cursor');
    return this.batches
      .list(userId, id, { ...(limit !== null ? { limit: Number(limit) } : {}), ...(cursor !== null ? { cursor } : {}) }, req.baseUrl)
      .then((page) => json(200, JSON.stringify(page)));
  }

  private async create(req: HttpRequest, principal: Principal): Promise<HttpResponse> {
    const body = readBody(req, this.options.limits.bodyBytes);
    if (!body.ok) return body.res;
    const value = body.value;
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return fail('invalid_request', 'The request body must be a JSON object.');
    const parsed = batchRequestSchema.safeParse(value);
    if (!parsed.success) {
      return fail('invalid_request', 'The batch is not valid; nothing was created.', parsed.error.issues.slice(0, 50).map((i) => detailOf('body', i)));
    }
    // Each request on its own, so the answer names every bad one by its index.
    const details: ErrorDetail[] = [];
    const requests: BatchRequestItem[] = [];
    parsed.data.requests.forEach((item, i) => {
      const r = batchItemSchema.safeParse(item);
      if (r.success) requests.push({ modelId: r.data.modelId, ...(r.data.settings !== undefined ? { settings: r.data.settings } : {}), ...(r.data.metadata !== undefined ? { metadata: r.data.metadata } : {}) });
      else details.push(detailOf(`requests[${i}]`, r.error.issues[0]!));
    });
    if (details.length > 0) return fail('invalid_request', `${details.length} of the ${parsed.data.requests.length} requests ${details.length === 1 ? 'is' : 'are'} not valid; nothing was created.`, details);
    const idempotencyKey = idempotencyKeyOf(req, this.options.limits.idempotencyKeyLength);
    if (typeof idempotencyKey === 'object') return idempotencyKey;
    const created = await this.batches.create(principal, { requests, ...(parsed.data.webhook ? { webhook: parsed.data.webhook } : {}) }, idempotencyKey);
    return json(201, JSON.stringify(created));
  }
}
