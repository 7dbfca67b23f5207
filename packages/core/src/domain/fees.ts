/**
 * What a generation costs, decided once: the charge of a completion (never more than its reserve) and the fee of
 * each way a generation can fail. Whoever sees a failure (the runner, a cancel, recovery, a create whose queue is
 * down) says what happened, as a `FailureCause`; the Lifecycle asks `failureRule` what that costs and which code the
 * owner reads. No other file picks a fee.
 */
import type { FailureCode } from './types.js';

/** The client-safe sentence of each failure code, used when nothing more specific may be said. */
export const FAILURE_MESSAGES: Record<FailureCode, string> = {
  cancelled: 'The generation was cancelled by its owner.',
  timeout: 'The generation took longer than its model allows.',
  provider_error: 'The model failed to generate a result.',
  invalid_input: 'The model could not use the given settings.',
  worker_lost: 'The generation was interrupted too many times and was given up.',
  model_unavailable: 'The model is no longer available.',
  storage_unavailable: 'The result could not be stored. Please try again.',
};

/** How a failure is charged. */
export type FeeRule =
  /** The model's failure fee: the model did work (a provider failure, a timeout, giving up after lost workers). */
  | 'failure_fee'
  /** Nothing: the model never ran for this generation, or our own storage failed it. */
  | 'free';

/** What ended a generation, as whoever saw it tells it. */
export type FailureCause =
  /** Its model's time ran out (a local run, or a remote job checked after its deadline). */
  | 'timeout'
  /** The provider failed it: threw, or its remote job ended in an error. The provider's own code may be given. */
  | 'provider_failed'
  /** The provider answered something that breaks its contract (no result, the wrong kind, a bad price). */
  | 'bad_output'
  /** Our blob store could not be reached to keep its result or a file: never the owner's or the model's fault. */
  | 'storage_unavailable'
  /** It lost its worker `runner.maxClaims` times. */
  | 'worker_lost'
  /** Its model no longer exists. */
  | 'model_gone'
  /** The job queue could not take it at create. */
  | 'not_queued'
  /** Its owner cancelled it before a worker had it. */
  | 'cancelled_pending'
  /** Its owner cancelled it while a worker had it. */
  | 'cancelled_running'
  /** A `low` priority generation's `deadline` passed before spare capacity ran it. */
  | 'deadline_passed';

const RULES: Record<FailureCause, { code: FailureCode; fee: FeeRule }> = {
  timeout: { code: 'timeout', fee: 'failure_fee' },
  provider_failed: { code: 'provider_error', fee: 'failure_fee' },
  bad_output: { code: 'provider_error', fee: 'failure_fee' },
  storage_unavailable: { code: 'storage_unavailable', fee: 'free' },
  worker_lost: { code: 'worker_lost', fee: 'failure_fee' },
  model_gone: { code: 'model_unavailable', fee: 'free' },
  not_queued: { code: 'model_unavailable', fee: 'free' },
  cancelled_pending: { code: 'cancelled', fee: 'free' },
  cancelled_running: { code: 'cancelled', fee: 'failure_fee' },
  deadline_passed: { code: 'timeout', fee: 'free' },
};

/**
 * The code the owner reads and the fee of a failure. `providerCode` is a `ProviderError`'s own code
 * (`invalid_input`), which only a provider's failure carries.
 */
export function failureRule(cause: FailureCause, providerCode?: 'provider_error' | 'invalid_input'): { code: FailureCode; fee: FeeRule } {
  const rule = RULES[cause];
  return cause === 'provider_failed' && providerCode !== undefined ? { code: providerCode, fee: rule.fee } : rule;
}

/**
 * The tokens a failure of this cause costs, for a model whose failure fee is `failureFee` (0 when the model is gone),
 * never more than what was reserved at create (a discounted or cheap generation may have reserved less than the fee):
 * the ledger settles at most the reserve, and the price a client reads is what was settled.
 */
export function failurePrice(cause: FailureCause, failureFee: number, reserved: number): number {
  return RULES[cause].fee === 'free' ? 0 : Math.min(reserved, failureFee);
}

/**
 * What a completed generation is charged: what its provider reported, else the price of the model that served it
 * (its own model: the reserve; a fallback: that model's price for its settings), never more than what was reserved at
 * create. The one price cap of the service (the ledger's own clamp on `settle` is its port's guard, not a second rule).
 */
export function completionCharge(reserved: number, reportedPrice: number | undefined, servedPrice: number = reserved): number {
  return Math.min(reserved, reportedPrice ?? servedPrice);
}
