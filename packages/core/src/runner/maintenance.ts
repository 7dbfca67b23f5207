import { inject, injectable } from 'tsyringe';
import { Cleanup } from '../lifecycle/cleanup.js';
import { Recovery, type RecoveryReport } from '../lifecycle/recovery.js';
import { UploadExpiry } from '../lifecycle/upload-expiry.js';
import { asError, childLogger } from '../logger.js';
import type { IdempotencyStore } from '../ports/idempotency.js';
import type { Logger } from '../ports/logger.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import type { ClockTimer } from '../ports/clock.js';

export type { RecoveryReport };

/** Records per retention batch: one batched file delete, then one remove each. */
const SWEEP_BATCH = 200;
/** The idempotency store's "user" under which instances elect the sweeper of each interval. */
const SWEEPER = 'genservice:maintenance';

/**
 * Background upkeep with its timers: recovery (`Recovery`: re-enqueue unfinished work, give up on work that lost its
 * worker too often, settle forgotten reserves, complete batches whose completion a crash lost), the retention sweep
 * (`Cleanup`: which generations expired, and their purge; `UploadExpiry`: expired uploads) and the idempotency purge.
 */
@injectable()
export class Maintenance {
  private readonly logger: Logger;
  private timers: ClockTimer[] = [];

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(Recovery) private readonly recovery: Recovery,
    @inject(Cleanup) private readonly cleanup: Cleanup,
    @inject(TOKENS.Idempotency) private readonly idempotency: IdempotencyStore,
    @inject(TOKENS.Logger) logger: Logger,
    @inject(UploadExpiry) private readonly uploads: UploadExpiry,
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

  /** One recovery pass now (see `Recovery`). */
  recover(): Promise<RecoveryReport> {
    return this.recovery.recover();
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
   * Deletes expired generations (the domain's expiry rule: past the service's retention, or past the life asked for at
   * create) with their files, records, events and deliveries (`Cleanup`), `SWEEP_BATCH` at a time. A blob
   * store outage ends the pass with every remaining record in place; the next sweep tries again. Then the uploads
   * whose links expired, with their files. Answers how many generations it removed.
   */
  async sweep(now: number = this.options.clock.now()): Promise<number> {
    let total = 0;
    for (;;) {
      const batch = await this.cleanup.expired(now, SWEEP_BATCH);
      if (batch.length === 0) break;
      const removed = await this.cleanup.purge(batch);
      total += removed;
      // Nothing removed from a full batch means others are removing the same rows: stop rather than spin on them.
      if (batch.length < SWEEP_BATCH || removed === 0) break;
      // Yield between batches so a long sweep never holds up requests.
      await new Promise((r) => setImmediate(r));
    }
    if (total > 0) this.logger.info({ deleted: total }, 'retention sweep');
    let uploads = 0;
    for (;;) {
      const removed = await this.uploads.purge(now, SWEEP_BATCH);
      uploads += removed;
      if (removed < SWEEP_BATCH) break;
      await new Promise((r) => setImmediate(r));
    }
    if (uploads > 0) this.logger.info({ deleted: uploads }, 'expired uploads deleted');
    return total;
  }
}
