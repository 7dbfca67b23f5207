import { inject, injectable } from 'tsyringe';
import type { GenerationRecord } from '../domain/types.js';
import type { ReserveResult } from '../ports/ledger.js';
import type { GenerationChange, GenerationStore, InsertOptions, InsertReserve, NewBatch, NewEvent, NewGeneration } from '../ports/store.js';
import { EventFeed } from '../push/event-feed.js';
import { TOKENS } from '../tokens.js';

/**
 * The generations as the Lifecycle module reads and writes them: the record a change starts from, and every write,
 * each one compare-and-set (or insert) with its event in one atomic step. A write that commits wakes the event log's
 * readers (streams, long-polls, the webhook outbox, other instances): the one place a store write and its wake-up go
 * together, so no transition can forget it.
 */
@injectable()
export class GenerationLog {
  constructor(
    @inject(TOKENS.Store) private readonly store: GenerationStore,
    @inject(EventFeed) private readonly feed: EventFeed,
  ) {}

  /** The record as it is now, whoever owns it (expired ones too). */
  get(id: string): Promise<GenerationRecord | null> {
    return this.store.getById(id);
  }

  /** True when a change can carry the settle of `ledger`'s reserve (`GenerationChange.settle`, one atomic step). */
  settlesFor(ledger: unknown): boolean {
    return this.store.settlesFor?.(ledger) === true;
  }

  /*
   * Each write below wakes the feed's readers once it committed, in a `then` with a callback made once, not an async
   * function: an await keeps a suspended frame (~0.3 KB a call), and the change and the insert are on every
   * generation's path (issue 36). A store that throws instead of rejecting still gives a rejected promise.
   */
  private readonly changed = (after: GenerationRecord | null): GenerationRecord | null => {
    if (after) this.feed.committed();
    return after;
  };
  private readonly changedMembers = (after: GenerationRecord[]): GenerationRecord[] => {
    if (after.length > 0) this.feed.committed();
    return after;
  };
  private readonly inserted = (inserted: 'inserted' | 'limit_reached'): 'inserted' | 'limit_reached' => {
    if (inserted === 'inserted') this.feed.committed();
    return inserted;
  };
  private readonly insertedReserved = (outcome: ReserveResult | 'limited'): ReserveResult | 'limited' => {
    if (outcome === 'ok') this.feed.committed();
    return outcome;
  };

  /** One compare-and-set with its event; the record after it, or null when its expectation did not hold. */
  change(id: string, change: GenerationChange): Promise<GenerationRecord | null> {
    try {
      return this.store.update(id, change).then(this.changed);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** The same change on every member of a batch whose expectation holds, in one atomic step; the records after it. */
  changeBatchMembers(batchId: string, change: GenerationChange): Promise<GenerationRecord[]> {
    try {
      return this.store.updateBatchMembers(batchId, change).then(this.changedMembers);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** A new generation with its `created` event (refused when its owner is at `maxUnfinishedPerOwner`). */
  insert(gen: NewGeneration, event: NewEvent, options: InsertOptions): Promise<'inserted' | 'limit_reached'> {
    try {
      return this.store.insert(gen, event, options).then(this.inserted);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** The ledger's reserve and the insert with its event in one atomic step (only when `settlesFor` the ledger). */
  insertReserved(gen: NewGeneration, event: NewEvent, reserve: InsertReserve): Promise<ReserveResult | 'limited'> {
    try {
      if (!this.store.insertReserved) throw new Error('this store cannot reserve and insert in one step');
      return this.store.insertReserved(gen, event, reserve).then(this.insertedReserved);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** A batch and all its generations with their events, in one atomic step. */
  async insertBatch(batch: NewBatch, gens: NewGeneration[], events: NewEvent[]): Promise<void> {
    await this.store.insertBatch(batch, gens, events);
    this.feed.committed();
  }

  /** Extends the leases `holder` holds (no event: nobody reads a renewal); answers the ids still held. */
  renewLeases(ids: readonly string[], holder: string, until: number, now: number): Promise<string[]> {
    return this.store.renewLeases(ids, holder, until, now);
  }

  /** Removes finished generations with their events; answers the ids it removed (another remover may have been first). */
  async removeFinished(ids: readonly string[]): Promise<string[]> {
    const removed: string[] = [];
    for (const id of ids) if (await this.store.remove(id, { status: ['completed', 'failed'] })) removed.push(id);
    if (removed.length > 0) this.feed.committed();
    return removed;
  }
}
