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
  // Encapsulated: these changes apply to the routes below only, never to the host's. A function parser (not
  // `parseAs: 'buffer'`) so Fastify applies no bodyLimit of its own: core answers 413.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (request, payload, done) => {
    readRawBody(payload, mount.limits.bytes, request.headers['content-length'], mount.limits.timeoutMs).then((raw) => done(null, { raw } satisfies HostBody), done);
  });
  const handler = (request: FastifyRequest, reply: FastifyReply): void => answer(mount, request, reply, pathBelow(request, mount.prefix));
  for (const path of ['/v1', '/v1/*', '/playground', '/playground/*']) app.all(path, handler);
  // Paths under a (non-root) prefix that no route serves get genservice's JSON 404, as on every adapter.
  if (mount.prefix !== '') app.setNotFoundHandler(handler);
};

export const genservicePlugin: FastifyPluginAsync<GenservicePluginOptions> = plugin;
export default genservicePlugin;

/**
 * For the Fastify server option `frameworkErrors`: a URL Fastify cannot route (broken percent-encoding such as
 * `/api/v1/generations/%ZZ`) below a genservice prefix is answered by genservice, as Express and Koa do, instead of
 * Fastify's own `400 FST_ERR_BAD_URL`; any other URL gets Fastify's answer.
 */
export function genserviceFrameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const url = request.raw.url ?? '';
  const q = url.indexOf('?');
  const pathname = q === -1 ? url : url.slice(0, q);
  const mounts = mountsByServer.get(request.server.server) ?? [];
  const mount = mounts.find((m) => pathname.startsWith(m.prefix) && isApiPath(pathname.slice(m.prefix.length)));
  if (!mount || (error.code !== 'FST_ERR_BAD_URL' && error.code !== 'FST_ERR_MAX_PARAM_LENGTH')) return void reply.send(error);
  answer(mount, request, reply, url.slice(mount.prefix.length));
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
