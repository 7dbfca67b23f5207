/**
 * Express 5 adapter for genservice: mounts the generation API on any path of an Express app.
 *
 * `genserviceRouter(service)` returns `[router, hostParserErrors]`, which `app.use()` and `router.use()` accept as
 * one argument. The second element is an error-handling middleware: when a host body parser mounted before it
 * (`express.json()`) rejects a request body, Express skips every ordinary middleware, so only an error handler can
 * still give that request genservice's own `400 invalid_json` / `413 payload_too_large` answer. Errors that are not
 * a body parser's, and requests outside `/v1`, pass through to the host unchanged.
 *
 * Only paths under `<mount>/v1` reach the service; anything else under the mount point falls through to the host.
 *
 * @module @genservice/express
 * @example
 * ```ts
 * import express from 'express';
 * import { createGenerationService } from '@genservice/core';
 * import { genserviceRouter } from '@genservice/express';
 *
 * const service = createGenerationService({ providers: [myProvider], publicUrl: 'https://api.example.com/api' });
 * await service.start();
 *
 * const app = express();
 * app.use(express.json()); // optional: genservice works with or without a host body parser
 * app.use('/api', genserviceRouter(service));
 * app.listen(3000);
 * ```
 */
import express from 'express';
import type { ErrorRequestHandler, NextFunction, Request, RequestHandler, Response, Router } from 'express';
import type { GenerationService } from '@genservice/core';
import type { HttpRequest, HttpResponse } from '@genservice/core/adapter';
import { DEFAULT_LIMITS } from '@genservice/core';
import { bodyLimitsOf, bodylessRequestBody, isApiPath, readRequestBody, requestHeaders, writeNodeResponse, type BodyLimits } from '@genservice/core/adapter';

export interface GenserviceRouterOptions {
  /**
   * Most body bytes read into memory. Default: the service's own limit (`limits.bodyBytes`). Keep it equal to that
   * limit: core answers 413 for anything above its own.
   */
  bodyLimit?: number;
  /**
   * Answer every path under the mount point that genservice does not serve with its JSON `404 not_found` (as the
   * Fastify and Koa adapters do on their own) instead of passing it on to the host. Default `false`: Express cannot
   * tell whether a route of the host's registered later would answer it, so turn this on only when nothing else of
   * yours lives under this mount (never for a root mount).
   */
  notFound?: boolean;
}

/**
 * What `genserviceRouter` returns: the Router, then the middleware that answers requests a host body parser
 * rejected. Pass it whole to `app.use(path, ...)` or `router.use(path, ...)`.
 */
export type GenserviceRouter = [router: Router, hostParserErrors: ErrorRequestHandler];

type BodyPart = Pick<HttpRequest, 'body' | 'parsedBody' | 'bodyError' | 'bodyLimitApplied'>;

/** Error `type`s set by body-parser (behind `express.json()` & co.) that genservice answers itself. */
const BODY_PARSER_ERRORS = new Set(['entity.parse.failed', 'entity.too.large', 'charset.unsupported', 'encoding.unsupported']);

/**
 * The generation API as Express middleware. Mount it with `app.use('/prefix', genserviceRouter(service))`.
 */
export function genserviceRouter(service: GenerationService, options: GenserviceRouterOptions = {}): GenserviceRouter {
  const limits = bodyLimitsOf(service, options.bodyLimit ?? service.bodyLimit ?? DEFAULT_LIMITS.bodyBytes);
  const router = express.Router();

  const forward: RequestHandler = (req, res, next) => {
    if (!isApiPath(req.path)) {
      next();
      return;
    }
    answer(service, req, res, next, () => bodyOf(req, limits));
  };
  router.use(forward);
  if (options.notFound) {
    router.use((req, res, next) => answer(service, req, res, next, async () => ({ body: '' })));
  }

  const hostParserErrors: ErrorRequestHandler = (err: unknown, req, res, next) => {
    const type = (err as { type?: unknown } | null)?.type;
    // A compressed body the host parser failed to inflate: core answers it (415, whatever the parser made of it).
    const encoded = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase() !== 'identity';
    if ((!encoded && (typeof type !== 'string' || !BODY_PARSER_ERRORS.has(type))) || !isApiPath(req.path) || res.headersSent) {
      next(err);
      return;
    }
    answer(service, req, res, next, async () => {
      // charset/encoding errors are raised before the parser reads anything: the raw body is still there.
      if (!streamConsumed(req)) return bodyOf(req, limits);
      if (type === 'entity.too.large') {
        // The host parser's own limit refused it (express.json() defaults to 100 kB): the 413 names that limit.
        const applied = (err as { limit?: unknown }).limit;
        return { bodyError: 'payload_too_large', ...(typeof applied === 'number' ? { bodyLimitApplied: applied } : {}) };
      }
      // body-parser keeps the text it could not parse; core parsing it gives the same answer as without a host
      // parser (a top-level string, rejected by express.json's strict mode, is `invalid_request` for core).
      const text = (err as { body?: unknown }).body;
      if (type === 'entity.parse.failed' && typeof text === 'string') return { body: text };
      return { bodyError: 'invalid_json' };
    });
  };

  return [router, hostParserErrors];
}

function answer(
  service: GenerationService,
  req: Request,
  res: Response,
  next: NextFunction,
  readBody: () => BodyPart | Promise<BodyPart>,
): void {
  const handle = (body: BodyPart): Promise<HttpResponse> => {
    const request: HttpRequest = {
      method: req.method,
      // Inside a mounted router req.url is already relative to the mount point, query string included.
      path: req.url,
      headers: headersOf(req),
      ...body,
      baseUrl: () => `${req.protocol}://${req.host}${req.baseUrl}`,
    };
    const ip = req.ip;
    if (ip !== undefined) request.remoteAddress = ip;
    return service.handle(request);
  };
  // A request without a body (every GET) goes to core at once, not after a body promise.
  let out: Promise<HttpResponse>;
  try {
    const body = readBody();
    out = body instanceof Promise ? body.then(handle) : handle(body);
  } catch (err) {
    out = Promise.reject(err);
  }
  out.then((o) => writeNodeResponse(res, o), next);
}

/** A host body parser (or anything else) already read the request stream. */
function streamConsumed(req: Request): boolean {
  // `_body` is how body-parser 1.x (Express 4 era, still usable with 5) marks a parsed request.
  return (req as { _body?: unknown })._body === true || req.readableEnded || (req.complete && !req.readable);
}

function bodyOf(req: Request, limits: BodyLimits): BodyPart | Promise<BodyPart> {
  if (!streamConsumed(req)) {
    const length = req.headers['content-length'];
    return bodylessRequestBody(req, length) ?? readRequestBody(req, limits, length);
  }
  // body-parser turns an empty JSON body into `{}`; core must see that it was empty.
  if (req.headers['content-length'] === '0') return { body: '' };
  const parsed: unknown = (req as { body?: unknown }).body;
  // express.raw() leaves the bytes themselves.
  if (Buffer.isBuffer(parsed)) return { body: parsed };
  return { parsedBody: parsed };
}

/** Node keeps only the first of repeated Authorization headers; core must see them all to refuse the request. */
function headersOf(req: Request): HttpRequest['headers'] {
  return requestHeaders(req);
}
