import { inject, injectable } from 'tsyringe';
import type { FailureCode, GenerationRecord, Metadata, Settings, WebhookEventType } from './domain.js';
import { DomainError, UnavailableError } from './errors.js';
import { newGenerationId } from './ids.js';
import { childLogger, silentLogger } from './logger.js';
import type { Ledger } from './ports/ledger.js';
import type { Logger } from './ports/logger.js';
import type { JobQueue } from './ports/queue.js';
import type { GenerationStore } from './ports/store.js';
import { EventFeed } from './push/event-feed.js';
import type { ResolvedServiceOptions } from './resolved-options.js';
import { TOKENS } from './tokens.js';

/** The client-safe sentence of each failure code, used when nothing more specific may be said. */
export const FAILURE_MESSAGES: Record<FailureCode, string> = {
  cancelled: 'The generation was cancelled by its owner.',
  timeout: 'The generation took longer than its model allows.',
  provider_error: 'The model failed to generate a result.',
  invalid_input: 'The model could not use the given settings.',
  worker_lost: 'The generation was interrupted too many times and was given up.',
  model_unavailable: 'The model is no longer available.',
};

/** How a failure is charged. Every fee rule of the service is here and nowhere else. */
export type FeeRule =
  /** The model's failure fee: the model did work (a provider failure, a timeout, giving up after lost workers). */
  | 'failure_fee'
  /** Nothing: the model never ran for this generation (model gone, queue unavailable at create). */
  | 'free'
  /** Nothing from `pending`, the model's failure fee from `processing` (decided by the state the store moved from). */
  | 'cancel';

export interface FailRequest {
  code: FailureCode;
  /** Shown to the owner; default: the code's generic sentence. */
  publicMessage?: string;
  /** For logs and operators only. */
  reason: string;
  fee: FeeRule;
  /** The worker whose claim fails it; omitted when no worker holds it (cancel, recovery). */
  workerId?: string;
  /** Fail a processing generation whatever its lease (cancel, which also aborts the worker). */
  force?: boolean;
}

export interface CompleteRequest {
  workerId: string;
  price: number;
  resultText?: string;
  resultKey?: string;
}

/**
 * The one owner of a generation's life: every state change goes through here, together with its ledger effect
 * (reserve at create, settle on completion, fee and release on failure or cancel) and, inside the store, its event.
 *
 * The ledger effect follows the store's transition and is idempotent by generation id, so a crash between the two
 * leaves a terminal generation with an open reserve, which recovery settles at the stored price.
 */
@injectable()
export class Lifecycle {
  private readonly logger: Logger;

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Store) private readonly store: GenerationStore,
    @inject(TOKENS.Ledger) private readonly ledger: Ledger,
    @inject(TOKENS.Queue) private readonly queue: JobQueue,
    @inject(TOKENS.Feed) private readonly feed: EventFeed,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'lifecycle' });
    this.logs = this.logger !== silentLogger;
  }

  /** False with the default silent logger: the per-generation log lines are then not even built. */
  private readonly logs: boolean;

  /** Every committed transition wakes the readers of the event log (streams, long-polls, webhooks). */
  private committed<T>(result: T): T {
    if (result) this.feed.committed();
    return result;
  }

  /**
   * Reserve, insert, enqueue. A step that fails undoes the ones before it, so nothing stays charged for a generation
   * the client was never told about. `id` is given when an Idempotency-Key planned it.
   */
  async create(input: {
    userId: string;
    modelId: string;
    settings: Settings;
    metadata?: Metadata;
    webhook?: { url: string; events: WebhookEventType[] };
    price: number;
    id?: string;
    /** The model's estimated time: how long a client refused for its in-flight cap should wait. */
    estimatedSeconds?: number;
  }): Promise<string> {
    const id = input.id ?? newGenerationId();
    const now = Date.now();
    const reserved = await this.ledger.reserve(input.userId, id, input.price, now);
    if (reserved === 'insufficient') {
      throw new DomainError('insufficient_funds', `The balance is too low for this generation (price ${input.price}).`);
    }
    let inserted: 'inserted' | 'limit_reached';
    try {
      inserted = await this.store.insert({
        id,
        ownerId: input.userId,
        modelId: input.modelId,
        settings: input.settings,
        reserved: input.price,
        createdAt: now,
        ...(input.metadata !== undefined ? { metadata: input.metadata } : {}),
        ...(input.webhook !== undefined ? { webhook: input.webhook } : {}),
      }, { maxUnfinishedPerOwner: this.options.limits.inFlightPerUser });
    } catch (err) {
      await this.ledger.release(id).catch(() => undefined);
      throw err;
    }
    if (inserted === 'limit_reached') {
      await this.ledger.release(id).catch(() => undefined);
      throw new DomainError(
        'rate_limited',
        `You have ${this.options.limits.inFlightPerUser} ${this.options.limits.inFlightPerUser === 1 ? 'generation' : 'generations'} pending or processing; wait for one to finish.`,
        { retryAfterSeconds: Math.max(1, Math.ceil(input.estimatedSeconds ?? 1)) },
      );
    }
    this.committed(true);
    try {
      await this.queue.enqueue({ generationId: id, modelId: input.modelId, ownerId: input.userId }, { fresh: true });
    } catch (err) {
      await this.fail(id, { code: 'model_unavailable', reason: 'queue unavailable at create', fee: 'free', force: true }).catch(() => undefined);
      if (err instanceof UnavailableError) throw new DomainError('unavailable', 'The job queue is unavailable; try again shortly.', { cause: err });
      throw err;
    }
    if (this.logs) this.logger.info({ generationId: id, modelId: input.modelId, userId: input.userId, status: 'pending', reserved: input.price }, 'generation created');
    return id;
  }

  /**
   * Whether a generation claimed `claimsBefore` times may be claimed again. The one give-up rule: the runner asks
   * it right after a claim (with attempts - 1), recovery before re-enqueueing (with attempts).
   */
  exhausted(claimsBefore: number): boolean {
    return claimsBefore >= this.options.runner.maxClaims;
  }

  /** Claims a generation for this instance's worker; null when it is not claimable (finished, or leased). */
  async claim(generationId: string): Promise<GenerationRecord | null> {
    return this.committed(await this.store.claim(generationId, { workerId: this.options.instanceId, leaseMs: this.options.runner.leaseMs, now: Date.now() }));
  }

  /** Stores a remote job's handle (once per generation) while this worker holds the lease. */
  setRemoteHandle(generationId: string, handle: unknown): Promise<boolean> {
    return this.store.setRemoteHandle(generationId, this.options.instanceId, handle, Date.now());
  }

  /** Lets go of a remote job until its next check, and schedules that check. */
  async park(generationId: string, modelId: string, ownerId: string, delayMs: number): Promise<boolean> {
    const until = Date.now() + delayMs;
    if (!(await this.store.park(generationId, this.options.instanceId, until, Date.now()))) return false;
    await this.queue.enqueue({ generationId, modelId, ownerId }, { delayMs });
    return true;
  }

  renew(generationId: string): Promise<boolean> {
    return this.store.renewLease(generationId, this.options.instanceId, this.options.runner.leaseMs, Date.now());
  }

  async progress(generationId: string, fraction: number, message?: string): Promise<boolean> {
    const f = Number.isFinite(fraction) ? Math.min(1, Math.max(0, fraction)) : 0;
    const m = message === undefined ? undefined : String(message).slice(0, 200);
    return this.committed(
      await this.store.progress(generationId, { workerId: this.options.instanceId, fraction: f, now: Date.now(), ...(m !== undefined ? { message: m } : {}) }),
    );
  }

  /** Completes a claimed generation and settles its price. False when the store refused (lease lost, cancelled). */
  async complete(generationId: string, result: Omit<CompleteRequest, 'workerId'>): Promise<boolean> {
    const ok = this.committed(await this.store.complete(generationId, { workerId: this.options.instanceId, ...result, now: Date.now() }));
    if (!ok) return false;
    await this.ledger.settle(generationId, result.price);
    if (this.logs) this.logger.info({ generationId, status: 'completed', price: result.price }, 'generation completed');
    return true;
  }

  /**
   * Fails a generation and settles the fee its rule gives. `failureFee` is the model's (0 when the model is gone).
   * Returns the settled price, or null when the store refused (already finished, or not this worker's any more).
   */
  async fail(generationId: string, request: FailRequest, failureFee = 0): Promise<number | null> {
    const fee = request.fee === 'free' ? 0 : failureFee;
    const ok = await this.store.fail(generationId, {
      ...(request.workerId !== undefined ? { workerId: request.workerId } : {}),
      ...(request.force ? { force: true } : {}),
      price: fee,
      ...(request.fee === 'cancel' ? { pendingPrice: 0 } : {}),
      reason: request.reason,
      error: { code: request.code, message: request.publicMessage ?? FAILURE_MESSAGES[request.code] },
      now: Date.now(),
    });
    if (!this.committed(ok)) return null;
    // A cancel's fee depends on the state the store moved from: read back what it actually recorded.
    const price = request.fee === 'cancel' ? ((await this.store.getById(generationId))?.price ?? 0) : fee;
    await this.ledger.settle(generationId, price);
    this.logger.info({ generationId, status: 'failed', price, code: request.code, reason: request.reason }, 'generation failed');
    return price;
  }

  /** Fails a generation the calling worker holds. */
  failClaimed(generationId: string, request: Omit<FailRequest, 'workerId' | 'force'>, failureFee: number): Promise<number | null> {
    return this.fail(generationId, { ...request, workerId: this.options.instanceId }, failureFee);
  }

  /** Cancels a pending or processing generation: free from pending, the failure fee once a worker has it. */
  async cancel(generationId: string, failureFee: number): Promise<boolean> {
    const price = await this.fail(generationId, { code: 'cancelled', reason: 'cancelled by its owner', fee: 'cancel', force: true }, failureFee);
    if (price === null) return false;
    this.queue.abort?.(generationId);
    return true;
  }
}
