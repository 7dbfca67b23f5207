import type { GenerationContext, GenerationOutput, ModelDefinition, Settings } from '@genservice/core';
import { ProviderError } from '@genservice/core';
import type { FetchMediaOptions } from '@genservice/core';
import type { ImageWorkerPool } from '../workers/pool.js';

/** What every demo model is given beside its settings. */
export interface DemoRuntime {
  /** Multiplier for the artificial delay: 1 takes about `estimatedGenerationTime`, 0 none. */
  speed: number;
  /** Limits for fetching media inputs. */
  fetch: FetchMediaOptions;
  /** Where image decoding and encoding run (worker threads). */
  images: ImageWorkerPool;
}

export interface DemoModel {
  definition: ModelDefinition;
  run(settings: Settings, ctx: GenerationContext, runtime: DemoRuntime): Promise<GenerationOutput>;
}

/** A setting the model cannot use: the owner reads which one and why. */
function settingError(message: string): ProviderError {
  return new ProviderError(message, { code: 'invalid_input', publicMessage: `The ${message}.` });
}

/** The run's whole budget in ms: `estimatedGenerationTime` scaled by the speed option. */
export function budgetMs(definition: ModelDefinition, runtime: DemoRuntime): number {
  return definition.estimatedGenerationTime * 1000 * runtime.speed;
}

/**
 * A text setting. Core has validated settings before a run, but a provider can also be called directly (tests,
 * scripts), so a missing required value still gives a clear, non-retryable error instead of a TypeError.
 */
export function textSetting(settings: Settings, name: string, required = true): string {
  const value = settings[name];
  if (typeof value === 'string' && value.trim() !== '') return value.trim();
  if (required) throw settingError(`setting "${name}" is required and must be a non-empty string`);
  return '';
}

/** A select setting, or its first option when absent (the documented default). */
export function selectSetting<T extends string>(settings: Settings, name: string, options: readonly T[]): T {
  const value = settings[name];
  if (value === undefined || value === null) return options[0];
  if (typeof value === 'string' && (options as readonly string[]).includes(value)) return value as T;
  throw settingError(`setting "${name}" must be one of ${options.join(', ')}`);
}

/** A media setting: an array of URL strings. */
export function urlListSetting(settings: Settings, name: string): string[] {
  const value = settings[name];
  const list = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(list) || list.length === 0 || !list.every((u) => typeof u === 'string')) {
    throw settingError(`setting "${name}" must be a non-empty array of URLs`);
  }
  return list as string[];
}
