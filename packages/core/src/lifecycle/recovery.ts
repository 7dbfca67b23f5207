import { inject, injectable } from 'tsyringe';
import type { GenerationRecord } from '../domain/types.js';
import { asError, childLogger } from '../logger.js';
import type { Logger } from '../ports/logger.js';
import type { JobQueue } from '../ports/queue.js';
import type { GenerationStore } from '../ports/store.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { BatchCompletion } from './batch-completion.js';
import { Lifecycle } from './lifecycle.js';
import { jobOfRecord } from '../domain/fair-order.js';

/** What one recovery pass did. */
export interface RecoveryReport {
  requeued: number;
  failed: number;
  settled: number;
  released: number;
  /** Batches whose generations had all finished but whose completion a crash lost, completed by this pass. */
  batchesCompleted: number;
}

const PAGE = 500;
/** Open batches per page of recovery's batch walk (each one costs a count read). */
const BATCH_PAGE = 100;

/**
 * One recovery pass, after a crash or on the maintenance timer: every unfinished generation nobody holds goes to the
 * Lifecycle (which fails it by the give-up rule, or says to run it again: it is enqueued, or a parked remote job's
 * check is scheduled again), forgotten reserves are settled or released, and batches whose completion a crash lost
 * are completed. Every state change it makes is the Lifecycle's.
 */
@injectable()
export class Recovery {
  private readonly logger: Logger;

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Store) private readonly store: GenerationStore,
    @inject(Lifecycle) private readonly lifecycle: Lifecycle,
    @inject(TOKENS.Queue) private readonly queue: JobQueue,
    @inject(BatchCompletion) private readonly batches: BatchCompletion,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'maintenance' });
  }

  async recover(): Promise<RecoveryReport> {
    const out: RecoveryReport = { requeued: 0, failed: 0, settled: 0, released: 0, batchesCompleted: 0 };
    const now = this.options.clock.now();
    // Paged, so a backlog of any size is walked, not just its oldest page.
    for await (const rec of this.unfinished()) {
      try {
        const decision = await this.lifecycle.recover(rec, now);
        if (decision === 'requeue') {
          // A remote job between checks: schedule its check (again: a restart lost the in-process timer).
          const delay = rec.parkedUntil !== undefined ? { delayMs: Math.max(0, rec.parkedUntil - now) } : {};
          await this.queue.enqueue(jobOfRecord(rec), delay);
          out.requeued++;
        } else if (decision === 'failed') out.failed++;
      } catch (err) {
        this.logger.warn({ err: asError(err), generationId: rec.id }, 'recovery could not enqueue');
      }
    }
    const reserves = await this.lifecycle.reconcileReserves(PAGE);
    out.settled = reserves.settled;
    out.released = reserves.released;
    out.batchesCompleted = await this.completeOpenBatches(now);
    if (out.requeued + out.failed + out.settled + out.released + out.batchesCompleted > 0) this.logger.info({ ...out }, 'recovery pass');
    return out;
  }

  /**
   * Every open batch older than `recovery.openBatchMs` is completed if it is done: one whose generations all finished
   * but whose completion (or its `batch.completed` delivery) a dying process never wrote. Younger ones are left to the
   * instance finishing them. Answers how many it completed.
   */
  private async completeOpenBatches(now: number): Promise<number> {
    const before = now - this.options.recovery.openBatchMs;
    let completed = 0;
    let after: string | undefined;
    for (;;) {
      const page = await this.store.listOpenBatches(before, BATCH_PAGE, after);
      for (const batch of page) {
        try {
          if (await this.batches.completeIfDone(batch.id, batch.ownerId)) completed++;
        } catch (err) {
          this.logger.warn({ err: asError(err), batchId: batch.id }, 'recovery could not complete a batch');
        }
      }
      if (page.length < BATCH_PAGE) return completed;
      after = page[page.length - 1]!.id;
    }
  }

  private async *unfinished(): AsyncGenerator<GenerationRecord> {
    let after: string | undefined;
    for (;;) {
      const batch = await this.store.listUnfinished(PAGE, after);
      yield* batch;
      if (batch.length < PAGE) return;
      after = batch[batch.length - 1]!.id;
    }
  }
}
