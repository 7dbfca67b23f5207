import type { ResolvedServiceOptions } from '../../resolved-options.js';
import { openAiForm, openAiJson, type OpenAiBody } from '../openai-bodies.js';
import { querySchema, text } from '../query.js';
import { badQuery, header } from '../respond.js';
import { type PathParam, type QueryParam, type RouteEntry, type UserCall, route } from '../route.js';
import type { HttpResponse } from '../types.js';
import { jsonOf, pollRate } from './shared.js';

/**
 * The OpenAI-compatible surface (docs/openai-compatible.md): OpenAI's models, images, videos and speech routes under
 * `<mount>/openai/v1`, over the same use cases, keys, scopes, rate classes and idempotency as the native API. Served
 * only with `options.openai` (else these paths are 404, as paths that are no route); every error in OpenAI's shape.
 * Not in `/v1/openapi.json`: that document is the native contract, and OpenAI publishes its own.
 */

const served = (options: ResolvedServiceOptions): boolean => options.openai !== undefined;
const surface = { errorShape: 'openai', servedWhen: served } as const;

const MODEL_ID: PathParam = { doc: { name: 'id', in: 'path', required: true, schema: { type: 'string' } }, notFound: 'No such model.' };
const VIDEO_ID: PathParam = { doc: { name: 'id', in: 'path', required: true, schema: { type: 'string' } }, notFound: 'Video not found.' };

const videoLimit: QueryParam<number> = {
  doc: { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 100 } },
  parse(value) {
    const n = Number(value);
    if (!/^\d{1,3}$/.test(value) || n < 1 || n > 100) throw badQuery('limit', 'must be a whole number from 1 to 100');
    return n;
  },
};

/** A stream of OpenAI's server-sent events. */
function eventStream(body: AsyncIterable<string>): HttpResponse {
  return {
    status: 200,
    headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff', 'x-accel-buffering': 'no' },
    body,
  };
}

/** What a route hands a use case of the request: fields, files, Idempotency-Key, and where file URLs start. */
function jobOf(call: UserCall<OpenAiBody>): { fields: Record<string, unknown>; files: OpenAiBody['files']; idempotencyKey?: string; baseUrl?: UserCall['req']['baseUrl'] } {
  const { fields, files } = call.body();
  const idempotencyKey = call.idempotencyKey();
  return { fields, files, ...(idempotencyKey !== undefined ? { idempotencyKey } : {}), ...(call.req.baseUrl !== undefined ? { baseUrl: call.req.baseUrl } : {}) };
}

/** `wait=N` of a Prefer header (seconds), capped by `push.maxWaitSeconds`; 0 without one. */
function preferWait(call: UserCall, max: number): number {
  const m = /(?:^|,)\s*wait\s*=\s*"?(\d{1,6})"?/i.exec(header(call.req, 'prefer') ?? '');
  return m ? Math.min(Number(m[1]), max) : 0;
}

export const openAiRoutes: RouteEntry[] = [
  route({
    ...surface,
    name: 'openaiModels',
    method: 'GET',
    path: '/openai/v1/models',
    auth: 'user',
    scope: 'read',
    rate: 'read',
    handle: (call, s) => jsonOf(200, s.openai.models(call.principal)),
  }),
  route({
    ...surface,
    name: 'openaiModel',
    method: 'GET',
    path: '/openai/v1/models/{id}',
    auth: 'user',
    scope: 'read',
    rate: 'read',
    params: { id: MODEL_ID },
    handle: (call, s) => jsonOf(200, s.openai.model(call.principal, call.param('id'))),
  }),
  route<OpenAiBody>({
    ...surface,
    name: 'openaiImages',
    method: 'POST',
    path: '/openai/v1/images/generations',
    auth: 'user',
    scope: 'generate',
    rate: 'create',
    body: openAiJson,
    async handle(call, s) {
      const job = jobOf(call);
      if (s.openai.images.streams(job.fields)) return eventStream(await s.openai.images.stream(call.principal, job, 'image_generation'));
      return jsonOf(200, await s.openai.images.create(call.principal, job));
    },
  }),
  route<OpenAiBody>({
    ...surface,
    name: 'openaiImageEdits',
    method: 'POST',
    path: '/openai/v1/images/edits',
    auth: 'user',
    scope: 'generate',
    rate: 'create',
    body: openAiForm(['image', 'mask']),
    async handle(call, s) {
      const job = jobOf(call);
      if (s.openai.images.streams(job.fields)) return eventStream(await s.openai.images.stream(call.principal, job, 'image_edit'));
      return jsonOf(200, await s.openai.images.create(call.principal, job));
    },
  }),
  route<OpenAiBody>({
    ...surface,
    name: 'openaiCreateVideo',
    method: 'POST',
    path: '/openai/v1/videos',
    auth: 'user',
    scope: 'generate',
    rate: 'create',
    body: openAiForm(['input_reference']),
    handle: async (call, s) => jsonOf(200, await s.openai.videos.create(call.principal, jobOf(call))),
  }),
  route<never, { after?: string; limit?: number; order?: string }>({
    ...surface,
    name: 'openaiListVideos',
    method: 'GET',
    path: '/openai/v1/videos',
    auth: 'user',
    scope: 'read',
    rate: 'read',
    query: querySchema({ after: text('after', 'The last id of the previous page'), limit: videoLimit, order: text('order', 'desc') }, 'first'),
    handle: async (call, s) => jsonOf(200, await s.openai.videos.list(call.userId, call.query())),
  }),
  route({
    ...surface,
    name: 'openaiGetVideo',
    method: 'GET',
    path: '/openai/v1/videos/{id}',
    auth: 'user',
    scope: 'read',
    rate: pollRate,
    params: { id: VIDEO_ID },
    handle: async (call, s) => jsonOf(200, await s.openai.videos.get(call.userId, call.param('id'), preferWait(call, s.options.push.maxWaitSeconds))),
  }),
  route({
    ...surface,
    name: 'openaiDeleteVideo',
    method: 'DELETE',
    path: '/openai/v1/videos/{id}',
    auth: 'user',
    scope: 'generate',
    rate: 'read',
    params: { id: VIDEO_ID },
    handle: async (call, s) => jsonOf(200, await s.openai.videos.delete(call.userId, call.param('id'))),
  }),
  route<never, { variant?: string }>({
    ...surface,
    name: 'openaiVideoContent',
    method: 'GET',
    path: '/openai/v1/videos/{id}/content',
    auth: 'user',
    scope: 'read',
    rate: 'read',
    params: { id: VIDEO_ID },
    query: querySchema({ variant: text('variant', 'video or thumbnail') }, 'first'),
    async handle(call, s) {
      const { key } = await s.openai.videos.content(call.userId, call.param('id'), call.query().variant ?? 'video');
      return s.files.serveKey(call.req, key, s.options.fileUrls.ttlSeconds);
    },
  }),
  route<OpenAiBody>({
    ...surface,
    name: 'openaiSpeech',
    method: 'POST',
    path: '/openai/v1/audio/speech',
    auth: 'user',
    scope: 'generate',
    rate: 'create',
    body: openAiJson,
    async handle(call, s) {
      const rec = await s.openai.speech.create(call.principal, jobOf(call));
      return s.files.serveKey(call.req, rec.resultKey!, s.options.fileUrls.ttlSeconds);
    },
  }),
];
