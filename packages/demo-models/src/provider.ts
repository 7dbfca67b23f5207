import type { GenerateProvider, GenerationContext, GenerationInput, GenerationOutput, ModelDefinition } from '@genservice/core';
import { ProviderError } from '@genservice/core';
import type { FetchMediaOptions } from '@genservice/core';
import { audioModel } from './models/audio.js';
import { failingModel } from './models/failing.js';
import { imageModel } from './models/image.js';
import { meshModel } from './models/mesh3d.js';
import { remixModel } from './models/remix.js';
import { textModel } from './models/text.js';
import type { DemoModel, DemoRuntime } from './models/types.js';
import { videoModel } from './models/video.js';
import { ImageWorkerPool } from './workers/pool.js';

const CATALOGUE: readonly DemoModel[] = [textModel, imageModel, videoModel, audioModel, meshModel, remixModel, failingModel];

export const DEMO_MODEL_IDS = [
  'demo-text',
  'demo-image',
  'demo-video',
  'demo-audio',
  'demo-3d',
  'demo-image-remix',
  'demo-always-fails',
] as const;
export type DemoModelId = (typeof DEMO_MODEL_IDS)[number];

/** Every demo model's definition (descriptor, price, limits), e.g. for documentation or a host's own listing. */
export const demoModels: readonly ModelDefinition[] = CATALOGUE.map((m) => m.definition);

export interface DemoProviderOptions {
  /**
   * Multiplier for the artificial delay. 1 (default) makes each model take about its `estimatedGenerationTime`;
   * tests pass something tiny such as 0.01; 0 removes the delay.
   */
  speed?: number;
  /**
   * Limits for fetching media inputs (`demo-image-remix`). Private and loopback addresses are refused unless
   * `allowPrivateNetworks` is set. `signal` is ignored here: each run uses its own.
   */
  fetch?: Omit<FetchMediaOptions, 'signal'>;
  /** Only offer these models (default: all of them), e.g. to hide `demo-always-fails` from a public demo. */
  models?: readonly DemoModelId[];
  /**
   * Where image decoding and encoding run: a pool of worker threads, so a large input image never stalls the event
   * loop that answers every user's requests. A number is the pool's size (default: cores - 1, at least 1, at most
   * 4; 0 runs them inline), or pass a pool to share it between providers.
   */
  imageWorkers?: number | ImageWorkerPool;
}

/**
 * A provider whose models make real files locally, with no network (except fetching user-supplied media
 * inputs) and no model weights, deterministic from the settings.
 *
 * @example
 * const service = createGenerationService({ providers: [createDemoProvider()] });
 */
export function createDemoProvider(options: DemoProviderOptions = {}): GenerateProvider {
  const speed = options.speed ?? 1;
  if (!Number.isFinite(speed) || speed < 0) throw new RangeError(`speed must be a finite number >= 0, got ${speed}`);
  const wanted = options.models ? new Set<string>(options.models) : undefined;
  for (const id of wanted ?? []) {
    if (!(DEMO_MODEL_IDS as readonly string[]).includes(id)) throw new RangeError(`unknown demo model ${id}`);
  }
  const selected = CATALOGUE.filter((m) => wanted === undefined || wanted.has(m.definition.modelId));
  const byId = new Map(selected.map((m) => [m.definition.modelId, m]));
  const images = options.imageWorkers instanceof ImageWorkerPool ? options.imageWorkers : new ImageWorkerPool({ size: options.imageWorkers });
  const runtime: DemoRuntime = { speed, fetch: { ...options.fetch }, images };

  return {
    // Copies, so a host that edits its listing (say, a title) does not change another provider's models.
    models: selected.map((m) => ({ ...m.definition, settings: m.definition.settings.map((s) => ({ ...s })) })),
    async generate(input: GenerationInput, ctx: GenerationContext): Promise<GenerationOutput> {
      const model = byId.get(input.model.modelId);
      if (!model) throw new ProviderError(`the demo provider has no model ${input.model.modelId}`);
      try {
        return await model.run(input.settings, ctx, runtime);
      } catch (error) {
        if (ctx.signal.aborted || error instanceof ProviderError) throw error;
        // A bug in a demo model must fail its generation with a reason, not retry forever or escape as a crash.
        throw new ProviderError(`${input.model.modelId} failed: ${(error as Error)?.message ?? String(error)}`, {
          cause: error,
          publicMessage: `${input.model.modelId} failed unexpectedly (a bug in the demo model; the service's log has the details).`,
        });
      }
    },
  };
}
