import { createHash } from 'node:crypto';
import { inject, injectable } from 'tsyringe';
import { isTerminal, type GenerationRecord, type GenerationStatus, type Metadata, type Settings } from '../domain/types.js';
import { DomainError, type ErrorDetail } from '../domain/errors.js';
import { Generations, canonical, decodeCursor, encodeCursor } from './generations.js';
import type { GenerationPage } from '../service-types.js';
import type { BaseUrl } from '../domain/types.js';
import { BATCH_ID_PATTERN, newBatchId } from '../domain/ids.js';
import { type BatchItem, Lifecycle, MAX_BATCH_SIZE } from '../lifecycle/lifecycle.js';
import { Webhooks } from '../push/webhooks.js';
import type { Principal } from '../ports/api-keys.js';
import type { IdempotencyStore } from '../ports/idempotency.js';
import type { GenerationStore } from '../ports/store.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { Views } from './views.js';

/** One request of a batch, as the client sent it (its shape already checked). */
export interface BatchRequestItem {
  modelId: string;
  settings?: Settings;
  metadata?: Metadata;
}

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
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(Generations) private readonly generations: Generations,
    @inject(Lifecycle) private readonly lifecycle: Lifecycle,
    @inject(TOKENS.Store) private readonly store: GenerationStore,
    @inject(TOKENS.Idempotency) private readonly idempotency: IdempotencyStore,
    @inject(Webhooks) private readonly webhooks: Webhooks,
    @inject(Views) private readonly views: Views,
  ) {}

  /**
   * Every request is validated before anything is reserved: one bad request refuses the whole batch with a 400 that
   * names each bad one by its index (`requests[3]`, `requests[7].settings.prompt`).
   */
  private validated(requests: readonly BatchRequestItem[], key?: Principal): BatchItem[] {
    const details: ErrorDetail[] = [];
    const items: BatchItem[] = [];
    requests.forEach((req, i) => {
      try {
        const { settings, price } = this.generations.priced(req, key);
        items.push({ modelId: req.modelId, settings, price, ...(req.metadata !== undefined ? { metadata: req.metadata } : {}) });
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        if (err.code === 'invalid_settings' && err.details && err.details.length > 0) {
          for (const d of err.details) details.push({ ...d, field: `requests[${i}].settings.${d.field}` });
        } else details.push({ field: `requests[${i}].modelId`, code: 'invalid_value', message: `requests[${i}]: ${err.message}` });
      }
    });
    if (details.length > 0) {
      const bad = new Set(details.map((d) => /^requests\[(\d+)\]/.exec(d.field)?.[1])).size;
      throw new DomainError('invalid_request', `${bad} of the ${requests.length} requests ${bad === 1 ? 'is' : 'are'} not valid; nothing was created.`, { details });
    }
    return items;
  }

  /** `who` is the user, or the principal of the key the request came with (its allow-list and budget then apply). */
  async create(who: string | Principal, input: BatchCreateRequest, idempotencyKey?: string): Promise<{ batchId: string; generationIds: string[] }> {
    const principal: Principal = typeof who === 'string' ? { userId: who } : who;
    if (input.requests.length < 1 || input.requests.length > MAX_BATCH_SIZE) {
      throw new DomainError('invalid_request', `A batch holds 1 to ${MAX_BATCH_SIZE} requests.`, {
        details: [{ field: 'requests', code: 'invalid_value', message: `must hold 1 to ${MAX_BATCH_SIZE} requests` }],
      });
    }
    const userId = principal.userId;
    const items = this.validated(input.requests, typeof who === 'string' ? undefined : principal);
    const webhook = input.webhook ? { url: (await this.webhooks.check({ url: input.webhook.url })).url } : undefined;
    const request = {
      userId,
      items,
      ...(webhook ? { webhook } : {}),
      ...(principal.keyId !== undefined ? { key: { keyId: principal.keyId, ...(principal.budget !== undefined ? { budget: principal.budget } : {}) } } : {}),
    };
    if (idempotencyKey === undefined) return this.lifecycle.createBatch(request);

    // Batch keys live beside the generation keys of the same user, in a namespace of their own.
    const key = `batch:${idempotencyKey}`;
    const hash = createHash('sha256')
      .update(canonical({ requests: items.map((i) => ({ modelId: i.modelId, settings: i.settings, metadata: i.metadata ?? null })), webhook: webhook ?? null }))
      .digest('hex');
    const planned = newBatchId();
    const begun = await this.idempotency.begin(userId, key, hash, this.options.clock.now(), planned);
    if (begun.state !== 'new' && begun.requestHash !== hash) {
      throw new DomainError('idempotency_mismatch', 'This Idempotency-Key was used with a different request body.');
    }
    if (begun.state === 'done') return this.answerOf(userId, begun.generationId);
    let id = planned;
    if (begun.state === 'in_progress') {
      const now = this.options.clock.now();
      const staleBefore = now - this.options.runner.leaseMs;
      if (begun.startedAt >= staleBefore) throw new DomainError('idempotency_conflict', 'A request with this Idempotency-Key is still being handled.');
      // The first request crashed: if it stored its batch, that is the answer; else this retry creates it.
      const existing = await this.store.getBatch(begun.generationId, userId);
      id = existing ? begun.generationId : newBatchId();
      if (!(await this.idempotency.takeOver(userId, key, staleBefore, now, id))) {
        throw new DomainError('idempotency_conflict', 'A request with this Idempotency-Key is still being handled.');
      }
      if (existing) {
        await this.idempotency.finish(userId, key, id);
        return { batchId: existing.id, generationIds: existing.generationIds };
      }
    }
    let created: { batchId: string; generationIds: string[] };
    try {
      created = await this.lifecycle.createBatch({ ...request, batchId: id });
    } catch (err) {
      await this.idempotency.abandon(userId, key, id).catch(() => undefined);
      throw err;
    }
    if (await this.idempotency.finish(userId, key, id)) return created;
    // A retry took the key over while this request stalled: that one's batch is the answer; ours is cancelled (free
    // from pending).
    await this.lifecycle.cancelBatch(created.generationIds);
    throw new DomainError('idempotency_conflict', 'A request with this Idempotency-Key is still being handled.');
  }

  private async answerOf(userId: string, batchId: string): Promise<{ batchId: string; generationIds: string[] }> {
    const batch = await this.store.getBatch(batchId, userId);
    if (!batch) throw new DomainError('idempotency_conflict', 'A request with this Idempotency-Key is still being handled.');
    return { batchId: batch.id, generationIds: batch.generationIds };
  }

  private async owned(userId: string, batchId: string) {
    const batch = BATCH_ID_PATTERN.test(batchId) ? await this.store.getBatch(batchId, userId) : null;
    if (!batch) throw notFound();
    return batch;
  }

  /** Running while any of its generations is pending or processing; completed once none is. */
  async get(userId: string, batchId: string): Promise<BatchView> {
    const batch = await this.owned(userId, batchId);
    const { counts, price } = await this.store.batchCounts(batch.id);
    return { status: counts.pending + counts.processing > 0 ? 'running' : 'completed', counts, price };
  }

  /** The batch's generations as list items, newest first (the order and cursor of GET /v1/generations). */
  async list(userId: string, batchId: string, request: { limit?: number; cursor?: string }, baseUrl?: BaseUrl): Promise<GenerationPage> {
    const batch = await this.owned(userId, batchId);
    const limit = request.limit ?? 20;
    const before = request.cursor === undefined ? undefined : decodeCursor(request.cursor);
    if (before === null) throw new DomainError('invalid_request', 'cursor is not valid.', { details: [{ field: 'cursor', code: 'invalid_value', message: 'must be a nextCursor from a previous page' }] });
    const rows: GenerationRecord[] = await this.store.list(userId, { limit: limit + 1, batchId: batch.id, ...(before !== undefined ? { before } : {}) });
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      data: page.map((r) => this.views.item(r, baseUrl)),
      nextCursor: rows.length > limit && last ? encodeCursor({ createdAt: last.createdAt, id: last.id }) : null,
    };
  }

  /** Cancels every generation of the batch that has not finished (each charged as a single cancel). */
  async cancel(userId: string, batchId: string): Promise<BatchView & { cancelled: number }> {
    const batch = await this.owned(userId, batchId);
    const counts = await this.store.batchCounts(batch.id);
    let cancelled = 0;
    if (counts.counts.pending + counts.counts.processing > 0) {
      const open: string[] = [];
      for (const id of batch.generationIds) {
        const rec = await this.store.get(id, userId);
        if (rec && !isTerminal(rec.status)) open.push(id);
      }
      cancelled = await this.lifecycle.cancelBatch(open);
    }
    return { ...(await this.get(userId, batchId)), cancelled };
  }
}
