import type { ModelDefinition } from '@genservice/core';
import { ProviderError } from '@genservice/core';
import { Pacer } from '../util/abort.js';
import { budgetMs, textSetting, type DemoModel } from './types.js';

const definition: ModelDefinition = {
  modelId: 'demo-always-fails',
  title: 'Demo model that always fails (shows the failed shape and the failure fee)',
  resultType: 'image',
  estimatedGenerationTime: 1,
  settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text', required: true }],
  price: 3,
  failureFee: 2,
  // Retrying cannot help a model that fails on purpose.
  maxAttempts: 1,
  timeoutMs: 30_000,
};

/** Why every run fails: the log's message and the owner's (`publicMessage`), the same sentence. */
export const ALWAYS_FAILS_MESSAGE = 'demo-always-fails fails every generation on purpose, to show what a failed generation looks like';

export const failingModel: DemoModel = {
  definition,
  async run(settings, ctx, runtime) {
    const pacer = new Pacer(budgetMs(definition, runtime), ctx.signal, (f) => ctx.progress(f));
    textSetting(settings, 'prompt');
    await pacer.reach(1);
    throw new ProviderError(ALWAYS_FAILS_MESSAGE, { retryable: false, publicMessage: ALWAYS_FAILS_MESSAGE });
  },
};
