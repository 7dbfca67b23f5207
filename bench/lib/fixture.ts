/**
 * What every part of the bench shares: one text model with a required text setting and a select (so settings
 * validation really runs), a provider whose `generate` does nothing, one user with one key and a balance that never
 * runs out, and the request bodies.
 */
import type { GenerationOutput, ModelDefinition, GenerateProvider } from '@genservice/core';

export const MODEL_ID = 'bench-text';
/** Jobs the runner runs at once, everywhere the bench runs one (the service's default). */
export const RUNNER_CONCURRENCY = 8;
export const USER_ID = 'bench-user';
export const API_KEY = 'bench-key-0123456789abcdef';
export const BAD_KEY = 'not-a-key-0123456789abcdef';
/** Never 402: far above anything a run can spend (1 token per generation). */
export const BALANCE = 1e15;
export const RESULT_TEXT = 'A short generated text, the same for every generation of the bench model.';

export const MODEL: ModelDefinition = {
  modelId: MODEL_ID,
  title: 'Bench text model',
  resultType: 'text',
  estimatedGenerationTime: 1,
  settings: [
    { name: 'prompt', title: 'Prompt', fieldType: 'text', required: true },
    { name: 'style', title: 'Style', fieldType: 'select', options: ['plain', 'fancy'] },
  ],
  price: 1,
};

const OUTPUT: GenerationOutput = { text: RESULT_TEXT };

/** The no-op provider: answers at once with a fixed text. */
export const noopProvider: GenerateProvider = {
  models: [MODEL],
  generate: async () => OUTPUT,
};

export const SETTINGS = { prompt: 'hello', style: 'plain' };
export const VALID_BODY = JSON.stringify({ modelId: MODEL_ID, settings: SETTINGS });
/** Missing required `prompt`, a value outside the select's options, an undeclared setting: 400 invalid_settings. */
export const INVALID_BODY = JSON.stringify({ modelId: MODEL_ID, settings: { style: 'nope', extra: 1 } });

/** A fixed 22-character id (the shape of ours) for the bare servers' stored generation. */
export const BARE_ID = 'bare_generation_id_001';
