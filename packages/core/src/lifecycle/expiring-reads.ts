import type { GenerationRecord } from '../domain/types.js';
import { hasExpired } from '../domain/rules.js';
import type { ReserveResult } from '../ports/ledger.js';
import type { GenerationChange, GenerationStore, InsertOptions, InsertReserve, ListQuery, NewEvent, NewGeneration } from '../ports/store.js';
import { isThenable } from '../domain/thenable.js';

/**
 * The store as every client-facing read sees it: a generation past its expiry (the domain's rule: the service's
 * retention, or the shorter life asked for at create) reads exactly like a deleted one (absent from `get` and
 * `list`), whether or not the sweep has come by yet. Workers, recovery and the
 * sweep read through `getById` and the other methods, which see everything. Reads are the only thing it changes.
 */
export class ExpiringReads implements GenerationStore {
  readonly countByStatus?: GenerationStore['countByStatus'];

  constructor(
    private readonly store: GenerationStore,
    /** `retention.finishedTtlMs`; undefined: only a life asked for at create ends a generation. */
    private readonly ttlMs: number | undefined,
    /** The service's clock (`options.clock.now`). */
    private readonly now: () => number,
  ) {
    if (store.countByStatus) this.countByStatus = () => store.countByStatus!();
  }

  private live(rec: GenerationRecord | null): GenerationRecord | null {
    if (!rec || rec.finishedAt === undefined) return rec;
    return hasExpired(rec, this.ttlMs, this.now()) ? null : rec;
  }

  get(id: string, ownerId: string): Promise<GenerationRecord | null> {
    return this.getAs(id, ownerId, identity);
  }

  /**
   * `as` of what `get` answers, in the same step as the expiry check: a promise chain, not an async frame (every poll
   * reads through it). A host store's thenable is taken as `await` would take it.
   */
  getAs<T>(id: string, ownerId: string, as: (rec: GenerationRecord | null) => T): Promise<T> {
    let got: ReturnType<GenerationStore['get']>;
    try {
      got = this.store.get(id, ownerId);
    } catch (err) {
      // A store that throws instead of rejecting still gives a rejected read.
      return Promise.reject(err);
    }
    // A store may answer at once (the port allows it): only a thenable waits.
    if (isThenable(got)) return Promise.resolve(got).then((rec) => as(this.live(rec)));
    try {
      return Promise.resolve(as(this.live(got)));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  async list(ownerId: string, query: ListQuery): Promise<GenerationRecord[]> {
    // An expired one still waiting for the sweep leaves its page a little short, never a wrong entry.
    return (await this.store.list(ownerId, query)).filter((r) => this.live(r) !== null);
  }

  insert(gen: NewGeneration, event: NewEvent, options?: InsertOptions): Promise<'inserted' | 'limit_reached'> {
    return this.store.insert(gen, event, options);
  }
  insertBatch(...args: Parameters<GenerationStore['insertBatch']>): ReturnType<GenerationStore['insertBatch']> {
    return this.store.insertBatch(...args);
  }
  getBatch(...args: Parameters<GenerationStore['getBatch']>): ReturnType<GenerationStore['getBatch']> {
    return this.store.getBatch(...args);
  }
  batchCounts(...args: Parameters<GenerationStore['batchCounts']>): ReturnType<GenerationStore['batchCounts']> {
    return this.store.batchCounts(...args);
  }
  completeBatch(...args: Parameters<GenerationStore['completeBatch']>): ReturnType<GenerationStore['completeBatch']> {
    return this.store.completeBatch(...args);
  }
  listOpenBatches(...args: Parameters<GenerationStore['listOpenBatches']>): ReturnType<GenerationStore['listOpenBatches']> {
    return this.store.listOpenBatches(...args);
  }
  getById(id: string): Promise<GenerationRecord | null> {
    return this.store.getById(id);
  }
  insertReserved(gen: NewGeneration, event: NewEvent, reserve: InsertReserve): Promise<ReserveResult | 'limited'> {
    if (!this.store.insertReserved) throw new Error('this store cannot reserve and insert in one step');
    return this.store.insertReserved(gen, event, reserve);
  }

  settlesFor(ledger: unknown): boolean {
    return this.store.settlesFor?.(ledger) === true;
  }

  update(id: string, change: GenerationChange): Promise<GenerationRecord | null> {
    return this.store.update(id, change);
  }

  updateBatchMembers(batchId: string, change: GenerationChange): Promise<GenerationRecord[]> {
    return this.store.updateBatchMembers(batchId, change);
  }
  renewLeases(ids: readonly string[], holder: string, until: number, now: number): Promise<string[]> {
    return this.store.renewLeases(ids, holder, until, now);
  }
  listUnfinished(limit: number, after?: string): Promise<GenerationRecord[]> {
    return this.store.listUnfinished(limit, after);
  }
  eventsOf(...args: Parameters<GenerationStore['eventsOf']>): ReturnType<GenerationStore['eventsOf']> {
    return this.store.eventsOf(...args);
  }
  readFeed(...args: Parameters<GenerationStore['readFeed']>): ReturnType<GenerationStore['readFeed']> {
    return this.store.readFeed(...args);
  }
  feedHead(): Promise<string> {
    return this.store.feedHead();
  }
  listFinishedBefore(before: number, limit: number): Promise<GenerationRecord[]> {
    return this.store.listFinishedBefore(before, limit);
  }
  listLifeEndedBefore(before: number, limit: number): Promise<GenerationRecord[]> {
    return this.store.listLifeEndedBefore(before, limit);
  }
  remove(...args: Parameters<GenerationStore['remove']>): ReturnType<GenerationStore['remove']> {
    return this.store.remove(...args);
  }
}

/** `getAs` for the value itself. */
export function identity<T>(value: T): T {
  return value;
}
