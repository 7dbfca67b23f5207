import { inject, injectable } from 'tsyringe';
import { DomainError, UnavailableError } from '../domain/errors.js';
import { asError, childLogger } from '../logger.js';
import type { ApiKeyResolver, Principal } from '../ports/api-keys.js';
import type { Logger } from '../ports/logger.js';
import { ModelRegistry } from '../domain/registry.js';
import { contextRead, type RequestContext, requestIdOf, withRequestContext } from '../request-context.js';
import { contextOfHeaders, Telemetry } from '../telemetry.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import type { GenerationService } from '../service-types.js';
import { isThenable } from '../domain/thenable.js';
import { TOKENS } from '../tokens.js';
import { AccountRoutes, type AdminRoute, scopeRefusal } from './accounts-routes.js';
import { headOf, isPreflight, preflight, withCors } from './cors.js';
import { FilesRoute } from './files-route.js';
import { HealthRoute } from './health.js';
import { GenerationRoutes, type UserRoute } from './generation-routes.js';
import { buildOpenApiDocument } from '../openapi/openapi.js';
import { PlaygroundRoute } from './playground.js';
import { RateLimits, type RateLimitClass, type RateLimitVerdict } from './rate-limits.js';
import { readBody } from './request-body.js';
import { UNAUTHORIZED, bearerKey, decodeSegment, fail, header, json } from './respond.js';
import { matchRoute } from './routes.js';
import type { HttpRequest, HttpResponse } from './types.js';

/** A path's id goes into the log context only when it looks like one (a hostile path stays out of the logs). */
const GENERATION_ID = /^[A-Za-z0-9_-]{1,64}$/;

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
    @inject(GenerationRoutes) private readonly routes: GenerationRoutes,
    @inject(FilesRoute) private readonly files: FilesRoute,
    @inject(PlaygroundRoute) private readonly playground: PlaygroundRoute,
    @inject(ModelRegistry) private readonly registry: ModelRegistry,
    @inject(TOKENS.ApiKeys) private readonly apiKeys: ApiKeyResolver,
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(RateLimits) private readonly limits: RateLimits,
    @inject(AccountRoutes) private readonly accountRoutes: AccountRoutes,
    @inject(HealthRoute) private readonly health: HealthRoute,
    @inject(Telemetry) private readonly telemetry: Telemetry,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'http' });
  }

  /**
   * The answer to a request of `service`'s API: its generation routes call `service`'s own methods. Never rejects.
   * Every answer carries the request's id (the client's `X-Request-Id` when acceptable, else a new one), which every
   * log line written while it is handled carries too.
   */
  handle(req: HttpRequest, service: GenerationService): Promise<HttpResponse> {
    const ctx: RequestContext = { requestId: requestIdOf(req.headers['x-request-id']) };
    const traceContext = contextOfHeaders(req.headers);
    if (traceContext !== undefined) ctx.traceContext = traceContext;
    const answer = withRequestContext(ctx, () => this.answer(req, ctx, service), ctx.traceContext !== undefined);
    // One step after the route's own promise: its answer or its error's, with the request's id and metric.
    if (answer instanceof Promise) return answer.then((res) => this.finish(ctx, res), (err: unknown) => this.finish(ctx, this.fromError(err)));
    return Promise.resolve(this.finish(ctx, answer));
  }

  private finish(ctx: RequestContext, res: HttpResponse): HttpResponse {
    this.telemetry.httpRequest(ctx.route ?? 'unmatched', res.status);
    // Copied with Object.assign, then the id set: a spread with a property after it takes V8's slow path (bench/notes.md).
    const headers: Record<string, string> = Object.assign({}, res.headers);
    headers['x-request-id'] = ctx.requestId!;
    return { status: res.status, headers, body: res.body };
  }

  /** The answer, or a promise of it (which may reject: `handle` turns that into its error answer). Never throws. */
  private answer(req: HttpRequest, ctx: RequestContext, service: GenerationService): HttpResponse | Promise<HttpResponse> {
    try {
      // Without CORS and HEAD there is nothing to add to dispatch's answer.
      if (this.options.cors === undefined && !(req.method.length === 4 && req.method.toUpperCase() === 'HEAD')) return this.dispatch(req, ctx, service);
      return this.handleWithCorsOrHead(req, ctx, service);
    } catch (err) {
      return this.fromError(err);
    }
  }

  private async handleWithCorsOrHead(req: HttpRequest, ctx: RequestContext, service: GenerationService): Promise<HttpResponse> {
    // HEAD is answered like GET, without the body (RFC 9110 9.3.2).
    const method = req.method.toUpperCase();
    const head = method === 'HEAD';
    const cors = this.options.cors;
    const origin = cors ? header(req, 'origin') : undefined;
    let res: HttpResponse;
    if (cors && origin !== undefined && isPreflight(req, method)) {
      try {
        res = preflight(cors, req, origin);
      } catch (err) {
        res = this.fromError(err);
      }
    } else {
      try {
        res = await this.dispatch(head ? { ...req, method: 'GET' } : req, ctx, service);
      } catch (err) {
        res = this.fromError(err);
      }
    }
    if (cors && origin !== undefined) res = withCors(cors, res, origin);
    return head ? headOf(res) : res;
  }

  private fromError(err: unknown): HttpResponse {
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
  private dispatch(req: HttpRequest, ctx: RequestContext, service: GenerationService): HttpResponse | Promise<HttpResponse> {
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
    const route = matchRoute(req.method.toUpperCase(), path);
    if ('status' in route) return route;
    ctx.route = route.template;
    // Only a log line reads the generation id.
    if ('id' in route && contextRead() && GENERATION_ID.test(route.id)) ctx.generationId = route.id;

    if (route.name === 'file') return this.files.serve(req, route.key, query);
    if (route.name === 'openapi') return this.openapi();
    if (route.name === 'healthz') return this.health.live();
    if (route.name === 'readyz') return this.health.ready();
    if (route.name === 'playground') return this.playground.serve(route.asset, query);
    if (route.name === 'admin') return this.admin(req, route, query);

    const resolving = this.authenticate(header(req, 'authorization'));
    // The resolver may answer at once (the port allows it): only a thenable waits, here and nowhere else.
    if (isThenable(resolving)) return Promise.resolve(resolving).then((principal) => this.asUser(req, route, principal, query, service));
    return this.asUser(req, route, resolving, query, service);
  }

  /** A user's route, once the key was looked at: 401 for no user, scopes, rate limits, then the route. */
  private asUser(req: HttpRequest, route: UserRoute, principal: Principal | null, query: string, service: GenerationService): HttpResponse | Promise<HttpResponse> {
    const userId = principal?.userId;
    // An admin key is never a user's, even where a user's store knows the same string.
    if (!userId || (this.accountRoutes.adminEnabled && this.accountRoutes.isAdminKey(header(req, 'authorization')))) {
      // Bad keys are limited by address, after the key was looked at: a valid key is never refused for what other
      // requests from its address (a NAT, an office, a proxy) did.
      return this.limits.badKey(req.remoteAddress ?? 'unknown').then((verdict) => (verdict.allowed === true ? { ...UNAUTHORIZED } : this.limited(verdict)));
    }
    // Keys of a host's own resolver carry no scopes: nothing to check for them.
    if (principal!.scopes !== undefined) {
      const refused = scopeRefusal(principal!, route.name);
      if (refused) return this.fromError(refused);
    }
    const cls: RateLimitClass =
      route.name === 'create' || route.name === 'createBatch' ? 'create' : route.name === 'events' || (route.name === 'get' && header(req, 'prefer') !== undefined) ? 'stream' : 'read';
    if (!this.limits.has(cls)) return this.routes.answer(route, req, principal!, query, service);
    return this.limitedAnswer(cls, userId, req, route, principal!, query, service);
  }

  private async limitedAnswer(cls: RateLimitClass, userId: string, req: HttpRequest, route: UserRoute, principal: Principal, query: string, service: GenerationService): Promise<HttpResponse> {
    const verdict = await this.limits.consume(cls, userId);
    if (verdict.allowed !== true) return this.limited(verdict);
    let res: HttpResponse;
    try {
      res = await this.routes.answer(route, req, principal, query, service);
    } catch (err) {
      res = this.fromError(err);
    }
    return { status: res.status, headers: Object.assign({}, res.headers, verdict.headers), body: res.body };
  }

  /** The admin routes: 404 unless `admin` is configured, 401 for anything but an admin key. */
  private async admin(req: HttpRequest, route: AdminRoute, query: string): Promise<HttpResponse> {
    if (!this.accountRoutes.adminEnabled) return fail('not_found', 'The admin API is not enabled on this service (the admin option).');
    const actor = this.accountRoutes.adminActor(header(req, 'authorization'));
    if (actor === null) {
      // Limited by address like any bad key.
      const verdict = await this.limits.badKey(req.remoteAddress ?? 'unknown');
      return verdict.allowed === true ? { ...UNAUTHORIZED } : this.limited(verdict);
    }
    const decoded = route.op === 'revokeKey' ? decodeSegment(route.keyId) : route.op === 'createUser' || route.op === 'audit' ? '' : decodeSegment(route.userId);
    if (decoded === null) return fail('not_found', 'No such user or key.');
    const target: AdminRoute =
      route.op === 'revokeKey' ? { ...route, keyId: decoded } : route.op === 'createUser' || route.op === 'audit' ? route : { ...route, userId: decoded };
    let body: unknown;
    if (route.op === 'createUser' || route.op === 'credit' || route.op === 'createKey') {
      const read = readBody(req, this.options.limits.bodyBytes);
      if (!read.ok) return read.res;
      body = read.value;
    }
    const answer = await this.accountRoutes.admin(target, actor, () => body, query);
    if (answer.status === 204) return { status: 204, headers: { 'cache-control': 'no-store' }, body: '' };
    return json(answer.status, JSON.stringify(answer.body), { 'cache-control': 'no-store' });
  }

  private limited(verdict: Exclude<RateLimitVerdict, { allowed: true }>): HttpResponse {
    if (verdict.allowed === 'unavailable') {
      return fail('unavailable', 'The rate limiter is unavailable; try again shortly.', undefined, { 'retry-after': '1' });
    }
    return fail('rate_limited', `Too many requests; try again in ${verdict.retryAfterSeconds} s.`, undefined, verdict.headers);
  }

  /** The key's principal: null at once without a (well-formed) key; a host's resolver may answer without a promise. */
  private authenticate(auth: string | undefined): PromiseLike<Principal | null> | Principal | null {
    const key = bearerKey(auth);
    return key === undefined ? null : this.apiKeys.resolve(key);
  }

  private openapi(): HttpResponse {
    this.openApiJson ??= JSON.stringify(buildOpenApiDocument(this.registry, this.options));
    return json(200, this.openApiJson, { 'cache-control': 'public, max-age=60' });
  }
}
