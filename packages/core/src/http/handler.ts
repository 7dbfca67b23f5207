import { inject, injectable } from 'tsyringe';
import { DomainError, UnavailableError } from '../domain/errors.js';
import { asError, childLogger } from '../logger.js';
import type { Principal } from '../ports/api-keys.js';
import type { Logger } from '../ports/logger.js';
import { contextRead, type RequestContext, requestIdOf, withRequestContext } from '../request-context.js';
import { contextOfHeaders, Telemetry } from '../telemetry.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { isThenable } from '../domain/thenable.js';
import { TOKENS } from '../tokens.js';
import { Access } from './access.js';
import { RouteCall } from './call.js';
import { headOf, isPreflight, preflight, withCors } from './cors.js';
import type { RateLimitClass } from './rate-limits.js';
import { Refusal, fail, header } from './respond.js';
import { type AdminRoute, type Answer, ROUTE_SERVICES, type RouteServices, type UserRoute } from './route.js';
import { openAiAnswer } from './openai-errors.js';
import { errorShapeOf, matchRoute, type RouteMatch } from './routes.js';
import type { HttpRequest, HttpResponse } from './types.js';

/** A path's id goes into the log context only when it looks like one (a hostile path stays out of the logs). */
const GENERATION_ID = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * The framework-neutral HTTP layer: every status code, header and error body of the API is decided here (or by a
 * route's entry in the route table), and the adapters only translate. Order of checks: route, then authentication
 * (before any body is looked at), then the body, then the domain.
 */
@injectable()
export class HttpHandler {
  private readonly logger: Logger;

  constructor(
    @inject(ROUTE_SERVICES) private readonly services: RouteServices,
    @inject(Access) private readonly access: Access,
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(Telemetry) private readonly telemetry: Telemetry,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'http' });
  }

  /** Largest request body in bytes: adapters stop reading beyond it. */
  get bodyLimit(): number {
    return this.options.limits.bodyBytes;
  }

  /** Whether the OpenAI-compatible surface is served (`options.openai`). */
  get servesOpenAi(): boolean {
    return this.options.openai !== undefined;
  }

  /** Whether the console pages are served (`options.console`). */
  get servesConsole(): boolean {
    return this.options.console;
  }

  /** How long a request body may take to arrive: adapters stop reading after it. */
  get bodyTimeoutMs(): number {
    return this.options.limits.bodyTimeoutMs;
  }

  /**
   * The answer to a request of the API. Never rejects. Every answer carries the request's id (the client's
   * `X-Request-Id` when acceptable, else a new one), which every log line written while it is handled carries too.
   */
  handle(req: HttpRequest): Promise<HttpResponse> {
    const ctx: RequestContext = { requestId: requestIdOf(req.headers['x-request-id']) };
    const traceContext = contextOfHeaders(req.headers);
    if (traceContext !== undefined) ctx.traceContext = traceContext;
    const answer = withRequestContext(ctx, () => this.answer(req, ctx), ctx.traceContext !== undefined);
    // One step after the route's own promise: its answer or its error's, with the request's id and metric.
    if (answer instanceof Promise) return answer.then((res) => this.finish(ctx, res), (err: unknown) => this.finish(ctx, this.fromError(err)));
    return Promise.resolve(this.finish(ctx, answer));
  }

  private finish(ctx: RequestContext, res: HttpResponse): HttpResponse {
    this.telemetry.httpRequest(ctx.route ?? 'unmatched', res.status);
    // Every error of a route of the OpenAI surface, whoever decided it, is rendered in OpenAI's shape here.
    if (ctx.errorShape === 'openai' && res.status >= 400) res = openAiAnswer(res);
    // Copied with Object.assign, then the id set: a spread with a property after it takes V8's slow path (bench/notes.md).
    const headers: Record<string, string> = Object.assign({}, res.headers);
    headers['x-request-id'] = ctx.requestId!;
    return { status: res.status, headers, body: res.body };
  }

  /** The answer, or a promise of it (which may reject: `handle` turns that into its error answer). Never throws. */
  private answer(req: HttpRequest, ctx: RequestContext): Answer {
    try {
      // Without CORS and HEAD there is nothing to add to dispatch's answer.
      if (this.options.cors === undefined && !(req.method.length === 4 && req.method.toUpperCase() === 'HEAD')) return this.dispatch(req, ctx);
      return this.handleWithCorsOrHead(req, ctx);
    } catch (err) {
      return this.fromError(err);
    }
  }

  private async handleWithCorsOrHead(req: HttpRequest, ctx: RequestContext): Promise<HttpResponse> {
    // HEAD is answered like GET, without the body (RFC 9110 9.3.2).
    const method = req.method.toUpperCase();
    const head = method === 'HEAD';
    const cors = this.options.cors;
    const origin = cors ? header(req, 'origin') : undefined;
    let res: HttpResponse;
    if (cors && origin !== undefined && isPreflight(req, method)) {
      try {
        res = preflight(cors, req, origin, this.options);
      } catch (err) {
        res = this.fromError(err);
      }
    } else {
      try {
        res = await this.dispatch(head ? { ...req, method: 'GET' } : req, ctx);
      } catch (err) {
        res = this.fromError(err);
      }
    }
    if (cors && origin !== undefined) res = withCors(cors, res, origin);
    return head ? headOf(res) : res;
  }

  /** The answer of what a route threw: a refusal's own answer, a domain error's, or a 503 / 500 (logged). */
  private fromError(err: unknown): HttpResponse {
    if (err instanceof Refusal) return err.response;
    if (err instanceof DomainError) {
      const extra: Record<string, string> =
        err.code === 'unavailable' || err.code === 'rate_limited' ? { 'retry-after': String(err.retryAfterSeconds ?? 1) } : {};
      return fail(err.code, err.message, err.details, extra);
    }
    if (err instanceof UnavailableError) {
      this.logger.warn({ err }, 'a backing service is unavailable');
      return fail('unavailable', 'The service is temporarily unavailable; try again shortly.', undefined, { 'retry-after': '1' });
    }
    this.logger.error({ err: asError(err) }, 'internal error');
    return fail('internal', 'Internal server error.');
  }

  /**
   * The answer, or a promise of it: not an async function, so a route's own promise is the answer (no step of its own).
   * A throw or a rejection is turned into its error answer by the caller.
   */
  private dispatch(req: HttpRequest, ctx: RequestContext): Answer {
    const q = req.path.indexOf('?');
    const path = q === -1 ? req.path : req.path.slice(0, q);
    const query = q === -1 ? '' : req.path.slice(q + 1);
    // A body that did not arrive in time: whatever the route, the request is over and so is the connection (the rest
    // of the body is never read). Still in the shape of the surface the path belongs to.
    if (req.bodyError === 'timeout') {
      if (this.options.openai !== undefined) ctx.errorShape = errorShapeOf(path, this.options);
      return fail('request_timeout', `The request body did not arrive within ${this.options.limits.bodyTimeoutMs} ms.`, undefined, {
        connection: 'close',
      });
    }
    const match = matchRoute(req.method.toUpperCase(), path, this.options);
    if (!('entry' in match)) {
      if (this.options.openai !== undefined) ctx.errorShape = errorShapeOf(path, this.options);
      return match;
    }
    ctx.route = match.template;
    if (match.entry.errorShape !== undefined) ctx.errorShape = match.entry.errorShape;
    // Only a log line reads the generation id.
    const id = match.id;
    if (typeof id === 'string' && contextRead() && GENERATION_ID.test(id)) ctx.generationId = id;

    const entry = match.entry;
    if (entry.auth === 'none') return entry.handle(new RouteCall(req, match, query, this.options.limits), this.services);
    if (entry.auth === 'admin') return this.asAdmin(req, match, query);
    const resolving = this.access.principal(header(req, 'authorization'));
    // The resolver may answer at once (the port allows it): only a thenable waits, here and nowhere else.
    if (isThenable(resolving)) return Promise.resolve(resolving).then((principal) => this.asUser(req, match, principal, query));
    return this.asUser(req, match, resolving, query);
  }

  /** A user's route, once the key was looked at: 401 for no user, the route's scope, its rate-limit class, then the route. */
  private asUser(req: HttpRequest, match: RouteMatch, principal: Principal | null, query: string): Answer {
    const userId = principal?.userId;
    // An admin key is never a user's, even where a user's store knows the same string.
    if (!userId || (this.access.adminEnabled && this.access.isAdminKey(header(req, 'authorization')))) return this.access.unauthorized(req);
    const entry = match.entry as UserRoute;
    const refused = this.access.scopeRefusal(principal!, entry.scope);
    if (refused) return refused;
    const cls = typeof entry.rate === 'function' ? entry.rate(req) : entry.rate;
    const call = new RouteCall(req, match, query, this.options.limits, principal!);
    if (!this.access.limits.has(cls)) return entry.handle(call, this.services);
    return this.limitedAnswer(cls, userId, entry, call);
  }

  private async limitedAnswer(cls: RateLimitClass, userId: string, entry: UserRoute, call: RouteCall): Promise<HttpResponse> {
    const verdict = await this.access.limits.consume(cls, userId);
    if (verdict.allowed !== true) return this.access.limited(verdict);
    let res: HttpResponse;
    try {
      res = await entry.handle(call, this.services);
    } catch (err) {
      res = this.fromError(err);
    }
    return { status: res.status, headers: Object.assign({}, res.headers, verdict.headers), body: res.body };
  }

  /** An admin route: 404 unless `admin` is configured, 401 (limited by address like any bad key) for anything but an admin key. */
  private asAdmin(req: HttpRequest, match: RouteMatch, query: string): Answer {
    if (!this.access.adminEnabled) return fail('not_found', 'The admin API is not enabled on this service (the admin option).');
    const actor = this.access.adminActor(header(req, 'authorization'));
    if (actor === null) return this.access.unauthorized(req);
    return (match.entry as AdminRoute).handle(new RouteCall(req, match, query, this.options.limits, actor), this.services);
  }
}
