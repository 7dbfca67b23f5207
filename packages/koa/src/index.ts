/**
 * Koa 3 adapter for genservice: a middleware that answers the generation API below a prefix and passes every
 * other request on.
 *
 * Mount it before any body parser (`@koa/bodyparser`, `koa-body`): it then reads the raw body itself, so invalid
 * JSON, size limits and content types get the same answers as on every other framework. Mounted after one, valid
 * bodies still work (it uses the parser's raw text or parsed value), but a body the parser rejects would never
 * reach it, since the parser throws first: give @koa/bodyparser `onError: onBodyParserError({ prefix })` so that
 * such a body reaches genservice for its own paths (the error is rethrown for every other path).
 *
 * Only `<prefix>/v1` and the paths below it are answered.
 *
 * @module @genservice/koa
 * @example
 * ```ts
 * import Koa from 'koa';
 * import { bodyParser } from '@koa/bodyparser';
 * import { createGenerationService } from '@genservice/core';
 * import { genserviceMiddleware } from '@genservice/koa';
 *
 * const service = createGenerationService({ providers: [myProvider], publicUrl: 'https://api.example.com/api' });
 * await service.start();
 *
 * const app = new Koa();
 * app.use(genserviceMiddleware(service, { prefix: '/api' })); // before the body parser
 * app.use(bodyParser());
 * app.listen(3000);
 * ```
 */
import type { Context, Middleware, Next } from 'koa';
import type { GenerationService } from '@genservice/core';
import type { HttpRequest, HttpResponse } from '@genservice/core/adapter';
import { DEFAULT_LIMITS } from '@genservice/core';
import {
  bodyLimitsOf,
  bodylessRequestBody,
  isApiPath,
  needsNodeWrite,
  readRequestBody,
  requestHeaders,
  writeNodeResponse,
  type BodyLimits,
} from '@genservice/core/adapter';

export interface GenserviceMiddlewareOptions {
  /**
   * Mount point, e.g. `/api`: the middleware answers `<prefix>/v1/...`. Give it too under @koa/router
   * (`router.all('/api{/*path}', ...)`), which leaves `ctx.path` whole.
   */
  prefix?: string;
  /**
   * Most body bytes read into memory. Default: the service's own limit (`limits.bodyBytes`). Keep it equal to that
   * limit: core answers 413 for anything above its own.
   */
  bodyLimit?: number;
}

type BodyPart = Pick<HttpRequest, 'body' | 'parsedBody' | 'bodyError' | 'bodyLimitApplied'>;

/** Where `onBodyParserError` leaves a rejected body's error for the middleware (a global symbol: one per realm). */
const PARSER_ERROR = Symbol.for('@genservice/koa:bodyParserError');

/** Path of the request below `prefix` when it is one of the API's, else null. */
function underPrefix(url: string, prefix: string): boolean {
  return url.length === prefix.length || url.startsWith(`${prefix}/`) || url.startsWith(`${prefix}?`);
}

function apiPathOf(url: string, prefix: string): string | null {
  const q = url.indexOf('?');
  const pathname = q === -1 ? url : url.slice(0, q);
  if (!pathname.startsWith(prefix) || !isApiPath(pathname.slice(prefix.length))) return null;
  return url.slice(prefix.length);
}

/**
 * The generation API as Koa middleware: `app.use(genserviceMiddleware(service, { prefix: '/api' }))`.
 */
export function genserviceMiddleware(service: GenerationService, options: GenserviceMiddlewareOptions = {}): Middleware {
  if (!service || typeof service.handle !== 'function') {
    throw new TypeError('genserviceMiddleware: the first argument must be a GenerationService');
  }
  const prefix = normalizePrefix(options.prefix);
  const limits = bodyLimitsOf(service, options.bodyLimit ?? service.bodyLimit ?? DEFAULT_LIMITS.bodyBytes);

  return async function genservice(ctx: Context, next: Next): Promise<void> {
    // ctx.url, not ctx.path: the path must reach core exactly as sent (still percent-encoded, query included).
    const path = apiPathOf(ctx.url, prefix);
    if (path === null) {
      await next();
      // Nothing of the host's answered a path under a (non-root) prefix: genservice's JSON 404, as on every adapter.
      if (prefix !== '' && ctx.status === 404 && ctx.body == null && ctx.respond !== false && underPrefix(ctx.url, prefix)) {
        send(ctx, await service.handle({ method: ctx.method, path: ctx.url.slice(prefix.length), headers: ctx.headers }));
      }
      return;
    }
    // koa-mount strips its own prefix from ctx.url and records it here.
    const mounted = (ctx as { mountPath?: unknown }).mountPath;
    const mountPath = typeof mounted === 'string' ? mounted : '';
    const req: HttpRequest = {
      method: ctx.method,
      path,
      // Node keeps only the first of repeated Authorization headers; core must see them all to refuse the request.
      headers: requestHeaders(ctx.req, ctx.headers),
      baseUrl: () => `${ctx.protocol}://${ctx.host}${mountPath.replace(/\/+$/, '')}${prefix}`,
      remoteAddress: ctx.ip,
    };
    // A request without a body (every GET) is not made to wait for a body promise.
    const body = bodyOf(ctx, limits);
    Object.assign(req, body instanceof Promise ? await body : body);
    send(ctx, await service.handle(req));
  };
}

/**
 * For `@koa/bodyparser`'s `onError` option, when the body parser runs before genservice: a body the parser rejects
 * on an API path is handed on to genservice, which answers it as it would without the parser (`400 invalid_json`,
 * `413 payload_too_large`). On every other path the error is rethrown, exactly as without `onError`.
 *
 * @example
 * ```ts
 * app.use(bodyParser({ onError: onBodyParserError({ prefix: '/api' }) }));
 * router.all('/api{/*path}', genserviceMiddleware(service, { prefix: '/api' }));
 * ```
 */
export function onBodyParserError(options: { prefix?: string } = {}): (err: Error, ctx: Context) => void {
  const prefix = normalizePrefix(options.prefix);
  return (err, ctx) => {
    if (apiPathOf(ctx.url, prefix) === null) throw err;
    (ctx.state as Record<symbol, unknown>)[PARSER_ERROR] = err;
  };
}

function normalizePrefix(prefix: string | undefined): string {
  if (!prefix || prefix === '/') return '';
  const p = prefix.startsWith('/') ? prefix : `/${prefix}`;
  return p.replace(/\/+$/, '');
}

function bodyOf(ctx: Context, limits: BodyLimits): BodyPart | Promise<BodyPart> {
  const req = ctx.req;
  const rejected = (ctx.state as Record<symbol, unknown>)[PARSER_ERROR] as
    | { type?: unknown; status?: unknown; body?: unknown; limit?: unknown }
    | undefined;
  if (rejected) {
    if (rejected.type === 'entity.too.large' || rejected.status === 413) {
      // The parser stopped part-way: discard the rest so the connection can carry the answer and the next request.
      if (!req.readableEnded) req.resume();
      // The parser's own limit refused it: the 413 names that limit.
      return { bodyError: 'payload_too_large', ...(typeof rejected.limit === 'number' ? { bodyLimitApplied: rejected.limit } : {}) };
    }
    // co-body keeps the text it could not parse: core parsing it answers as it would without the parser.
    if (typeof rejected.body === 'string') return { body: rejected.body };
    return { bodyError: 'invalid_json' };
  }
  const consumed = req.readableEnded || (req.complete && !req.readable);
  if (!consumed) {
    const length = ctx.get('content-length') || undefined;
    return bodylessRequestBody(req, length) ?? readRequestBody(req, limits, length);
  }
  // A body parser ran first. @koa/bodyparser keeps the text it parsed: core then sees the body as sent.
  const request = ctx.request as { rawBody?: unknown; body?: unknown };
  if (typeof request.rawBody === 'string') return { body: request.rawBody };
  if (ctx.get('content-length') === '0') return { body: '' };
  return { parsedBody: request.body };
}

function send(ctx: Context, out: HttpResponse): void {
  ctx.status = out.status;
  if (needsNodeWrite(out, ctx.method)) {
    // A live stream, or a HEAD that must keep the GET's Content-Length: written as core made it, Koa stands aside.
    ctx.respond = false;
    void writeNodeResponse(ctx.res, out);
    return;
  }
  ctx.set(out.headers);
  const body = out.body as string | Uint8Array;
  // Koa keeps a Content-Type that is already set, so core's header wins over Koa's guess from the body.
  ctx.body = typeof body === 'string' ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}
