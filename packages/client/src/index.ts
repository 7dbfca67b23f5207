/**
 * @module @genservice/client
 *
 * Typed client for a genservice HTTP API. Runs in Node 20+ and browsers: it uses only `fetch`, `AbortSignal` and
 * timers from the global scope.
 *
 * @example
 * import { createClient, InsufficientFundsError } from '@genservice/client';
 *
 * const client = createClient({ baseUrl: 'https://api.example.com', apiKey: 'sk-...' });
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
export { verifyWebhook, WebhookVerificationError } from './webhooks.js';
export type { PollSchedule, PollScheduleOverrides } from './backoff.js';
export type { FetchLike } from './transport.js';
export type { BatchesApi } from './batches.js';
export type {
  Balance,
  Batch,
  BatchCancelResult,
  BatchCreated,
  BatchRequest,
  CreateBatchInput,
  CancelResult,
  CompletedGeneration,
  CreateGenerationInput,
  ErrorDetail,
  FailedGeneration,
  FailureReason,
  Generation,
  GenerationItem,
  GenerationPage,
  ListOptions,
  Quote,
  WebhookEvent,
  WebhookEventType,
  GenerationStatus,
  InProgressGeneration,
  Model,
  ResultType,
  SettingDescriptor,
  TerminalGeneration,
  TerminalStatus,
} from './types.js';
