/**
 * @module @genservice/core/ports
 *
 * For authors of stores, ledgers, queues, notifiers and model providers: the port interfaces with their documented
 * guarantees, the domain types they speak, the errors they may throw, and the helpers they share with core (key
 * digests, the outbound guard for fetching media). Every implementation is checked by the contract suites of
 * `@genservice/testing`.
 */
import 'reflect-metadata';

export type * from './ports/index.js';
export type {
  BatchCounts,
  BatchRecord,
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
} from './domain/types.js';
export { EVENT_TYPES, FAILURE_CODES, GENERATION_STATUSES, RESULT_TYPES, WEBHOOK_EVENT_TYPES, isTerminal } from './domain/types.js';
export { ProviderError, UnavailableError } from './domain/errors.js';
/** Key digests as the in-memory store keeps them: a durable ApiKeyStore should keep the same. */
export { hashApiKey } from './domain/ids.js';
export { silentLogger } from './logger.js';
export { newGenerationId, newKeyId } from './domain/ids.js';
export * from './outbound/index.js';
/** The bound on token amounts and balances every ledger keeps (issue 37). */
export { MAX_TOKENS, assertTokenAmount, creditFits, isTokenAmount } from './domain/amounts.js';
/** How every ledger adds up and orders its usage report, so all answer the same. */
export { dayIndexOf, groupUsage, usageCover, usageDayIndex, usageDayOfIndex, USAGE_SPANS, type UsageCover } from './domain/usage.js';
/** Which window an organisation's budget counts in, the same in every ledger. */
export { organizationWindowStart } from './domain/limits.js';
/**
 * The active span's propagation fields (`traceparent`, `tracestate`, and whatever else the host's propagator writes),
 * and its W3C `traceparent` alone: providers send them with their upstream HTTP calls.
 */
/** The order every queue hands out waiting work in (weighted across organisations, then users, then priority). */
export { FAIR_SCALE, JOB_PRIORITIES, LINE_SEPARATOR, MAX_WEIGHT, fairLineOf, fairOrder, fairTagUnits, fairWeight, tagOfOrder } from './domain/fair-order.js';
export type { FairFields, FairLine, JobPriority } from './domain/fair-order.js';
export { currentTraceparent, traceHeaders } from './trace-context.js';
/** The window provider lanes' per-minute limits count in (CapacityStore implementations share it). */
export { CAPACITY_WINDOW_MS } from './ports/capacity.js';
/** What the durable queues share: a job's stored fields, bounded waits, an enqueue that answers in time. */
export { enqueueWithin, jobFields, messageOf, within } from './domain/queue-kit.js';
/** Whose turn a lane's next free slot is, across instances (the memory and SQLite stores call it; SQL and Lua mirror it). */
export { LANE_TURN_UNITS, LANE_WAITER_TTL_MS, laneTurn, laneTurnCost, waiterUntil } from './domain/lane-turns.js';
export type { LaneTurn, LaneTurnView } from './domain/lane-turns.js';
