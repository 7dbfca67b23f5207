/**
 * Fastify 5 plugin for genservice: mounts the generation API under a prefix.
 *
 * The plugin is encapsulated on purpose (it is not wrapped in `fastify-plugin`): inside its own context it swaps
 * every content-type parser for one that keeps the raw bytes, so core sees the body exactly as sent and answers
 * invalid JSON, size limits and content types the same way as on every other framework. The host's parsers,
 * error handler and routes outside the prefix are untouched.
 *
 * Only `<prefix>/v1` and the paths below it are routed to the service.
 *
 * @module @genservice/fastify
 * @example
 * ```ts
 * import Fastify from 'fastify';
 * import { createGenerationService } from '@genservice/core';
 * import { genserviceFrameworkErrors, genservicePlugin } from '@genservice/fastify';
 *
 * const service = createGenerationService({ providers: [myProvider], publicUrl: 'https://api.example.com/api' });
 * await service.start();
 *
 * // frameworkErrors is optional: it lets genservice answer URLs Fastify's router cannot parse (see below).
 * const app = Fastify({ frameworkErrors: genserviceFrameworkErrors });
 * await app.register(genservicePlugin, { service, prefix: '/api' });
 * await app.listen({ port: 3000 });
 * ```
 */
import type { FastifyError, FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { GenerationService } from '@genservice/core';
import type { HttpRequest, HttpResponse } from '@genservice/core/adapter';
import { DEFAULT_LIMITS } from '@genservice/core';
import {
  bodyLimitsOf,
  bodylessRequestBody,
  isApiPath,
  needsNodeWrite,
  readRawBody,
  readRequestBody,
  requestHeaders,
  toRequestBody,
  writeNodeResponse,
  type BodyLimits,
  type RawBody,
  type RequestBody,
} from '@genservice/core/adapter';

export interface GenservicePluginOptions {
  service: GenerationService;
  /** Mount point, e.g. `/api` (Fastify's own register option: it prefixes the plugin's routes). */
  prefix?: string;
  /**
   * Most body bytes read into memory. Default: the service's own limit (`limits.bodyBytes`). Keep it equal to that
   * limit: core answers 413 for anything above its own.
   */
  bodyLimit?: number;
}

/** What our content-type parser leaves in `request.body`: the raw bytes, or the fact that there were too many. */
interface RawPayload {
  readonly raw: RawBody;
}

interface Mount {
  prefix: string;
  service: GenerationService;
  limits: BodyLimits;
}

/** The plugin's mounts per HTTP server, for `genserviceFrameworkErrors`, which runs outside every plugin context. */
const mountsByServer = new WeakMap<object, Mount[]>();

const plugin: FastifyPluginAsync<GenservicePluginOptions> = async (app: FastifyInstance, options) => {
  const { service } = options;
  if (!service || typeof service.handle !== 'function') {
    throw new TypeError('genservicePlugin: options.service must be a GenerationService');
  }
  const limits = bodyLimitsOf(service, options.bodyLimit ?? service.bodyLimit ?? DEFAULT_LIMITS.bodyBytes);
  // The full prefix of this context (parents' prefixes included), as the public path of the mount point.
  const prefix = app.prefix;
  const mounts = mountsByServer.get(app.server) ?? [];
  mounts.push({ prefix, service, limits });
  // Longest prefix first, so a nested mount wins over one at a shorter prefix.
  mounts.sort((a, b) => b.prefix.length - a.prefix.length);
  mountsByServer.set(app.server, mounts);

  // Encapsulated: these changes apply to the routes below only, never to the host's.
  app.removeAllContentTypeParsers();
  // A function parser (not `parseAs: 'buffer'`) so Fastify applies no bodyLimit of its own: core answers 413.
  app.addContentTypeParser('*', (request, payload, done) => {
    readRawBody(payload, limits.bytes, request.headers['content-length'], limits.timeoutMs).then(
      (raw) => done(null, { raw } satisfies RawPayload),
      (err: Error) => done(err, undefined),
    );
  });

  // Not an async function: a GET (no body) goes to core without waiting for a body promise, and Fastify has no
  // returned promise to follow; the reply is sent when core answers, and a failure goes to Fastify's error handling
  // (reply.send(err)), as a rejected async handler's would.
  const handler = (request: FastifyRequest, reply: FastifyReply): void => {
    const req: HttpRequest = {
      method: request.method,
      path: pathBelow(request, prefix),
      headers: headersOf(request),
      remoteAddress: request.ip,
      baseUrl: () => `${request.protocol}://${request.host}${prefix}`,
    };
    const body = bodyOf(request, limits);
    const out = body instanceof Promise ? body.then((b) => service.handle(withBody(req, b))) : service.handle(withBody(req, body));
    out.then((o) => sendOrFail(reply, o), (err: unknown) => reply.send(err));
  };

  app.all('/v1', handler);
  app.all('/v1/*', handler);
  // Paths under a (non-root) prefix that no route serves get genservice's JSON 404, as on every adapter. Scoped to
  // this plugin's prefix: the host's routes and its own 404s elsewhere are untouched.
  if (prefix !== '') app.setNotFoundHandler(handler);
  // The playground page (a 404 from core unless the service was created with playground: true).
  app.all('/playground', handler);
  app.all('/playground/*', handler);
};

/**
 * Register with `app.register(genservicePlugin, { service, prefix: '/api' })`.
 */
export const genservicePlugin: FastifyPluginAsync<GenservicePluginOptions> = plugin;

export default genservicePlugin;

/**
 * For the Fastify server option `frameworkErrors`. Fastify answers a URL it cannot route, such as one with broken
 * percent-encoding (`/api/v1/generations/%ZZ`), itself and before any plugin runs (`400 FST_ERR_BAD_URL` in
 * Fastify's own error shape). With this option, such a URL below a genservice prefix is answered by genservice, as
 * Express and Koa do (a JSON `404 not_found`, or `401` without a key); any other URL gets Fastify's answer.
 *
 * @example
 * ```ts
 * const app = Fastify({ frameworkErrors: genserviceFrameworkErrors });
 * await app.register(genservicePlugin, { service, prefix: '/api' });
 * ```
 */
export function genserviceFrameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const url = request.raw.url ?? '';
  const q = url.indexOf('?');
  const pathname = q === -1 ? url : url.slice(0, q);
  const mount = (mountsByServer.get(request.server.server) ?? []).find(
    (m) => pathname.startsWith(m.prefix) && isApiPath(pathname.slice(m.prefix.length)),
  );
  if (!mount || (error.code !== 'FST_ERR_BAD_URL' && error.code !== 'FST_ERR_MAX_PARAM_LENGTH')) {
    reply.send(error);
    return;
  }
  readRequestBody(request.raw, mount.limits, request.headers['content-length'])
    .then((body) =>
      mount.service.handle({
        method: request.method,
        path: url.slice(mount.prefix.length),
        headers: headersOf(request),
      remoteAddress: request.ip,
        ...body,
        baseUrl: () => `${request.protocol}://${request.host}${mount.prefix}`,
      }),
    )
    .then(
      (out) => send(reply, out),
      (err: Error) => reply.send(err),
    );
}

/** Node keeps only the first of repeated Authorization headers; core must see them all to refuse the request. */
function headersOf(request: FastifyRequest): HttpRequest['headers'] {
  return requestHeaders(request.raw, request.headers);
}

function withBody(req: HttpRequest, body: RequestBody): HttpRequest {
  if (body.body !== undefined) req.body = body.body;
  if (body.bodyError !== undefined) req.bodyError = body.bodyError;
  return req;
}

function pathBelow(request: FastifyRequest, prefix: string): string {
  const url = request.url;
  if (url.startsWith(prefix)) return url.slice(prefix.length);
  // The router matched with an option that alters the path (ignoreDuplicateSlashes, case-insensitive prefix):
  // rebuild it from the route instead.
  const q = url.indexOf('?');
  const rest = (request.params as Record<string, string | undefined>)['*'];
  const base = request.routeOptions.url?.includes('/playground') ? '/playground' : '/v1';
  return `${base}${rest === undefined ? '' : `/${rest}`}${q === -1 ? '' : url.slice(q)}`;
}

function bodyOf(request: FastifyRequest, limits: BodyLimits): RequestBody | Promise<RequestBody> {
  const payload = request.body as RawPayload | undefined;
  // Fastify parses no body on GET and on bodiless requests; read whatever is there ourselves (nothing to wait for
  // when the headers say there is none).
  if (payload?.raw !== undefined) return toRequestBody(payload.raw);
  const length = request.headers['content-length'];
  return bodylessRequestBody(request.raw, length) ?? readRequestBody(request.raw, limits, length);
}

/** `send`, with a failure going to Fastify's error handling (one promise reaction per request, not two). */
function sendOrFail(reply: FastifyReply, out: HttpResponse): void {
  try {
    send(reply, out);
  } catch (err) {
    reply.send(err);
  }
}

function send(reply: FastifyReply, out: HttpResponse): FastifyReply {
  if (needsNodeWrite(out, reply.request.method)) {
    // A live stream, or a HEAD that must keep the GET's Content-Length: written as core made it, Fastify stands aside.
    reply.hijack();
    void writeNodeResponse(reply.raw, out);
    return reply;
  }
  const raw = out.body as string | Uint8Array;
  const body = typeof raw === 'string' ? raw : Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  return reply.code(out.status).headers(out.headers).send(body);
}
