/**
 * Express 5 adapter for genservice: `app.use('/api', genserviceRouter(service))` mounts the generation API.
 *
 * It returns `[router, hostParserErrors]` (one argument to `app.use()`): when a host body parser mounted before it
 * (`express.json()`) rejects a body, Express skips every ordinary middleware, so only the error handler can still give
 * genservice's own `400 invalid_json` / `413 payload_too_large`. Other errors, and paths outside `<mount>/v1` and
 * `<mount>/playground`, pass through to the host unchanged.
 *
 * @module @genservice/express
 * @example
 * ```ts
 * const app = express();
 * app.use(express.json()); // optional: genservice works with or without a host body parser
 * app.use('/api', genserviceRouter(service));
 * ```
 */
import express from 'express';
import type { ErrorRequestHandler, NextFunction, Request, Response, Router } from 'express';
import type { GenerationService } from '@genservice/core';
import { DEFAULT_LIMITS } from '@genservice/core';
import { bodyLimitsOf, isApiPath, handleNodeRequest, isCoreAnsweredError, writeNodeResponse, type BodyLimits, type HostBody } from '@genservice/core/adapter';

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

/** The Router, then the middleware that answers requests a host body parser rejected: pass both to `app.use`. */
export type GenserviceRouter = [router: Router, hostParserErrors: ErrorRequestHandler];

/** The generation API as Express middleware. Mount it with `app.use('/prefix', genserviceRouter(service))`. */
export function genserviceRouter(service: GenerationService, options: GenserviceRouterOptions = {}): GenserviceRouter {
  const limits = bodyLimitsOf(service, options.bodyLimit ?? service.bodyLimit ?? DEFAULT_LIMITS.bodyBytes);
  const router = express.Router();
  router.use((req, res, next) => {
    if (isApiPath(req.path, service)) answer(service, limits, req, res, next, { value: req.body });
    else next();
  });
  if (options.notFound) router.use((req, res, next) => answer(service, limits, req, res, next, { raw: Buffer.alloc(0) }));

  const hostParserErrors: ErrorRequestHandler = (err: unknown, req, res, next) => {
    if (!isCoreAnsweredError(err, req.headers) || !isApiPath(req.path, service) || res.headersSent) {
      next(err);
      return;
    }
    answer(service, limits, req, res, next, { error: err });
  };
  return [router, hostParserErrors];
}

function answer(service: GenerationService, limits: BodyLimits, req: Request, res: Response, next: NextFunction, hostBody: HostBody): void {
  handleNodeRequest(service, req, {
    limits,
    // Inside a mounted router req.url is already relative to the mount point, query string included.
    path: req.url,
    prefix: req.baseUrl,
    origin: () => `${req.protocol}://${req.host}`,
    remoteAddress: req.ip,
    hostBody,
  }).then((out) => writeNodeResponse(res, out), next);
}
