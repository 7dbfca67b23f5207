import { inject, injectable } from 'tsyringe';
import type { Metadata, Settings, WebhookEventType } from '../domain/types.js';
import { DomainError, UnavailableError } from '../domain/errors.js';
import { newBatchId, newGenerationId } from '../domain/ids.js';
import type { JobQueue } from '../ports/queue.js';
import type { NewEvent, NewGeneration } from '../ports/store.js';
import { currentRequestContext } from '../request-context.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { GenerationLog } from './generation-log.js';
import { Lifecycle, type ReserveKey } from './lifecycle.js';
import { LifecycleObserver } from './observer.js';

/** One generation to create, validated and priced by the use case. */
export interface NewGenerationRequest {
  userId: string;
  modelId: string;
  settings: Settings;
  metadata?: Metadata;
  webhook?: { url: string; events: WebhookEventType[] };
  price: number;
  /** Given when an Idempotency-Key planned it. */
  id?: string;
  /** The model's estimated time: how long a client refused for its in-flight cap should wait. */
  estimatedSeconds?: number;
  /** The managed key the request came with: its spend is recorded, and held within its budget. */
  key?: ReserveKey;
  /** A shorter life than the service's retention (checked by the use case with `checkLife`). */
  expiresAfterSeconds?: number;
}

/** One generation of a batch, validated and priced. */
export interface BatchItem {
  modelId: string;
  settings: Settings;
  metadata?: Metadata;
  price: number;
}

export interface NewBatchRequest {
  userId: string;
  items: readonly BatchItem[];
  webhook?: { url: string };
  /** Planned by an Idempotency-Key. */
  batchId?: string;
  key?: ReserveKey;
}

/**
 * Creating generations, one or a batch, in the same three steps: reserve (the Lifecycle's money), insert (with the
 * `created` event), enqueue. A step that fails undoes the ones before it (`insertOrRelease`, `enqueueOrFail`: the
 * one compensation of both), so nothing stays charged for a generation the client was never told about.
 */
@injectable()
export class Creation {
  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(Lifecycle) private readonly lifecycle: Lifecycle,
    @inject(GenerationLog) private readonly log: GenerationLog,
    @inject(TOKENS.Queue) private readonly queue: JobQueue,
    @inject(LifecycleObserver) private readonly observer: LifecycleObserver,
  ) {}

  /** Reserve, insert, enqueue one generation, in the create's span; answers its id. */
  create(input: NewGenerationRequest): Promise<string> {
    return this.observer.creating(input.modelId, async (traceparent, span) => {
      const id = input.id ?? newGenerationId();
      span.setAttribute('genservice.generation_id', id);
      const ctx = currentRequestContext();
      if (ctx) ctx.generationId = id;
      const now = this.options.clock.now();
      await this.lifecycle.reserve(input.userId, { generationId: id, amount: input.price, modelId: input.modelId }, input.key, now);
      const cap = this.options.limits.inFlightPerUser;
      const gen: NewGeneration = {
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
      };
      const inserted = await this.insertOrRelease([id], () => this.log.insert(gen, { type: 'created', data: { modelId: input.modelId } }, { maxUnfinishedPerOwner: cap }));
      if (inserted === 'limit_reached') {
        await this.lifecycle.release([id]);
        throw new DomainError('rate_limited', `You have ${cap} ${cap === 1 ? 'generation' : 'generations'} pending or processing; wait for one to finish.`, {
          retryAfterSeconds: Math.max(1, Math.ceil(input.estimatedSeconds ?? 1)),
        });
      }
      await this.enqueueOrFail(input.userId, [gen]);
      this.observer.created(gen);
      return id;
    });
  }

  /**
   * A batch as one unit: every reserve held at once (all or nothing: 402 when the balance or the key's budget cannot
   * cover the total, nothing held), the batch and every generation stored in one atomic step, then each enqueued as
   * its owner's work (the queue's round-robin over owners keeps a big batch from starving anyone else). The in-flight
   * cap of single creates does not refuse a batch: it was admitted, and paid for, as a whole.
   */
  async createBatch(input: NewBatchRequest): Promise<{ batchId: string; generationIds: string[] }> {
    const batchId = input.batchId ?? newBatchId();
    const now = this.options.clock.now();
    const ids = input.items.map(() => newGenerationId());
    await this.lifecycle.reserveMany(
      input.userId,
      input.items.map((item, i) => ({ generationId: ids[i]!, amount: item.price, modelId: item.modelId })),
      input.key,
      now,
    );
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
    const batch = { id: batchId, ownerId: input.userId, generationIds: ids, createdAt: now, ...(input.webhook ? { webhook: { url: input.webhook.url } } : {}) };
    await this.insertOrRelease(ids, () => this.log.insertBatch(batch, gens, events));
    await this.enqueueOrFail(input.userId, gens);
    this.observer.batchCreated(batchId, input.userId, ids.length, input.items.reduce((sum, i) => sum + i.price, 0));
    return { batchId, generationIds: ids };
  }

  /** The insert; when it throws, the reserves it was for are released. */
  private async insertOrRelease<T>(ids: readonly string[], insert: () => Promise<T>): Promise<T> {
    try {
      return await insert();
    } catch (err) {
      await this.lifecycle.release(ids);
      throw err;
    }
  }

  /**
   * Enqueues each new generation as fresh work. When the queue refuses one, it and the rest cannot run now: they fail
   * free (a batch then completes with them failed) and the client is told (503 when the queue is unavailable).
   */
  private async enqueueOrFail(userId: string, gens: readonly NewGeneration[]): Promise<void> {
    for (let i = 0; i < gens.length; i++) {
      const gen = gens[i]!;
      try {
        await this.queue.enqueue({ generationId: gen.id, modelId: gen.modelId, ownerId: userId }, { fresh: true });
      } catch (err) {
        await this.lifecycle.failUnqueued(gens.slice(i));
        if (err instanceof UnavailableError) throw new DomainError('unavailable', 'The job queue is unavailable; try again shortly.', { cause: err });
        throw err;
      }
    }
  }
}
