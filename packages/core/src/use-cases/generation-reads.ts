import { inject, injectable } from 'tsyringe';
import type { BaseUrl, GenerationRecord, GenerationView } from '../domain/types.js';
import { DomainError } from '../domain/errors.js';
import { GENERATION_ID_PATTERN } from '../domain/ids.js';
import { readPage, type PageRequest } from '../domain/paging.js';
import { ExpiringReads, identity } from '../lifecycle/expiring-reads.js';
import type { ListQuery } from '../ports/store.js';
import type { GenerationPage } from './types.js';
import { type GenerationItem, Views } from './views.js';
import { QueuePositions } from '../runner/queue-positions.js';

function notFound(): DomainError {
  return new DomainError('not_found', 'Generation not found.');
}

/**
 * Reading a user's generations: one (another user's, or an expired one, reads as absent), its details, and pages of
 * them (all of the user's, or a batch's). The store as clients read it; the views as clients see them.
 */
@injectable()
export class GenerationReads {
  constructor(
    // The store as clients read it (expired generations read as absent).
    @inject(ExpiringReads) private readonly store: ExpiringReads,
    @inject(Views) private readonly views: Views,
    @inject(QueuePositions) private readonly positions: QueuePositions,
  ) {}

  /** The caller's generation; a promise chain, not an async frame: every poll reads it. */
  owned(userId: string, generationId: string): Promise<GenerationRecord> {
    return this.ownedAs(userId, generationId, identity);
  }

  /** The caller's generation as it is now, or null when it is gone. */
  current(userId: string, generationId: string): Promise<GenerationRecord | null> {
    return this.store.get(generationId, userId);
  }

  /** `as` of the caller's generation, in the same step as the ownership check (a poll's view takes no extra step). */
  private ownedAs<T>(userId: string, generationId: string, as: (rec: GenerationRecord) => T): Promise<T> {
    if (!GENERATION_ID_PATTERN.test(generationId)) return Promise.reject(notFound());
    return this.store.getAs(generationId, userId, (rec) => {
      if (!rec) throw notFound();
      return as(rec);
    });
  }

  /** The contract's view of a record. */
  view(rec: GenerationRecord, baseUrl?: BaseUrl): GenerationView {
    return this.views.view(rec, baseUrl);
  }

  get(userId: string, generationId: string, baseUrl?: BaseUrl): Promise<GenerationView> {
    return this.ownedAs(userId, generationId, (rec) => this.views.view(rec, baseUrl));
  }

  /**
   * The details item; a processing generation's carries the partial output streamed so far (read from its log), a
   * pending one's where it waits in the queue (when the queue can tell).
   */
  async details(userId: string, generationId: string, baseUrl?: BaseUrl): Promise<GenerationItem> {
    const rec = await this.owned(userId, generationId);
    const item = this.views.item(rec, baseUrl);
    if (rec.status === 'pending') {
      const queue = await this.positions.of(rec.id);
      if (queue) item.queue = queue;
      return item;
    }
    if (rec.status !== 'processing') return item;
    const output = this.views.partial(rec, await this.store.eventsOf(rec.id), baseUrl);
    if (output) item.output = output;
    return item;
  }

  /** A page of the user's generations, newest first, narrowed by `filter`. Throws invalid_request for a bad cursor. */
  list(userId: string, request: PageRequest, filter: Omit<ListQuery, 'limit' | 'before'>, baseUrl?: BaseUrl): Promise<GenerationPage> {
    return readPage(
      request,
      (query) => this.store.list(userId, { ...query, ...filter }),
      (r) => this.views.item(r, baseUrl),
    );
  }
}
