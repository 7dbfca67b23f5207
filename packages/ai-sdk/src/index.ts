/**
 * @module @genservice/ai-sdk
 *
 * Any Vercel AI SDK model of specification v3 (`@ai-sdk/provider@3`: `@ai-sdk/openai@3`, `@ai-sdk/fal@2`,
 * `@ai-sdk/replicate@2`, ...) as a genservice model. The bridge calls the model's `doGenerate` itself: the `ai`
 * package is not needed; `@ai-sdk/provider` is a peer dependency.
 *
 * @example
 * import { createOpenAI } from '@ai-sdk/openai';
 * import { createGenerationService } from '@genservice/core';
 * import { createAiSdkProvider } from '@genservice/ai-sdk';
 *
 * const openai = createOpenAI({ apiKey: process.env.OPENAI_API_KEY });
 * const provider = createAiSdkProvider({
 *   models: [
 *     { modelId: 'gpt-image', title: 'GPT Image', model: openai.image('gpt-image-1'), price: 8, sizes: ['1024x1024', '1536x1024'] },
 *     { modelId: 'tts', title: 'Text to speech', model: openai.speech('tts-1'), price: 2, voices: ['alloy', 'nova'] },
 *     { modelId: 'whisper', title: 'Transcription', model: openai.transcription('whisper-1'), price: 2 },
 *     { modelId: 'chat', title: 'Chat', model: openai.chat('gpt-4o-mini'), price: 1, maxOutputTokens: 1000 },
 *   ],
 * });
 * const service = createGenerationService({ providers: [provider] });
 */
export { createAiSdkProvider } from './provider.js';
export { createGuardedFetch, type GuardedFetchOptions } from './guarded-fetch.js';
export { sniffMimeType } from './sniff.js';
export type {
  AiSdkFetchOptions,
  AiSdkModel,
  AiSdkModelKind,
  AiSdkModelObject,
  AiSdkProviderOptions,
  AiSdkSettingOverride,
  AiSdkSettingsOption,
} from './types.js';
