/**
 * @module @genservice/core
 *
 * For hosts embedding the service: createGenerationService, its options and result types, the types of a model
 * provider a host writes itself, errors, the in-memory and disk implementations, the JSON logger and the outbound
 * guard. The port interfaces (store, ledger, queue, blobs, idempotency, webhooks, notifier) and what their authors
 * need are in `@genservice/core/ports`; adapter authors have `@genservice/core/adapter`.
 */
// tsyringe needs the Reflect metadata API before any decorated class is defined.
import 'reflect-metadata';

export * from './domain/types.js';
export * from './domain/errors.js';
export type {
  ApiKeyResolver,
  GenerateProvider,
  GenerationContext,
  GenerationInput,
  GenerationOutput,
  GenerationOutputStream,
  Logger,
  ModelDefinition,
  ModelProvider,
  OpenAiMapping,
  Principal,
  RemoteJobProvider,
  RemoteJobStatus,
  UploadRecord,
  UploadStore,
} from './ports/index.js';
export type * from './options.js';
export { DEFAULT_UPLOAD_TYPES } from './options.js';
export type * from './service-types.js';
export type { BaseUrl, HttpRequest, HttpResponse } from './http/types.js';
export { SERVED_ROUTES } from './http/routes.js';
export { createGenerationService } from './service.js';
export { InvalidOptionsError } from './options-schema.js';
export { InProcessQueue, type InProcessQueueOptions } from './runner/in-process-queue.js';
export { FileUrlSigner } from './domain/file-urls.js';
export { CachedApiKeyResolver, type ApiKeyCacheOptions } from './use-cases/api-key-cache.js';
export { newGenerationId } from './domain/ids.js';
export { systemClock } from './clock.js';
export type { Clock, ClockTimer } from './ports/clock.js';
export type { CapacityAsk, CapacityFairness, CapacityGrant, CapacityLimits, CapacityStore, ProviderCapacity } from './ports/capacity.js';
export type { Accounts, ActorOption, AuditView, CreditInput, KeyView, NewKeyInput, NewUserInput, UsageInput, UsageReportView, UserLimitsInput, UserLimitsView } from './use-cases/accounts.js';
export type { Batches, BatchCreateRequest, BatchRequestItem, BatchView } from './use-cases/batches.js';
export type {
  EndpointDeliveryView,
  NewWebhookEndpointInput,
  WebhookEndpointChangeInput,
  WebhookEndpoints,
  WebhookEndpointView,
  WebhookEndpointWithSecret,
} from './use-cases/webhook-endpoints.js';
export { MAX_BATCH_SIZE } from './domain/batches.js';
export { MAX_TOKENS } from './domain/amounts.js';
export { USAGE_DEFAULT_DAYS, USAGE_MAX_DAYS } from './use-cases/accounts.js';
export type { MemberInput, NewOrganizationInput, OrganizationLimitsInput, OrganizationUsageInput, OrganizationUsageView, OrganizationView } from './use-cases/organizations.js';
export { MAX_ORGANIZATION_WEIGHT } from './domain/limits.js';
export { createJsonLogger, silentLogger, type LogLevel } from './logger.js';
export { DEFAULT_LIMITS } from './settings/compile.js';
export * from './memory/index.js';
export * from './disk/index.js';
export * from './outbound/index.js';
export { METRIC_NAMES, TELEMETRY_SCOPE, currentTraceparent, traceHeaders } from './telemetry.js';
export type { CheckOutcome } from './http/health.js';
