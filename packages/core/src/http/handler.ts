import { inject, injectable } from 'tsyringe';
import { DomainError, UnavailableError, type ErrorCode, type ErrorDetail } from '../errors.js';
import { FileUrlSigner } from '../files.js';
import { fileResponse } from './file-response.js';
import { Generations, isGenerationStatus, type CreateRequest, type ListRequest } from '../generations.js';
import { childLogger } from '../logger.js';
import { resolveAtOnce } from '../memory/api-keys.js';
import type { ApiKeyResolver, Principal } from '../ports/api-keys.js';
import type { BlobStore } from '../ports/blob.js';
import type { Logger } from '../ports/logger.js';
import { LiveStatus } from '../push/live-status.js';
import { Webhooks } from '../push/webhooks.js';
import { ModelRegistry } from '../registry.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { buildOpenApiDocument } from './openapi.js';
import { RateLimits, type RateLimitClass, type RateLimitVerdict } from './rate-limits.js';
import { LIST_LIMITS, METADATA_LIMITS, createRequestSchema } from './schemas.js';
import { STATUS_OF, errorBody } from './errors.js';
import type { HttpRequest, HttpResponse } from './types.js';
import { GENERATION_STATUSES, type GenerationView } from '../domain.js';

/** What @genservice/playground exports (an optional dependency, imported on the first playground request). */
interface PlaygroundAssets {
  readPlaygroundAsset(path: string): { contentType: string; body: Uint8Array } | null;
}

const JSON_HEADERS = {
  'content-type': 'application/json; charset=utf-8',
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
} as const;
const BEARER = /^Bearer +([\x21-\x7e]{1,512})$/i;
const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;.*)?$/i;
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

type Route =
  | { name: 'models' }
  | { name: 'create' }
  | { name: 'list' }
  | { name: 'quote' }
  | { name: 'get'; id: string }
  | { name: 'events'; id: string }
  | { name: 'deliveries'; id: string }
  | { name: 'webhookSecret' }
  | { name: 'rotateWebhookSecret' }
  | { name: 'cancel'; id: string }
  | { name: 'delete'; id: string }
  | { name: 'balance' }
  | { name: 'openapi' }
  | { name: 'playground'; asset: string }
  | { name: 'file'; key: string };

const ROUTES: Array<{ template: string; pattern: RegExp; methods: Record<string, (m: RegExpExecArray) => Route> }> = [
  { template: '/v1/models', pattern: /^\/v1\/models\/?$/, methods: { GET: () => ({ name: 'models' }) } },
  {
    template: '/v1/generations',
    pattern: /^\/v1\/generations\/?$/,
    methods: { GET: () => ({ name: 'list' }), POST: () => ({ name: 'create' }) },
  },
  { template: '/v1/quotes', pattern: /^\/v1\/quotes\/?$/, methods: { POST: () => ({ name: 'quote' }) } },
  { template: '/v1/generations/{id}', pattern: /^\/v1\/generations\/([^/]+)\/?$/, methods: { GET: (m) => ({ name: 'get', id: m[1]! }), DELETE: (m) => ({ name: 'delete', id: m[1]! }) } },
  {
    template: '/v1/generations/{id}/events',
    pattern: /^\/v1\/generations\/([^/]+)\/events\/?$/,
    methods: { GET: (m) => ({ name: 'events', id: m[1]! }) },
  },
  {
    template: '/v1/generations/{id}/webhook-deliveries',
    pattern: /^\/v1\/generations\/([^/]+)\/webhook-deliveries\/?$/,
    methods: { GET: (m) => ({ name: 'deliveries', id: m[1]! }) },
  },
  { template: '/v1/webhooks/secret', pattern: /^\/v1\/webhooks\/secret\/?$/, methods: { GET: () => ({ name: 'webhookSecret' }) } },
  {
    template: '/v1/webhooks/secret/rotate',
    pattern: /^\/v1\/webhooks\/secret\/rotate\/?$/,
    methods: { POST: () => ({ name: 'rotateWebhookSecret' }) },
  },
  {
    template: '/v1/generations/{id}/cancel',
    pattern: /^\/v1\/generations\/([^/]+)\/cancel\/?$/,
    methods: { POST: (m) => ({ name: 'cancel', id: m[1]! }) },
  },
  { template: '/v1/balance', pattern: /^\/v1\/balance\/?$/, methods: { GET: () => ({ name: 'balance' }) } },
  { template: '/v1/openapi.json', pattern: /^\/v1\/openapi\.json$/, methods: { GET: () => ({ name: 'openapi' }) } },
  {
    template: '/playground/{asset}',
    pattern: /^\/playground(\/[^?]*)?$/,
    // `/playground` without the slash is '' (answered with a redirect, so the page's relative URLs resolve).
    methods: { GET: (m) => ({ name: 'playground', asset: m[1] ?? '' }) },
  },
  { template: '/v1/files/{key}', pattern: /^\/v1\/files\/([^/]+)$/, methods: { GET: (m) => ({ name: 'file', key: m[1]! }) } },
];

/** Every `METHOD /path/{param}` the handler serves; the OpenAPI test checks the document lists exactly these. */
export const SERVED_ROUTES: readonly string[] = ROUTES.filter((r) => r.template.startsWith('/v1/')).flatMap((r) =>
  Object.keys(r.methods).map((m) => `${m} ${r.template}`),
);

function json(status: number, body: string, extra?: Record<string, string>): HttpResponse {
  // A literal, not a spread of JSON_HEADERS: every answer gets its own headers object (adapters may keep it), built
  // the cheapest way there is; `extra` overrides, as the spread did.
  const headers: Record<string, string> = {
    'content-type': JSON_HEADERS['content-type'],
    'cache-control': JSON_HEADERS['cache-control'],
    'x-content-type-options': JSON_HEADERS['x-content-type-options'],
  };
  return { status, headers: extra === undefined ? headers : Object.assign(headers, extra), body };
}

/**
 * The contract's generation view (`{ status, result?, price? }`, in that key order, as `Views.view` builds it) as
 * JSON, without walking the object generically: the same text JSON.stringify gives for it, on the hottest answer of
 * the API (every poll).
 */
function viewJson(view: GenerationView): string {
  let out = STATUS_JSON.get(view.status) ?? `{"status":${JSON.stringify(view.status)}`;
  if (view.result !== undefined) out += `,"result":${JSON.stringify(view.result)}`;
  // A finite number's JSON is its String() (-0 included); anything else goes through JSON.stringify as before.
  if (view.price !== undefined) out += `,"price":${Number.isFinite(view.price) ? String(view.price) : JSON.stringify(view.price)}`;
  return `${out}}`;
}

/** The start of `viewJson` for each status, built once. */
const STATUS_JSON = new Map<string, string>(GENERATION_STATUSES.map((s) => [s, `{"status":${JSON.stringify(s)}`]));

function fail(code: ErrorCode, message: string, details?: ErrorDetail[], extra?: Record<string, string>): HttpResponse {
  return json(STATUS_OF[code], errorBody(code, message, details), extra);
}

/** Built once: the 401 is the cheapest answer there is, so that bad keys cost the server as little as possible. */
const UNAUTHORIZED: HttpResponse = fail('unauthorized', 'A valid API key is required (Authorization: Bearer <key>).', undefined, {
  'www-authenticate': 'Bearer',
});
Object.freeze(UNAUTHORIZED.headers);

/**
 * `{ modelId, settings? }` of a create body that has only those (the common case), as `createRequestSchema` would
 * parse it: a modelId of 1 to 200 characters, settings absent or a plain object (copied, as zod's record copies it).
 * Null for anything else (metadata, a webhook, other types, a `__proto__` setting name, which zod drops), which then
 * goes through the schema and its error details. Only for objects JSON.parse made (no symbols, no getters).
 */
function simpleCreateBody(value: Record<string, unknown>): CreateRequest | null {
  const { modelId, settings } = value;
  if (typeof modelId !== 'string' || modelId.length < 1 || modelId.length > 200) return null;
  if (value.metadata !== undefined || value.webhook !== undefined) return null;
  if (settings === undefined) return { modelId };
  if (settings === null || typeof settings !== 'object' || Array.isArray(settings) || Object.hasOwn(settings, '__proto__')) return null;
  const proto = Object.getPrototypeOf(settings);
  if (proto !== Object.prototype && proto !== null) return null;
  return { modelId, settings: { ...(settings as Record<string, unknown>) } as CreateRequest['settings'] };
}

/**
 * Whether a port's answer must be awaited: any thenable, not only a native Promise (a host's store or resolver may hand
 * back another promise library's object, or a query builder that is awaitable), as `await` itself would treat it.
 */
function isThenable<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as PromiseLike<T>).then === 'function';
}

function header(req: HttpRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? (v.length === 1 ? v[0] : undefined) : v;
}

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

/** Whether the request came with a body (declared, streamed, or read), whatever its type. */
function hasBody(req: HttpRequest): boolean {
  if (req.bodyError !== undefined) return true;
  if (Number(header(req, 'content-length')) > 0 || header(req, 'transfer-encoding') !== undefined) return true;
  if (req.body !== undefined) return (typeof req.body === 'string' ? req.body.length : req.body.byteLength) > 0;
  return false;
}

function decodeSegment(s: string): string | null {
  // Nothing to decode without a '%' (every id the service makes): no call, no try.
  if (!s.includes('%')) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

/**
 * The framework-neutral HTTP layer: every status code, header and error body of the API is decided here, and
 * the adapters only translate. Order of checks: route, then authentication (before any body is looked at),
 * then the body, then the domain.
 */
@injectable()
export class HttpHandler {
  private openApiJson: string | undefined;
  private readonly logger: Logger;

  constructor(
    @inject(TOKENS.Generations) private readonly generations: Generations,
    @inject(TOKENS.LiveStatus) private readonly live: LiveStatus,
    @inject(TOKENS.Webhooks) private readonly webhooks: Webhooks,
    @inject(TOKENS.Registry) private readonly registry: ModelRegistry,
    @inject(TOKENS.Signer) private readonly signer: FileUrlSigner,
    @inject(TOKENS.Blobs) private readonly blobs: BlobStore,
    @inject(TOKENS.ApiKeys) private readonly apiKeys: ApiKeyResolver,
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.RateLimits) private readonly limits: RateLimits,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'http' });
  }

  handle(req: HttpRequest): Promise<HttpResponse> {
    // The common request (no CORS configured, not HEAD) is dispatch's answer as it is: dispatch never rejects, so no
    // async frame of its own is needed around it.
    if (this.cors === undefined && !(req.method.length === 4 && req.method.toUpperCase() === 'HEAD')) return this.dispatch(req);
    return this.handleWithCorsOrHead(req);
  }

  private async handleWithCorsOrHead(req: HttpRequest): Promise<HttpResponse> {
    // HEAD is answered like GET, without the body (RFC 9110 9.3.2).
    const method = req.method.toUpperCase();
    const head = method === 'HEAD';
    const origin = this.cors ? header(req, 'origin') : undefined;
    let res: HttpResponse;
    if (method === 'OPTIONS' && origin !== undefined && header(req, 'access-control-request-method') !== undefined) {
      try {
        res = this.preflight(req, origin);
      } catch (err) {
        res = this.fromError(err);
      }
    } else {
      res = await this.dispatch(head ? { ...req, method: 'GET' } : req);
    }
    if (origin !== undefined) res = this.withCors(res, origin);
    if (!head) return res;
    if (typeof res.body === 'object' && Symbol.asyncIterator in res.body) {
      // A stream that is never read holds nothing, but say so: it is over.
      await res.body[Symbol.asyncIterator]().return?.();
      return { ...res, body: '' };
    }
    // The same Content-Length a GET would send (RFC 9110 9.3.2), without the body.
    const length = typeof res.body === 'string' ? Buffer.byteLength(res.body) : (res.body as Uint8Array).byteLength;
    return { ...res, headers: { 'content-length': String(length), ...res.headers }, body: '' };
  }

  private get cors(): ResolvedServiceOptions['cors'] {
    return this.options.cors;
  }

  private allowedOrigin(origin: string): boolean {
    const cors = this.cors;
    return cors !== undefined && (cors.origins === '*' || cors.origins.includes(origin));
  }

  /** A CORS preflight (OPTIONS with Origin and Access-Control-Request-Method) for a known route. */
  private preflight(req: HttpRequest, origin: string): HttpResponse {
    const q = req.path.indexOf('?');
    const path = q === -1 ? req.path : req.path.slice(0, q);
    const route = ROUTES.find((r) => r.pattern.test(path));
    if (!route) return fail('not_found', 'No such endpoint.');
    const methods = Object.keys(route.methods).flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m]));
    if (!this.allowedOrigin(origin)) return { status: 204, headers: { vary: 'Origin' }, body: '' };
    return {
      status: 204,
      headers: {
        'access-control-allow-methods': methods.join(', '),
        'access-control-allow-headers': 'Authorization, Content-Type, Idempotency-Key, Prefer, Last-Event-ID',
        'access-control-max-age': String(this.cors!.maxAgeSeconds),
      },
      body: '',
    };
  }

  private withCors(res: HttpResponse, origin: string): HttpResponse {
    if (!this.allowedOrigin(origin)) return { ...res, headers: { ...res.headers, vary: 'Origin' } };
    return {
      ...res,
      headers: {
        ...res.headers,
        'access-control-allow-origin': this.cors!.origins === '*' ? '*' : origin,
        'access-control-expose-headers': 'Retry-After, RateLimit, RateLimit-Policy, Preference-Applied, WWW-Authenticate',
        vary: res.headers.vary ? `${res.headers.vary}, Origin` : 'Origin',
      },
    };
  }

  private fromError(err: unknown): HttpResponse {
    if (err instanceof DomainError) {
      const extra: Record<string, string> =
        err.code === 'unavailable' || err.code === 'rate_limited' ? { 'retry-after': String(err.retryAfterSeconds ?? 1) } : {};
      return fail(err.code, err.message, err.details, extra);
    }
    if (err instanceof UnavailableError) {
      this.logger.warn({ err: err.message }, 'a backing service is unavailable');
      return fail('unavailable', 'The service is temporarily unavailable; try again shortly.', undefined, { 'retry-after': '1' });
    }
    this.logger.error({ err: err instanceof Error ? (err.stack ?? err.message) : String(err) }, 'internal error');
    return fail('internal', 'Internal server error.');
  }

  /** Answers every request, errors included (as their error answers): never rejects. */
  private async dispatch(req: HttpRequest): Promise<HttpResponse> {
    try {
      // A body that did not arrive in time: whatever the route, the request is over and so is the connection (the rest
      // of the body is never read).
      if (req.bodyError === 'timeout') {
        return fail('request_timeout', `The request body did not arrive within ${this.options.limits.bodyTimeoutMs} ms.`, undefined, {
          connection: 'close',
        });
      }
      const q = req.path.indexOf('?');
      const path = q === -1 ? req.path : req.path.slice(0, q);
      const query = q === -1 ? '' : req.path.slice(q + 1);
      const method = req.method.toUpperCase();

      let route: Route | undefined;
      for (const r of ROUTES) {
        const m = r.pattern.exec(path);
        if (!m) continue;
        const make = r.methods[method];
        if (!make) {
          return fail('method_not_allowed', `Method ${method} is not allowed here.`, undefined, { allow: Object.keys(r.methods).flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m])).join(', ') });
        }
        route = make(m);
        break;
      }
      if (!route) return fail('not_found', 'No such endpoint.');

      // `return await` inside the try: a rejection must become its error answer here.
      if (route.name === 'file') return await this.file(req, route.key, query);
      if (route.name === 'openapi') return this.openapi();
      if (route.name === 'playground') return await this.playground(route.asset, query);

      const address = req.remoteAddress ?? 'unknown';
      if (this.limits.has('unauthenticated')) {
        const blocked = await this.limits.peek('unauthenticated', address);
        if (blocked.allowed !== true) return this.limited(blocked);
      }
      const resolving = this.authenticate(header(req, 'authorization'));
      // No key (or a malformed one) is known at once: no tick spent waiting for nothing.
      const principal = isThenable(resolving) ? await resolving : resolving;
      const userId = principal?.userId;
      if (!userId) {
        // Only failures count against an address: guessing keys is limited, a busy office behind one NAT is not.
        if (this.limits.has('unauthenticated')) await this.limits.consume('unauthenticated', address);
        return { ...UNAUTHORIZED };
      }
      const cls: RateLimitClass =
        route.name === 'create' ? 'create' : route.name === 'events' || (route.name === 'get' && header(req, 'prefer') !== undefined) ? 'stream' : 'read';
      if (!this.limits.has(cls)) {
        // The hottest answers without an async frame of their own: the models list, a plain poll, a create.
        if (route.name === 'models') return json(200, this.registry.listJson);
        if (route.name === 'get' && query === '' && cls === 'read') {
          const id = decodeSegment(route.id);
          const found = id === null ? null : this.generations.record(userId, id);
          const rec = isThenable(found) ? await found : found;
          return rec === null ? fail('not_found', 'Generation not found.') : json(200, viewJson(this.generations.viewOf(rec, req.baseUrl)));
        }
        if (route.name === 'create') return await this.create(req, userId);
        // `return await`, not `return`: an async function returning a promise waits two more ticks to adopt it.
        return await this.route(route, req, userId, query);
      }
      const verdict = await this.limits.consume(cls, userId);
      if (verdict.allowed !== true) return this.limited(verdict);
      let res: HttpResponse;
      try {
        res = await this.route(route, req, userId, query);
      } catch (err) {
        res = this.fromError(err);
      }
      return { ...res, headers: { ...res.headers, ...verdict.headers } };
    } catch (err) {
      return this.fromError(err);
    }
  }

  private limited(verdict: Exclude<RateLimitVerdict, { allowed: true }>): HttpResponse {
    if (verdict.allowed === 'unavailable') {
      return fail('unavailable', 'The rate limiter is unavailable; try again shortly.', undefined, { 'retry-after': '1' });
    }
    return fail('rate_limited', `Too many requests; try again in ${verdict.retryAfterSeconds} s.`, undefined, verdict.headers);
  }

  private async route(route: Exclude<Route, { name: 'file' | 'openapi' | 'playground' }>, req: HttpRequest, userId: string, query: string): Promise<HttpResponse> {
    switch (route.name) {
      case 'models':
        return json(200, this.registry.listJson);
      case 'balance':
        return json(200, JSON.stringify({ balance: await this.generations.balance(userId) }));
      case 'get': {
        const id = decodeSegment(route.id);
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
      case 'events': {
        const id = decodeSegment(route.id);
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
      case 'delete': {
        // Nothing to send with a delete: a body is a client mistake, refused before anything is deleted.
        if (hasBody(req)) return fail('invalid_request', 'A DELETE request takes no body.', [{ field: 'body', code: 'unexpected', message: 'must be empty' }]);
        const id = decodeSegment(route.id);
        if (id === null) return fail('not_found', 'Generation not found.');
        await this.generations.delete(userId, id);
        return { status: 204, headers: { 'cache-control': 'no-store' }, body: '' };
      }
      case 'create':
        return await this.create(req, userId);
      case 'quote': {
        const body = this.createBody(req);
        if ('res' in body) return body.res;
        return json(200, JSON.stringify(await this.generations.quote(userId, body.value)));
      }
    }
  }

  /** The user of a Bearer key; null for none, a malformed one, or one the resolver does not know. */
  /** The key's principal: null at once without a (well-formed) key; a host's resolver may answer without a promise. */
  private authenticate(auth: string | undefined): Promise<Principal | null> | Principal | null {
    if (!auth) return null;
    const m = BEARER.exec(auth.trim());
    if (!m) return null;
    // An in-memory key store answers at once: no promise to wait a turn of the event loop for.
    const now = resolveAtOnce(this.apiKeys, m[1]!);
    return now !== undefined ? now : (this.apiKeys.resolve(m[1]!) as Promise<Principal | null> | Principal | null);
  }

  private readBody(req: HttpRequest): { ok: true; value: unknown } | { ok: false; res: HttpResponse } {
    const limit = this.options.limits.bodyBytes;
    const tooLarge = (applied = limit): { ok: false; res: HttpResponse } => ({
      ok: false,
      res: fail('payload_too_large', `The request body is larger than ${applied} bytes.`),
    });
    if (req.bodyError === 'payload_too_large') {
      // A host body parser's lower limit refused it: name that one.
      const applied = req.bodyLimitApplied;
      return tooLarge(applied !== undefined && Number.isFinite(applied) && applied > 0 && applied < limit ? applied : limit);
    }
    const declared = Number(header(req, 'content-length'));
    if (Number.isFinite(declared) && declared > limit) return tooLarge();
    // Compressed bodies are not taken: inflating them is a way around the body limit, and the API never needs them.
    const encoding = header(req, 'content-encoding');
    if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity' && encoding.trim() !== '') {
      return { ok: false, res: fail('unsupported_media_type', 'Compressed request bodies are not accepted (send it without Content-Encoding).') };
    }
    const type = header(req, 'content-type');
    if (!type || !JSON_TYPE.test(type.trim())) {
      return { ok: false, res: fail('unsupported_media_type', 'The request body must be JSON (Content-Type: application/json).') };
    }
    if (req.bodyError === 'invalid_json') return { ok: false, res: fail('invalid_json', 'The request body is not valid JSON.') };
    if (req.body === undefined) {
      if (req.parsedBody !== undefined) return { ok: true, value: req.parsedBody };
      return { ok: false, res: fail('invalid_json', 'The request body is not valid JSON.') };
    }
    const size = typeof req.body === 'string' ? Buffer.byteLength(req.body) : req.body.byteLength;
    if (size > limit) return tooLarge();
    let text: string;
    try {
      text = typeof req.body === 'string' ? req.body : utf8.decode(req.body);
      return { ok: true, value: JSON.parse(text) };
    } catch {
      return { ok: false, res: fail('invalid_json', 'The request body is not valid JSON.') };
    }
  }

  /** The body of a create (or quote), checked down to the model-independent fields. */
  private createBody(req: HttpRequest): { value: CreateRequest } | { res: HttpResponse } {
    const body = this.readBody(req);
    if (!body.ok) return { res: body.res };
    const value = body.value;
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      return { res: fail('invalid_request', 'The request body must be a JSON object.') };
    }
    // The common body, parsed from the raw bytes here: exactly what the schema below would make of it, without zod.
    if (req.body !== undefined) {
      const simple = simpleCreateBody(value as Record<string, unknown>);
      if (simple) return { value: simple };
    }
    const parsed = createRequestSchema.safeParse(value);
    if (!parsed.success) {
      const details = parsed.error.issues.slice(0, 50).map((i): ErrorDetail => {
        const top = i.path.length > 0 ? String(i.path[0]) : 'body';
        const missing = i.code === 'invalid_type' && (value as Record<string, unknown>)[top] === undefined;
        if (missing) return { field: top, code: 'required', message: `${top} is required` };
        if (top === 'webhook') {
          const field = i.path.length > 1 ? `webhook.${String(i.path[1])}` : 'webhook';
          return {
            field,
            code: 'invalid_value',
            message:
              field === 'webhook.events'
                ? 'webhook.events must be a non-empty list of generation.processing, generation.progress, generation.completed, generation.failed'
                : 'webhook must be an object { url, events? } with a URL of at most 2048 characters',
          };
        }
        if (top === 'metadata') {
          const field = i.path.length > 1 ? `metadata.${String(i.path[1])}` : 'metadata';
          return {
            field,
            code: 'invalid_value',
            message: `metadata must be an object of at most ${METADATA_LIMITS.entries} string values, keys of 1 to ${METADATA_LIMITS.keyLength} characters, values of at most ${METADATA_LIMITS.valueLength}`,
          };
        }
        return {
          field: top,
          code: 'invalid_type',
          message: top === 'settings' ? 'settings must be an object' : `${top} must be a non-empty string of at most 200 characters`,
        };
      });
      return { res: fail('invalid_request', 'The request is not valid.', details) };
    }
    const { modelId, settings, metadata, webhook } = parsed.data;
    return {
      value: {
        modelId,
        ...(settings !== undefined ? { settings } : {}),
        ...(metadata !== undefined ? { metadata } : {}),
        ...(webhook !== undefined ? { webhook } : {}),
      },
    };
  }

  private async create(req: HttpRequest, userId: string): Promise<HttpResponse> {
    const body = this.createBody(req);
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
    // `{ generationId }` is all a create answers: the same text as JSON.stringify(created).
    return json(201, `{"generationId":${JSON.stringify(created.generationId)}}`);
  }

  private async file(req: HttpRequest, rawKey: string, query: string): Promise<HttpResponse> {
    const key = decodeSegment(rawKey);
    const params = new URLSearchParams(query);
    if (key === null || !this.signer.verify(key, params.get('exp'), params.get('sig'))) {
      return fail('forbidden', 'This file link is invalid or has expired.');
    }
    const res = await fileResponse(this.blobs, key, Number(params.get('exp')), header(req, 'range'), Date.now());
    return res ?? fail('not_found', 'File not found.');
  }

  private playgroundAssets: Promise<PlaygroundAssets | null> | undefined;

  /** The playground page (`playground: true`): static assets of @genservice/playground, loaded on first use. */
  private async playground(asset: string, query: string): Promise<HttpResponse> {
    if (!this.options.playground) return fail('not_found', 'No such endpoint.');
    // A specifier in a variable: the package is optional, so neither the compiler nor a bundler may require it.
    const specifier = '@genservice/playground';
    this.playgroundAssets ??= import(specifier).then(
      (m: Partial<PlaygroundAssets>) => {
        if (typeof m.readPlaygroundAsset === 'function') return m as PlaygroundAssets;
        this.logger.error({}, '@genservice/playground is installed but has no readPlaygroundAsset: the page is not served');
        return null;
      },
      (err: unknown) => {
        this.logger.error({ err: String(err) }, 'playground: true needs the @genservice/playground package installed');
        return null;
      },
    );
    const assets = await this.playgroundAssets;
    if (!assets) return fail('not_found', 'The playground is not installed.');
    // The page lives at `<mount>/playground/`: its files and the API (`../v1/...`) are addressed relative to it, so it
    // works under any mount point and behind any proxy prefix. A relative Location keeps both (RFC 9110 10.2.2).
    if (asset === '') {
      return { status: 308, headers: { location: `playground/${query ? `?${query}` : ''}`, 'content-length': '0', 'cache-control': 'no-cache' }, body: '' };
    }
    const file = assets.readPlaygroundAsset(asset);
    if (!file) return fail('not_found', 'No such file.');
    return {
      status: 200,
      headers: {
        'content-type': file.contentType,
        'content-length': String(file.body.byteLength),
        'cache-control': 'no-cache',
        'x-content-type-options': 'nosniff',
        'referrer-policy': 'no-referrer',
        // Scripts and styles only from the page's own files; results may be on the API's public URL; the API is
        // called on the same origin (or the publicUrl's).
        'content-security-policy': [
          "default-src 'self'",
          "script-src 'self'",
          "style-src 'self'",
          "img-src 'self' data: blob: http: https:",
          "media-src 'self' blob: http: https:",
          `connect-src 'self'${this.options.publicUrl ? ` ${new URL(this.options.publicUrl).origin}` : ''} http: https:`,
          "object-src 'none'",
          "base-uri 'none'",
          "frame-ancestors 'self'",
          "form-action 'self'",
        ].join('; '),
      },
      body: file.body,
    };
  }

  private openapi(): HttpResponse {
    this.openApiJson ??= JSON.stringify(buildOpenApiDocument(this.registry, this.options));
    return json(200, this.openApiJson, { 'cache-control': 'public, max-age=60' });
  }
}
