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

/** A Replicate model: an official model by name (`owner/name`), or any model by its version id. */
export type ReplicateModel = RemoteModel<ReplicateOutput> & ({ model: string; version?: undefined } | { version: string; model?: undefined });

/** A prediction's `output`: a URL, a list of URLs, a string, a list of strings (streamed text), or an object. */
export type ReplicateOutput = unknown;

/** Options of `createReplicateProvider`. */
export interface ReplicateProviderOptions {
  /** The API token (`r8_...`), sent as `Authorization: Bearer`. */
  apiToken: string;
  /** Default `https://api.replicate.com`. */
  baseUrl?: string;
  models: ReplicateModel[];
  /** Time for one API call (create, get, cancel). Default 30 000 ms. */
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

/** What the runner stores for a Replicate generation: the prediction's id, and which of the models it runs. */
export interface ReplicateHandle {
  id: string;
  modelId: string;
}

interface Prediction {
  id?: string;
  status?: 'starting' | 'processing' | 'succeeded' | 'failed' | 'canceled' | 'aborted';
  output?: unknown;
  error?: unknown;
  logs?: string;
}

/** Replicate's usual outputs: the first URL of a URL or list of URLs; for text models the strings joined. */
export function defaultReplicateOutput(output: unknown, resultType: ModelDefinition['resultType']): string | { text: string } | undefined {
  if (resultType === 'text') {
    if (typeof output === 'string') return { text: output };
    if (Array.isArray(output) && output.every((o) => typeof o === 'string')) return { text: output.join('') };
    return undefined;
  }
  const first = Array.isArray(output) ? output[0] : output;
  if (typeof first === 'string') return first;
  if (first && typeof first === 'object' && typeof (first as { url?: unknown }).url === 'string') return (first as { url: string }).url;
  return undefined;
}

/**
 * Replicate's predictions API as a genservice provider: each generation is one prediction (`POST /v1/predictions`
 * or `POST /v1/models/{owner}/{name}/predictions`), checked with `GET /v1/predictions/{id}` and cancelled with
 * `POST /v1/predictions/{id}/cancel`. The prediction id is stored with the generation before the first check, so a
 * crash or restart resumes checking the same prediction: it is created once per generation.
 *
 * @example
 * createReplicateProvider({
 *   apiToken: process.env.REPLICATE_API_TOKEN!,
 *   models: [{
 *     modelId: 'flux-schnell', title: 'FLUX.1 [schnell]', resultType: 'image', estimatedGenerationTime: 4, price: 3,
 *     model: 'black-forest-labs/flux-schnell',
 *     settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text', required: true }],
 *     input: (s) => ({ prompt: s.prompt, output_format: 'png' }),
 *   }],
 * });
 */
export function createReplicateProvider(options: ReplicateProviderOptions): RemoteJobProvider {
  requireString(options?.apiToken, 'createReplicateProvider: apiToken');
  checkModels(options.models, 'createReplicateProvider');
  for (const m of options.models) {
    if (typeof m.model === 'string' === (typeof m.version === 'string')) {
      throw new TypeError(`createReplicateProvider: ${m.modelId} needs exactly one of model ('owner/name') or version`);
    }
    if (typeof m.model === 'string' && !/^\w[\w.-]*\/\w[\w.-]*$/.test(m.model)) {
      throw new TypeError(`createReplicateProvider: ${m.modelId}.model must look like 'owner/name', got ${m.model}`);
    }
  }
  const upstream = upstreamOf('Replicate', options, 'https://api.replicate.com', `Bearer ${options.apiToken}`, options.apiToken);
  const modelOf = modelLookup(options.models, 'Replicate');
  const handleOf = (handle: unknown): ReplicateHandle => {
    const h = handle as { id?: unknown; modelId?: unknown } | null;
    if (typeof h?.id !== 'string' || !/^[\w-]+$/.test(h.id) || typeof h.modelId !== 'string') {
      throw new ProviderError('Replicate: a stored handle has no usable prediction id');
    }
    return { id: h.id, modelId: h.modelId };
  };

  return {
    models: options.models.map(definitionOf),
    ...(options.capacity ? { capacity: options.capacity } : {}),

    async start(input: GenerationInput, ctx: GenerationContext) {
      const model = modelOf(input.model.modelId);
      const body = model.input ? model.input(input.settings) : { ...input.settings };
      // Replicate has no idempotency key: a create is repeated only when it answered a retryable error (nothing was
      // created, or Replicate says so) or the process died in the one store write between this call and the handle.
      const prediction = (
        model.model
          ? await callUpstream(upstream, 'POST', `/v1/models/${model.model}/predictions`, ctx.signal, { input: body }, { inputErrors: true })
          : await callUpstream(upstream, 'POST', '/v1/predictions', ctx.signal, { version: model.version, input: body }, { inputErrors: true })
      ) as Prediction;
      if (typeof prediction?.id !== 'string') throw new ProviderError('Replicate: the created prediction has no id', { retryable: true });
      ctx.logger.debug({ prediction: prediction.id }, 'replicate: prediction created');
      return { handle: { id: prediction.id, modelId: model.modelId } satisfies ReplicateHandle };
    },

    async check(handle: unknown, ctx: GenerationContext): Promise<RemoteJobStatus> {
      const { id, modelId } = handleOf(handle);
      const read = await readStatus(() => callUpstream(upstream, 'GET', `/v1/predictions/${id}`, ctx.signal), ctx, 'Replicate');
      if ('waiting' in read) return { status: 'running', message: read.waiting };
      const prediction = read.value as Prediction;
      switch (prediction?.status) {
        case 'starting':
          return { status: 'running', message: 'starting' };
        case 'processing': {
          const progress = progressFromLogs(prediction.logs);
          return progress === undefined ? { status: 'running', message: 'processing' } : { status: 'running', progress, message: 'processing' };
        }
        case 'succeeded': {
          return { status: 'done', output: await outputOf(modelId, prediction.output, ctx) };
        }
        case 'failed':
          return { status: 'failed', error: upstreamFailure(upstream, `prediction ${id} failed`, prediction.error) };
        case 'canceled':
        case 'aborted':
          return { status: 'failed', error: new ProviderError(`Replicate: prediction ${id} was ${prediction.status}`, { publicMessage: 'The job was cancelled upstream.' }) };
        default:
          throw new ProviderError(`Replicate: prediction ${id} has an unknown status ${String(prediction?.status)}`, { retryable: true });
      }
    },

    async cancel(handle: unknown, ctx: { generationId: string; logger: Logger }) {
      const { id } = handleOf(handle);
      await callUpstream(upstream, 'POST', `/v1/predictions/${id}/cancel`, undefined);
      ctx.logger.debug({ prediction: id }, 'replicate: prediction cancelled');
    },
  };

  async function outputOf(modelId: string, output: unknown, ctx: GenerationContext) {
    // The model's mapping (or the default) finds the result in the output.
    const model = modelOf(modelId);
    const mapped = model.output ? model.output(output) : defaultReplicateOutput(output, model.resultType);
    const result = resolveOutput(mapped, model.modelId, 'Replicate');
    if ('url' in result) return downloadResult(result.url, ctx, options.results ?? {}, 'Replicate', defaultMimeType(model.resultType));
    return result;
  }
}
