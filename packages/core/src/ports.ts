/**
 * @module @genservice/core/ports
 *
 * For authors of stores, ledgers, queues, notifiers and model providers: the port interfaces with their documented
 * guarantees, the domain types they speak, and the errors they may throw. Every implementation is checked by the
 * contract suites of `@genservice/testing`.
 */
import 'reflect-metadata';

export type * from './ports/index.js';
export type {
  FailureCode,
  FailureInfo,
  GenerationEvent,
  GenerationEventType,
  GenerationRecord,
  GenerationStatus,
  GenerationView,
  Metadata,
  ModelInfo,
  Progress,
  ResultType,
  SettingDescriptor,
  Settings,
  TerminalStatus,
  WebhookEventType,
} from './domain.js';
export { EVENT_TYPES, FAILURE_CODES, GENERATION_STATUSES, RESULT_TYPES, WEBHOOK_EVENT_TYPES, isTerminal } from './domain.js';
export { ProviderError, UnavailableError } from './errors.js';
/** Key digests as the in-memory store keeps them: a durable ApiKeyStore should keep the same. */
export { hashApiKey } from './memory/api-keys.js';
/** A fresh key id, for a store whose `addKey` must give a host-made key one. */
export { newKeyId } from './ids.js';
/** How every ledger adds up and orders its usage report, so all answer the same. */
export { dayIndexOf, groupUsage, usageDayIndex, usageDayOfIndex } from './usage.js';
