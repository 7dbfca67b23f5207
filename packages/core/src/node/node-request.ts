import { IncomingMessage } from 'node:http';
import { rawBodyKnown, readRequestBody, toRequestBody, type BodyLimits, type RawBody } from './node-body.js';
import type { HttpRequest, HttpResponse } from '../http/types.js';

/**
 * The headers to hand `service.handle`: the request's own, unless it carries more than one Authorization header.
 * Node keeps only the first of those in `headers`; core must see them all to refuse the request, so then the copy
 * has every value in `authorization` (what `headersDistinct.authorization` holds).
 *
 * On a real IncomingMessage this scans `rawHeaders` for the (13-character) name instead of reading
 * `headersDistinct`, which builds an array for every header of every request just to look at one. Anything else
 * (an injected request of a test framework) keeps the `headersDistinct` reading.
 */
export function requestHeaders(req: IncomingMessage, headers: HttpRequest['headers'] = req.headers): HttpRequest['headers'] {
  if (!(req instanceof IncomingMessage)) {
    const auth = (req as { headersDistinct?: Record<string, string[] | undefined> }).headersDistinct?.authorization;
    return auth && auth.length > 1 ? { ...headers, authorization: auth } : headers;
  }
  const raw = req.rawHeaders;
  let found = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 13 && name.toLowerCase() === 'authorization') found++;
  }
  if (found < 2) return headers;
  const all: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 13 && name.toLowerCase() === 'authorization') all.push(raw[i + 1]!);
  }
  return { ...headers, authorization: all };
}

/**
 * What a host's body parser did before the adapter saw the request (Express's `express.json()`, @koa/bodyparser), or
 * the bytes the adapter read itself (Fastify's content-type parser).
 */
export type HostBody =
  /** The bytes the adapter read with `readRawBody` (or that they were too many, or too slow). */
  | { raw: RawBody }
  /** The parser refused the body: its error (body-parser and co-body errors carry `type`, `status`, `limit`, `body`). */
  | { error: unknown }
  /** The parser's result: the text it parsed when it keeps it, and the value it made. */
  | { text?: string | undefined; value?: unknown };

export interface NodeRequestOptions {
  /** Most bytes and ms a body may take (`bodyLimitsOf(service)`). */
  limits: BodyLimits;
  /** The mount point as the client sees it (`/api`): taken off `req.url` for the path, and part of the base URL. */
  prefix?: string;
  /** The path below the mount point, query string included, when the framework already has it. Default: `req.url` without `prefix`. */
  path?: string;
  /** `protocol://host` as the framework sees it (its trust-proxy rules); asked only when core builds a file URL. */
  origin?: () => string;
  /** The client's address as the framework sees it. */
  remoteAddress?: string | undefined;
  /** The headers, when the framework keeps its own object of them. Default: `req.headers`. */
  headers?: HttpRequest['headers'];
  /** What a host body parser did with the body, when one ran. */
  hostBody?: HostBody | undefined;
}

/**
 * The bytes an adapter read itself (`readRawBody`), as its `HostBody`: what the Fastify adapter's content-type parser
 * hands Fastify. A class rather than an object literal: V8 may decide, from one burst in which a literal's objects
 * outlived a young-generation GC, to make every later object of that literal in the old generation ("allocation-site
 * pretenuring"), and there each of these kept its body's buffer until the next full GC: through HTTP a fifth of the
 * bytes the young-generation GC copied per Fastify POST (issue 36). Objects made with `new` are never pretenured.
 */
export class RawHostBody {
  constructor(readonly raw: RawBody) {}
}

/**
 * Core's request for a Node request: method, path below the mount point, headers (every Authorization header), the
 * body read within the service's limits (or what a host's body parser made of it), the base URL and the client's
 * address. What a hand-written adapter hands `service.handle` (the framework adapters call `handleNodeRequest`, which
 * builds the same request).
 */
export function toHttpRequest(req: IncomingMessage, options: NodeRequestOptions): Promise<HttpRequest> {
  const request = nodeRequest(req, options);
  return request instanceof Promise ? request : Promise.resolve(request);
}

/**
 * `service.handle` of the request `toHttpRequest` builds: what every framework adapter calls. A request whose body is
 * already known (none by its headers, or read by the host's parser) goes to core without waiting for anything.
 */
export function handleNodeRequest(service: { handle(request: HttpRequest): Promise<HttpResponse> }, req: IncomingMessage, options: NodeRequestOptions): Promise<HttpResponse> {
  const request = nodeRequest(req, options);
  return request instanceof Promise ? request.then((r) => service.handle(r)) : service.handle(request);
}

/** The request, at once when its body is known, else a promise of it; a throw while reading it becomes a rejection. */
function nodeRequest(req: IncomingMessage, options: NodeRequestOptions): HttpRequest | Promise<HttpRequest> {
  try {
    const request = requestOf(req, options);
    const body = bodyOf(req, options.limits, options.hostBody);
    return body instanceof Promise ? body.then((b) => Object.assign(request, b)) : Object.assign(request, body);
  } catch (err) {
    return Promise.reject(err);
  }
}

/** Everything of core's request but the body. */
function requestOf(req: IncomingMessage, options: NodeRequestOptions): HttpRequest {
  const prefix = options.prefix ?? '';
  const origin = options.origin;
  const request: HttpRequest = {
    method: req.method ?? 'GET',
    path: options.path ?? (req.url ?? '/').slice(prefix.length),
    headers: requestHeaders(req, options.headers ?? req.headers),
  };
  if (origin !== undefined) request.baseUrl = () => `${origin()}${prefix}`;
  if (options.remoteAddress !== undefined) request.remoteAddress = options.remoteAddress;
  return request;
}

type BodyPart = Pick<HttpRequest, 'body' | 'parsedBody' | 'bodyError' | 'bodyLimitApplied'>;

/** The body fields: at once when the body is known (none by the headers, or a host parser's result), else a promise. */
function bodyOf(req: IncomingMessage, limits: BodyLimits, host: HostBody | undefined): BodyPart | Promise<BodyPart> {
  if (host !== undefined && 'raw' in host) return toRequestBody(host.raw);
  const error = host !== undefined && 'error' in host ? ((host.error ?? {}) as ParserError) : undefined;
  if (error !== undefined && (error.type === 'entity.too.large' || error.status === 413)) {
    // The parser stopped part-way: discard the rest so the connection can carry the answer and the next request.
    if (!req.readableEnded) req.resume();
    // The parser's own limit refused it (express.json() defaults to 100 kB): the 413 names that limit.
    return { bodyError: 'payload_too_large', ...(typeof error.limit === 'number' ? { bodyLimitApplied: error.limit } : {}) };
  }
  // No parser, or one that refused a body before reading it (an unsupported charset or encoding): core reads it.
  if (!streamConsumed(req)) {
    const known = rawBodyKnown(req, limits.bytes, req.headers['content-length']);
    return known !== undefined ? toRequestBody(known) : readRequestBody(req, limits, req.headers['content-length']);
  }
  // body-parser and co-body keep the text they could not parse: core parsing it answers as it would without them.
  if (error !== undefined) return typeof error.body === 'string' ? { body: error.body } : { bodyError: 'invalid_json' };
  const parsed = host as { text?: string | undefined; value?: unknown } | undefined;
  if (parsed?.text !== undefined) return { body: parsed.text };
  // body-parser turns an empty JSON body into `{}`; core must see that it was empty.
  if (req.headers['content-length'] === '0') return { body: '' };
  // express.raw() leaves the bytes themselves.
  if (Buffer.isBuffer(parsed?.value)) return { body: parsed.value };
  return { parsedBody: parsed?.value };
}

/** What body-parser (Express) and co-body (Koa) errors carry. */
interface ParserError {
  type?: unknown;
  status?: unknown;
  limit?: unknown;
  body?: unknown;
}

/** A host body parser (or anything else) already read the request stream. */
function streamConsumed(req: IncomingMessage): boolean {
  // `_body` is how body-parser marks a request it parsed.
  return (req as { _body?: unknown })._body === true || req.readableEnded || (req.complete && !req.readable);
}
