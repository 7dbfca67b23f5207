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
 * import { genservicePlugin } from '@genservice/fastify';
 *
 * const service = createGenerationService({ providers: [myProvider], publicUrl: 'https://api.example.com/api' });
 * await service.start();
 *
 * const app = Fastify();
 * await app.register(genservicePlugin, { service, prefix: '/api' });
 * await app.listen({ port: 3000 });
 * ```
 */
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { GenerationService, HttpRequest, HttpResponse } from '@genservice/core';
import { DEFAULT_BODY_LIMIT, readRawBody, type RawBody } from './read-body.js';

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

const plugin: FastifyPluginAsync<GenservicePluginOptions> = async (app: FastifyInstance, options) => {
  const { service } = options;
  if (!service || typeof service.handle !== 'function') {
    throw new TypeError('genservicePlugin: options.service must be a GenerationService');
  }
  const limit = options.bodyLimit ?? service.bodyLimit ?? DEFAULT_BODY_LIMIT;
  // The full prefix of this context (parents' prefixes included), as the public path of the mount point.
  const prefix = app.prefix;

  // Encapsulated: these changes apply to the routes below only, never to the host's.
  app.removeAllContentTypeParsers();
  // A function parser (not `parseAs: 'buffer'`) so Fastify applies no bodyLimit of its own: core answers 413.
  app.addContentTypeParser('*', (request, payload, done) => {
    readRawBody(payload, limit, request.headers['content-length']).then(
      (raw) => done(null, { raw } satisfies RawPayload),
      (err: Error) => done(err, undefined),
    );
  });

  const handler = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const out = await service.handle({
      method: request.method,
      path: pathBelow(request, prefix),
      headers: request.headers,
      ...(await bodyOf(request, limit)),
      baseUrl: `${request.protocol}://${request.host}${prefix}`,
    });
    return send(reply, out);
  };

  app.all('/v1', handler);
  app.all('/v1/*', handler);
};

/**
 * Register with `app.register(genservicePlugin, { service, prefix: '/api' })`.
 */
export const genservicePlugin: FastifyPluginAsync<GenservicePluginOptions> = plugin;

export default genservicePlugin;

function pathBelow(request: FastifyRequest, prefix: string): string {
  const url = request.url;
  if (url.startsWith(prefix)) return url.slice(prefix.length);
  // The router matched with an option that alters the path (ignoreDuplicateSlashes, case-insensitive prefix):
  // rebuild it from the route instead.
  const q = url.indexOf('?');
  const rest = (request.params as Record<string, string | undefined>)['*'];
  return `/v1${rest === undefined ? '' : `/${rest}`}${q === -1 ? '' : url.slice(q)}`;
}

async function bodyOf(request: FastifyRequest, limit: number): Promise<Pick<HttpRequest, 'body' | 'bodyError'>> {
  const payload = request.body as RawPayload | undefined;
  // Fastify parses no body on GET and on bodiless requests; read whatever is there ourselves.
  const raw = payload?.raw !== undefined ? payload.raw : await readRawBody(request.raw, limit, request.headers['content-length']);
  return raw === null ? { bodyError: 'payload_too_large' } : { body: raw };
}

function send(reply: FastifyReply, out: HttpResponse): FastifyReply {
  const body = typeof out.body === 'string' ? out.body : Buffer.from(out.body.buffer, out.body.byteOffset, out.body.byteLength);
  return reply.code(out.status).headers(out.headers).send(body);
}
