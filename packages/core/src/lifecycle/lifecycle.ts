import { inject, injectable } from 'tsyringe';
import { isTerminal, previewKeys, type FailureCode, type FailureInfo, type GenerationRecord, type Metadata, type Settings, type WebhookEventType } from '../domain/types.js';
import { budgetWindow, lifeEnd, maxLifeSeconds } from '../domain/rules.js';
import { DomainError, UnavailableError } from '../domain/errors.js';
import { newBatchId, newGenerationId } from '../domain/ids.js';
import { asError, childLogger, silentLogger } from '../logger.js';
import type { KeyBudget } from '../ports/api-keys.js';
import type { BlobStore } from '../ports/blob.js';
import type { Ledger, ReserveItem, ReserveOptions } from '../ports/ledger.js';
import type { Logger } from '../ports/logger.js';
import type { JobQueue } from '../ports/queue.js';
import type { Expectation, GenerationChange, GenerationPatch, GenerationStore, NewEvent, NewGeneration } from '../ports/store.js';
import { EventFeed } from '../push/event-feed.js';
import { Webhooks } from '../push/webhooks.js';
import { isRemoteJobProvider, ModelRegistry } from '../domain/registry.js';
import type { WebhookStore } from '../ports/webhooks.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { Telemetry, traceHeaders, traceparentOf } from '../telemetry.js';
import { currentRequestContext } from '../request-context.js';
import { type Span, trace } from '@opentelemetry/api';
import { TOKENS } from '../tokens.js';

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
  | 'free';

export interface FailRequest {
  code: FailureCode;
  /** Shown to the owner; default: the code's generic sentence. */
  publicMessage?: string;
  /** For logs and operators only. */
  reason: string;
  fee: FeeRule;
}

export interface CompleteRequest {
  price: number;
  resultText?: string;
  resultKey?: string;
  /** The fallback model that produced the result, when it was not the generation's own model. */
  servedModelId?: string;
}

/** One generation of a batch, validated and priced. */
export interface BatchItem {
  modelId: string;
  settings: Settings;
  metadata?: Metadata;
  price: number;
}

export { budgetWindow, expiresAt, hasExpired, MAX_BATCH_SIZE, MAX_LIFE_SECONDS, maxLifeSeconds } from '../domain/rules.js';

/**
 * The generation a finishing change is for: its id, and the life it asked for, whose end the change writes with
 * `finishedAt` (`lifeEndsAt`, how the sweep finds it).
 */
export type Finishing = Pick<GenerationRecord, 'id' | 'expiresAfterSeconds'>;

/** What recovery did with one unfinished generation. */
export type RecoveryAction = 'requeued' | 'failed' | 'skipped';

/** The states a change may start from, and the lease it needs. Every transition of a generation is one of these. */
const FROM = {
  /** A worker's own claim: it holds the lease. */
  held: (holder: string): Expectation => ({ status: ['processing'], lease: { heldBy: holder } }),
  /** Nobody works on it: pending, or processing with a lost (expired) or released (parked) lease. */
  unheld: { status: ['pending', 'processing'], lease: 'free' } as Expectation,
  pending: { status: ['pending'] } as Expectation,
  /** Processing, whoever holds it (a cancel, which also aborts the worker). */
  processing: { status: ['processing'] } as Expectation,
};

/**
 * The one owner of a generation's life. Every state change is decided here (which changes exist, from which states,
 * what they cost, what their events say) and handed to the store as one compare-and-set with its event; the ledger
 * effect follows the change and is idempotent by generation id, so a crash between the two leaves a terminal
 * generation with an open reserve, which `reconcileReserves` settles at the stored price.
 *
 * The runner and maintenance only ask: claim, renew, progress, complete, fail, park, recover, reconcile, cancel.
 */
@injectable()
export class Lifecycle {
  private readonly logger: Logger;
  /** False with the default silent logger: the per-generation log lines are then not even built. */
  private readonly logs: boolean;

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Store) private readonly store: GenerationStore,
    @inject(TOKENS.Ledger) private readonly ledger: Ledger,
    @inject(TOKENS.Queue) private readonly queue: JobQueue,
    @inject(EventFeed) private readonly feed: EventFeed,
    @inject(ModelRegistry) private readonly registry: ModelRegistry,
    @inject(TOKENS.Blobs) private readonly blobs: BlobStore,
    @inject(TOKENS.WebhookStore) private readonly webhookStore: WebhookStore,
    @inject(Webhooks) private readonly webhooks: Webhooks,
    @inject(Telemetry) private readonly telemetry: Telemetry,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'lifecycle' });
    this.logs = this.logger !== silentLogger;
  }

  private get holder(): string {
    return this.options.instanceId;
  }

  /** Applies one change; every applied change wakes the readers of the event log (streams, long-polls, webhooks). */
  private async change(id: string, change: GenerationChange): Promise<GenerationRecord | null> {
    const after = await this.store.update(id, change);
    if (after) this.feed.committed();
    return after;
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
    /** The managed key the request came with: its spend is recorded, and held within its budget. */
    key?: { keyId: string; budget?: KeyBudget };
    /** A shorter life than the service's retention (checked with `checkLife`). */
    expiresAfterSeconds?: number;
  }): Promise<string> {
    this.checkLife(input.expiresAfterSeconds);
    // The create's span: a child of the client's `traceparent` (or of the active span). Its context is stored with
    // the generation, so the run continues this trace wherever it runs.
    const parent = currentRequestContext()?.traceContext;
    return this.telemetry.inSpan(
      'genservice.create',
      { 'genservice.model': input.modelId },
      (span) => {
        const sc = span.spanContext();
        return this.insertAndEnqueue(input, trace.isSpanContextValid(sc) ? traceparentOf(sc) : undefined, span);
      },
      parent,
    );
  }

  private async insertAndEnqueue(input: Parameters<Lifecycle['create']>[0], traceparent: string | undefined, span: Span): Promise<string> {
    const id = input.id ?? newGenerationId();
    span.setAttribute('genservice.generation_id', id);
    const ctx = currentRequestContext();
    if (ctx) ctx.generationId = id;
    const now = this.options.clock.now();
    const options: ReserveOptions = { modelId: input.modelId };
    const budget = input.key?.budget;
    if (input.key) options.keyId = input.key.keyId;
    if (budget) options.keyLimit = { amount: budget.amount, windowStart: budgetWindow(budget.period, now).start };
    const reserved = await this.ledger.reserve(input.userId, id, input.price, now, options);
    if (reserved === 'insufficient') {
      throw new DomainError('insufficient_funds', `The balance is too low for this generation (price ${input.price}).`);
    }
    if (reserved === 'budget_exceeded') {
      const { end } = budgetWindow(budget!.period, now);
      throw new DomainError(
        'budget_exceeded',
        `This key's ${budget!.period === 'day' ? 'daily' : 'monthly'} budget of ${budget!.amount} tokens would be exceeded (price ${input.price}); it resets at ${new Date(end).toISOString()}.`,
      );
    }
    const cap = this.options.limits.inFlightPerUser;
    let inserted: 'inserted' | 'limit_reached';
    try {
      inserted = await this.store.insert(
        {
          id,
          ownerId: input.userId,
          modelId: input.modelId,
          settings: input.settings,
          status: 'pending',
          reserved: input.price,
          createdAt: now,
          ...(input.metadata !== undefined ? { metadata: input.metadata } : {}),
          ...(input.webhook !== undefined ? { webhook: input.webhook } : {}),
          ...(input.expiresAfterSeconds !== undefined ? { expiresAfterSeconds: input.expiresAfterSeconds } : {}),
          ...(traceparent !== undefined ? { traceparent } : {}),
        },
        { type: 'created', data: { modelId: input.modelId } },
        { maxUnfinishedPerOwner: cap },
      );
    } catch (err) {
      await this.ledger.release(id).catch(() => undefined);
      throw err;
    }
    if (inserted === 'limit_reached') {
      await this.ledger.release(id).catch(() => undefined);
      throw new DomainError('rate_limited', `You have ${cap} ${cap === 1 ? 'generation' : 'generations'} pending or processing; wait for one to finish.`, {
        retryAfterSeconds: Math.max(1, Math.ceil(input.estimatedSeconds ?? 1)),
      });
    }
    this.feed.committed();
    try {
      await this.queue.enqueue({ generationId: id, modelId: input.modelId, ownerId: input.userId, ...(traceparent !== undefined ? { trace: traceHeaders() } : {}) }, { fresh: true });
    } catch (err) {
      const gen = { id, modelId: input.modelId, ...(input.expiresAfterSeconds !== undefined ? { expiresAfterSeconds: input.expiresAfterSeconds } : {}) };
      await this.fail(gen, FROM.pending, { code: 'model_unavailable', reason: 'queue unavailable at create', fee: 'free' }).catch(() => undefined);
      if (err instanceof UnavailableError) throw new DomainError('unavailable', 'The job queue is unavailable; try again shortly.', { cause: err });
      throw err;
    }
    this.telemetry.generationCreated(input.modelId);
    if (this.logs) this.logger.info({ generationId: id, modelId: input.modelId, userId: input.userId, status: 'pending', reserved: input.price }, 'generation created');
    return id;
  }

  /**
   * Checks the life a create asks for: an integer of seconds from 1 to `maxLifeSeconds` (the service's retention, when
   * it has one). Throws the 400 naming the field; a quote asks it too.
   */
  checkLife(expiresAfterSeconds: number | undefined): void {
    if (expiresAfterSeconds === undefined) return;
    const max = maxLifeSeconds(this.options.retention);
    if (Number.isInteger(expiresAfterSeconds) && expiresAfterSeconds >= 1 && expiresAfterSeconds <= max) return;
    const message =
      this.options.retention.finishedTtlMs === undefined
        ? `must be an integer from 1 to ${max}`
        : `must be an integer from 1 to ${max} (this service keeps finished generations for ${max} s)`;
    throw new DomainError('invalid_request', `expiresAfterSeconds ${message}.`, {
      details: [{ field: 'expiresAfterSeconds', code: 'invalid_value', message }],
    });
  }

  /**
   * The next batch of expired generations for the sweep, at most `limit`: past the service's retention first, then
   * those whose own life ended (each query by its index; a generation in both is taken once).
   */
  async expired(now: number, limit: number): Promise<GenerationRecord[]> {
    const ttl = this.options.retention.finishedTtlMs;
    const batch = ttl === undefined ? [] : await this.store.listFinishedBefore(now - ttl, limit);
    if (batch.length >= limit) return batch;
    const taken = new Set(batch.map((r) => r.id));
    for (const r of await this.store.listLifeEndedBefore(now, limit)) {
      if (batch.length >= limit) break;
      if (!taken.has(r.id)) batch.push(r);
    }
    return batch;
  }

  /**
   * A batch as one unit: every reserve held at once (all or nothing: 402 when the balance or the key's budget cannot
   * cover the total, nothing held), the batch and every generation stored in one atomic step, then each enqueued as
   * its owner's work (the queue's round-robin over owners keeps a big batch from starving anyone else). The in-flight
   * cap of single creates does not refuse a batch: it was admitted, and paid for, as a whole. A step that fails
   * undoes the ones before it.
   */
  async createBatch(input: {
    userId: string;
    items: readonly BatchItem[];
    webhook?: { url: string };
    /** Planned by an Idempotency-Key. */
    batchId?: string;
    key?: { keyId: string; budget?: KeyBudget };
  }): Promise<{ batchId: string; generationIds: string[] }> {
    const batchId = input.batchId ?? newBatchId();
    const now = this.options.clock.now();
    const ids = input.items.map(() => newGenerationId());
    const total = input.items.reduce((sum, i) => sum + i.price, 0);
    const options: ReserveOptions = {};
    const budget = input.key?.budget;
    if (input.key) options.keyId = input.key.keyId;
    if (budget) options.keyLimit = { amount: budget.amount, windowStart: budgetWindow(budget.period, now).start };
    const reserves: ReserveItem[] = input.items.map((item, i) => ({ generationId: ids[i]!, amount: item.price, modelId: item.modelId }));
    const reserved = await this.ledger.reserveMany(input.userId, reserves, now, options);
    if (reserved === 'insufficient') throw new DomainError('insufficient_funds', `The balance is too low for this batch (total price ${total}).`);
    if (reserved === 'budget_exceeded') {
      const { end } = budgetWindow(budget!.period, now);
      throw new DomainError(
        'budget_exceeded',
        `This key's ${budget!.period === 'day' ? 'daily' : 'monthly'} budget of ${budget!.amount} tokens would be exceeded (batch total ${total}); it resets at ${new Date(end).toISOString()}.`,
      );
    }
    const gens: NewGeneration[] = input.items.map((item, i) => ({
      id: ids[i]!,
      ownerId: input.userId,
      modelId: item.modelId,
      settings: item.settings,
      status: 'pending',
      reserved: item.price,
      createdAt: now,
      batchId,
      ...(item.metadata !== undefined ? { metadata: item.metadata } : {}),
    }));
    const events: NewEvent[] = input.items.map((item) => ({ type: 'created', data: { modelId: item.modelId } }));
    try {
      await this.store.insertBatch({ id: batchId, ownerId: input.userId, generationIds: ids, createdAt: now, ...(input.webhook ? { webhook: { url: input.webhook.url } } : {}) }, gens, events);
    } catch (err) {
      for (const id of ids) await this.ledger.release(id).catch(() => undefined);
      throw err;
    }
    this.feed.committed();
    for (let i = 0; i < ids.length; i++) {
      const modelId = input.items[i]!.modelId;
      try {
        await this.queue.enqueue({ generationId: ids[i]!, modelId, ownerId: input.userId }, { fresh: true });
      } catch (err) {
        // The rest cannot run now: they fail free (the batch completes with them failed) and the client is told.
        for (let j = i; j < ids.length; j++) {
          await this.fail({ id: ids[j]!, modelId: input.items[j]!.modelId }, FROM.pending, { code: 'model_unavailable', reason: 'queue unavailable at create', fee: 'free' }).catch(() => undefined);
        }
        if (err instanceof UnavailableError) throw new DomainError('unavailable', 'The job queue is unavailable; try again shortly.', { cause: err });
        throw err;
      }
    }
    if (this.logs) this.logger.info({ batchId, userId: input.userId, size: ids.length, reserved: total }, 'batch created');
    return { batchId, generationIds: ids };
  }

  /** After one of a batch's generations finished: the batch may be done now. */
  private async batchMemberFinished(rec: GenerationRecord): Promise<void> {
    if (rec.batchId !== undefined) await this.completeBatchIfDone(rec.batchId, rec.ownerId);
  }

  /**
   * Completes a batch when none of its generations is pending or processing any more: its `batch.completed` delivery
   * is written to the outbox first (keyed by the batch, so writing it again adds nothing), and only then `completedAt`
   * is set (a compare-and-set in the store: of racing instances one wins, and all of them wrote the same one
   * delivery). A process that dies anywhere in between leaves the batch open, and recovery, which calls this for
   * every open batch older than `recovery.openBatchMs`, finishes it. True for the one call that completed it.
   */
  async completeBatchIfDone(batchId: string, ownerId: string): Promise<boolean> {
    const { counts, price } = await this.store.batchCounts(batchId);
    if (counts.pending + counts.processing > 0) return false;
    const batch = await this.store.getBatch(batchId, ownerId);
    if (!batch || batch.completedAt !== undefined) return false;
    const now = this.options.clock.now();
    await this.webhooks.batchCompleted(batch, { counts, price }, now);
    if (!(await this.store.completeBatch(batchId, now))) return false;
    if (this.logs) this.logger.info({ batchId, counts, price }, 'batch completed');
    return true;
  }

  /** Cancels every unfinished generation of a batch (each as a single cancel); answers how many it cancelled. */
  async cancelBatch(generationIds: readonly string[]): Promise<number> {
    let cancelled = 0;
    // A batch's items ask no life of their own (no expiresAfterSeconds), so the id is all a cancel needs.
    for (const id of generationIds) if (await this.cancel({ id })) cancelled++;
    return cancelled;
  }

  /**
   * What a generation served by a fallback model is charged: that model's price for its settings, or what the
   * provider reported, never more than what was reserved at create (the generation's own model's price).
   */
  fallbackPrice(reserved: number, servedPrice: number, reportedPrice?: number): number {
    return Math.min(reserved, reportedPrice ?? servedPrice);
  }

  /**
   * Why a generation nobody works on must not run again, or null when it may: its model is gone (free), or it was
   * claimed `maxClaims` times already and lost its worker each time (the failure fee). The one give-up rule, asked by
   * claim and by recovery.
   */
  private giveUp(rec: GenerationRecord): FailRequest | null {
    if (!this.registry.get(rec.modelId)) return { code: 'model_unavailable', reason: 'model no longer exists', fee: 'free' };
    if (rec.status === 'processing' && rec.parkedUntil === undefined && rec.claims >= this.options.runner.maxClaims) {
      return { code: 'worker_lost', reason: `gave up after ${rec.claims} lost runs`, fee: 'failure_fee' };
    }
    return null;
  }

  /**
   * Claims a generation for this instance: from pending; a processing one whose worker was lost (its lease expired;
   * one more claim); or a parked remote job whose check is due (not a claim: no count, no event). Null when it is not
   * claimable (finished, or leased), or when the give-up rule fails it instead.
   */
  async claim(job: { generationId: string; modelId: string }): Promise<GenerationRecord | null> {
    const { generationId } = job;
    const now = this.options.clock.now();
    const lease: GenerationPatch = { leaseOwner: this.holder, leaseExpiresAt: now + this.options.runner.leaseMs };
    const fromPending: GenerationChange = {
      expect: FROM.pending,
      set: { status: 'processing', claims: 1, startedAt: now, ...lease },
      event: { type: 'processing', data: { claim: 1 } },
      now,
    };
    // Pending is the common case and needs no read: a pending generation was never claimed. (A job whose model is
    // gone goes the long way, to the give-up rule.)
    if (this.registry.get(job.modelId)) {
      const fresh = await this.change(generationId, fromPending);
      if (fresh) return this.started(fresh, now);
    }
    const rec = await this.store.getById(generationId);
    if (!rec || isTerminal(rec.status)) return null;
    if (rec.status === 'processing' && rec.leaseExpiresAt !== undefined && rec.leaseExpiresAt > now) return null;
    const stop = this.giveUp(rec);
    if (stop) {
      await this.fail(rec, FROM.unheld, stop);
      return null;
    }
    if (rec.status === 'pending') return this.started(await this.change(generationId, fromPending), now);
    if (rec.parkedUntil !== undefined) {
      return this.change(generationId, { expect: { status: ['processing'], lease: 'free', parked: true }, set: { parkedUntil: null, ...lease }, now });
    }
    const claims = rec.claims + 1;
    return this.change(generationId, {
      expect: { status: ['processing'], lease: 'free', parked: false, claims: rec.claims },
      set: { claims, ...lease },
      event: { type: 'processing', data: { claim: claims } },
      now,
    });
  }

  /** A first claim: how long it waited in the queue is observed. */
  private started(rec: GenerationRecord | null, now: number): GenerationRecord | null {
    if (rec) this.telemetry.runStarted(rec.modelId, now - rec.createdAt);
    return rec;
  }

  /**
   * What recovery does with an unfinished generation nobody holds: fail it (the give-up rule), schedule a parked remote
   * job's check, or enqueue it again. A generation a live worker holds is skipped.
   */
  async recover(rec: GenerationRecord, now: number): Promise<RecoveryAction> {
    if (isTerminal(rec.status)) return 'skipped';
    if (rec.status === 'processing' && (rec.leaseExpiresAt ?? 0) > now) return 'skipped';
    const stop = this.giveUp(rec);
    if (stop) return (await this.fail(rec, FROM.unheld, stop)) !== null ? 'failed' : 'skipped';
    const job = { generationId: rec.id, modelId: rec.modelId, ownerId: rec.ownerId };
    // A remote job between checks: schedule its check (again: a restart lost the in-process timer).
    await this.queue.enqueue(job, rec.parkedUntil !== undefined ? { delayMs: Math.max(0, rec.parkedUntil - now) } : {});
    return 'requeued';
  }

  /**
   * Open reserves whose generation is finished are settled at its stored price (a crash between the change and its
   * ledger effect); reserves without a generation older than `recovery.orphanReserveMs` are released (a create that
   * crashed before its insert).
   */
  async reconcileReserves(limit: number): Promise<{ settled: number; released: number }> {
    const out = { settled: 0, released: 0 };
    const now = this.options.clock.now();
    for (const r of await this.ledger.openReserves(limit)) {
      const gen = await this.store.getById(r.generationId);
      if (gen && isTerminal(gen.status)) {
        await this.ledger.settle(r.generationId, gen.price ?? 0);
        out.settled++;
      } else if (!gen && now - r.createdAt > this.options.recovery.orphanReserveMs) {
        await this.ledger.release(r.generationId);
        out.released++;
      }
    }
    return out;
  }

  /** Stores a remote job's handle (once per generation) while this instance holds the lease. */
  async setRemoteHandle(generationId: string, handle: unknown): Promise<boolean> {
    const now = this.options.clock.now();
    return (await this.change(generationId, { expect: { ...FROM.held(this.holder), noRemoteHandle: true }, set: { remoteHandle: handle }, now })) !== null;
  }

  /** Lets go of a remote job until its next check, and schedules that check. */
  async park(generationId: string, modelId: string, ownerId: string, delayMs: number): Promise<boolean> {
    const now = this.options.clock.now();
    const parked = await this.change(generationId, {
      expect: FROM.held(this.holder),
      set: { leaseOwner: null, leaseExpiresAt: null, parkedUntil: now + delayMs },
      now,
    });
    if (!parked) return false;
    await this.queue.enqueue({ generationId, modelId, ownerId }, { delayMs });
    return true;
  }

  /** Extends the leases this instance holds, in one store call; answers the ids still held. */
  renewLeases(generationIds: readonly string[]): Promise<string[]> {
    const now = this.options.clock.now();
    return this.store.renewLeases(generationIds, this.holder, now + this.options.runner.leaseMs, now);
  }

  async progress(generationId: string, fraction: number, message?: string): Promise<boolean> {
    const f = Number.isFinite(fraction) ? Math.min(1, Math.max(0, fraction)) : 0;
    const progress = message === undefined ? { fraction: f } : { fraction: f, message: String(message).slice(0, 200) };
    const now = this.options.clock.now();
    return (await this.change(generationId, { expect: FROM.held(this.holder), set: { progress }, event: { type: 'progress', data: { ...progress } }, now })) !== null;
  }

  /** Appends streamed text to the log of a generation this instance holds (no field changes). */
  async output(generationId: string, delta: string): Promise<boolean> {
    const now = this.options.clock.now();
    return (await this.change(generationId, { expect: FROM.held(this.holder), set: {}, event: { type: 'output', data: { delta } }, now })) !== null;
  }

  /** Appends a preview (a file the runner stored) to the log of a generation this instance holds. */
  async preview(generationId: string, key: string, mimeType: string): Promise<boolean> {
    const now = this.options.clock.now();
    return (await this.change(generationId, { expect: FROM.held(this.holder), set: {}, event: { type: 'preview', data: { key, mimeType } }, now })) !== null;
  }

  /** Completes a generation this instance holds and settles its price. False when refused (lease lost, cancelled). */
  async complete(gen: Finishing, result: CompleteRequest): Promise<boolean> {
    const generationId = gen.id;
    const now = this.options.clock.now();
    const lifeEndsAt = lifeEnd(gen.expiresAfterSeconds, now);
    const done = await this.change(generationId, {
      expect: FROM.held(this.holder),
      set: {
        status: 'completed',
        price: result.price,
        finishedAt: now,
        ...(lifeEndsAt !== undefined ? { lifeEndsAt } : {}),
        ...(result.resultText !== undefined ? { resultText: result.resultText } : {}),
        ...(result.resultKey !== undefined ? { resultKey: result.resultKey } : {}),
        ...(result.servedModelId !== undefined ? { servedModelId: result.servedModelId } : {}),
      },
      event: { type: 'completed', data: { price: result.price } },
      now,
    });
    if (!done) return false;
    await this.ledger.settle(generationId, result.price);
    await this.batchMemberFinished(done);
    this.telemetry.generationFinished(done.modelId, 'completed', '', result.price, done.startedAt === undefined ? undefined : now - done.startedAt);
    if (this.logs) this.logger.info({ generationId, status: 'completed', price: result.price }, 'generation completed');
    return true;
  }

  /** Fails a generation this instance holds. Returns the settled price, or null when refused. */
  async failClaimed(gen: Finishing & { modelId: string }, request: FailRequest): Promise<number | null> {
    return this.fail(gen, FROM.held(this.holder), request);
  }

  /** The price a failure of this rule costs for this generation's model (0 when the model is gone). */
  private feeOf(modelId: string, fee: FeeRule): number {
    return fee === 'free' ? 0 : (this.registry.get(modelId)?.failureFee ?? 0);
  }

  private async fail(gen: Finishing & { modelId: string }, from: Expectation, request: FailRequest): Promise<number | null> {
    return (await this.failAt(gen, from, this.feeOf(gen.modelId, request.fee), request))?.price ?? null;
  }

  /** The failed transition at a given price, and its ledger effect; the record as failed, or null when refused. */
  private async failAt(
    gen: Finishing,
    from: Expectation,
    price: number,
    request: { code: FailureCode; publicMessage?: string; reason: string },
  ): Promise<GenerationRecord | null> {
    const generationId = gen.id;
    const now = this.options.clock.now();
    const error: FailureInfo = { code: request.code, message: request.publicMessage ?? FAILURE_MESSAGES[request.code] };
    const lifeEndsAt = lifeEnd(gen.expiresAfterSeconds, now);
    const failed = await this.change(generationId, {
      expect: from,
      set: { status: 'failed', price, failureReason: request.reason, error, parkedUntil: null, finishedAt: now, ...(lifeEndsAt !== undefined ? { lifeEndsAt } : {}) },
      event: { type: 'failed', data: { price, error: { ...error } } },
      now,
    });
    if (!failed) return null;
    await this.ledger.settle(generationId, price);
    await this.batchMemberFinished(failed);
    this.telemetry.generationFinished(failed.modelId, 'failed', request.code, price, failed.startedAt === undefined ? undefined : now - failed.startedAt);
    this.logger.info({ generationId, status: 'failed', price, code: request.code, reason: request.reason }, 'generation failed');
    return failed;
  }

  /**
   * Cancels a pending or processing generation: free from pending, the model's failure fee once a worker has it (the
   * state it really moved from decides: a cancel racing a claim is tried from pending first). Aborts a local run and
   * stops a remote job upstream. Null when there was nothing to cancel.
   */
  async cancel(gen: Finishing): Promise<GenerationRecord | null> {
    const generationId = gen.id;
    const request = { code: 'cancelled' as const, reason: 'cancelled by its owner' };
    let cancelled = await this.failAt(gen, FROM.pending, 0, request);
    if (!cancelled) {
      const rec = await this.store.getById(generationId);
      if (!rec || rec.status !== 'processing') return null;
      cancelled = await this.failAt(rec, FROM.processing, this.feeOf(rec.modelId, 'failure_fee'), request);
      if (!cancelled) return null;
    }
    this.queue.abort?.(generationId);
    // A remote job may be running upstream with nobody left to check it. A worker that stores a handle after this
    // cancel stops it itself (its setRemoteHandle is refused).
    if (cancelled.remoteHandle !== undefined) await this.cancelUpstream(cancelled.modelId, generationId, cancelled.remoteHandle);
    return cancelled;
  }

  /**
   * Deletes one of its owner's generations: an unfinished one is cancelled first (charged as a cancel), then its
   * files are deleted, then its record and events, then its webhook deliveries. The ledger keeps the charge.
   *
   * Files go first, so a blob store that cannot be reached (`UnavailableError`, answered 503) leaves the generation
   * as it was, and the client's retry finishes the job. Answers the generation as it was before it went and the
   * `seq` its deletion takes in its log (for `generation.deleted`), or null when there is none (another user's, or
   * already deleted).
   */
  async delete(ownerId: string, generationId: string): Promise<{ deleted: GenerationRecord; seq: number } | null> {
    let rec = await this.store.get(generationId, ownerId);
    // A cancel can lose a race (a worker claims, or completes, at that moment): read again and act on what is there.
    for (let tries = 0; rec && !isTerminal(rec.status) && tries < 5; tries++) {
      await this.cancel(rec);
      rec = await this.store.get(generationId, ownerId);
    }
    if (!rec) return null;
    if (!isTerminal(rec.status)) throw new UnavailableError('the generation kept changing while it was being deleted');
    const events = await this.store.eventsOf(generationId);
    if ((await this.purge([rec])) === 0) return null;
    if (this.logs) this.logger.info({ generationId, status: rec.status }, 'generation deleted');
    return { deleted: rec, seq: (events[events.length - 1]?.seq ?? 0) + 1 };
  }

  /**
   * Deletes finished generations for good (a DELETE, or retention): their files first, in one batched call, then
   * each record with its events, then their webhook deliveries. Files go first so that a blob store that cannot be
   * reached (the call throws) leaves every record as it was, to be tried again. Answers how many records it removed.
   * A generation's previews are among its files: its events name them (one read of its log each).
   */
  async purge(recs: readonly GenerationRecord[]): Promise<number> {
    const keys = recs.flatMap((r) => (r.resultKey === undefined ? [] : [r.resultKey]));
    // Previews are files too, named only by their events.
    for (const r of recs) keys.push(...previewKeys(await this.store.eventsOf(r.id)));
    if (keys.length > 0) await this.blobs.deleteMany(keys);
    const removed: string[] = [];
    for (const r of recs) if (await this.store.remove(r.id, { status: ['completed', 'failed'] })) removed.push(r.id);
    if (removed.length === 0) return 0;
    this.feed.committed();
    await this.webhookStore.deleteForGenerations(removed);
    return removed.length;
  }

  /** Best effort: an upstream job nobody will check any more is told to stop. */
  async cancelUpstream(modelId: string, generationId: string, handle: unknown): Promise<void> {
    const provider = this.registry.get(modelId)?.provider;
    if (!provider || !isRemoteJobProvider(provider) || !provider.cancel) return;
    try {
      await provider.cancel(handle, { generationId, logger: this.logger });
    } catch (err) {
      this.logger.warn({ err: asError(err), generationId }, 'cancelling the upstream job failed');
    }
  }
}
