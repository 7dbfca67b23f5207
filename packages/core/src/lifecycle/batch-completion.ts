import { inject, injectable } from 'tsyringe';
import type { FailureCode, GenerationRecord } from '../domain/types.js';
import { isBatchDone } from '../domain/batches.js';
import type { GenerationStore } from '../ports/store.js';
import { WebhookOutbox } from '../push/webhook-outbox.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { LifecycleObserver } from './observer.js';

/** How a generation failed, as the observer is told it. */
export interface Failure {
  code: FailureCode;
  reason: string;
}

function isList(members: GenerationRecord | readonly GenerationRecord[]): members is readonly GenerationRecord[] {
  return Array.isArray(members);
}

/**
 * The one change of a batch: its completion, once none of its generations is pending or processing any more
 * (`isBatchDone`). Asked by the Lifecycle after each of a batch's generations finished (`finished`, which also tells
 * the observer, in the one order of a finish), and by recovery for every open batch older than `recovery.openBatchMs`
 * (a process that died in between).
 */
@injectable()
export class BatchCompletion {
  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Store) private readonly store: GenerationStore,
    @inject(WebhookOutbox) private readonly outbox: WebhookOutbox,
    @inject(LifecycleObserver) private readonly observer: LifecycleObserver,
  ) {}

  /**
   * The one order of a finish, for every way a generation ends (completed, failed, a batch cancelled whole): when it
   * belongs to a batch, the batch is completed first if this was its last open member, and only then is the observer
   * told of the generation (its metric and log line), so whoever sees a member finished can already see its batch
   * done. `members`: one finished generation, or several of one batch finished in one step (the batch is looked at
   * once). `failure`: they failed, with this code and reason; else they completed. Answers true (a completion's chain
   * ends on it); only a batch's member takes a promise step.
   */
  finished(members: GenerationRecord | readonly GenerationRecord[], price: number, now: number, failure?: Failure): true | Promise<true> {
    const first = isList(members) ? members[0] : members;
    if (first?.batchId === undefined) return this.tell(members, price, now, failure);
    return this.completeIfDone(first.batchId, first.ownerId).then(() => this.tell(members, price, now, failure));
  }

  private tell(members: GenerationRecord | readonly GenerationRecord[], price: number, now: number, failure: Failure | undefined): true {
    if (!isList(members)) return this.tellOne(members, price, now, failure);
    for (const rec of members) this.tellOne(rec, price, now, failure);
    return true;
  }

  private tellOne(rec: GenerationRecord, price: number, now: number, failure: Failure | undefined): true {
    if (failure === undefined) return this.observer.completed(rec, price, now);
    this.observer.failed(rec, price, failure.code, failure.reason, now);
    return true;
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
