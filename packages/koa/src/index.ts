/**
 * Koa 3 adapter: `app.use(genserviceMiddleware(service, { prefix: '/api' }))` answers `<prefix>/v1` and
 * `<prefix>/playground` and passes every other request on.
 *
 * Mount it before any body parser: it then reads the raw body itself, so invalid JSON, size limits and content types
 * get the same answers as on every other framework. Mounted after one, valid bodies still work (it uses the parser's
 * raw text or parsed value); give @koa/bodyparser `onError: onBodyParserError({ prefix })` so that a body the parser
 * rejects reaches genservice on its own paths (the error is rethrown for every other path).
 *
 * @module @genservice/koa
 */
import type { Context, Middleware, Next } from 'koa';
import type { GenerationService } from '@genservice/core';
import type { HostBody, HttpResponse } from '@genservice/core/adapter';
import { DEFAULT_LIMITS } from '@genservice/core';
import { bodyLimitsOf, handleNodeRequest, isApiPath, needsNodeWrite, nodeBody, writeNodeResponse } from '@genservice/core/adapter';

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

/** Where `onBodyParserError` leaves a rejected body's error for the middleware (a global symbol: one per realm). */
const PARSER_ERROR = Symbol.for('@genservice/koa:bodyParserError');

/** The path below `prefix` (ctx.url: still percent-encoded, query included) when it is one of the API's, else null. */
function apiPathOf(url: string, prefix: string, service?: GenerationService): string | null {
  const q = url.indexOf('?');
  const pathname = q === -1 ? url : url.slice(0, q);
  if (!pathname.startsWith(prefix) || !isApiPath(pathname.slice(prefix.length), service)) return null;
  return url.slice(prefix.length);
}

/** The generation API as Koa middleware: `app.use(genserviceMiddleware(service, { prefix: '/api' }))`. */
export function genserviceMiddleware(service: GenerationService, options: GenserviceMiddlewareOptions = {}): Middleware {
  if (!service || typeof service.handle !== 'function') throw new TypeError('genserviceMiddleware: the first argument must be a GenerationService');
  const prefix = normalizePrefix(options.prefix);
  const limits = bodyLimitsOf(service, options.bodyLimit ?? service.bodyLimit ?? DEFAULT_LIMITS.bodyBytes);
  return async function genservice(ctx: Context, next: Next): Promise<void> {
    let path = apiPathOf(ctx.url, prefix, service);
    // What a body parser that ran first made of the body (@koa/bodyparser keeps the text it parsed), or its error.
    const state = ctx.state as Record<symbol, unknown>;
    const parsed = ctx.request as { rawBody?: unknown; body?: unknown };
    let hostBody: HostBody =
      PARSER_ERROR in state ? { error: state[PARSER_ERROR] } : { text: typeof parsed.rawBody === 'string' ? parsed.rawBody : undefined, value: parsed.body };
    if (path === null) {
      await next();
      // Nothing of the host's answered a path under a (non-root) prefix: genservice's JSON 404, as on every adapter.
      const under = ctx.url.length === prefix.length || ctx.url.startsWith(`${prefix}/`) || ctx.url.startsWith(`${prefix}?`);
      if (prefix === '' || ctx.status !== 404 || ctx.body != null || ctx.respond === false || !under) return;
      path = ctx.url.slice(prefix.length);
      hostBody = { raw: Buffer.alloc(0) };
    }
    // koa-mount strips its own prefix from ctx.url and records it here.
    const mounted = (ctx as { mountPath?: unknown }).mountPath;
    const mountPath = typeof mounted === 'string' ? mounted.replace(/\/+$/, '') : '';
    const out = await handleNodeRequest(service, ctx.req, {
      limits,
      path,
      prefix: `${mountPath}${prefix}`,
      origin: () => `${ctx.protocol}://${ctx.host}`,
      headers: ctx.headers,
      remoteAddress: ctx.ip,
      hostBody,
    });
    send(ctx, out);
  };
}

/** For `@koa/bodyparser`'s `onError`: a body it rejects on an API path goes to genservice; elsewhere the error is rethrown. */
export function onBodyParserError(options: { prefix?: string; service?: GenerationService } = {}): (err: Error, ctx: Context) => void {
  const prefix = normalizePrefix(options.prefix);
  return (err, ctx) => {
    if (apiPathOf(ctx.url, prefix, options.service) === null) throw err;
    (ctx.state as Record<symbol, unknown>)[PARSER_ERROR] = err;
  };
}

function normalizePrefix(prefix: string | undefined): string {
  if (!prefix || prefix === '/') return '';
  return (prefix.startsWith('/') ? prefix : `/${prefix}`).replace(/\/+$/, '');
}

function send(ctx: Context, out: HttpResponse): void {
  ctx.status = out.status;
  // A live stream, or a HEAD that must keep the GET's Content-Length: written as core made it, Koa stands aside.
  if (needsNodeWrite(out, ctx.method)) return void ((ctx.respond = false), writeNodeResponse(ctx.res, out));
  ctx.set(out.headers);
  // Koa keeps a Content-Type that is already set, so core's header wins over Koa's guess from the body.
  ctx.body = nodeBody(out);
}
