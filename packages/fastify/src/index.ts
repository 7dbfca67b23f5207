/**
 * Fastify 5 plugin for genservice: `app.register(genservicePlugin, { service, prefix: '/api' })` mounts the
 * generation API (`<prefix>/v1`, `<prefix>/playground`, `<prefix>/console`). Encapsulated on purpose (not wrapped in `fastify-plugin`):
 * inside its own context every content-type parser is one that keeps the raw bytes, so core answers invalid JSON, size
 * limits and content types as on every other framework; the host's parsers, error handler and routes are untouched.
 * @module @genservice/fastify
 */
import type { FastifyError, FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { DEFAULT_LIMITS, type GenerationService } from '@genservice/core';
import { ApiMounts, apiRoots, bodyLimitsOf, isCoreAnsweredError, handleNodeRequest, needsNodeWrite, nodeBody, RawHostBody, readRawBody, writeNodeResponse, type BodyLimits, type HostBody } from '@genservice/core/adapter';

export interface GenservicePluginOptions {
  service: GenerationService;
  /** Mount point, e.g. `/api` (Fastify's own register option: it prefixes the plugin's routes). */
  prefix?: string;
  /** Most body bytes read into memory. Default: the service's own limit (`limits.bodyBytes`); keep it equal to that. */
  bodyLimit?: number;
}

type Mount = { prefix: string; service: GenerationService; limits: BodyLimits };
type ErrorHook = (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => void;
export const genservicePlugin: FastifyPluginAsync<GenservicePluginOptions> = async (app: FastifyInstance, { service, bodyLimit }) => {
  if (!service || typeof service.handle !== 'function') throw new TypeError('genservicePlugin: options.service must be a GenerationService');
  const mount: Mount = { prefix: app.prefix, service, limits: bodyLimitsOf(service, bodyLimit ?? service.bodyLimit ?? DEFAULT_LIMITS.bodyBytes) };
  // Per server: the `frameworkErrors` hook runs outside every plugin context.
  ApiMounts.of<Mount>(app.server).add(mount);
  routeUnroutableUrls(app);
  // Encapsulated: these apply to the routes below only. A function parser (not `parseAs: 'buffer'`) so Fastify
  // applies no bodyLimit of its own: core answers 413.
  app.removeAllContentTypeParsers();
  const parser = (request: FastifyRequest, payload: FastifyRequest['raw'], done: (err: Error | null, body?: HostBody) => void): void => {
    // A `RawHostBody`, not `{ raw }`: see its doc (V8's pretenuring kept every body's buffer until a full GC).
    readRawBody(payload, mount.limits.bytes, request.headers['content-length'], mount.limits.timeoutMs).then((raw) => done(null, new RawHostBody(raw) satisfies HostBody), done);
  };
  // The same parser by name for JSON, the type of nearly every request: Fastify caches a parser found by name, while
  // the catch-all is looked up anew (the Content-Type header parsed) on every request.
  app.addContentTypeParser('application/json', parser);
  app.addContentTypeParser('*', parser);
  const handler = (request: FastifyRequest, reply: FastifyReply): void => answer(mount, request, reply, pathBelow(request, mount));
  // Core's list of what a mount answers: each root, and the paths below it where it has any.
  for (const root of apiRoots(service)) {
    app.all(root.path, handler);
    if (root.below) app.all(`${root.path}/*`, handler);
  }
  // Paths under a (non-root) prefix that no route serves get genservice's JSON 404, as on every adapter.
  if (mount.prefix !== '') app.setNotFoundHandler(handler);
};

export default genservicePlugin;

/** A `frameworkErrors` hook: a URL under a genservice prefix that Fastify cannot route goes to core, any other to `fallback`. */
const frameworkErrors =
  (fallback: ErrorHook): ErrorHook =>
  (error, request, reply) => {
    const found = ApiMounts.of<Mount>(request.server.server).find(request.raw.url ?? '');
    if (found && isCoreAnsweredError(error, request.headers)) answer(found.mount, request, reply, found.path);
    else fallback(error, request, reply);
  };

/**
 * For a host that sets the Fastify server option `frameworkErrors` itself (without one, the plugin installs its own):
 * call it from yours. A URL below a genservice prefix that Fastify cannot route (`/api/v1/generations/%ZZ`) is answered
 * by genservice, as Express and Koa do, instead of Fastify's `400 FST_ERR_BAD_URL`; any other gets Fastify's answer.
 */
export const genserviceFrameworkErrors: ErrorHook = frameworkErrors((error, _request, reply) => void reply.send(error));

/**
 * Fastify answers a URL it cannot decode before any plugin runs; only the server option `frameworkErrors` sees it. When
 * the host set none, the plugin puts in one (read by Fastify at each such request) that answers every other URL with
 * Fastify's own answer (fastify.js: onBadUrl, onMaxParamLength, onAsyncConstraintError), byte for byte.
 */
function routeUnroutableUrls(app: FastifyInstance): void {
  for (let holder: object | null = app; holder; holder = Object.getPrototypeOf(holder) as object | null) {
    const key = Object.getOwnPropertySymbols(holder).find((s) => s.description === 'fastify.options');
    if (key === undefined) continue;
    const options = (holder as Record<symbol, { frameworkErrors?: unknown } | undefined>)[key];
    if (options && typeof options === 'object' && options.frameworkErrors === undefined) options.frameworkErrors = frameworkErrors(fastifysOwnAnswer);
    return;
  }
}

function fastifysOwnAnswer(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  const [statusCode, body] =
    error.code === 'FST_ERR_ASYNC_CONSTRAINT'
      ? [500, '{"error":"Internal Server Error","message":"Unexpected error from async constraint","statusCode":500}']
      : [error.statusCode ?? 400, JSON.stringify({ error: 'Bad Request', code: error.code, message: error.message, statusCode: error.statusCode ?? 400 })];
  reply.hijack();
  reply.raw.writeHead(statusCode, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) }).end(body);
}

function answer({ service, limits, prefix }: Mount, request: FastifyRequest, reply: FastifyReply, path: string): void {
  const options = { limits, path, prefix, origin: () => `${request.protocol}://${request.host}`, headers: request.headers, remoteAddress: request.ip, hostBody: request.body as HostBody | undefined };
  handleNodeRequest(service, request.raw, options).then(
    (out) => {
      // A live stream, or a HEAD that must keep the GET's Content-Length: written as core made it, Fastify stands aside.
      if (needsNodeWrite(out, reply.request.method)) return void (reply.hijack(), writeNodeResponse(reply.raw, out));
      reply.code(out.status).headers(out.headers).send(nodeBody(out));
    },
    (err: unknown) => reply.send(err),
  );
}

/** The path below the prefix; rebuilt from the route when a router option altered it (ignoreDuplicateSlashes, a case-insensitive prefix). */
function pathBelow(request: FastifyRequest, { prefix, service }: Mount): string {
  if (request.url.startsWith(prefix)) return request.url.slice(prefix.length);
  const q = request.url.indexOf('?');
  const rest = (request.params as Record<string, string | undefined>)['*'];
  const url = request.routeOptions.url ?? '';
  // The route's own pattern names its root (longest first: `/openai/v1/*` before `/v1/*`).
  const root = apiRoots(service).find((r) => url.endsWith(r.below && rest !== undefined ? `${r.path}/*` : r.path))?.path ?? '/v1';
  return `${root}${rest === undefined ? '' : `/${rest}`}${q === -1 ? '' : request.url.slice(q)}`;
}
