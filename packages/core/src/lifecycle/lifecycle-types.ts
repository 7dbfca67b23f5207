/** The Lifecycle's request and answer types (kept apart so lifecycle.ts stays within its size). */
import type { FailureCause } from '../domain/fees.js';
import type { RegisteredModel } from '../domain/registry.js';
import type { GenerationRecord, Settings } from '../domain/types.js';
import type { KeyBudget } from '../ports/api-keys.js';

/** A failure as whoever saw it tells it; the Lifecycle decides its code and fee from `cause` (domain/fees.ts). */
export interface FailRequest {
  cause: FailureCause;
  /** A provider's own code for its failure (`invalid_input`); only with `cause: 'provider_failed'`. */
  providerCode?: 'provider_error' | 'invalid_input';
  /** Shown to the owner; default: the code's generic sentence. */
  publicMessage?: string;
  /** For logs and operators only. */
  reason: string;
}

/** A completed run's result, as the runner has it; the Lifecycle decides its charge (`completionCharge`). */
export interface CompleteRequest {
  /** What the provider reported it cost, if it did. */
  reportedPrice?: number;
  /** The fallback model that produced the result (with its settings), when it was not the generation's own model. */
  servedBy?: { model: RegisteredModel; settings: Settings };
  resultText?: string;
  resultKey?: string;
}

/** The key a create reserves under: its spend is recorded, and held within its budget. */
export interface ReserveKey {
  keyId: string;
  budget?: KeyBudget;
  /** Its generations pending or processing, at most. */
  maxInFlight?: number;
}

/** The organisation a create was reserved under, as its job carries it to the queue (fair shares by weight). */
export interface Tenant {
  organizationId: string;
  weight: number;
}

/**
 * The generation a finishing change is for: its id, and the life it asked for, whose end the change writes with
 * `finishedAt` (`lifeEndsAt`, how the sweep finds it).
 */
export type Finishing = Pick<GenerationRecord, 'id' | 'expiresAfterSeconds'>;

/** The generation a failure or cancel is for: its model (whose failure fee applies) and its reserve (the fee's cap). */
export type Failing = Finishing & Pick<GenerationRecord, 'modelId' | 'reserved'>;

/** What recovery should do with one unfinished generation (the Lifecycle has already failed it when `failed`). */
export type RecoveryDecision = 'requeue' | 'failed' | 'skipped';
