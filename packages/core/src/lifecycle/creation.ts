import { inject, injectable } from 'tsyringe';
import type { Metadata, Settings, WebhookEventType } from '../domain/types.js';
import { DomainError } from '../domain/errors.js';
import { jobOfRecord } from '../domain/fair-order.js';
import { asError, childLogger } from '../logger.js';
import type { Logger } from '../ports/logger.js';
import { newBatchId, newGenerationId } from '../domain/ids.js';
import type { Job, JobQueue } from '../ports/queue.js';
import type { NewEvent, NewGeneration } from '../ports/store.js';
import { currentRequestContext } from '../request-context.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { traceHeaders } from '../telemetry.js';
import { TOKENS } from '../tokens.js';
import { GenerationLog } from './generation-log.js';
import { Lifecycle, type ReserveKey, type Tenant } from './lifecycle.js';
import { LifecycleObserver } from './observer.js';

/** A refused enqueue is tried again this long after the create (times the attempt), a few times, before recovery's pass. */
const REQUEUE_MS = 1000;
const REQUEUE_ATTEMPTS = 3;

const NO_CAP = {};
const FRESH = { fresh: true };
const CREATED = (modelId: string): NewEvent => ({ type: 'created', data: { modelId } });

/** The 429 of a create over the user's in-flight cap (whichever of ledger and store counted it). */
function inFlightRefusal(cap: number, estimatedSeconds: number | undefined): DomainError {
  return new DomainError('rate_limited', `You have ${cap} ${cap === 1 ? 'generation' : 'generations'} pending or processing; wait for one to finish.`, {
    retryAfterSeconds: Math.max(1, Math.ceil(estimatedSeconds ?? 1)),
  });
}

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
  /** The priority asked (absent: none asked), and a `low` one's deadline (epoch ms). */
  priority?: 'low' | 'normal' | 'high';
  deadlineAt?: number;
  /** Given under an Idempotency-Key: see `NewBatchRequest.keyHeld`. */
  keyHeld?: () => Promise<boolean>;
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
  /**
   * Given under an Idempotency-Key: asked once the insert committed, before the enqueue. False (a retry took the key
   * over while this request stalled): nothing is enqueued, so the request can undo what it stored for free. A
   * rejection enqueues as usual (the request asks again afterwards).
   */
  keyHeld?: () => Promise<boolean>;
}

/**
 * Creating generations, one or a batch, in the same three steps: reserve (the Lifecycle's money), insert (with the
 * `created` event), enqueue. A reserve or insert that fails undoes what came before (`insertOrRelease`), so nothing
 * stays charged for a generation the client was never told about; once the insert committed the create has
 * succeeded, and a queue that refuses the job only delays it (`enqueueOrLeave`).
 */
@injectable()
export class Creation {
  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(Lifecycle) private readonly lifecycle: Lifecycle,
    @inject(GenerationLog) private readonly log: GenerationLog,
    @inject(TOKENS.Queue) private readonly queue: JobQueue,
    @inject(LifecycleObserver) private readonly observer: LifecycleObserver,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'lifecycle' });
  }

  private readonly logger: Logger;

  /**
   * Reserve, insert, enqueue one generation, in the create's span; answers its id. Each step follows the last in a
   * `then`, not an await: a suspended async frame is ~0.3 KB per await, three on every create (issue 36).
   */
  create(input: NewGenerationRequest): Promise<string> {
    return this.observer.creating(input.modelId, (traceparent, span) => {
      const id = input.id ?? newGenerationId();
      span.setAttribute('genservice.generation_id', id);
      const ctx = currentRequestContext();
      if (ctx) ctx.generationId = id;
      const now = this.options.clock.now();
      const retryAfterSeconds = Math.max(1, Math.ceil(input.estimatedSeconds ?? 1));
      const cap = this.options.limits.inFlightPerUser;
      const gen: NewGeneration = { id, ownerId: input.userId, modelId: input.modelId, settings: input.settings, status: 'pending', reserved: input.price, createdAt: now };
      // Only what was given, set one by one (conditional spreads build and copy an object each: issue 36).
      if (input.metadata !== undefined) gen.metadata = input.metadata;
      if (input.webhook !== undefined) gen.webhook = input.webhook;
      if (input.expiresAfterSeconds !== undefined) gen.expiresAfterSeconds = input.expiresAfterSeconds;
      if (traceparent !== undefined) gen.traceparent = traceparent;
      if (input.priority !== undefined) gen.priority = input.priority;
      if (input.deadlineAt !== undefined) gen.deadlineAt = input.deadlineAt;
      const item = { generationId: id, amount: input.price, modelId: input.modelId };
      const enqueue = (tenant: Tenant | undefined): Promise<string> =>
        this.enqueueIfHeld(input.userId, [gen], tenant, input.keyHeld).then(() => {
          this.observer.created(gen);
          return id;
        });
      // Every level at once (balance, key, organisation); the user's in-flight cap is held by the reserve when the
      // ledger keeps the count on the user's row, otherwise the store counts the owner's unfinished generations.
      const reserveAndInsert = (): Promise<string> => {
        const capInLedger = this.lifecycle.ledgerHoldsInFlight;
        return this.lifecycle.reserve(input.userId, item, input.key, now, retryAfterSeconds, capInLedger ? cap : undefined).then((tenant) =>
          this.insertOrRelease([id], () => this.log.insert(gen, CREATED(input.modelId), capInLedger ? NO_CAP : { maxUnfinishedPerOwner: cap })).then((inserted) =>
            inserted === 'limit_reached'
              ? this.lifecycle.release([id]).then(() => {
                  throw inFlightRefusal(cap, input.estimatedSeconds);
                })
              : enqueue(tenant),
          ),
        );
      };
      // One atomic step (Postgres: one statement) when no limit beyond the balance and the user's cap applies: the
      // reserve with the in-flight count on the user's row, the insert and its event (issue 36). Refused, nothing is
      // written; `limited` (the owner's organisation has limits), nothing is written and the full reserve follows.
      if (!this.lifecycle.canInsertReserved(input.key)) return reserveAndInsert();
      return this.lifecycle
        .insertReserved(gen, CREATED(input.modelId), item, input.key, now, cap, retryAfterSeconds)
        .then((outcome) => (outcome === 'ok' ? enqueue(undefined) : reserveAndInsert()));
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
    const tenant = await this.lifecycle.reserveMany(
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
    await this.enqueueIfHeld(input.userId, gens, tenant, input.keyHeld);
    this.observer.batchCreated(batchId, input.userId, ids.length, input.items.reduce((sum, i) => sum + i.price, 0));
    return { batchId, generationIds: ids };
  }

  /** The insert; when it throws or rejects, the reserves it was for are released (a `catch`, not an await: issue 36). */
  private insertOrRelease<T>(ids: readonly string[], insert: () => Promise<T>): Promise<T> {
    let inserting: Promise<T>;
    try {
      inserting = insert();
    } catch (err) {
      inserting = Promise.reject(err);
    }
    return inserting.catch((err: unknown) =>
      this.lifecycle.release(ids).then(() => {
        throw err;
      }),
    );
  }

  /** `enqueueOrLeave`, unless the create's Idempotency-Key was taken over meanwhile (`keyHeld` answers false). */
  private enqueueIfHeld(userId: string, gens: readonly NewGeneration[], tenant: Tenant | undefined, keyHeld: (() => Promise<boolean>) | undefined): Promise<void> {
    if (keyHeld === undefined) return this.enqueueOrLeave(userId, gens, tenant);
    return keyHeld().then(
      (held) => (held ? this.enqueueOrLeave(userId, gens, tenant) : undefined),
      () => this.enqueueOrLeave(userId, gens, tenant),
    );
  }

  /**
   * Enqueues each new generation as fresh work. The generations are stored (committed) by now, so the create has
   * succeeded whatever the queue says: a job the queue refuses (down, or slower than its enqueue timeout) leaves its
   * generation pending, and the service enqueues it again itself: soon (`requeueUnqueued`, on the service clock) and,
   * failing that, at recovery's next pass, which re-enqueues every pending generation nobody holds.
   */
  private enqueueOrLeave(userId: string, gens: readonly NewGeneration[], tenant: Tenant | undefined): Promise<void> {
    // The owner's organisation, as the reserve read it: the queues share the runner by organisation, then user.
    const owner: Pick<Job, 'ownerId' | 'organizationId' | 'weight'> = tenant ? { ownerId: userId, organizationId: tenant.organizationId, weight: tenant.weight } : { ownerId: userId };
    // One after another, each in a `then` of the last (no async frame: issue 36).
    const from = (i: number): Promise<void> => {
      const gen = gens[i]!;
      let enqueued: Promise<void>;
      try {
        // The owner's organisation, when the reserve read one (the record's owner is the user's own otherwise).
        const job: Job = jobOfRecord(tenant ? { ...gen, ...owner } : gen);
        // A traced create hands its trace fields (the host propagator's, tracestate included) to the run.
        if (gen.traceparent !== undefined) job.trace = traceHeaders();
        enqueued = this.queue.enqueue(job, FRESH);
      } catch (err) {
        enqueued = Promise.reject(err);
      }
      return enqueued.then(
        () => (i + 1 < gens.length ? from(i + 1) : undefined),
        (err: unknown) => {
          this.logger.warn({ err: asError(err), generationId: gen.id, left: gens.length - i }, 'the queue refused a new job; the generation stays pending and is enqueued again');
          this.requeueUnqueued(owner, gens.slice(i), 1);
        },
      );
    };
    return gens.length > 0 ? from(0) : Promise.resolve();
  }

  /** Another enqueue of the jobs the queue refused, `REQUEUE_MS * attempt` later; after the last, recovery's. */
  private requeueUnqueued(owner: Pick<Job, 'ownerId' | 'organizationId' | 'weight'>, gens: readonly NewGeneration[], attempt: number): void {
    if (attempt > REQUEUE_ATTEMPTS) return;
    const timer = this.options.clock.setTimeout(() => {
      void (async () => {
        for (let i = 0; i < gens.length; i++) {
          const gen = gens[i]!;
          try {
            // Not `fresh`: the job may have reached the queue after all (a slow answer), and a second one is then none.
            await this.queue.enqueue(jobOfRecord({ ...gen, ...owner }));
          } catch {
            this.requeueUnqueued(owner, gens.slice(i), attempt + 1);
            return;
          }
        }
      })();
    }, REQUEUE_MS * attempt);
    timer.unref?.();
  }
}
