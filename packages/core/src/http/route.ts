import type { z } from 'zod';
import type { ModelRegistry } from '../domain/registry.js';
import type { Json } from '../openapi/common.js';
import type { OpenAi } from '../openai/openai.js';
import type { Accounts } from '../use-cases/accounts.js';
import type { Batches } from '../use-cases/batches.js';
import type { Generations } from '../use-cases/generations.js';
import type { Operations, QueueHealth } from '../use-cases/operations.js';
import type { Uploads } from '../use-cases/uploads.js';
import type { Views } from '../use-cases/views.js';
import type { WebhookEndpoints } from '../use-cases/webhook-endpoints.js';
import type { KeyScope, Principal } from '../ports/api-keys.js';
import type { LiveStatus } from '../push/live-status.js';
import type { Webhooks } from '../push/webhooks.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import type { FilesRoute } from './files-route.js';
import type { HealthRoute } from './health.js';
import type { PlaygroundRoute } from './playground.js';
import type { RateLimitClass } from './rate-limits.js';
import type { HttpRequest, HttpResponse } from './types.js';

/**
 * One entry of the route table (`route-table/`): everything about one `METHOD /path`, declared once. The dispatcher
 * (`routes.ts`), the scope check and rate-limit class (`handler.ts`), `SERVED_ROUTES` and the OpenAPI document
 * (`openapi/openapi.ts`) are all read from these entries.
 */

export type { Json };

/** A route's answer, or a promise of it. A handler may also throw: a `Refusal` is its answer, a DomainError its error's. */
export type Answer = HttpResponse | Promise<HttpResponse>;

/** The rate-limit class of a route: fixed, or read from the request (a long-poll counts as a stream). */
export type RateRule = RateLimitClass | ((req: HttpRequest) => RateLimitClass);

/** What the OpenAPI document is made from besides the table: the models (a create's body) and the options. */
export interface DocContext {
  registry: ModelRegistry;
  options: ResolvedServiceOptions;
}

/** A `{name}` segment of a path: its OpenAPI parameter, and the 404 a segment that does not decode is answered. */
export interface PathParam {
  doc: Json;
  notFound: string;
}

/** A query parameter: its OpenAPI parameter, and how its value is read (a throw is the 400). */
export interface QueryParam<T> {
  doc: Json;
  parse(value: string): T;
}

/** A route's query string, read: its documented parameters and the reading itself. */
export interface QuerySpec<T> {
  params: readonly QueryParam<unknown>[];
  read(query: string): T;
}

/** A route's request body: its JSON Schema in the document (none: not documented), and the body read and checked. */
export interface BodySpec<T> {
  doc?(ctx: DocContext): Json;
  /** The whole `content` map of a body that is not JSON (an upload's raw bytes); `doc` is then not read. */
  content?(ctx: DocContext): Json;
  /** The checked body; throws a `Refusal` (400, 413, 415) otherwise. */
  read(req: HttpRequest, bodyBytes: number): T;
}

/** One documented answer of a status: its description, and its JSON schema (zod or JSON Schema) or content. */
export interface AnswerDoc {
  description: string;
  schema?: z.ZodType | Json;
  headers?: Json;
  /** The whole `content` map, when the answer is not JSON. */
  content?: Json;
}

/** The document's words about an operation (its parameters, body and answers are read from the entry itself). */
export interface OperationDoc {
  operationId: string;
  summary: string;
  description: string;
  tag: string;
}

/** What every route's handler is given about its request. */
export interface Call<B = unknown, Q = unknown> {
  readonly req: HttpRequest;
  /** The query string without its `?` ('' for none), as sent. */
  readonly rawQuery: string;
  /** A `{name}` segment of the path, percent-decoded; a segment that does not decode throws its 404. */
  param(name: string): string;
  /** A `{name}` segment as it came. */
  rawParam(name: string): string;
  /** The query, read with the route's `query` spec (a bad parameter throws its 400). */
  query(): Q;
  /** The body, read with the route's `body` spec (a bad one throws its 400, 413 or 415). */
  body(): B;
  /** The `Idempotency-Key` header: undefined without one; a malformed one throws its 400. */
  idempotencyKey(): string | undefined;
}

export interface UserCall<B = unknown, Q = unknown> extends Call<B, Q> {
  readonly principal: Principal;
  readonly userId: string;
}

export interface AdminCall<B = unknown, Q = unknown> extends Call<B, Q> {
  /** Who the admin key stands for (the audit log's actor). */
  readonly actor: string;
}

/**
 * What a handler calls: the use cases (the very objects `GenerationService` calls for an embedder) and the pages of
 * the HTTP layer itself. Built once, in the composition root (`service.ts`).
 */
export interface RouteServices {
  readonly generations: Generations;
  readonly batches: Batches;
  readonly accounts: Accounts;
  /** The operator console's reads (admin routes). */
  readonly operations: Operations;
  readonly queueHealth: QueueHealth;
  readonly uploads: Uploads;
  readonly live: LiveStatus;
  readonly webhooks: Webhooks;
  /** Registered webhook endpoints (`/v1/webhook-endpoints`). */
  readonly webhookEndpoints: WebhookEndpoints;
  readonly views: Views;
  /** The OpenAI-compatible surface's use cases (its entries are served only with `options.openai`). */
  readonly openai: OpenAi;
  readonly files: FilesRoute;
  readonly health: HealthRoute;
  readonly playground: PlaygroundRoute;
  /** GET /v1/openapi.json (the document is made from this table, so only its shape is named here). */
  readonly openapi: { answer(): HttpResponse };
  readonly options: ResolvedServiceOptions;
}

/** The injection token of the `RouteServices` object. */
export const ROUTE_SERVICES = Symbol('RouteServices');

interface RouteBase<B, Q> {
  /** A short name (what `matchRoute` answers, for tests and logs). */
  name: string;
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** Below the mount point; `{name}` is one path segment. A trailing slash is accepted unless `exact`. */
  path: string;
  exact?: true;
  /** A pattern of its own instead of the path's (its groups are the path's params, in order). */
  pattern?: RegExp;
  /** Each `{name}` of a documented path. */
  params?: Readonly<Record<string, PathParam>>;
  query?: QuerySpec<Q>;
  /** Documented header parameters, in order; a function of the options where they say a limit. */
  headers?: ReadonlyArray<Json | ((options: ResolvedServiceOptions) => Json)>;
  body?: BodySpec<B>;
  /** The answers of success (and any error described in words of its own), by status. */
  answers?: Readonly<Record<number, AnswerDoc>>;
  /** The error statuses it answers beside the ones every authenticated route does (`COMMON`). */
  errors?: readonly number[];
  /** In the OpenAPI document when given (every `/v1/` route has one). */
  doc?: OperationDoc;
  /**
   * The shape of every error this route answers (its own, its body's and query's refusals, 401, 403, 429, 404 and 405
   * of its path): `native` (the contract's `{error: {code, message, details?}}`, the default) or `openai` (OpenAI's
   * `{error: {message, type, param, code}}`, same statuses). Rendered in one place, the handler's last step.
   */
  errorShape?: 'native' | 'openai';
  /**
   * Served only when this says so (an optional surface): otherwise its path answers exactly as a path that is no
   * route (404). Every entry of one path must say the same.
   */
  servedWhen?: (options: ResolvedServiceOptions) => boolean;
}

/** A route for a user's API key: it needs `scope`, and counts against the `rate` class. */
export interface UserRoute<B = unknown, Q = unknown> extends RouteBase<B, Q> {
  auth: 'user';
  scope: KeyScope;
  rate: RateRule;
  handle(call: UserCall<B, Q>, s: RouteServices): Answer;
}

/** An admin route: 404 without the `admin` option, 401 for anything but an admin key. */
export interface AdminRoute<B = unknown, Q = unknown> extends RouteBase<B, Q> {
  auth: 'admin';
  handle(call: AdminCall<B, Q>, s: RouteServices): Answer;
}

/** A route anyone may call (files behind signed links, this document, health, the playground). */
export interface OpenRoute<B = unknown, Q = unknown> extends RouteBase<B, Q> {
  auth: 'none';
  handle(call: Call<B, Q>, s: RouteServices): Answer;
}

/** Any entry, whatever its body and query types. */
export type RouteEntry = UserRoute<any, any> | AdminRoute<any, any> | OpenRoute<any, any>;

/** Declares one entry; only there so that the body's and query's types reach the handler. */
export function route<B = never, Q = never>(entry: UserRoute<B, Q> | AdminRoute<B, Q> | OpenRoute<B, Q>): RouteEntry {
  return entry;
}

/** The `{name}` segments of a path, in order. */
export function pathParamNames(path: string): string[] {
  return [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
}
