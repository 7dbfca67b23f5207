import { inject, injectable } from 'tsyringe';
import { isTerminal } from '../domain/types.js';
import { UnavailableError } from '../domain/errors.js';
import type { GenerationStore } from '../ports/store.js';
import { WebhookOutbox } from '../push/webhook-outbox.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { Cancellation } from './cancellation.js';
import { Cleanup } from './cleanup.js';
import { LifecycleObserver } from './observer.js';

/**
 * Deleting one generation on its owner's behalf: an unfinished one is cancelled first (charged as a cancel), then it
 * is purged (its files, then its record and events, then its webhook deliveries), then `generation.deleted` is
 * written to the outbox. The ledger keeps the charge.
 */
@injectable()
export class Deletion {
  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Store) private readonly store: GenerationStore,
    @inject(Cancellation) private readonly cancellation: Cancellation,
    @inject(Cleanup) private readonly cleanup: Cleanup,
    @inject(WebhookOutbox) private readonly outbox: WebhookOutbox,
    @inject(LifecycleObserver) private readonly observer: LifecycleObserver,
  ) {}

  /**
   * Files go first, so a blob store that cannot be reached (`UnavailableError`, answered 503) leaves the generation
   * as it was, and the client's retry finishes the job. False when there is none to delete (another user's, or
   * already deleted).
   */
  async delete(ownerId: string, generationId: string): Promise<boolean> {
    let rec = await this.store.get(generationId, ownerId);
    // A cancel can lose a race (a worker claims, or completes, at that moment): read again and act on what is there.
    for (let tries = 0; rec && !isTerminal(rec.status) && tries < 5; tries++) {
      await this.cancellation.cancel(rec);
      rec = await this.store.get(generationId, ownerId);
    }
    if (!rec) return false;
    if (!isTerminal(rec.status)) throw new UnavailableError('the generation kept changing while it was being deleted');
    const events = await this.store.eventsOf(generationId);
    if ((await this.cleanup.purge([rec])) === 0) return false;
    this.observer.deleted(rec);
    // Its deletion takes the next `seq` of its log, so `generation.deleted` is delivered after its other messages.
    await this.outbox.deleted(rec, (events[events.length - 1]?.seq ?? 0) + 1, this.options.clock.now());
    return true;
  }
}
