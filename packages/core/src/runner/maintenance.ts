import { inject, injectable } from 'tsyringe';
import type { GenerationRecord } from '../domain/types.js';
import { Lifecycle } from '../lifecycle/lifecycle.js';
import { asError, childLogger } from '../logger.js';
import type { IdempotencyStore } from '../ports/idempotency.js';
import type { Logger } from '../ports/logger.js';
import type { GenerationStore } from '../ports/store.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';

import type { RecoveryReport } from '../service-types.js';
import type { ClockTimer } from '../ports/clock.js';

export type { RecoveryReport };

const PAGE = 500;
/** Open batches per page of recovery's batch walk (each one costs a count read). */
const BATCH_PAGE = 100;
/** Records per retention batch: one batched file delete, then one remove each. */
const SWEEP_BATCH = 200;
/** The idempotency store's "user" under which instances elect the sweeper of each interval. */
const SWEEPER = 'genservice:maintenance';

/**
 * Background upkeep with its timers: recovery (re-enqueue unfinished work, give up on work that lost its worker too
 * often, settle forgotten reserves, complete batches whose completion a crash lost), the retention sweep and the idempotency purge. Every state change it makes is
 * the Lifecycle's.
 */
@injectable()
export class Maintenance {
  private readonly logger: Logger;
  private timers: ClockTimer[] = [];

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(Lifecycle) private readonly lifecycle: Lifecycle,
    @inject(TOKENS.Store) private readonly store: GenerationStore,
    @inject(TOKENS.Idempotency) private readonly idempotency: IdempotencyStore,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'maintenance' });
  }

  async start(): Promise<void> {
    const { recovery, retention, idempotencyTtlMs } = this.options;
    if (recovery.onStart) await this.recover();
    if (recovery.intervalMs > 0) this.every(recovery.intervalMs, () => this.recover(), 'recovery');
    // Always: without retention, a generation may still have asked for a life of its own at create.
    this.every(retention.sweepIntervalMs, () => this.scheduledSweep(), 'retention sweep');
    this.every(Math.min(idempotencyTtlMs, 3600_000), () => this.idempotency.purgeBefore(this.options.clock.now() - idempotencyTtlMs), 'idempotency purge');
  }

  stop(): void {
    for (const t of this.timers) this.options.clock.clearInterval(t);
    this.timers = [];
  }

  private every(ms: number, task: () => Promise<unknown>, name: string): void {
    let running = false;
    const t = this.options.clock.setInterval(() => {
      if (running) return;
      running = true;
      task()
        .catch((err: unknown) => this.logger.error({ err: asError(err) }, `${name} failed`))
        .finally(() => {
          running = false;
        });
    }, ms);
    t.unref?.();
    this.timers.push(t);
  }

  async recover(): Promise<RecoveryReport> {
    const out: RecoveryReport = { requeued: 0, failed: 0, settled: 0, released: 0, batchesCompleted: 0 };
    const now = this.options.clock.now();
    // Paged, so a backlog of any size is walked, not just its oldest page.
    for await (const rec of this.unfinished()) {
      try {
        const action = await this.lifecycle.recover(rec, now);
        if (action !== 'skipped') out[action]++;
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
   * Every open batch older than `recovery.openBatchMs` goes through the Lifecycle's `completeBatchIfDone`: one whose
   * generations all finished but whose completion (or its `batch.completed` delivery) a dying process never wrote is
   * completed now. Younger ones are left to the instance finishing them. Answers how many it completed.
   */
  private async completeOpenBatches(now: number): Promise<number> {
    const before = now - this.options.recovery.openBatchMs;
    let completed = 0;
    let after: string | undefined;
    for (;;) {
      const page = await this.store.listOpenBatches(before, BATCH_PAGE, after);
      for (const batch of page) {
        try {
          if (await this.lifecycle.completeBatchIfDone(batch.id, batch.ownerId)) completed++;
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

  /**
   * The timer's sweep: once per sweep interval across all instances. The idempotency store's atomic `begin` elects
   * the instance that sweeps this interval; the others skip it. Answers what `sweep` removed (0 when not elected).
   */
  async scheduledSweep(now: number = this.options.clock.now()): Promise<number> {
    const window = `sweep:${Math.floor(now / this.options.retention.sweepIntervalMs)}`;
    const elected = await this.idempotency.begin(SWEEPER, window, 'sweep', now, window);
    if (elected.state !== 'new') return 0;
    const removed = await this.sweep(now);
    await this.idempotency.finish(SWEEPER, window, window);
    return removed;
  }

  /**
   * Deletes expired generations (the Lifecycle's rule: past the service's retention, or past the life asked for at
   * create) with their files, records, events and deliveries (the Lifecycle's purge), `SWEEP_BATCH` at a time. A blob
   * store outage ends the pass with every remaining record in place; the next sweep tries again.
   */
  async sweep(now: number = this.options.clock.now()): Promise<number> {
    let total = 0;
    for (;;) {
      const batch = await this.lifecycle.expired(now, SWEEP_BATCH);
      if (batch.length === 0) break;
      const removed = await this.lifecycle.purge(batch);
      total += removed;
      // Nothing removed from a full batch means others are removing the same rows: stop rather than spin on them.
      if (batch.length < SWEEP_BATCH || removed === 0) break;
      // Yield between batches so a long sweep never holds up requests.
      await new Promise((r) => setImmediate(r));
    }
    if (total > 0) this.logger.info({ deleted: total }, 'retention sweep');
    return total;
  }
}
