/**
 * @module @genservice/providers
 *
 * Ready genservice providers for hosted model APIs, built on the two-phase remote job port (start, check, cancel):
 * Replicate's predictions API and fal's queue API. The upstream job's id is stored with the generation before the
 * first check, so after a crash, a lost lease or a restart the same upstream job is checked again: it is started
 * once per generation, and the generation is charged once.
 *
 * @example
 * import { createGenerationService } from '@genservice/core';
 * import { createReplicateProvider } from '@genservice/providers';
 *
 * const service = createGenerationService({
 *   providers: [createReplicateProvider({ apiToken: process.env.REPLICATE_API_TOKEN!, models: [...] })],
 * });
 */
export { createReplicateProvider, defaultReplicateOutput, type ReplicateHandle, type ReplicateModel, type ReplicateOutput, type ReplicateProviderOptions } from './replicate.js';
export { createFalProvider, defaultFalOutput, type FalHandle, type FalModel, type FalOutput, type FalProviderOptions } from './fal.js';
export type { RemoteModel } from './remote-model.js';
export { RESULT_FETCH_DEFAULTS, type ResultFetchOptions } from './http.js';
