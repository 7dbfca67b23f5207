import type { GenerationContext, GenerationInput, GenerationOutput, ModelDefinition, ModelProvider } from '@genservice/core';
import { ProviderError } from '@genservice/core';
import type { FetchMediaOptions } from './fetch/fetch-media.js';
import { imageModel } from './models/image.js';
import type { DemoModel, DemoRuntime } from './models/types.js';
import { videoModel } from './models/video.js';

export { fetchMedia, type FetchMediaOptions } from './fetch/fetch-media.js';
export type { DemoModel, DemoRuntime } from './models/types.js';

export interface DemoProviderOptions {
  /** Multiplies the artificial delay: 1 takes about `estimatedGenerationTime`, 0.02 suits tests, 0 none. */
  speed?: number;
  /** Limits for fetching media inputs (remix model). */
  fetch?: FetchMediaOptions;
}

/** Every demo model, in the order GET /v1/models lists them. */
export const demoModels: readonly DemoModel[] = [imageModel, videoModel];

/** The model definitions alone, for hosts that want to show or filter the catalogue. */
export const demoModelDefinitions: readonly ModelDefinition[] = demoModels.map((m) => m.definition);

/** A ModelProvider with the whole demo catalogue: real files made locally, deterministic from the settings. */
export function createDemoProvider(options: DemoProviderOptions = {}): ModelProvider {
  const speed = options.speed ?? 1;
  if (!Number.isFinite(speed) || speed < 0) throw new RangeError('speed must be a finite number >= 0');
  const runtime: DemoRuntime = { speed, fetch: { ...options.fetch } };
  const byId = new Map(demoModels.map((m) => [m.definition.modelId, m]));
  return {
    models: demoModels.map((m) => m.definition),
    async generate(input: GenerationInput, ctx: GenerationContext): Promise<GenerationOutput> {
      const model = byId.get(input.model.modelId);
      // Core only routes its own models here, but a host may merge providers and route by mistake.
      if (!model) throw new ProviderError(`unknown demo model "${input.model.modelId}"`, { retryable: false });
      return model.run(input.settings, ctx, runtime);
    },
  };
}
