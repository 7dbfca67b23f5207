import { DomainError, UnavailableError, type ErrorCode, type ErrorDetail } from '../errors.js';
import type { FileUrlSigner } from '../files.js';
import type { ApiKeyResolver } from '../ports/api-keys.js';
import type { BlobStore } from '../ports/blob.js';
import type { Logger } from '../ports/logger.js';
import type { ModelRegistry } from '../registry.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import type { GenerationServiceImpl } from '../service.js';
import { buildOpenApiDocument } from './openapi.js';
import { createRequestSchema } from './schemas.js';
import { STATUS_OF, errorBody } from './errors.js';
import type { HttpRequest, HttpResponse } from './types.js';

const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' } as const;
const BEARER = /^Bearer +([\x21-\x7e]{1,512})$/i;
const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;.*)?$/i;
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

type Route =
  | { name: 'models' }
  | { name: 'create' }
  | { name: 'get'; id: string }
  | { name: 'cancel'; id: string }
  | { name: 'balance' }
  | { name: 'openapi' }
  | { name: 'file'; key: string };

const ROUTES: Array<{ template: string; pattern: RegExp; methods: Record<string, (m: RegExpExecArray) => Route> }> = [
  { template: '/v1/models', pattern: /^\/v1\/models\/?$/, methods: { GET: () => ({ name: 'models' }) } },
  { template: '/v1/generations', pattern: /^\/v1\/generations\/?$/, methods: { POST: () => ({ name: 'create' }) } },
  { template: '/v1/generations/{id}', pattern: /^\/v1\/generations\/([^/]+)\/?$/, methods: { GET: (m) => ({ name: 'get', id: m[1]! }) } },
  {
    template: '/v1/generations/{id}/cancel',
    pattern: /^\/v1\/generations\/([^/]+)\/cancel\/?$/,
    methods: { POST: (m) => ({ name: 'cancel', id: m[1]! }) },
  },
  { template: '/v1/balance', pattern: /^\/v1\/balance\/?$/, methods: { GET: () => ({ name: 'balance' }) } },
  { template: '/v1/openapi.json', pattern: /^\/v1\/openapi\.json$/, methods: { GET: () => ({ name: 'openapi' }) } },
  { template: '/v1/files/{key}', pattern: /^\/v1\/files\/([^/]+)$/, methods: { GET: (m) => ({ name: 'file', key: m[1]! }) } },
];

/** Every `METHOD /path/{param}` the handler serves; the OpenAPI test checks the document lists exactly these. */
export const SERVED_ROUTES: readonly string[] = ROUTES.flatMap((r) => Object.keys(r.methods).map((m) => `${m} ${r.template}`));

function json(status: number, body: string, extra: Record<string, string> = {}): HttpResponse {
  return { status, headers: { ...JSON_HEADERS, ...extra }, body };
}

function fail(code: ErrorCode, message: string, details?: ErrorDetail[], extra: Record<string, string> = {}): HttpResponse {
  return json(STATUS_OF[code], errorBody(code, message, details), extra);
}

/** Built once: the 401 is the cheapest answer there is, so that bad keys cost the server as little as possible. */
const UNAUTHORIZED: HttpResponse = fail('unauthorized', 'A valid API key is required (Authorization: Bearer <key>).', undefined, {
  'www-authenticate': 'Bearer',
});
Object.freeze(UNAUTHORIZED.headers);

function header(req: HttpRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? (v.length === 1 ? v[0] : undefined) : v;
}

function decodeSegment(s: string): string | null {
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
export class HttpHandler {
  private openApiJson: string | undefined;

  constructor(
    private readonly service: GenerationServiceImpl,
    private readonly registry: ModelRegistry,
    private readonly signer: FileUrlSigner,
    private readonly blobs: BlobStore,
    private readonly apiKeys: ApiKeyResolver,
    private readonly options: ResolvedServiceOptions,
    private readonly logger: Logger,
  ) {}

  async handle(req: HttpRequest): Promise<HttpResponse> {
    // HEAD is answered like GET, without the body (RFC 9110 9.3.2).
    const head = req.method.toUpperCase() === 'HEAD';
    let res: HttpResponse;
    try {
      res = await this.dispatch(head ? { ...req, method: 'GET' } : req);
    } catch (err) {
      res = this.fromError(err);
    }
    return head ? { ...res, body: '' } : res;
  }

  private fromError(err: unknown): HttpResponse {
    if (err instanceof DomainError) {
      const extra: Record<string, string> = err.code === 'unavailable' || err.code === 'rate_limited' ? { 'retry-after': '1' } : {};
      return fail(err.code, err.message, err.details, extra);
    }
    if (err instanceof UnavailableError) {
      this.logger.warn({ err: err.message }, 'a backing service is unavailable');
      return fail('unavailable', 'The service is temporarily unavailable; try again shortly.', undefined, { 'retry-after': '1' });
    }
    this.logger.error({ err: err instanceof Error ? (err.stack ?? err.message) : String(err) }, 'internal error');
    return fail('internal', 'Internal server error.');
  }

  private async dispatch(req: HttpRequest): Promise<HttpResponse> {
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

    if (route.name === 'file') return this.file(route.key, query);
    if (route.name === 'openapi') return this.openapi();

    const userId = await this.authenticate(req);
    if (!userId) return { ...UNAUTHORIZED };

    switch (route.name) {
      case 'models':
        return json(200, this.registry.listJson);
      case 'balance':
        return json(200, JSON.stringify({ balance: await this.service.balance(userId) }));
      case 'get': {
        const id = decodeSegment(route.id);
        if (id === null) return fail('not_found', 'Generation not found.');
        return json(200, JSON.stringify(await this.service.get(userId, id, { baseUrl: req.baseUrl })));
      }
      case 'cancel': {
        const id = decodeSegment(route.id);
        if (id === null) return fail('not_found', 'Generation not found.');
        const { outcome, generation } = await this.service.cancel(userId, id, { baseUrl: req.baseUrl });
        return json(200, JSON.stringify({ ...generation, cancelled: outcome === 'cancelled' }));
      }
      case 'create':
        return this.create(req, userId);
    }
  }

  private async authenticate(req: HttpRequest): Promise<string | null> {
    const auth = header(req, 'authorization');
    if (!auth) return null;
    const m = BEARER.exec(auth.trim());
    if (!m) return null;
    const principal = await this.apiKeys.resolve(m[1]!);
    return principal?.userId ?? null;
  }

  private readBody(req: HttpRequest): { ok: true; value: unknown } | { ok: false; res: HttpResponse } {
    const limit = this.options.limits.bodyBytes;
    const tooLarge = (): { ok: false; res: HttpResponse } => ({
      ok: false,
      res: fail('payload_too_large', `The request body is larger than ${limit} bytes.`),
    });
    if (req.bodyError === 'payload_too_large') return tooLarge();
    const declared = Number(header(req, 'content-length'));
    if (Number.isFinite(declared) && declared > limit) return tooLarge();
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

  private async create(req: HttpRequest, userId: string): Promise<HttpResponse> {
    const body = this.readBody(req);
    if (!body.ok) return body.res;
    const value = body.value;
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      return fail('invalid_request', 'The request body must be a JSON object.');
    }
    const parsed = createRequestSchema.safeParse(value);
    if (!parsed.success) {
      const details = parsed.error.issues.map((i): ErrorDetail => {
        const field = i.path.length > 0 ? String(i.path[0]) : 'body';
        const missing = i.code === 'invalid_type' && (value as Record<string, unknown>)[field] === undefined;
        return {
          field,
          code: missing ? 'required' : 'invalid_type',
          message: missing ? `${field} is required` : field === 'settings' ? 'settings must be an object' : `${field} must be a non-empty string of at most 200 characters`,
        };
      });
      return fail('invalid_request', 'The request is not valid.', details);
    }
    const { modelId, settings } = parsed.data;

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
    const created = await this.service.create(userId, { modelId, settings }, { idempotencyKey });
    return json(201, JSON.stringify(created));
  }

  private async file(rawKey: string, query: string): Promise<HttpResponse> {
    const key = decodeSegment(rawKey);
    const params = new URLSearchParams(query);
    if (key === null || !this.signer.verify(key, params.get('exp'), params.get('sig'))) {
      return fail('forbidden', 'This file link is invalid or has expired.');
    }
    const blob = await this.blobs.get(key);
    if (!blob) return fail('not_found', 'File not found.');
    const exp = Number(params.get('exp'));
    return {
      status: 200,
      headers: {
        'content-type': blob.mimeType,
        'content-length': String(blob.bytes.byteLength),
        'cache-control': `private, max-age=${Math.max(0, Math.floor(exp - Date.now() / 1000))}`,
        'x-content-type-options': 'nosniff',
        // A provider's file must never run as a page of the host's origin.
        'content-security-policy': "default-src 'none'; sandbox",
      },
      body: blob.bytes,
    };
  }

  private openapi(): HttpResponse {
    this.openApiJson ??= JSON.stringify(buildOpenApiDocument(this.registry, this.options));
    return json(200, this.openApiJson, { 'cache-control': 'public, max-age=60' });
  }
}
