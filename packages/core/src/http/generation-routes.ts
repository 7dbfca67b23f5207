import { inject, injectable } from 'tsyringe';
import { DomainError } from '../errors.js';
import { Generations, isGenerationStatus, type ListRequest } from '../generations.js';
import { LiveStatus } from '../push/live-status.js';
import { Webhooks } from '../push/webhooks.js';
import { ModelRegistry } from '../registry.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { createBody } from './request-body.js';
import { decodeSegment, fail, header, json, viewJson } from './respond.js';
import type { Route } from './routes.js';
import { LIST_LIMITS } from './schemas.js';
import type { HttpRequest, HttpResponse } from './types.js';

/** The routes that need a user: what an authenticated request of the API is answered. */
export type UserRoute = Exclude<Route, { name: 'file' | 'openapi' | 'playground' }>;

function badQuery(field: string, message: string): DomainError {
  return new DomainError('invalid_request', `${field} ${message}.`, { details: [{ field, code: 'invalid_value', message }] });
}

/** `limit`, `cursor`, `status`, `modelId` of GET /v1/generations; anything malformed or repeated is a 400. */
function parseListQuery(query: string): ListRequest {
  const params = new URLSearchParams(query);
  const one = (name: string): string | undefined => {
    const all = params.getAll(name);
    if (all.length > 1) throw badQuery(name, 'must be given once');
    return all[0];
  };
  const out: ListRequest = {};
  const limit = one('limit');
  if (limit !== undefined) {
    if (!/^\d{1,3}$/.test(limit) || Number(limit) < 1 || Number(limit) > LIST_LIMITS.max) throw badQuery('limit', `must be a whole number from 1 to ${LIST_LIMITS.max}`);
    out.limit = Number(limit);
  }
  const status = one('status');
  if (status !== undefined) {
    if (!isGenerationStatus(status)) throw badQuery('status', 'must be one of pending, processing, completed, failed');
    out.status = status;
  }
  const modelId = one('modelId');
  if (modelId !== undefined) {
    if (modelId.length < 1 || modelId.length > 200) throw badQuery('modelId', 'must be 1 to 200 characters');
    out.modelId = modelId;
  }
  const cursor = one('cursor');
  if (cursor !== undefined) out.cursor = cursor;
  return out;
}

/**
 * `wait=N` of a Prefer header (RFC 7240; several preferences, any order, case-insensitive name), capped at `max`.
 * Undefined when there is none or it is not a whole number of seconds.
 */
function preferredWait(prefer: string | undefined, max: number): number | undefined {
  if (!prefer) return undefined;
  for (const part of prefer.split(',')) {
    const m = /^\s*wait\s*=\s*"?(\d{1,6})"?\s*(?:;.*)?$/i.exec(part);
    if (m) return Math.min(Number(m[1]), max);
  }
  return undefined;
}

/** The generation API of an authenticated user: each route is a call of the use cases, its answer their JSON. */
@injectable()
export class GenerationRoutes {
  constructor(
    @inject(TOKENS.Generations) private readonly generations: Generations,
    @inject(TOKENS.LiveStatus) private readonly live: LiveStatus,
    @inject(TOKENS.Webhooks) private readonly webhooks: Webhooks,
    @inject(TOKENS.Registry) private readonly registry: ModelRegistry,
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
  ) {}

  async answer(route: UserRoute, req: HttpRequest, userId: string, query: string): Promise<HttpResponse> {
    switch (route.name) {
      case 'models':
        return json(200, this.registry.listJson);
      case 'balance':
        return json(200, JSON.stringify({ balance: await this.generations.balance(userId) }));
      case 'get':
        return await this.get(route.id, req, userId, query);
      case 'events':
        return await this.events(route.id, req, userId);
      case 'deliveries': {
        const id = decodeSegment(route.id);
        if (id === null) return fail('not_found', 'Generation not found.');
        return json(200, JSON.stringify({ data: await this.webhooks.deliveries(userId, id) }));
      }
      case 'webhookSecret':
        return json(200, JSON.stringify({ key: await this.webhooks.secret(userId) }));
      case 'rotateWebhookSecret':
        return json(200, JSON.stringify({ key: await this.webhooks.rotate(userId) }));
      case 'list':
        return json(200, JSON.stringify(await this.generations.list(userId, parseListQuery(query), req.baseUrl)));
      case 'cancel': {
        const id = decodeSegment(route.id);
        if (id === null) return fail('not_found', 'Generation not found.');
        const { cancelled, generation } = await this.generations.cancel(userId, id, req.baseUrl);
        return json(200, JSON.stringify({ ...generation, cancelled }));
      }
      case 'create':
        return await this.create(req, userId);
      case 'quote': {
        const body = createBody(req, this.options.limits.bodyBytes);
        if ('res' in body) return body.res;
        return json(200, JSON.stringify(await this.generations.quote(userId, body.value)));
      }
    }
  }

  private async get(rawId: string, req: HttpRequest, userId: string, query: string): Promise<HttpResponse> {
    const id = decodeSegment(rawId);
    if (id === null) return fail('not_found', 'Generation not found.');
    const include = query === '' ? null : new URLSearchParams(query).getAll('include');
    const details = include !== null && include.length > 0;
    if (details && (include.length > 1 || include[0] !== 'details')) {
      return fail('invalid_request', 'include must be "details".', [{ field: 'include', code: 'invalid_value', message: 'must be "details"' }]);
    }
    const wait = preferredWait(header(req, 'prefer'), this.options.push.maxWaitSeconds);
    if (wait !== undefined) {
      const rec = await this.live.waitForChange(userId, id, wait);
      const body = details ? this.generations.itemOf(rec, req.baseUrl) : this.generations.viewOf(rec, req.baseUrl);
      return json(200, JSON.stringify(body), { 'preference-applied': `wait=${wait}`, vary: 'Prefer' });
    }
    if (details) return json(200, JSON.stringify(await this.generations.details(userId, id, req.baseUrl)));
    return json(200, viewJson(await this.generations.get(userId, id, req.baseUrl)));
  }

  private async events(rawId: string, req: HttpRequest, userId: string): Promise<HttpResponse> {
    const id = decodeSegment(rawId);
    if (id === null) return fail('not_found', 'Generation not found.');
    const lastId = header(req, 'last-event-id');
    const after = lastId !== undefined && /^\d{1,15}$/.test(lastId.trim()) ? Number(lastId.trim()) : undefined;
    const stream = await this.live.stream(userId, id, after, req.baseUrl);
    return {
      status: 200,
      headers: {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-store',
        'x-content-type-options': 'nosniff',
        // nginx and similar buffer responses unless told not to: a buffered event stream is not live.
        'x-accel-buffering': 'no',
      },
      body: stream,
    };
  }

  async create(req: HttpRequest, userId: string): Promise<HttpResponse> {
    const body = createBody(req, this.options.limits.bodyBytes);
    if ('res' in body) return body.res;
    const keyHeader = req.headers['idempotency-key'];
    let idempotencyKey: string | undefined;
    if (keyHeader !== undefined) {
      const k = Array.isArray(keyHeader) ? undefined : keyHeader;
      if (!k || k.length > this.options.limits.idempotencyKeyLength || !/^[\x21-\x7e]+$/.test(k)) {
        return fail('invalid_request', 'Idempotency-Key must be 1 to 255 visible ASCII characters.', [
          { field: 'Idempotency-Key', code: 'invalid_value', message: 'must be 1 to 255 visible ASCII characters' },
        ]);
      }
      idempotencyKey = k;
    }
    const created = await this.generations.create(userId, body.value, idempotencyKey);
    return json(201, `{"generationId":${JSON.stringify(created.generationId)}}`);
  }
}
