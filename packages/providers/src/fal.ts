import type { ProviderCapacity } from '@genservice/core/ports';
import {
  ProviderError,
  type GenerationContext,
  type GenerationInput,
  type Logger,
  type ModelDefinition,
  type RemoteJobProvider,
  type RemoteJobStatus,
} from '@genservice/core/ports';
import {
  callUpstream,
  defaultMimeType,
  downloadResult,
  progressFromLogs,
  readStatus,
  requireString,
  upstreamFailure,
  upstreamOf,
  type ResultFetchOptions,
} from './http.js';
import { checkModels, definitionOf, modelLookup, resolveOutput, type RemoteModel } from './remote-model.js';

/** A fal model: its endpoint id (`fal-ai/flux/schnell`). */
export type FalModel = RemoteModel<FalOutput> & { endpoint: string };

/** A request's result JSON, e.g. `{ images: [{ url, content_type }] }`, `{ video: { url } }`, `{ audio: { url } }`. */
export type FalOutput = Record<string, unknown>;

/** Options of `createFalProvider`. */
export interface FalProviderOptions {
  /** The API key, sent as `Authorization: Key <key>`. */
  apiKey: string;
  /** The queue API. Default `https://queue.fal.run`. */
  baseUrl?: string;
  models: FalModel[];
  /** Time for one API call (submit, status, result, cancel). Default 30 000 ms. */
  requestTimeoutMs?: number;
  /** Limits for downloading result files (through the outbound guard). Default 100 MiB, 120 s, public addresses only. */
  results?: ResultFetchOptions;
  /** Default: the global fetch. */
  fetch?: typeof fetch;
  /**
   * The account's limits (`{ lane: 'NAME:account', concurrency, requestsPerMinute }`): every instance keeps its
   * calls (each submit and each status read) within them; see docs/writing-a-provider.md.
   */
  capacity?: ProviderCapacity;
}

/** What the runner stores for a fal generation: the request id, which model it runs, and fal's own request URL. */
export interface FalHandle {
  requestId: string;
  modelId: string;
  /**
   * The `response_url` fal gave at submit, when it is on the configured base URL's origin (status, result and cancel
   * are under it). Without it (another origin, or an older handle) the URL is built from the endpoint id.
   */
  responseUrl?: string;
}

/** Endpoint ids with a namespace before the owner (`workflows/owner/app`, `comfy/owner/app`). */
const NAMESPACES = new Set(['workflows', 'comfy']);

interface QueueStatus {
  status?: 'IN_QUEUE' | 'IN_PROGRESS' | 'COMPLETED';
  queue_position?: number;
  logs?: Array<{ message?: string }> | null;
  error?: unknown;
}

/** fal's usual result shapes: `images[0]`, `image`, `video`, `audio`, `audio_file`, `model_mesh` (each `{ url }`), or text. */
export function defaultFalOutput(output: FalOutput, resultType: ModelDefinition['resultType']): string | { text: string } | undefined {
  if (resultType === 'text') {
    for (const key of ['output', 'text', 'response']) if (typeof output[key] === 'string') return { text: output[key] as string };
    return undefined;
  }
  const urlOf = (v: unknown): string | undefined => (v && typeof v === 'object' && typeof (v as { url?: unknown }).url === 'string' ? (v as { url: string }).url : undefined);
  const images = output.images;
  if (Array.isArray(images) && urlOf(images[0])) return urlOf(images[0]);
  for (const key of ['image', 'video', 'audio', 'audio_file', 'model_mesh', 'file']) {
    const url = urlOf(output[key]);
    if (url) return url;
  }
  return undefined;
}

/**
 * fal's queue API as a genservice provider: each generation is one queued request (`POST {base}/{endpoint}`),
 * checked with `GET .../requests/{id}/status`, its result read with `GET .../requests/{id}`, cancelled with
 * `PUT .../requests/{id}/cancel`. The request id is stored with the generation before the first check, so a crash
 * or restart resumes the same request: it is submitted once per generation.
 *
 * @example
 * createFalProvider({
 *   apiKey: process.env.FAL_KEY!,
 *   models: [{
 *     modelId: 'fal-flux-schnell', title: 'FLUX.1 [schnell] on fal', resultType: 'image', estimatedGenerationTime: 3, price: 3,
 *     endpoint: 'fal-ai/flux/schnell',
 *     settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text', required: true }],
 *   }],
 * });
 */
export function createFalProvider(options: FalProviderOptions): RemoteJobProvider {
  requireString(options?.apiKey, 'createFalProvider: apiKey');
  checkModels(options.models, 'createFalProvider');
  for (const m of options.models) {
    // Each segment starts with a letter or digit: no '.' or '..' can make the path climb.
    if (typeof m.endpoint !== 'string' || !/^\w[\w.-]*(\/\w[\w.-]*)+$/.test(m.endpoint)) {
      throw new TypeError(`createFalProvider: ${m.modelId}.endpoint must look like 'owner/app[/path]', got ${String(m.endpoint)}`);
    }
  }
  const upstream = upstreamOf('fal', options, 'https://queue.fal.run', `Key ${options.apiKey}`, options.apiKey);
  const baseOrigin = new URL(upstream.baseUrl).origin;
  const modelOf = modelLookup(options.models, 'fal');
  // fal's own URL for the request, if it may carry the key: same origin as the base URL, and naming this request.
  const ownRequestUrl = (url: unknown, requestId: string): string | undefined => {
    if (typeof url !== 'string') return undefined;
    try {
      const u = new URL(url);
      return u.origin === baseOrigin && u.pathname.endsWith(`/requests/${requestId}`) && !u.search && !u.hash ? `${u.origin}${u.pathname}` : undefined;
    } catch {
      return undefined;
    }
  };
  const handleOf = (handle: unknown): { requestId: string; model: FalModel; requestUrl: string } => {
    const h = handle as { requestId?: unknown; modelId?: unknown; responseUrl?: unknown } | null;
    if (typeof h?.requestId !== 'string' || !/^[\w-]+$/.test(h.requestId) || typeof h.modelId !== 'string') {
      throw new ProviderError('fal: a stored handle has no usable request id');
    }
    const model = modelOf(h.modelId);
    return { requestId: h.requestId, model, requestUrl: ownRequestUrl(h.responseUrl, h.requestId) ?? requestPath(model, h.requestId) };
  };
  // Status, result and cancel live under the app id, without the endpoint's path: fal-ai/flux/schnell -> fal-ai/flux
  // (workflows/owner/app/path -> workflows/owner/app), as fal's own client builds them.
  const requestPath = (model: FalModel, requestId: string): string => {
    const parts = model.endpoint.split('/');
    return `/${parts.slice(0, NAMESPACES.has(parts[0]!) ? 3 : 2).join('/')}/requests/${requestId}`;
  };

  return {
    models: options.models.map(definitionOf),
    ...(options.capacity ? { capacity: options.capacity } : {}),

    async start(input: GenerationInput, ctx: GenerationContext) {
      const model = modelOf(input.model.modelId);
      const body = model.input ? model.input(input.settings) : { ...input.settings };
      // fal has no idempotency key: a submit is repeated only when it answered a retryable error, or the process died
      // in the one store write between this call and the handle.
      const submitted = (await callUpstream(upstream, 'POST', `/${model.endpoint}`, ctx.signal, body, { inputErrors: true })) as {
        request_id?: unknown;
        response_url?: unknown;
      };
      if (typeof submitted?.request_id !== 'string' || !/^[\w-]+$/.test(submitted.request_id)) {
        throw new ProviderError('fal: the queued request has no usable request_id', { retryable: true });
      }
      ctx.logger.debug({ request: submitted.request_id }, 'fal: request queued');
      const responseUrl = ownRequestUrl(submitted.response_url, submitted.request_id);
      const handle: FalHandle = { requestId: submitted.request_id, modelId: model.modelId, ...(responseUrl ? { responseUrl } : {}) };
      return { handle };
    },

    async check(handle: unknown, ctx: GenerationContext): Promise<RemoteJobStatus> {
      const { requestId, model, requestUrl: path } = handleOf(handle);
      const read = await readStatus(() => callUpstream(upstream, 'GET', `${path}/status?logs=1`, ctx.signal), ctx, 'fal');
      if ('waiting' in read) return { status: 'running', message: read.waiting };
      const status = read.value as QueueStatus;
      switch (status?.status) {
        case 'IN_QUEUE':
          return { status: 'running', message: status.queue_position !== undefined ? `queued (position ${status.queue_position})` : 'queued' };
        case 'IN_PROGRESS': {
          const progress = progressFromLogs(status.logs);
          return progress === undefined ? { status: 'running', message: 'running' } : { status: 'running', progress, message: 'running' };
        }
        case 'COMPLETED': {
          if (status.error) return { status: 'failed', error: upstreamFailure(upstream, `request ${requestId} failed`, status.error) };
          let result: FalOutput;
          try {
            result = (await callUpstream(upstream, 'GET', path, ctx.signal)) as FalOutput;
          } catch (error) {
            // A completed request whose result is an error (422: the input was refused) failed for good.
            if (error instanceof ProviderError && !error.retryable) return { status: 'failed', error };
            throw error;
          }
          const mapped = model.output ? model.output(result) : defaultFalOutput(result ?? {}, model.resultType);
          const output = resolveOutput(mapped, model.modelId, 'fal');
          if ('url' in output) {
            return { status: 'done', output: await downloadResult(output.url, ctx, options.results ?? {}, 'fal', defaultMimeType(model.resultType)) };
          }
          return { status: 'done', output };
        }
        default:
          throw new ProviderError(`fal: request ${requestId} has an unknown status ${String(status?.status)}`, { retryable: true });
      }
    },

    async cancel(handle: unknown, ctx: { generationId: string; logger: Logger }) {
      const { requestId, requestUrl } = handleOf(handle);
      await callUpstream(upstream, 'PUT', `${requestUrl}/cancel`, undefined);
      ctx.logger.debug({ request: requestId }, 'fal: request cancelled');
    },
  };
}
