/**
 * Real model providers an example host enables when their keys are in the environment, listed beside the demo
 * models. Nothing here is needed to run the demo or the tests.
 *
 * - `REPLICATE_API_TOKEN` (and `REPLICATE_BASE_URL` to point elsewhere): FLUX.1 [schnell] (image) and Llama 3 8B
 *   Instruct (text) on Replicate.
 * - `FAL_KEY` (and `FAL_BASE_URL`): FLUX.1 [schnell] (image) and LTX Video (video) on fal.
 * - `OPENAI_API_KEY` (and `OPENAI_BASE_URL`): GPT Image, text to speech and chat through the AI SDK bridge.
 */
import { createHash } from 'node:crypto';
import { ProviderError, type Logger, type ModelProvider, type SettingDescriptor } from '@genservice/core';
import { createAiSdkProvider } from '@genservice/ai-sdk';
import { createFalProvider, createReplicateProvider } from '@genservice/providers';

const prompt: SettingDescriptor = { name: 'prompt', title: 'Prompt', fieldType: 'text', required: true };
const aspect: SettingDescriptor = { name: 'aspect_ratio', title: 'Aspect ratio', fieldType: 'select', options: ['1:1', '16:9', '9:16', '4:3', '3:4'] };

/**
 * The providers whose keys are set in `env`. `allowPrivateResults` lets result files come from private addresses
 * (ALLOW_PRIVATE_MEDIA: for a fake upstream on this machine, never in production).
 */
export async function configuredProviders(env: NodeJS.ProcessEnv, logger: Logger, allowPrivateResults = false): Promise<ModelProvider[]> {
  const providers: ModelProvider[] = [];
  const results = { allowPrivateNetworks: allowPrivateResults };
  if (env.REPLICATE_API_TOKEN) {
    providers.push(
      createReplicateProvider({
        apiToken: env.REPLICATE_API_TOKEN,
        ...(env.REPLICATE_BASE_URL ? { baseUrl: env.REPLICATE_BASE_URL } : {}),
        results,
        models: [
          {
            modelId: 'replicate-flux-schnell',
            title: 'FLUX.1 [schnell] (Replicate)',
            resultType: 'image',
            estimatedGenerationTime: 4,
            price: 3,
            settings: [prompt, aspect],
            model: 'black-forest-labs/flux-schnell',
            input: (s) => ({ prompt: s.prompt, aspect_ratio: s.aspect_ratio ?? '1:1', output_format: 'png' }),
          },
          {
            modelId: 'replicate-llama-3-8b',
            title: 'Llama 3 8B Instruct (Replicate)',
            resultType: 'text',
            estimatedGenerationTime: 3,
            price: 1,
            settings: [prompt],
            model: 'meta/meta-llama-3-8b-instruct',
            // The output is a list of streamed strings, joined by the default output mapping.
            input: (s) => ({ prompt: s.prompt, max_tokens: 512 }),
          },
        ],
      }),
    );
    logger.info({ provider: 'replicate' }, 'real provider enabled');
  }
  if (env.FAL_KEY) {
    providers.push(
      createFalProvider({
        apiKey: env.FAL_KEY,
        ...(env.FAL_BASE_URL ? { baseUrl: env.FAL_BASE_URL } : {}),
        results,
        models: [
          {
            modelId: 'fal-flux-schnell',
            title: 'FLUX.1 [schnell] (fal)',
            resultType: 'image',
            estimatedGenerationTime: 3,
            price: 3,
            settings: [prompt],
            endpoint: 'fal-ai/flux/schnell',
            input: (s) => ({ prompt: s.prompt, num_images: 1, output_format: 'png' }),
          },
          {
            modelId: 'fal-ltx-video',
            title: 'LTX Video (fal)',
            resultType: 'video',
            estimatedGenerationTime: 30,
            price: 20,
            failureFee: 1,
            // Generous: a queue can hold a video request for minutes before it runs.
            timeoutMs: 10 * 60_000,
            settings: [prompt],
            endpoint: 'fal-ai/ltx-video',
            // The result is { video: { url } }, found by the default output mapping.
            input: (s) => ({ prompt: s.prompt }),
          },
        ],
      }),
    );
    logger.info({ provider: 'fal' }, 'real provider enabled');
  }
  if (env.OPENAI_API_KEY) {
    const { createOpenAI } = await import('@ai-sdk/openai');
    const openai = createOpenAI({ apiKey: env.OPENAI_API_KEY, ...(env.OPENAI_BASE_URL ? { baseURL: env.OPENAI_BASE_URL } : {}) });
    providers.push(
      createAiSdkProvider({
        media: { allowPrivateNetworks: allowPrivateResults },
        models: [
          { modelId: 'openai-image', title: 'GPT Image (OpenAI)', model: openai.image('gpt-image-1'), price: 8, sizes: ['1024x1024', '1536x1024', '1024x1536'] },
          { modelId: 'openai-tts', title: 'Text to speech (OpenAI)', model: openai.speech('tts-1'), price: 2, voices: ['alloy', 'echo', 'nova', 'shimmer'] },
          { modelId: 'openai-chat', title: 'Chat (OpenAI gpt-4o-mini)', model: openai.chat('gpt-4o-mini'), price: 1 },
        ],
      }),
    );
    logger.info({ provider: 'openai' }, 'real provider enabled');
  }
  return providers;
}

/**
 * `demo-text-flaky`: the demo text model behind an unreliable "upstream". For half of the generations (by id) its
 * provider is in an outage and fails every attempt retryably; those run on its fallback `demo-text` instead (their
 * details show `servedModelId: "demo-text"`), and after `runner.circuit.failureThreshold` failures in a row the
 * provider's circuit opens and every `demo-text-flaky` generation goes straight to `demo-text` until it closes.
 * Its own provider, so its circuit is not the stable model's.
 */
export function flakyDemoProvider(stable: ModelProvider): ModelProvider {
  const text = stable.models.find((m) => m.modelId === 'demo-text');
  if (!text || !('generate' in stable)) throw new Error('flakyDemoProvider needs the demo provider with demo-text');
  return {
    models: [
      {
        ...text,
        modelId: 'demo-text-flaky',
        title: 'Flaky text (falls back to Demo text)',
        settings: text.settings.map((s) => ({ ...s })),
        maxAttempts: 2,
        fallbacks: ['demo-text'],
      },
    ],
    async generate(input, ctx) {
      if (createHash('sha256').update(ctx.generationId).digest()[0]! % 2 === 0) {
        throw new ProviderError('the flaky upstream is in an outage', { retryable: true, publicMessage: 'The upstream is unavailable.' });
      }
      return stable.generate({ ...input, model: text }, ctx);
    },
  };
}
