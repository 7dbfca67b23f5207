import type {
  Experimental_VideoModelV3,
  ImageModelV3,
  LanguageModelV3,
  SharedV3ProviderOptions,
  SpeechModelV3,
  TranscriptionModelV3,
} from '@ai-sdk/provider';
import type { FetchMediaOptions, ModelDefinition, SettingDescriptor, Settings } from '@genservice/core/ports';

/**
 * What an AI SDK model is, and so what its generations make: `image` (an image), `speech` (audio),
 * `transcription` (text from an audio setting), `language` (text), `video` (a video).
 */
export type AiSdkModelKind = 'image' | 'speech' | 'transcription' | 'language' | 'video';

/** An AI SDK model object of specification v3 (`@ai-sdk/provider@3`), of any kind the bridge runs. */
export type AiSdkModelObject = ImageModelV3 | SpeechModelV3 | TranscriptionModelV3 | LanguageModelV3 | Experimental_VideoModelV3;

/**
 * One change to a default setting, in the map form of {@link AiSdkModel.settings}: any descriptor field to replace
 * (`title`, `required`, `options`, `maxItems`, `fieldType`), and `name` to rename it (the bridge maps the new name back
 * to the default one before calling the model).
 */
export type AiSdkSettingOverride = Partial<SettingDescriptor>;

/**
 * How a host narrows or renames the settings a model offers:
 *
 * - a map from a default setting's name to `false` (drop it) or an {@link AiSdkSettingOverride} (change or rename it);
 *   renamed settings are mapped back for you;
 * - or a function from the default descriptors to the ones offered (drop, reorder, add your own). A setting renamed
 *   or added this way reaches the model only through {@link AiSdkModel.callOptions}.
 */
export type AiSdkSettingsOption = Readonly<Record<string, false | AiSdkSettingOverride>> | ((defaults: SettingDescriptor[]) => SettingDescriptor[]);

/**
 * Limits and address policy for the bridge's own downloads, through core's outbound guard (`fetchMedia`): refuses
 * loopback, private and link-local addresses (checked on every redirect), bounds size and time.
 */
export type AiSdkFetchOptions = Omit<FetchMediaOptions, 'signal'>;

/**
 * One genservice model backed by an AI SDK model: every {@link ModelDefinition} field (`modelId`, `title`, `price`,
 * `failureFee`, `timeoutMs`, `concurrency`, `maxAttempts`) except `resultType` (from the kind) and `settings`
 * (derived from the kind, see {@link AiSdkModel.settings}), plus the fields below.
 */
export interface AiSdkModel extends Omit<ModelDefinition, 'resultType' | 'settings' | 'estimatedGenerationTime'> {
  /** The AI SDK model object, e.g. `openai.image('gpt-image-1')` or `fal.video('luma-dream-machine')`. */
  model: AiSdkModelObject;
  /**
   * Which kind of model it is. Image, video and language models are recognised by their shape. Speech and
   * transcription models have the same shape: the bridge reads the class name (`OpenAISpeechModel`,
   * `FalTranscriptionModel`, ...); say `kind` when it does not tell.
   */
  kind?: AiSdkModelKind;
  /** Seconds a generation takes, about. Default: image 15, speech 5, transcription 10, language 10, video 120. */
  estimatedGenerationTime?: number;
  /** Image and video models: the sizes (video: resolutions) offered, as a `size` select, e.g. `['1024x1024']`. */
  sizes?: readonly string[];
  /** Image and video models: the aspect ratios offered, as an `aspect_ratio` select, e.g. `['1:1', '16:9']`. */
  aspectRatios?: readonly string[];
  /** Speech models: the voices offered, as a `voice` select, e.g. `['alloy', 'nova']`. */
  voices?: readonly string[];
  /** Video models: the durations offered in seconds, as a `duration` select, e.g. `[5, 10]`. */
  durations?: readonly number[];
  /** Image and video models: take one input image (an optional `image` media setting; video: the first frame). */
  acceptsImage?: boolean;
  /** Language models: the temperatures offered, as a `temperature` select, e.g. `[0, 0.7, 1]`. */
  temperatures?: readonly number[];
  /**
   * Language models: a number caps the answer's tokens on every call (a bound on what one generation costs you); a
   * list offers the caps as a `max_output_tokens` select.
   */
  maxOutputTokens?: number | readonly number[];
  /** Narrow or rename the settings the model offers (see {@link AiSdkSettingsOption}). Default: all of its kind's. */
  settings?: AiSdkSettingsOption;
  /**
   * Provider options sent on every call, e.g. `{ openai: { quality: 'high' } }` (the `providerOptions` of the AI SDK
   * call); what `callOptions` returns as `providerOptions` is merged over them, per provider.
   */
  providerOptions?: SharedV3ProviderOptions;
  /**
   * Extra call options of the AI SDK call from the validated settings, keyed as the client sent them (the offered
   * names): provider options, settings you added or renamed with a `settings` function. Merged over the call options
   * the bridge derived (so it can replace any of them); its `providerOptions` are merged per provider over
   * `providerOptions`. E.g. `(s) => ({ providerOptions: { openai: { quality: s.quality } } })`.
   */
  callOptions?: (settings: Settings) => Record<string, unknown>;
}

/** Options of {@link createAiSdkProvider}. */
export interface AiSdkProviderOptions {
  /** The models offered; at least one, each `modelId` once. */
  models: readonly AiSdkModel[];
  /**
   * Media settings (an input image, the audio to transcribe) are fetched through core's outbound guard with these
   * limits. Default: 25 MiB, 60 s, public addresses only. Its `allowPrivateNetworks`, `trustedHosts` and `lookup`
   * also apply to result downloads unless `results` sets them.
   */
  media?: AiSdkFetchOptions;
  /**
   * Results a model gives as a URL (video models) are downloaded at once (provider URLs expire) through the same
   * guard with these limits. Default: 200 MiB, 120 s, and the address policy of `media`.
   */
  results?: AiSdkFetchOptions;
}
