import { inject, injectable } from 'tsyringe';
import { RESULT_TYPES, type ModelInfo, type Settings } from './types.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import type { ModelDefinition, ModelProvider, RemoteJobProvider } from '../ports/provider.js';
import type { ProviderCapacity } from '../ports/capacity.js';

/** Whether a provider runs its generations as remote jobs (start / check) rather than in one `generate` call. */
export function isRemoteJobProvider(p: ModelProvider): p is RemoteJobProvider {
  return typeof (p as RemoteJobProvider).start === 'function' && typeof (p as RemoteJobProvider).check === 'function';
}
import type { z } from 'zod';
import { buildSettingsSchema, compileSettings, type SettingsValidator } from '../settings/compile.js';

export interface RegisteredModel {
  definition: ModelDefinition;
  provider: ModelProvider;
  info: ModelInfo;
  validate: SettingsValidator;
  /** The zod schema `validate` uses; the OpenAPI document is generated from it. */
  schema: z.ZodObject;
  timeoutMs: number;
  maxAttempts: number;
  failureFee: number;
  /** `definition.fallbacks`, checked: models that exist, of the same result type, run in one call. */
  fallbacks: string[];
  /** Its provider's lane (`provider.capacity`, checked), when the provider declares limits. */
  lane?: ProviderCapacity;
}

/** Checks a provider's declared limits: a lane name and positive integers. Throws naming what is wrong. */
function checkCapacity(c: ProviderCapacity | undefined): ProviderCapacity | undefined {
  if (c === undefined) return undefined;
  if (typeof c.lane !== 'string' || !/^[A-Za-z0-9._:-]{1,100}$/.test(c.lane)) {
    throw new Error(`provider capacity: lane must be 1 to 100 letters, digits or ._:- (got ${JSON.stringify(c.lane)})`);
  }
  for (const k of ['concurrency', 'requestsPerMinute', 'unitsPerMinute'] as const) {
    const v = c[k];
    if (v !== undefined && !(Number.isInteger(v) && v >= 1)) throw new Error(`provider capacity of lane "${c.lane}": ${k} must be a positive integer`);
  }
  if (c.units !== undefined && typeof c.units !== 'function') throw new Error(`provider capacity of lane "${c.lane}": units must be a function of the settings`);
  return c;
}

/** The models of every provider, checked and compiled once when the service is created. */
@injectable()
export class ModelRegistry {
  private readonly models = new Map<string, RegisteredModel>();
  readonly list: ModelInfo[];

  constructor(
    @inject(TOKENS.Providers) providers: ModelProvider[],
    @inject(TOKENS.Options) options: ResolvedServiceOptions,
  ) {
    const { limits, fieldTypes } = options;
    for (const provider of providers) {
      const lane = checkCapacity(provider.capacity);
      for (const def of provider.models) {
        if (this.models.has(def.modelId)) throw new Error(`model "${def.modelId}" is declared twice`);
        if (!RESULT_TYPES.includes(def.resultType)) throw new Error(`model "${def.modelId}" has unknown resultType "${def.resultType}"`);
        if (typeof def.price === 'number' && !(def.price >= 0 && Number.isFinite(def.price))) {
          throw new Error(`model "${def.modelId}" has an invalid price`);
        }
        for (const [p, m] of Object.entries(def.priorityMultipliers ?? {})) {
          if (!['low', 'normal', 'high'].includes(p) || !(typeof m === 'number' && m >= 0 && m <= 1000)) {
            throw new Error(`model "${def.modelId}" has an invalid priorityMultipliers.${p} (a number from 0 to 1000 for low, normal or high)`);
          }
        }
        const failureFee = def.failureFee ?? 0;
        if (!(failureFee >= 0 && Number.isFinite(failureFee))) throw new Error(`model "${def.modelId}" has an invalid failureFee`);
        for (const s of def.settings) {
          if (s.maxItems !== undefined && s.maxItems > limits.mediaUrls) {
            throw new Error(`setting "${s.name}" of model "${def.modelId}" allows ${s.maxItems} items, more than limits.mediaUrls (${limits.mediaUrls})`);
          }
        }
        // Frozen, as the list of them: what listModels hands out cannot be changed under the routes (which serialise
        // an unchanged list once).
        const info: ModelInfo = Object.freeze({
          modelId: def.modelId,
          title: def.title,
          resultType: def.resultType,
          estimatedGenerationTime: def.estimatedGenerationTime,
          settings: Object.freeze(
            def.settings.map((s) =>
              Object.freeze({
                name: s.name,
                title: s.title,
                fieldType: s.fieldType,
                ...(s.required ? { required: true } : {}),
                ...(s.options ? { options: Object.freeze([...s.options]) as string[] } : {}),
              }),
            ),
          ) as ModelInfo['settings'],
        });
        const schema = buildSettingsSchema(def.settings, limits, fieldTypes);
        this.models.set(def.modelId, {
          definition: def,
          provider,
          info,
          schema,
          validate: compileSettings(def.settings, schema),
          timeoutMs: def.timeoutMs ?? Math.max(30_000, def.estimatedGenerationTime * 4000),
          maxAttempts: Math.max(1, def.maxAttempts ?? 3),
          failureFee,
          fallbacks: [...(def.fallbacks ?? [])],
          ...(lane ? { lane } : {}),
        });
      }
    }
    for (const m of this.models.values()) {
      for (const id of m.fallbacks) {
        const f = this.models.get(id);
        const name = `model "${m.info.modelId}"`;
        if (!f) throw new Error(`${name} names the fallback "${id}", which is not a model`);
        if (f === m) throw new Error(`${name} names itself as a fallback`);
        if (f.info.resultType !== m.info.resultType) throw new Error(`${name} (${m.info.resultType}) names the fallback "${id}" of another result type (${f.info.resultType})`);
        if (isRemoteJobProvider(m.provider) || isRemoteJobProvider(f.provider)) {
          throw new Error(`${name}: fallbacks are for models run in one generate call; "${isRemoteJobProvider(m.provider) ? m.info.modelId : id}" runs as a remote job`);
        }
      }
    }
    this.list = Object.freeze([...this.models.values()].map((m) => m.info)) as ModelInfo[];
  }

  get(modelId: string): RegisteredModel | undefined {
    return this.models.get(modelId);
  }

  all(): RegisteredModel[] {
    return [...this.models.values()];
  }

  /** Tokens to reserve for these (validated) settings. */
  priceOf(model: RegisteredModel, settings: Settings): number {
    const p = typeof model.definition.price === 'function' ? model.definition.price(settings) : model.definition.price;
    if (typeof p !== 'number' || !Number.isFinite(p) || p < 0) {
      throw new Error(`model "${model.info.modelId}" priced a generation at ${String(p)}`);
    }
    return p;
  }
}
