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

  /** One compare-and-set with its event; the record after it, or null when its expectation did not hold. */
  async change(id: string, change: GenerationChange): Promise<GenerationRecord | null> {
    const after = await this.store.update(id, change);
    if (after) this.feed.committed();
    return after;
  }

  /** The same change on every member of a batch whose expectation holds, in one atomic step; the records after it. */
  async changeBatchMembers(batchId: string, change: GenerationChange): Promise<GenerationRecord[]> {
    const after = await this.store.updateBatchMembers(batchId, change);
    if (after.length > 0) this.feed.committed();
    return after;
  }

  /** A new generation with its `created` event (refused when its owner is at `maxUnfinishedPerOwner`). */
  async insert(gen: NewGeneration, event: NewEvent, options: InsertOptions): Promise<'inserted' | 'limit_reached'> {
    const inserted = await this.store.insert(gen, event, options);
    if (inserted === 'inserted') this.feed.committed();
    return inserted;
  }

  /** The ledger's reserve and the insert with its event in one atomic step (only when `settlesFor` the ledger). */
  async insertReserved(gen: NewGeneration, event: NewEvent, reserve: InsertReserve): Promise<ReserveResult | 'limited'> {
    if (!this.store.insertReserved) throw new Error('this store cannot reserve and insert in one step');
    const outcome = await this.store.insertReserved(gen, event, reserve);
    if (outcome === 'ok') this.feed.committed();
    return outcome;
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
