/**
 * Fastify 5 plugin for genservice: `app.register(genservicePlugin, { service, prefix: '/api' })` mounts the
 * generation API (`<prefix>/v1`, `<prefix>/playground`) under a prefix.
 *
 * Encapsulated on purpose (not wrapped in `fastify-plugin`): inside its own context it swaps every content-type parser
 * for one that keeps the raw bytes, so core answers invalid JSON, size limits and content types as on every other
 * framework. The host's parsers, error handler and routes outside the prefix are untouched.
 *
 * @module @genservice/fastify
 */
import type { FastifyError, FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { GenerationService } from '@genservice/core';
import { DEFAULT_LIMITS } from '@genservice/core';
import { bodyLimitsOf, isApiPath, needsNodeWrite, readRawBody, toHttpRequest, writeNodeResponse, type BodyLimits, type HostBody, type HttpResponse } from '@genservice/core/adapter';

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

interface Mount {
  prefix: string;
  service: GenerationService;
  limits: BodyLimits;
}

/** The plugin's mounts per HTTP server, for `genserviceFrameworkErrors`, which runs outside every plugin context. */
const mountsByServer = new WeakMap<object, Mount[]>();

const plugin: FastifyPluginAsync<GenservicePluginOptions> = async (app: FastifyInstance, { service, bodyLimit }) => {
  if (!service || typeof service.handle !== 'function') throw new TypeError('genservicePlugin: options.service must be a GenerationService');
  const mount: Mount = { prefix: app.prefix, service, limits: bodyLimitsOf(service, bodyLimit ?? service.bodyLimit ?? DEFAULT_LIMITS.bodyBytes) };
  // Longest prefix first, so a nested mount wins over one at a shorter prefix.
  mountsByServer.set(app.server, [...(mountsByServer.get(app.server) ?? []), mount].sort((a, b) => b.prefix.length - a.prefix.length));
  routeUnroutableUrls(app);
  // Encapsulated: these changes apply to the routes below only, never to the host's. A function parser (not
  // `parseAs: 'buffer'`) so Fastify applies no bodyLimit of its own: core answers 413.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (request, payload, done) => {
    readRawBody(payload, mount.limits.bytes, request.headers['content-length'], mount.limits.timeoutMs).then((raw) => done(null, { raw } satisfies HostBody), done);
  });
  const handler = (request: FastifyRequest, reply: FastifyReply): void => answer(mount, request, reply, pathBelow(request, mount.prefix));
  for (const path of ['/v1', '/v1/*', '/playground', '/playground/*', '/healthz', '/readyz']) app.all(path, handler);
  // Paths under a (non-root) prefix that no route serves get genservice's JSON 404, as on every adapter.
  if (mount.prefix !== '') app.setNotFoundHandler(handler);
};

export const genservicePlugin: FastifyPluginAsync<GenservicePluginOptions> = plugin;
export default genservicePlugin;

/**
 * For a host that sets the Fastify server option `frameworkErrors` itself (without one, the plugin installs its
 * own): call it from yours. A URL Fastify cannot route (broken percent-encoding such as
 * `/api/v1/generations/%ZZ`) below a genservice prefix is answered by genservice, as Express and Koa do, instead of
 * Fastify's own `400 FST_ERR_BAD_URL`; any other URL gets Fastify's answer.
 */
export function genserviceFrameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const mount = mountOf(request);
  if (!mount || (error.code !== 'FST_ERR_BAD_URL' && error.code !== 'FST_ERR_MAX_PARAM_LENGTH')) return void reply.send(error);
  answer(mount, request, reply, (request.raw.url ?? '').slice(mount.prefix.length));
}

/**
 * Fastify's router answers a URL it cannot decode before any plugin runs; only the server option `frameworkErrors`
 * sees it. When the host set none, the plugin puts in one of its own (read by Fastify at each such request), so the
 * request under a genservice prefix reaches core like any other and every other URL gets Fastify's own answer, byte
 * for byte. A host with its own `frameworkErrors` keeps it and calls `genserviceFrameworkErrors` from it.
 */
function routeUnroutableUrls(app: FastifyInstance): void {
  let holder: object | null = app;
  while (holder) {
    const key = Object.getOwnPropertySymbols(holder).find((s) => s.description === 'fastify.options');
    if (key) {
      const options = (holder as Record<symbol, { frameworkErrors?: unknown } | undefined>)[key];
      if (options && typeof options === 'object' && options.frameworkErrors === undefined) options.frameworkErrors = frameworkErrorsOrFastifys;
      return;
    }
    holder = Object.getPrototypeOf(holder) as object | null;
  }
}

/** What the plugin installs: genservice's answer under its prefixes, Fastify's built-in answer elsewhere. */
function frameworkErrorsOrFastifys(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const mount = mountOf(request);
  if (mount && (error.code === 'FST_ERR_BAD_URL' || error.code === 'FST_ERR_MAX_PARAM_LENGTH')) {
    return answer(mount, request, reply, (request.raw.url ?? '').slice(mount.prefix.length));
  }
  // Fastify's own answer without a frameworkErrors (fastify.js: onBadUrl, onMaxParamLength, onAsyncConstraintError),
  // written the way Fastify writes it.
  const [statusCode, body] =
    error.code === 'FST_ERR_ASYNC_CONSTRAINT'
      ? [500, '{"error":"Internal Server Error","message":"Unexpected error from async constraint","statusCode":500}']
      : [error.statusCode ?? 400, JSON.stringify({ error: 'Bad Request', code: error.code, message: error.message, statusCode: error.statusCode ?? 400 })];
  reply.hijack();
  reply.raw.writeHead(statusCode, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  reply.raw.end(body);
}

function mountOf(request: FastifyRequest): Mount | undefined {
  const url = request.raw.url ?? '';
  const q = url.indexOf('?');
  const pathname = q === -1 ? url : url.slice(0, q);
  const mounts = mountsByServer.get(request.server.server) ?? [];
  return mounts.find((m) => pathname.startsWith(m.prefix) && isApiPath(pathname.slice(m.prefix.length)));
}

function answer({ service, limits, prefix }: Mount, request: FastifyRequest, reply: FastifyReply, path: string): void {
  const payload = request.body as HostBody | undefined;
  const origin = (): string => `${request.protocol}://${request.host}`;
  toHttpRequest(request.raw, { limits, path, prefix, origin, headers: request.headers, remoteAddress: request.ip, ...(payload ? { hostBody: payload } : {}) })
    .then((req) => service.handle(req))
    .then((out) => send(reply, out))
    .catch((err: unknown) => reply.send(err));
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

function send(reply: FastifyReply, out: HttpResponse): void {
  if (needsNodeWrite(out, reply.request.method)) {
    // A live stream, or a HEAD that must keep the GET's Content-Length: written as core made it, Fastify stands aside.
    reply.hijack();
    void writeNodeResponse(reply.raw, out);
    return;
  }
  const raw = out.body as string | Uint8Array;
  reply.code(out.status).headers(out.headers).send(typeof raw === 'string' ? raw : Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength));
}
