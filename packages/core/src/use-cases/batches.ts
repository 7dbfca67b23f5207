import { inject, injectable } from 'tsyringe';
import { isTerminal, type BaseUrl, type BatchRecord, type GenerationRecord, type GenerationStatus } from '../domain/types.js';
import { DomainError } from '../domain/errors.js';
import { isBatchDone, MAX_BATCH_SIZE } from '../domain/batches.js';
import { BATCH_ID_PATTERN, newBatchId } from '../domain/ids.js';
import { Cancellation } from '../lifecycle/cancellation.js';
import { Creation, type NewBatchRequest } from '../lifecycle/creation.js';
import type { Principal } from '../ports/api-keys.js';
import type { GenerationStore } from '../ports/store.js';
import { TOKENS } from '../tokens.js';
import { Admission, type BatchRequestItem, reserveKey } from './admission.js';
import { GenerationReads } from './generation-reads.js';
import { requestHash } from '../domain/request-hash.js';
import { idempotencyConflict, IdempotentCreates } from './idempotent.js';
import type { GenerationPage } from './types.js';

export type { BatchRequestItem } from './admission.js';

export interface BatchCreateRequest {
  requests: BatchRequestItem[];
  webhook?: { url: string };
}

/** What GET /v1/batches/:id answers. */
export interface BatchView {
  status: 'running' | 'completed';
  counts: Record<GenerationStatus, number>;
  /** Tokens charged for the batch's finished generations (all of them once it is completed). */
  price: number;
}

type Created = { batchId: string; generationIds: string[] };

function notFound(): DomainError {
  return new DomainError('not_found', 'Batch not found.');
}

/**
 * What a user can do with batches: create (validated and reserved as a whole, idempotent), read, list its
 * generations, cancel. The batch's life is its generations' lives: the Lifecycle runs each one and completes the
 * batch when the last one finished.
 */
@injectable()
export class Batches {
  constructor(
    @inject(Admission) private readonly admission: Admission,
    @inject(IdempotentCreates) private readonly idempotent: IdempotentCreates,
    @inject(Creation) private readonly creation: Creation,
    @inject(Cancellation) private readonly cancellation: Cancellation,
    @inject(TOKENS.Store) private readonly store: GenerationStore,
    @inject(GenerationReads) private readonly reads: GenerationReads,
  ) {}

  /** `who` is the user, or the principal of the key the request came with (its allow-list and budget then apply). */
  async create(who: string | Principal, input: BatchCreateRequest, idempotencyKey?: string, baseUrl?: BaseUrl): Promise<Created> {
    const principal: Principal = typeof who === 'string' ? { userId: who } : who;
    if (input.requests.length < 1 || input.requests.length > MAX_BATCH_SIZE) {
      throw new DomainError('invalid_request', `A batch holds 1 to ${MAX_BATCH_SIZE} requests.`, {
        details: [{ field: 'requests', code: 'invalid_value', message: `must hold 1 to ${MAX_BATCH_SIZE} requests` }],
      });
    }
    const userId = principal.userId;
    const items = this.admission.batchItems(input.requests, { userId, ...(baseUrl !== undefined ? { baseUrl } : {}) }, typeof who === 'string' ? undefined : principal);
    const webhook = input.webhook ? { url: (await this.admission.webhook({ url: input.webhook.url })).url } : undefined;
    const request: NewBatchRequest = { userId, items };
    if (webhook) request.webhook = webhook;
    const key = reserveKey(principal);
    if (key !== undefined) request.key = key;
    if (idempotencyKey === undefined) return this.creation.createBatch(request);
    const answerOf = (batch: BatchRecord): Created => ({ batchId: batch.id, generationIds: batch.generationIds });
    return this.idempotent.run<Created>({
      userId,
      // Batch keys live beside the generation keys of the same user, in a namespace of their own.
      key: `batch:${idempotencyKey}`,
      hash: requestHash({ requests: items.map((i) => ({ modelId: i.modelId, settings: i.settings, metadata: i.metadata ?? null })), webhook: webhook ?? null }),
      newId: newBatchId,
      create: (batchId, keyHeld) => this.creation.createBatch({ ...request, batchId, keyHeld }),
      answer: async (id) => {
        const batch = await this.store.getBatch(id, userId);
        if (!batch) throw idempotencyConflict();
        return answerOf(batch);
      },
      stored: async (id) => {
        const batch = await this.store.getBatch(id, userId);
        return batch ? answerOf(batch) : null;
      },
      lost: async (created) => {
        // A retry took the key over while this request stalled: that one's batch is the answer; ours, never enqueued, is
        // cancelled (free from pending).
        await this.cancellation.cancelAll(created.generationIds.map((id, i) => ({ id, modelId: items[i]!.modelId, reserved: items[i]!.price })));
        throw idempotencyConflict();
      },
    });
  }

  private async owned(userId: string, batchId: string): Promise<BatchRecord> {
    const batch = BATCH_ID_PATTERN.test(batchId) ? await this.store.getBatch(batchId, userId) : null;
    if (!batch) throw notFound();
    return batch;
  }

  /** Running while any of its generations is pending or processing; completed once none is. */
  async get(userId: string, batchId: string): Promise<BatchView> {
    const batch = await this.owned(userId, batchId);
    const { counts, price } = await this.store.batchCounts(batch.id);
    return { status: isBatchDone(counts) ? 'completed' : 'running', counts, price };
  }

  /** The batch's generations as list items, newest first (the order and cursor of GET /v1/generations). */
  async list(userId: string, batchId: string, request: { limit?: number; cursor?: string }, baseUrl?: BaseUrl): Promise<GenerationPage> {
    const batch = await this.owned(userId, batchId);
    return this.reads.list(userId, request, { batchId: batch.id }, baseUrl);
  }

  /**
   * Cancels every generation of the batch that has not finished: the ones no worker started all at once, free (one
   * set-based step, so the runner can no longer claim them), then the running ones each as a single cancel.
   */
  async cancel(userId: string, batchId: string): Promise<BatchView & { cancelled: number }> {
    const batch = await this.owned(userId, batchId);
    const { counts } = await this.store.batchCounts(batch.id);
    let cancelled = 0;
    if (!isBatchDone(counts)) {
      cancelled = (await this.cancellation.cancelPendingOfBatch(batch.id)).length;
      cancelled += await this.cancellation.cancelAll(await this.processingOf(userId, batch.id));
    }
    return { ...(await this.get(userId, batchId)), cancelled };
  }

  /** The batch's processing generations, read a page at a time. */
  private async processingOf(userId: string, batchId: string): Promise<GenerationRecord[]> {
    const out: GenerationRecord[] = [];
    for (;;) {
      const last = out[out.length - 1];
      const page = await this.store.list(userId, { limit: 100, status: 'processing', batchId, ...(last ? { before: { createdAt: last.createdAt, id: last.id } } : {}) });
      out.push(...page);
      if (page.length < 100) return out;
    }
  }
}
