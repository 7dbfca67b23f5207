import type {
  Experimental_VideoModelV3,
  Experimental_VideoModelV3CallOptions,
  ImageModelV3,
  ImageModelV3CallOptions,
  LanguageModelV3,
  LanguageModelV3CallOptions,
  SharedV3ProviderOptions,
  SharedV3Warning,
  SpeechModelV3,
  SpeechModelV3CallOptions,
  TranscriptionModelV3,
  TranscriptionModelV3CallOptions,
} from '@ai-sdk/provider';
import {
  fetchMedia,
  OutboundError,
  ProviderError,
  type GenerateProvider,
  type GenerationContext,
  type GenerationOutput,
  type ModelDefinition,
  type Settings,
} from '@genservice/core/ports';
import { toProviderError } from './errors.js';
import { kindOf } from './kind.js';
import { resolveSettings, underDefaultNames } from './settings.js';
import { sniffMimeType } from './sniff.js';
import type { AiSdkFetchOptions, AiSdkModel, AiSdkModelKind, AiSdkProviderOptions } from './types.js';

const MEDIA_DEFAULTS = { maxBytes: 25 * 1024 * 1024, timeoutMs: 60_000 } as const;
const RESULT_DEFAULTS = { maxBytes: 200 * 1024 * 1024, timeoutMs: 120_000 } as const;

const RESULT_TYPE: Record<AiSdkModelKind, ModelDefinition['resultType']> = {
  image: 'image',
  speech: 'audio',
  transcription: 'text',
  language: 'text',
  video: 'video',
};
const ESTIMATE: Record<AiSdkModelKind, number> = { image: 15, speech: 5, transcription: 10, language: 10, video: 120 };
/** What a file result is called when neither the model nor its bytes say (and the bridge warns). */
const FALLBACK_TYPE: Record<'image' | 'speech' | 'video', string> = { image: 'image/png', speech: 'audio/mpeg', video: 'video/mp4' };

interface Entry {
  entry: AiSdkModel;
  kind: AiSdkModelKind;
  renames: Map<string, string>;
}

interface Fetched {
  bytes: Uint8Array;
  mediaType: string;
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() !== '' ? v : undefined);
const firstUrl = (v: unknown): string | undefined => (Array.isArray(v) ? str(v[0]) : str(v));

function numberOf(settings: Settings, name: string, what: string, integer: boolean): number | undefined {
  const raw = settings[name];
  if (typeof raw === 'number') return raw;
  const s = str(raw);
  if (s === undefined) return undefined;
  const n = Number(s.trim());
  if (!Number.isFinite(n) || (integer && !Number.isSafeInteger(n))) {
    throw new ProviderError(`${name} ${JSON.stringify(s.slice(0, 40))} is not a ${integer ? 'whole ' : ''}number`, {
      code: 'invalid_input',
      publicMessage: `The ${what} must be a ${integer ? 'whole ' : ''}number.`,
    });
  }
  return n;
}

function bytesOf(data: string | Uint8Array): Uint8Array {
  return typeof data === 'string' ? new Uint8Array(Buffer.from(data, 'base64')) : data;
}

function logWarnings(ctx: GenerationContext, modelId: string, warnings: readonly SharedV3Warning[] | undefined): void {
  for (const warning of warnings ?? []) ctx.logger.warn({ model: modelId, warning }, 'ai-sdk: the model warned');
}

/** Per-provider merge: `{ openai: { a } }` and `{ openai: { b } }` make `{ openai: { a, b } }`. */
function mergeProviderOptions(base: SharedV3ProviderOptions | undefined, over: unknown): SharedV3ProviderOptions {
  const out: SharedV3ProviderOptions = { ...(base ?? {}) };
  if (over && typeof over === 'object') {
    for (const [provider, value] of Object.entries(over as SharedV3ProviderOptions)) out[provider] = { ...(out[provider] ?? {}), ...value };
  }
  return out;
}

/**
 * Every AI SDK model given as a genservice model (a one-call provider: `generate` awaits the model's `doGenerate`, a
 * language model's `doStream`, whose text deltas are streamed to clients as partial output as they come):
 * image models make images, speech models audio, transcription and language models text, video models video, each
 * with the settings of its kind. File results are stored with their MIME type (the model's, else sniffed from the
 * bytes); a result given as a URL, and every media setting, is fetched through core's outbound guard. Errors become
 * ProviderErrors, retryable as the AI SDK says; the run's AbortSignal reaches the model; its warnings are logged.
 *
 * Throws a TypeError naming the model when the options are wrong (no models, a modelId twice, something that is not
 * an AI SDK v3 model, a kind it cannot place, a bad `settings` option).
 *
 * @example
 * const openai = createOpenAI({ apiKey: process.env.OPENAI_API_KEY });
 * const provider = createAiSdkProvider({
 *   models: [{ modelId: 'gpt-image', title: 'GPT Image', model: openai.image('gpt-image-1'), price: 8, sizes: ['1024x1024'] }],
 * });
 * const service = createGenerationService({ providers: [provider] });
 */
export function createAiSdkProvider(options: AiSdkProviderOptions): GenerateProvider {
  if (!options || !Array.isArray(options.models) || options.models.length === 0) {
    throw new TypeError('createAiSdkProvider: models must be a non-empty array');
  }
  const entries = new Map<string, Entry>();
  const definitions: ModelDefinition[] = [];
  for (const entry of options.models) {
    if (typeof entry?.modelId !== 'string' || entry.modelId === '') throw new TypeError('createAiSdkProvider: every model needs a modelId');
    if (entries.has(entry.modelId)) throw new TypeError(`createAiSdkProvider: modelId ${entry.modelId} is listed twice`);
    const kind = kindOf(entry);
    const { descriptors, renames } = resolveSettings(kind, entry);
    entries.set(entry.modelId, { entry, kind, renames });
    const {
      model: _model,
      kind: _kind,
      sizes: _sizes,
      aspectRatios: _aspectRatios,
      voices: _voices,
      durations: _durations,
      acceptsImage: _acceptsImage,
      temperatures: _temperatures,
      maxOutputTokens: _maxOutputTokens,
      settings: _settings,
      providerOptions: _providerOptions,
      callOptions: _callOptions,
      ...definition
    } = entry;
    definitions.push({
      ...definition,
      resultType: RESULT_TYPE[kind],
      estimatedGenerationTime: entry.estimatedGenerationTime ?? ESTIMATE[kind],
      settings: descriptors,
    });
  }
  const media: AiSdkFetchOptions = { ...MEDIA_DEFAULTS, ...options.media };
  const addressPolicy: AiSdkFetchOptions = {};
  if (options.media?.allowPrivateNetworks !== undefined) addressPolicy.allowPrivateNetworks = options.media.allowPrivateNetworks;
  if (options.media?.trustedHosts !== undefined) addressPolicy.trustedHosts = options.media.trustedHosts;
  if (options.media?.lookup !== undefined) addressPolicy.lookup = options.media.lookup;
  const results: AiSdkFetchOptions = { ...RESULT_DEFAULTS, ...addressPolicy, ...options.results };

  /**
   * Fetches a media setting through the guard; one that cannot be fetched, or whose bytes are plainly another kind of
   * file than the setting takes (`accepts`: MIME type prefixes), is the caller's input problem.
   */
  async function fetchInput(url: string, ctx: GenerationContext, what: string, accepts: readonly string[]): Promise<Fetched> {
    let got: Awaited<ReturnType<typeof fetchMedia>>;
    try {
      got = await fetchMedia(url, { ...media, signal: ctx.signal });
    } catch (error) {
      if (ctx.signal.aborted || !(error instanceof OutboundError)) throw error;
      ctx.logger.warn({ code: error.code, reason: error.message }, `ai-sdk: the ${what} could not be fetched`);
      throw new ProviderError(`the ${what} could not be fetched: ${error.message}`, {
        retryable: error.retryable,
        code: 'invalid_input',
        publicMessage: `The ${what} could not be fetched (${error.code}).`,
        cause: error,
      });
    }
    const sniffed = sniffMimeType(got.bytes);
    if (sniffed && !accepts.some((prefix) => sniffed.startsWith(prefix))) {
      throw new ProviderError(`the ${what} is ${sniffed}`, { code: 'invalid_input', publicMessage: `The ${what} is not a file this model takes (${sniffed}).` });
    }
    return { bytes: got.bytes, mediaType: sniffed ?? got.contentType?.split(';')[0]?.trim() ?? 'application/octet-stream' };
  }

  /** Downloads a result the model gave as a URL, at once (provider URLs expire), through the guard. */
  async function fetchResult(url: string, ctx: GenerationContext, modelId: string): Promise<Fetched> {
    try {
      const got = await fetchMedia(url, { ...results, signal: ctx.signal });
      return { bytes: got.bytes, mediaType: got.contentType?.split(';')[0]?.trim() ?? '' };
    } catch (error) {
      if (ctx.signal.aborted || !(error instanceof OutboundError)) throw error;
      throw new ProviderError(`${modelId}: the result could not be downloaded: ${error.message}`, {
        retryable: error.retryable,
        publicMessage: `The model's result could not be downloaded (${error.code}).`,
        cause: error,
      });
    }
  }

  /** A file output with the model's MIME type, else the one its bytes show, else the kind's usual one (with a warning). */
  function fileOutput(ctx: GenerationContext, kind: 'image' | 'speech' | 'video', bytes: Uint8Array, given?: string): GenerationOutput {
    const stated = given?.split(';')[0]?.trim().toLowerCase();
    if (stated && stated !== 'application/octet-stream' && stated.includes('/')) return { bytes, mimeType: stated };
    const sniffed = sniffMimeType(bytes);
    if (sniffed) return { bytes, mimeType: sniffed };
    ctx.logger.warn({ bytes: bytes.length }, `ai-sdk: the ${kind} result has no MIME type and its bytes match no known format; stored as ${FALLBACK_TYPE[kind]}`);
    return { bytes, mimeType: FALLBACK_TYPE[kind] };
  }

  async function run(found: Entry, raw: Settings, ctx: GenerationContext): Promise<GenerationOutput> {
    const { entry, kind } = found;
    const s = underDefaultNames(raw, found.renames);
    const extra = entry.callOptions ? entry.callOptions(raw) : {};
    const providerOptions = mergeProviderOptions(entry.providerOptions, extra.providerOptions);
    const common = { abortSignal: ctx.signal, providerOptions };
    const overrides = { ...extra, providerOptions };
    const id = entry.modelId;
    switch (kind) {
      case 'image': {
        const imageUrl = firstUrl(s.image);
        const file = imageUrl ? await fetchInput(imageUrl, ctx, 'input image', ['image/']) : undefined;
        const call: ImageModelV3CallOptions = {
          ...common,
          prompt: str(s.prompt),
          n: 1,
          size: str(s.size) as ImageModelV3CallOptions['size'],
          aspectRatio: str(s.aspect_ratio) as ImageModelV3CallOptions['aspectRatio'],
          seed: numberOf(s, 'seed', 'seed', true),
          files: file ? [{ type: 'file', mediaType: file.mediaType, data: file.bytes }] : undefined,
          mask: undefined,
          ...overrides,
        };
        const r = await (entry.model as ImageModelV3).doGenerate(call);
        logWarnings(ctx, id, r.warnings);
        const image = r.images[0];
        if (image === undefined) throw new ProviderError(`${id}: the answer held no image`, { publicMessage: 'The model returned no image.' });
        return fileOutput(ctx, 'image', bytesOf(image));
      }
      case 'video': {
        const imageUrl = firstUrl(s.image);
        const file = imageUrl ? await fetchInput(imageUrl, ctx, 'first frame', ['image/']) : undefined;
        const call: Experimental_VideoModelV3CallOptions = {
          ...common,
          prompt: str(s.prompt),
          n: 1,
          aspectRatio: str(s.aspect_ratio) as Experimental_VideoModelV3CallOptions['aspectRatio'],
          resolution: str(s.size) as Experimental_VideoModelV3CallOptions['resolution'],
          duration: numberOf(s, 'duration', 'duration', false),
          fps: undefined,
          seed: numberOf(s, 'seed', 'seed', true),
          image: file ? { type: 'file', mediaType: file.mediaType, data: file.bytes } : undefined,
          frameImages: undefined,
          inputReferences: undefined,
          generateAudio: undefined,
          ...overrides,
        };
        const r = await (entry.model as Experimental_VideoModelV3).doGenerate(call);
        logWarnings(ctx, id, r.warnings);
        const video = r.videos[0];
        if (!video) throw new ProviderError(`${id}: the answer held no video`, { publicMessage: 'The model returned no video.' });
        if (video.type === 'url') {
          const got = await fetchResult(video.url, ctx, id);
          return fileOutput(ctx, 'video', got.bytes, video.mediaType || got.mediaType);
        }
        return fileOutput(ctx, 'video', bytesOf(video.data), video.mediaType);
      }
      case 'speech': {
        const call: SpeechModelV3CallOptions = { ...common, text: str(s.text) ?? '', voice: str(s.voice), ...overrides };
        const r = await (entry.model as SpeechModelV3).doGenerate(call);
        logWarnings(ctx, id, r.warnings);
        return fileOutput(ctx, 'speech', bytesOf(r.audio));
      }
      case 'transcription': {
        const url = firstUrl(s.audio);
        if (!url) throw new ProviderError(`${id}: no audio URL`, { code: 'invalid_input', publicMessage: 'An audio URL is required.' });
        const audio = await fetchInput(url, ctx, 'audio', ['audio/', 'video/']);
        const call: TranscriptionModelV3CallOptions = { ...common, audio: audio.bytes, mediaType: audio.mediaType, ...overrides };
        const r = await (entry.model as TranscriptionModelV3).doGenerate(call);
        logWarnings(ctx, id, r.warnings);
        return { text: r.text };
      }
      case 'language': {
        const system = str(s.system);
        const chosenCap = numberOf(s, 'max_output_tokens', 'longest answer', true);
        const call: LanguageModelV3CallOptions = {
          ...common,
          prompt: [
            ...(system ? [{ role: 'system' as const, content: system }] : []),
            { role: 'user' as const, content: [{ type: 'text' as const, text: str(s.prompt) ?? '' }] },
          ],
          temperature: numberOf(s, 'temperature', 'temperature', false),
          maxOutputTokens: chosenCap ?? (typeof entry.maxOutputTokens === 'number' ? entry.maxOutputTokens : undefined),
          ...overrides,
        };
        // Streamed: each text delta reaches the generation's event stream as it comes (ctx.output), and the
        // joined text is the result.
        const { stream } = await (entry.model as LanguageModelV3).doStream(call);
        let text = '';
        let finishReason: unknown;
        let usage: unknown;
        const reader = stream.getReader();
        try {
          for (;;) {
            const { done, value: part } = await reader.read();
            if (done) break;
            if (part.type === 'text-delta') {
              text += part.delta;
              ctx.output.append(part.delta);
            } else if (part.type === 'stream-start') logWarnings(ctx, id, part.warnings);
            else if (part.type === 'finish') {
              finishReason = part.finishReason;
              usage = part.usage;
            } else if (part.type === 'error') throw part.error;
          }
        } finally {
          await reader.cancel().catch(() => undefined);
        }
        const finish = typeof finishReason === 'object' && finishReason !== null ? (finishReason as { unified: string }).unified : String(finishReason);
        ctx.logger.debug({ model: id, finishReason: finish, usage }, 'ai-sdk: the model answered');
        if (text === '' && finish === 'content-filter') {
          throw new ProviderError(`${id}: the answer was stopped by the provider's content filter`, {
            publicMessage: "The model provider's content filter stopped the answer.",
          });
        }
        if (text === '' && finish === 'error') {
          throw new ProviderError(`${id}: the model stopped with an error and no text`, { publicMessage: 'The model stopped with an error.' });
        }
        return { text };
      }
    }
  }

  return {
    models: definitions,
    async generate(input, ctx) {
      const found = entries.get(input.model.modelId);
      if (!found) throw new ProviderError(`ai-sdk: no model ${input.model.modelId}`);
      try {
        return await run(found, input.settings, ctx);
      } catch (error) {
        // A cancel, timeout or shutdown: the runner knows why; whatever the SDK made of the abort is beside the point.
        if (ctx.signal.aborted) throw error;
        throw toProviderError(error, found.entry.modelId);
      }
    },
  };
}
