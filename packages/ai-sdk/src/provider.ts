import type {
  Experimental_VideoModelV3 as VideoModelV3,
  ImageModelV3,
  LanguageModelV3,
  SharedV3Warning,
  SpeechModelV3,
  TranscriptionModelV3,
} from '@ai-sdk/provider';
import {
  fetchMedia,
  OutboundError,
  ProviderError,
  type FetchMediaOptions,
  type GenerateProvider,
  type GenerationContext,
  type GenerationOutput,
  type ModelDefinition,
  type SettingDescriptor,
  type Settings,
} from '@genservice/core';
import { sniffMimeType } from './sniff.js';

/** What a model is, and so what its generations make: image, audio (speech), text (transcription, language), video. */
export type AiSdkModelKind = 'image' | 'speech' | 'transcription' | 'language' | 'video';

type AnyModel = ImageModelV3 | SpeechModelV3 | TranscriptionModelV3 | LanguageModelV3 | VideoModelV3;

/** One genservice model backed by an AI SDK model. */
export interface AiSdkModel extends Omit<ModelDefinition, 'resultType' | 'settings' | 'estimatedGenerationTime'> {
  /** The AI SDK model object (specification v3). */
  model: AnyModel;
  /**
   * Which kind of model it is. Image, video and language models are recognised by their shape; speech and
   * transcription models look alike, so say which (or the bridge reads it from the class name, e.g. OpenAISpeechModel).
   */
  kind?: AiSdkModelKind;
  /** Seconds a generation takes, about. Default: image 15, speech 5, transcription 10, language 10, video 120. */
  estimatedGenerationTime?: number;
  /** Image and video models: the sizes / resolutions offered, as a `size` select (`1024x1024`, ...). */
  sizes?: string[];
  /** Image and video models: the aspect ratios offered, as an `aspect_ratio` select (`1:1`, `16:9`, ...). */
  aspectRatios?: string[];
  /** Speech models: the voices offered, as a `voice` select. */
  voices?: string[];
  /** Video models: the durations offered in seconds, as a `duration` select. */
  durations?: number[];
  /** Image and video models: take an input image (an `image` media setting, optional). */
  acceptsImage?: boolean;
  /**
   * Narrow or rename the settings: receives the default descriptors, returns the ones the model offers. A renamed
   * setting needs `callOptions` to map it back.
   */
  settings?: (defaults: SettingDescriptor[]) => SettingDescriptor[];
  /** Extra call options from the settings (provider options, renamed settings): merged over the defaults. */
  callOptions?: (settings: Settings) => Record<string, unknown>;
}

export interface AiSdkProviderOptions {
  models: AiSdkModel[];
  /**
   * Limits for fetching media settings (input images, audio) and results given as URLs, through core's outbound
   * guard. Default: 25 MiB, 60 s, public addresses only.
   */
  media?: Omit<FetchMediaOptions, 'signal'>;
}

const MEDIA_DEFAULTS = { maxBytes: 25 * 1024 * 1024, timeoutMs: 60_000 } as const;
const RESULT_TYPE: Record<AiSdkModelKind, ModelDefinition['resultType']> = {
  image: 'image',
  speech: 'audio',
  transcription: 'text',
  language: 'text',
  video: 'video',
};
const ESTIMATE: Record<AiSdkModelKind, number> = { image: 15, speech: 5, transcription: 10, language: 10, video: 120 };

/** The kind of an AI SDK model, from its shape (or its class name for speech and transcription). */
function kindOf(entry: AiSdkModel): AiSdkModelKind {
  if (entry.kind) return entry.kind;
  const m = entry.model as unknown as Record<string, unknown>;
  if (!m || typeof m !== 'object' || typeof m.doGenerate !== 'function') {
    throw new TypeError(`createAiSdkProvider: ${entry.modelId}.model is not an AI SDK model (no doGenerate)`);
  }
  if (m.specificationVersion !== 'v3') {
    throw new TypeError(`createAiSdkProvider: ${entry.modelId}.model is of specification ${String(m.specificationVersion)}; this bridge takes v3 (@ai-sdk/provider@3)`);
  }
  if ('maxImagesPerCall' in m) return 'image';
  if ('maxVideosPerCall' in m) return 'video';
  if (typeof m.doStream === 'function') return 'language';
  const name = (entry.model as object).constructor?.name ?? '';
  if (/speech/i.test(name)) return 'speech';
  if (/transcri/i.test(name)) return 'transcription';
  throw new TypeError(`createAiSdkProvider: ${entry.modelId}: say kind: 'speech' or 'transcription' (the model's shape does not tell)`);
}

const prompt: SettingDescriptor = { name: 'prompt', title: 'Prompt', fieldType: 'text', required: true };
const select = (name: string, title: string, options: ReadonlyArray<string | number> | undefined): SettingDescriptor[] =>
  options && options.length > 0 ? [{ name, title, fieldType: 'select', options: options.map(String) }] : [];

function defaultSettings(kind: AiSdkModelKind, entry: AiSdkModel): SettingDescriptor[] {
  switch (kind) {
    case 'image':
      return [
        prompt,
        ...select('size', 'Size', entry.sizes),
        ...select('aspect_ratio', 'Aspect ratio', entry.aspectRatios),
        { name: 'seed', title: 'Seed', fieldType: 'text' },
        ...(entry.acceptsImage ? [{ name: 'image', title: 'Input image', fieldType: 'image', maxItems: 1 }] : []),
      ];
    case 'video':
      return [
        prompt,
        ...select('size', 'Resolution', entry.sizes),
        ...select('aspect_ratio', 'Aspect ratio', entry.aspectRatios),
        ...select('duration', 'Duration (seconds)', entry.durations),
        { name: 'seed', title: 'Seed', fieldType: 'text' },
        ...(entry.acceptsImage ? [{ name: 'image', title: 'First frame', fieldType: 'image', maxItems: 1 }] : []),
      ];
    case 'speech':
      return [{ name: 'text', title: 'Text', fieldType: 'text', required: true }, ...select('voice', 'Voice', entry.voices)];
    case 'transcription':
      return [{ name: 'audio', title: 'Audio', fieldType: 'audio', required: true, maxItems: 1 }];
    case 'language':
      return [prompt, { name: 'system', title: 'System instructions', fieldType: 'text' }];
  }
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() !== '' ? v : undefined);
const firstUrl = (v: unknown): string | undefined => (Array.isArray(v) ? str(v[0]) : str(v));

function seedOf(v: unknown): number | undefined {
  const s = str(v);
  if (s === undefined) return undefined;
  const n = Number(s);
  if (!Number.isInteger(n)) throw new ProviderError(`seed ${s} is not an integer`, { code: 'invalid_input', publicMessage: 'The seed must be a whole number.' });
  return n;
}

function bytesOf(data: string | Uint8Array): Uint8Array {
  return typeof data === 'string' ? new Uint8Array(Buffer.from(data, 'base64')) : data;
}

/** Turns what an AI SDK model threw into the ProviderError the runner understands. */
function toProviderError(error: unknown, entry: AiSdkModel): ProviderError {
  if (error instanceof ProviderError) return error;
  const e = error as { name?: string; isRetryable?: unknown; statusCode?: unknown; message?: unknown };
  // APICallError (by its marker, without importing a second copy of @ai-sdk/provider): HTTP status and retryability.
  if (e && typeof e === 'object' && (e.name === 'AI_APICallError' || typeof e.isRetryable === 'boolean')) {
    const status = typeof e.statusCode === 'number' ? e.statusCode : undefined;
    return new ProviderError(`${entry.modelId}: ${String(e.message)}`, {
      retryable: e.isRetryable === true,
      publicMessage: status === 401 || status === 403 ? 'The model provider refused the credentials of this service.' : `The model provider answered ${status ?? 'with an error'}.`,
      cause: error,
    });
  }
  return new ProviderError(`${entry.modelId}: ${e && typeof e === 'object' ? String(e.message) : String(error)}`, { cause: error });
}

function logWarnings(ctx: GenerationContext, warnings: SharedV3Warning[] | undefined): void {
  for (const w of warnings ?? []) ctx.logger.warn({ warning: w }, 'ai-sdk: the model warned');
}

/**
 * Every AI SDK model given as a genservice model: image models make images, speech models audio, transcription and
 * language models text, video models video. Results are stored with their MIME type (sniffed when the model gives
 * none); a result given as a URL, and every media setting, is fetched through the outbound guard.
 */
export function createAiSdkProvider(options: AiSdkProviderOptions): GenerateProvider {
  if (!options || !Array.isArray(options.models) || options.models.length === 0) {
    throw new TypeError('createAiSdkProvider: models must be a non-empty array');
  }
  const entries = new Map<string, { entry: AiSdkModel; kind: AiSdkModelKind }>();
  const definitions: ModelDefinition[] = [];
  for (const entry of options.models) {
    if (typeof entry?.modelId !== 'string' || entry.modelId === '') throw new TypeError('createAiSdkProvider: every model needs a modelId');
    if (entries.has(entry.modelId)) throw new TypeError(`createAiSdkProvider: modelId ${entry.modelId} is listed twice`);
    const kind = kindOf(entry);
    entries.set(entry.modelId, { entry, kind });
    const { model: _m, kind: _k, sizes: _s, aspectRatios: _a, voices: _v, durations: _d, acceptsImage: _i, settings, callOptions: _c, ...definition } = entry;
    const defaults = defaultSettings(kind, entry);
    definitions.push({
      ...definition,
      resultType: RESULT_TYPE[kind],
      estimatedGenerationTime: entry.estimatedGenerationTime ?? ESTIMATE[kind],
      settings: settings ? settings(defaults) : defaults,
    });
  }
  const media = { ...MEDIA_DEFAULTS, ...options.media };

  async function fetchInput(url: string, ctx: GenerationContext, what: string): Promise<{ bytes: Uint8Array; mediaType: string }> {
    try {
      const got = await fetchMedia(url, { ...media, signal: ctx.signal });
      const mediaType = sniffMimeType(got.bytes) ?? got.contentType?.split(';')[0]?.trim() ?? 'application/octet-stream';
      return { bytes: got.bytes, mediaType };
    } catch (error) {
      if (ctx.signal.aborted) throw error;
      if (error instanceof OutboundError) {
        throw new ProviderError(`${what} ${url} could not be fetched: ${error.message}`, {
          retryable: error.retryable,
          code: 'invalid_input',
          publicMessage: `The ${what} could not be fetched (${error.code}).`,
          cause: error,
        });
      }
      throw error;
    }
  }

  function fileOutput(bytes: Uint8Array, given: string | undefined, fallback: string): GenerationOutput {
    return { bytes, mimeType: given && given !== 'application/octet-stream' ? given : (sniffMimeType(bytes) ?? fallback) };
  }

  return {
    models: definitions,
    async generate(input, ctx) {
      const found = entries.get(input.model.modelId);
      if (!found) throw new ProviderError(`ai-sdk: no model ${input.model.modelId}`);
      const { entry, kind } = found;
      const s = input.settings;
      const extra = entry.callOptions ? entry.callOptions(s) : {};
      const common = { abortSignal: ctx.signal, providerOptions: {} };
      try {
        switch (kind) {
          case 'image': {
            const imageUrl = firstUrl(s.image);
            const file = imageUrl ? await fetchInput(imageUrl, ctx, 'input image') : undefined;
            const r = await (entry.model as ImageModelV3).doGenerate({
              ...common,
              prompt: str(s.prompt),
              n: 1,
              size: str(s.size) as `${number}x${number}` | undefined,
              aspectRatio: str(s.aspect_ratio) as `${number}:${number}` | undefined,
              seed: seedOf(s.seed),
              files: file ? [{ type: 'file', mediaType: file.mediaType, data: file.bytes }] : undefined,
              mask: undefined,
              ...extra,
            });
            logWarnings(ctx, r.warnings);
            const image = r.images[0];
            if (image === undefined) throw new ProviderError(`${entry.modelId}: no image in the answer`, { publicMessage: 'The model returned no image.' });
            return fileOutput(bytesOf(image), undefined, 'image/png');
          }
          case 'video': {
            const imageUrl = firstUrl(s.image);
            const file = imageUrl ? await fetchInput(imageUrl, ctx, 'input image') : undefined;
            const duration = str(s.duration);
            const r = await (entry.model as VideoModelV3).doGenerate({
              ...common,
              prompt: str(s.prompt),
              n: 1,
              aspectRatio: str(s.aspect_ratio) as `${number}:${number}` | undefined,
              resolution: str(s.size) as `${number}x${number}` | undefined,
              duration: duration === undefined ? undefined : Number(duration),
              fps: undefined,
              seed: seedOf(s.seed),
              image: file ? { type: 'file', mediaType: file.mediaType, data: file.bytes } : undefined,
              frameImages: undefined,
              inputReferences: undefined,
              generateAudio: undefined,
              ...extra,
            } as Parameters<VideoModelV3['doGenerate']>[0]);
            logWarnings(ctx, r.warnings);
            const video = r.videos[0];
            if (!video) throw new ProviderError(`${entry.modelId}: no video in the answer`, { publicMessage: 'The model returned no video.' });
            if (video.type === 'url') {
              // Provider URLs expire: download now, through the guard.
              const got = await fetchInput(video.url, ctx, 'result video');
              return fileOutput(got.bytes, video.mediaType, 'video/mp4');
            }
            return fileOutput(video.type === 'base64' ? bytesOf(video.data) : video.data, video.mediaType, 'video/mp4');
          }
          case 'speech': {
            const r = await (entry.model as SpeechModelV3).doGenerate({
              ...common,
              text: str(s.text) ?? '',
              voice: str(s.voice),
              ...extra,
            });
            logWarnings(ctx, r.warnings);
            return fileOutput(bytesOf(r.audio), undefined, 'audio/mpeg');
          }
          case 'transcription': {
            const url = firstUrl(s.audio);
            if (!url) throw new ProviderError('no audio given', { code: 'invalid_input', publicMessage: 'An audio URL is required.' });
            const audio = await fetchInput(url, ctx, 'audio');
            const r = await (entry.model as TranscriptionModelV3).doGenerate({ ...common, audio: audio.bytes, mediaType: audio.mediaType, ...extra });
            logWarnings(ctx, r.warnings);
            return { text: r.text };
          }
          case 'language': {
            const system = str(s.system);
            const r = await (entry.model as LanguageModelV3).doGenerate({
              ...common,
              prompt: [
                ...(system ? [{ role: 'system' as const, content: system }] : []),
                { role: 'user' as const, content: [{ type: 'text' as const, text: str(s.prompt) ?? '' }] },
              ],
              ...extra,
            });
            logWarnings(ctx, r.warnings);
            const text = r.content
              .filter((c): c is Extract<typeof c, { type: 'text' }> => c.type === 'text')
              .map((c) => c.text)
              .join('');
            return { text };
          }
        }
      } catch (error) {
        if (ctx.signal.aborted) throw error;
        throw toProviderError(error, entry);
      }
    },
  };
}
