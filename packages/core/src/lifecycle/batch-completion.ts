import { inject, injectable } from 'tsyringe';
import type { GenerationRecord } from '../domain/types.js';
import { isBatchDone } from '../domain/batches.js';
import type { GenerationStore } from '../ports/store.js';
import { WebhookOutbox } from '../push/webhook-outbox.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { LifecycleObserver } from './observer.js';

/**
 * The one change of a batch: its completion, once none of its generations is pending or processing any more
 * (`isBatchDone`). Asked by the Lifecycle after each of a batch's generations finished, and by recovery for every open
 * batch older than `recovery.openBatchMs` (a process that died in between).
 */
@injectable()
export class BatchCompletion {
  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Store) private readonly store: GenerationStore,
    @inject(WebhookOutbox) private readonly outbox: WebhookOutbox,
    @inject(LifecycleObserver) private readonly observer: LifecycleObserver,
  ) {}

  /** After one of a batch's generations finished: the batch may be done now. */
  async memberFinished(rec: GenerationRecord): Promise<void> {
    if (rec.batchId !== undefined) await this.completeIfDone(rec.batchId, rec.ownerId);
  }

  /**
   * Completes a batch when it is done: its `batch.completed` delivery is written to the outbox first (keyed by the
   * batch, so writing it again adds nothing), and only then `completedAt` is set (a compare-and-set in the store: of
   * racing instances one wins, and all of them wrote the same one delivery). A process that dies anywhere in between
   * leaves the batch open, and recovery finishes it. True for the one call that completed it.
   */
  async completeIfDone(batchId: string, ownerId: string): Promise<boolean> {
    const totals = await this.store.batchCounts(batchId);
    if (!isBatchDone(totals.counts)) return false;
    const batch = await this.store.getBatch(batchId, ownerId);
    if (!batch || batch.completedAt !== undefined) return false;
    const now = this.options.clock.now();
    await this.outbox.batchCompleted(batch, totals, now);
    if (!(await this.store.completeBatch(batchId, now))) return false;
    this.observer.batchCompleted(batchId, totals);
    return true;
  }
}
