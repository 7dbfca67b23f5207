/**
 * @module @genservice/client
 *
 * Typed client for a genservice HTTP API. Runs in Node 20+ and browsers: it uses only `fetch`, `AbortSignal` and
 * timers from the global scope.
 *
 * @example
 * import { createClient, InsufficientFundsError } from '@genservice/client';
 *
 * // The API key from GENSERVICE_API_KEY (or pass apiKey).
 * const client = createClient({ baseUrl: 'https://api.example.com' });
 * try {
 *   const generation = await client.generations.run(
 *     { modelId: 'text-small', settings: { prompt: 'A haiku about rain' } },
 *     { timeoutMs: 60_000 },
 *   );
 *   console.log(generation.result, generation.price);
 * } catch (error) {
 *   if (error instanceof InsufficientFundsError) console.log('top up first');
 *   else throw error;
 * }
 */
export { createClient } from './client.js';
export type {
  ClientOptions,
  CreateOptions,
  GenServiceClient,
  OutputChunk,
  OutputOptions,
  RequestSignalOptions,
  RunOptions,
  StatusListener,
  WaitForOptions,
} from './client.js';
export {
  ConflictError,
  ConnectionError,
  ForbiddenError,
  GenServiceError,
  GenerationFailedError,
  IdempotencyMismatchError,
  InsufficientFundsError,
  InternalServerError,
  InvalidRequestError,
  InvalidSettingsError,
  ModelNotFoundError,
  NotFoundError,
  PayloadTooLargeError,
  RateLimitedError,
  ServiceUnavailableError,
  TimeoutError,
  UnauthorizedError,
  isTransientError,
} from './errors.js';
export type { ErrorCode, GenServiceErrorOptions, KnownErrorCode } from './errors.js';
export { pollSchedule } from './backoff.js';
export { generateModelTypes } from './model-types.js';
export type { GenerateModelTypesOptions } from './model-types.js';
export type { RetryOptions } from './retry.js';
export type { Upload, UploadData, UploadOptions, UploadsApi } from './uploads.js';
export { verifyWebhook, WebhookVerificationError } from './webhooks.js';
export type { PollSchedule, PollScheduleOverrides } from './backoff.js';
export type { FetchLike } from './transport.js';
export type { BatchesApi } from './batches.js';
export type { EndpointEventType, WebhookDelivery, WebhookEndpoint, WebhookEndpointsApi, WebhookEndpointWithSecret } from './webhook-endpoints.js';
export type {
  AnyModels,
  Balance,
  Batch,
  BatchCancelResult,
  BatchCreated,
  BatchRequest,
  CreateBatchInput,
  CancelResult,
  CompletedGeneration,
  CreateGenerationCommon,
  CreateGenerationInput,
  ErrorDetail,
  FailedGeneration,
  FailureReason,
  Generation,
  GenerationItem,
  QueuePosition,
  GenerationPage,
  ListOptions,
  Quote,
  WebhookEvent,
  WebhookEventType,
  GenerationStatus,
  InProgressGeneration,
  Model,
  ModelMap,
  ResultType,
  SettingDescriptor,
  SettingsField,
  TerminalGeneration,
  TerminalStatus,
} from './types.js';
