import { inject, injectable } from 'tsyringe';
import type { GenerationView, ModelInfo } from '../domain/types.js';
import { DomainError } from '../domain/errors.js';
import { isGenerationStatus } from '../use-cases/generations.js';
import { LiveStatus } from '../push/live-status.js';
import { Webhooks } from '../push/webhooks.js';
import type { Principal } from '../ports/api-keys.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import type { GenerationService, ListOptions } from '../service-types.js';
import { TOKENS } from '../tokens.js';
import { Views } from '../use-cases/views.js';
import { AccountRoutes } from './accounts-routes.js';
import { BatchRoutes } from './batch-routes.js';
import { createBody } from './request-body.js';
import { decodeSegment, fail, header, idempotencyKeyOf, json, viewJson } from './respond.js';
import type { Route } from './routes.js';
import { LIST_LIMITS } from './schemas.js';
import type { HttpRequest, HttpResponse } from './types.js';

/** The routes that need a user: what an authenticated request of the API is answered. */
export type UserRoute = Exclude<Route, { name: 'file' | 'openapi' | 'playground' | 'admin' | 'healthz' | 'readyz' }>;

function badQuery(field: string, message: string): DomainError {
  return new DomainError('invalid_request', `${field} ${message}.`, { details: [{ field, code: 'invalid_value', message }] });
}

/** `limit`, `cursor`, `status`, `modelId` of GET /v1/generations; anything malformed or repeated is a 400. */
function parseListQuery(query: string): ListOptions {
  const params = new URLSearchParams(query);
  const one = (name: string): string | undefined => {
    const all = params.getAll(name);
    if (all.length > 1) throw badQuery(name, 'must be given once');
    return all[0];
  };
  const out: ListOptions = {};
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

/** Whether the request came with a body (declared, streamed, or read), whatever its type. */
function hasBody(req: HttpRequest): boolean {
  if (req.bodyError !== undefined) return true;
  if (Number(header(req, 'content-length')) > 0 || header(req, 'transfer-encoding') !== undefined) return true;
  if (req.body !== undefined) return (typeof req.body === 'string' ? req.body.length : req.body.byteLength) > 0;
  return false;
}

function notFound(): HttpResponse {
  return fail('not_found', 'Generation not found.');
}

function viewAnswer(view: GenerationView): HttpResponse {
  return json(200, viewJson(view));
}

/**
 * The generation API of an authenticated user: each route is a call of the service's own methods, the ones an
 * embedder calls, and its answer their JSON. Only what has no such method (a long-poll, an event stream, webhook
 * deliveries and secrets, usage) asks its module.
 */
@injectable()
export class GenerationRoutes {
  constructor(
    @inject(LiveStatus) private readonly live: LiveStatus,
    @inject(Webhooks) private readonly webhooks: Webhooks,
    @inject(Views) private readonly views: Views,
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(AccountRoutes) private readonly accountRoutes: AccountRoutes,
    @inject(BatchRoutes) private readonly batchRoutes: BatchRoutes,
  ) {}

  /**
   * The answer to an authenticated request. Not an async function: each route's own promise is the answer, and a
   * throw here reaches the caller's try as a rejection would.
   */
  answer(route: UserRoute, req: HttpRequest, principal: Principal, query: string, service: GenerationService): Promise<HttpResponse> {
    const userId = principal.userId;
    switch (route.name) {
      case 'models': {
        // A key's allow-list: the other models are not there for it.
        const allowed = principal.models;
        const models = service.listModels();
        return Promise.resolve(json(200, allowed === undefined ? this.modelsJson(models) : JSON.stringify({ models: models.filter((m) => allowed.includes(m.modelId)) })));
      }
      case 'usage':
        return this.accountRoutes.usage(userId, query).then((a) => json(a.status, JSON.stringify(a.body)));
      case 'balance':
        return service.balance(userId).then((balance) => json(200, JSON.stringify({ balance })));
      case 'get':
        return this.get(route.id, req, userId, query, route.details === true, service);
      case 'events':
        return this.events(route.id, req, userId);
      case 'deliveries': {
        const id = decodeSegment(route.id);
        if (id === null) return Promise.resolve(notFound());
        return this.webhooks.deliveries(userId, id).then((data) => json(200, JSON.stringify({ data })));
      }
      case 'webhookSecret':
        return this.webhooks.secret(userId).then((key) => json(200, JSON.stringify({ key })));
      case 'rotateWebhookSecret':
        return this.webhooks.rotate(userId).then((key) => json(200, JSON.stringify({ key })));
      case 'list':
        return service.list(userId, { ...parseListQuery(query), baseUrl: req.baseUrl }).then((page) => json(200, JSON.stringify(page)));
      case 'cancel': {
        const id = decodeSegment(route.id);
        if (id === null) return Promise.resolve(notFound());
        return service
          .cancel(userId, id, { baseUrl: req.baseUrl })
          .then(({ outcome, generation }) => json(200, JSON.stringify({ ...generation, cancelled: outcome === 'cancelled' })));
      }
      case 'delete': {
        // Nothing to send with a delete: a body is a client mistake, refused before anything is deleted.
        if (hasBody(req)) return Promise.resolve(fail('invalid_request', 'A DELETE request takes no body.', [{ field: 'body', code: 'invalid_value', message: 'must be empty' }]));
        const id = decodeSegment(route.id);
        if (id === null) return Promise.resolve(notFound());
        return service.delete(userId, id).then(() => ({ status: 204, headers: { 'cache-control': 'no-store' }, body: '' }));
      }
      case 'create':
        return this.create(req, principal, service);
      case 'createBatch':
      case 'getBatch':
      case 'batchGenerations':
      case 'cancelBatch':
        return this.batchRoutes.answer(route, req, principal, query);
      case 'quote': {
        const body = createBody(req, this.options.limits.bodyBytes);
        if ('res' in body) return Promise.resolve(body.res);
        return service.quote(userId, body.value, { key: principal }).then((quote) => json(200, JSON.stringify(quote)));
      }
    }
  }

  /** The JSON of a model list, made once per list: the service's own list is frozen, so the same array reads the same. */
  private modelsJson(models: ModelInfo[]): string {
    let text = this.modelsText.get(models);
    if (text === undefined) {
      text = JSON.stringify({ models });
      // Only a frozen list is kept: a host's own listModels may hand out an array it changes later.
      if (Object.isFrozen(models)) this.modelsText.set(models, text);
    }
    return text;
  }

  private readonly modelsText = new WeakMap<ModelInfo[], string>();

  private get(rawId: string, req: HttpRequest, userId: string, query: string, detailsPath: boolean, service: GenerationService): Promise<HttpResponse> {
    const id = decodeSegment(rawId);
    if (id === null) return Promise.resolve(notFound());
    const include = query === '' || detailsPath ? null : new URLSearchParams(query).getAll('include');
    const details = detailsPath || (include !== null && include.length > 0);
    if (include !== null && include.length > 0 && (include.length > 1 || include[0] !== 'details')) {
      return Promise.resolve(fail('invalid_request', 'include must be "details".', [{ field: 'include', code: 'invalid_value', message: 'must be "details"' }]));
    }
    const wait = preferredWait(header(req, 'prefer'), this.options.push.maxWaitSeconds);
    if (wait !== undefined) {
      // The details long-poll answers new partial output too; the contract's poll only a change of status.
      return this.live.waitForChange(userId, id, wait, details).then(async (rec) => {
        // Details read through the service (with the partial output from the log); the plain poll answers the record.
        const body = details ? await service.details(userId, rec.id, { baseUrl: req.baseUrl }) : this.views.view(rec, req.baseUrl);
        return json(200, JSON.stringify(body), { 'preference-applied': `wait=${wait}`, vary: 'Prefer' });
      });
    }
    const options = { baseUrl: req.baseUrl };
    if (details) return service.details(userId, id, options).then((item) => json(200, JSON.stringify(item)));
    return service.get(userId, id, options).then(viewAnswer);
  }

  private async events(rawId: string, req: HttpRequest, userId: string): Promise<HttpResponse> {
    const id = decodeSegment(rawId);
    if (id === null) return notFound();
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

  private async create(req: HttpRequest, principal: Principal, service: GenerationService): Promise<HttpResponse> {
    const body = createBody(req, this.options.limits.bodyBytes);
    if ('res' in body) return body.res;
    const idempotencyKey = idempotencyKeyOf(req, this.options.limits.idempotencyKeyLength);
    if (typeof idempotencyKey === 'object') return idempotencyKey;
    const created = await service.create(principal.userId, body.value, { key: principal, ...(idempotencyKey !== undefined ? { idempotencyKey } : {}) });
    return json(201, `{"generationId":${JSON.stringify(created.generationId)}}`);
  }
}
