import { cloneJson, copyBatch, holds, keptData } from './records.js';
import { Chunked, NumberBlocks, numberSlots, objectSlots } from './chunked.js';
import { apply, copy, StoredGeneration } from './stored-generation.js';
import type { BatchCounts, BatchRecord, GenerationEvent, GenerationRecord, GenerationStatus } from '../domain/types.js';
import { GENERATION_STATUSES } from '../domain/types.js';
import type { ReserveResult } from '../ports/ledger.js';
import type { FeedPage, GenerationChange, GenerationStore, InsertOptions, InsertReserve, ListQuery, NewBatch, NewEvent, NewGeneration } from '../ports/store.js';
import { type InStoreLedger, reserveInStore, settleInStore } from './in-store-ledger.js';

/**
 * GenerationStore held in a Map, for tests and single-process hosts.
 *
 * Every method checks and writes in one synchronous step before yielding, so concurrent callers in one process get
 * the same "exactly one wins" a SQL store gets from conditional UPDATEs. Records go in and out as copies: a caller
 * that mutates what it got back cannot change the stored state.
 */
export class MemoryGenerationStore implements GenerationStore {
  private readonly entries = new Map<string, StoredGeneration>();
  /** Every generation's five timestamps (stored-generation.ts). */
  private readonly times = new NumberBlocks(5);
  private order = 0;
  /**
   * The feed: every event in append order, one column per field (the event at index i is `logEntry[i]`'s, its
   * `logSeq[i]`th, of type `logType[i]` at `logAt[i]`, with `logData[i]`, at position `logPos[i]`). Columns rather than
   * an event object each: every generation's events are kept for good, and each object kept is copied by the
   * young-generation GC twice and marked by every full one; a column of numbers holds them unboxed (issue 36). One
   * process appends and commits in one step, so positions follow the append order. `logSeq` could be found from the
   * entry's positions, but by a scan of them: a feed page over a long streamed output would cost its square. Each
   * column grows a chunk at a time (chunked.ts), its numbers in Float64Arrays.
   */
  private readonly logEntry = new Chunked<StoredGeneration>(objectSlots);
  private readonly logSeq = new Chunked(numberSlots);
  private readonly logType = new Chunked<GenerationEvent['type']>(objectSlots);
  private readonly logAt = new Chunked(numberSlots);
  private readonly logData = new Chunked<GenerationEvent['data']>(objectSlots);
  private readonly logPos = new Chunked(numberSlots);
  /** Events still in the columns whose generation was removed: skipped by reads, dropped once they are half the feed. */
  private logGaps = 0;
  private position = 0;
  /**
   * Each owner's entries in insertion order (a removed one leaves an `undefined` until the array is compacted); a list
   * page sorts only that owner's generations, never the whole store. An array an entry knows its index in, rather than
   * a Set of ids: a create appends instead of growing a hash table as large as the owner's history (issue 36).
   */
  private readonly byOwner = new Map<string, Owned>();
  /** Unfinished generations per owner, for the in-flight cap without a scan. */
  private readonly unfinished = new Map<string, number>();
  private readonly batches = new Map<string, BatchRecord>();
  /** The memory ledger whose reserves this store holds and settles in its own steps (in-store-ledger.ts). */
  private settling: InStoreLedger | undefined;

  /**
   * Lets this store's creates hold, and its changes settle, `ledger`'s reserves in the same step, as the Postgres store
   * does. A store keeps the first ledger it was linked to: true when `ledger` is that one.
   */
  settleWith(ledger: InStoreLedger): boolean {
    this.settling ??= ledger;
    return this.settling === ledger;
  }

  settlesFor(ledger: unknown): boolean {
    return ledger !== undefined && ledger === this.settling;
  }

  async insertReserved(gen: NewGeneration, event: NewEvent, reserve: InsertReserve): Promise<ReserveResult | 'limited'> {
    if (this.entries.has(gen.id)) throw new Error(`Generation ${gen.id} already exists`);
    const held = reserveInStore(this.settling, gen, reserve);
    if (held === 'ok') this.put(gen, event);
    return held;
  }

  private append(entry: StoredGeneration, event: NewEvent, at: number): void {
    const pos = ++this.position;
    this.logEntry.push(entry);
    this.logSeq.push(entry.addPosition(pos));
    this.logType.push(event.type);
    this.logAt.push(at);
    // Data that is exactly the generation's own `{ modelId }` (every created event's) is kept as a mark, not as an
    // object per generation; which events carry it is the Lifecycle's business, not the store's.
    this.logData.push(isModelOf(event.data, entry.modelId) ? MODEL_OF_RECORD : keptData(event.data));
    this.logPos.push(pos);
  }

  /** The caller's copy of the event at index `i` of the feed. */
  private eventAt(i: number): GenerationEvent {
    const record = this.logEntry.at(i);
    const data = this.logData.at(i);
    return { seq: this.logSeq.at(i), generationId: record.id, ownerId: record.ownerId, type: this.logType.at(i), at: this.logAt.at(i), data: data === MODEL_OF_RECORD ? { modelId: record.modelId } : (cloneJson(data) as GenerationEvent['data']) };
  }

  /** The feed index of position `pos`, or of the first one after it (binary search: positions are in append order). */
  private indexOf(pos: number): number {
    let lo = 0;
    let hi = this.logPos.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.logPos.at(mid) < pos) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  async insert(gen: NewGeneration, event: NewEvent, options: InsertOptions = {}): Promise<'inserted' | 'limit_reached'> {
    if (this.entries.has(gen.id)) throw new Error(`Generation ${gen.id} already exists`);
    const max = options.maxUnfinishedPerOwner;
    if (max !== undefined && (this.unfinished.get(gen.ownerId) ?? 0) >= max) return 'limit_reached';
    this.put(gen, event);
    return 'inserted';
  }

  async insertBatch(batch: NewBatch, generations: readonly NewGeneration[], events: readonly NewEvent[]): Promise<void> {
    // Every check before the first write: all of it goes in, or nothing.
    if (this.batches.has(batch.id)) throw new Error(`Batch ${batch.id} already exists`);
    const ids = new Set<string>();
    for (const gen of generations) {
      if (this.entries.has(gen.id) || ids.has(gen.id)) throw new Error(`Generation ${gen.id} already exists`);
      ids.add(gen.id);
    }
    if (events.length !== generations.length) throw new Error('insertBatch: one first event per generation');
    const stored: BatchRecord = { id: batch.id, ownerId: batch.ownerId, generationIds: [...batch.generationIds], createdAt: batch.createdAt };
    if (batch.webhook !== undefined) stored.webhook = { url: batch.webhook.url };
    this.batches.set(batch.id, stored);
    generations.forEach((gen, i) => this.put(gen, events[i]!));
  }

  async getBatch(id: string, ownerId: string): Promise<BatchRecord | null> {
    const b = this.batches.get(id);
    return b && b.ownerId === ownerId ? copyBatch(b) : null;
  }

  async batchCounts(batchId: string): Promise<BatchCounts> {
    const counts = Object.fromEntries(GENERATION_STATUSES.map((s) => [s, 0])) as Record<GenerationStatus, number>;
    let price = 0;
    for (const id of this.batches.get(batchId)?.generationIds ?? []) {
      const r = this.entries.get(id);
      if (!r) continue;
      counts[r.status] += 1;
      if (r.finishedAt !== undefined) price += r.price ?? 0;
    }
    return { counts, price };
  }

  async completeBatch(id: string, now: number): Promise<boolean> {
    const b = this.batches.get(id);
    if (!b || b.completedAt !== undefined) return false;
    b.completedAt = now;
    return true;
  }

  async listOpenBatches(createdBefore: number, limit: number, after?: string): Promise<BatchRecord[]> {
    if (!(limit > 0)) return [];
    // A stable sort over insertion order: ties keep one order that does not change. Completed ones stay in it until
    // the cursor is found, so a page resumes after a batch completed since.
    let all = [...this.batches.values()].filter((b) => b.createdAt < createdBefore || b.id === after).sort((a, b) => a.createdAt - b.createdAt);
    if (after !== undefined) {
      const at = all.findIndex((b) => b.id === after);
      if (at < 0) return [];
      all = all.slice(at + 1);
    }
    const out: BatchRecord[] = [];
    for (const b of all) {
      if (out.length >= limit) break;
      if (b.completedAt === undefined && b.createdAt < createdBefore) out.push(copyBatch(b));
    }
    return out;
  }

  private put(gen: NewGeneration, event: NewEvent): void {
    const entry = new StoredGeneration(gen, this.order++, this.times);
    this.entries.set(gen.id, entry);
    let owned = this.byOwner.get(gen.ownerId);
    if (!owned) this.byOwner.set(gen.ownerId, (owned = { entries: new Chunked<StoredGeneration | undefined>(objectSlots), removed: 0 }));
    entry.slot = owned.entries.length;
    owned.entries.push(entry);
    this.unfinished.set(gen.ownerId, (this.unfinished.get(gen.ownerId) ?? 0) + 1);
    this.append(entry, event, gen.createdAt);
  }

  /** Answers at once (the port allows it); typed as the port is, so a subclass may answer with a promise. */
  get(id: string, ownerId: string): GenerationRecord | null | PromiseLike<GenerationRecord | null> {
    const record = this.entries.get(id);
    return record && record.ownerId === ownerId ? copy(record) : null;
  }

  async getById(id: string): Promise<GenerationRecord | null> {
    const record = this.entries.get(id);
    return record ? copy(record) : null;
  }

  async update(id: string, change: GenerationChange): Promise<GenerationRecord | null> {
    const record = this.entries.get(id);
    if (!record || !holds(record, change.expect, change.now)) return null;
    const settles = settleInStore(this.settling, change);
    const wasFinished = record.finishedAt !== undefined;
    apply(record, change.set);
    record.updatedAt = change.now;
    if (!wasFinished && record.finishedAt !== undefined) this.finished(record.ownerId);
    if (change.event) this.append(record, change.event, change.now);
    settles?.settleNow(id, change.settle!, change.now);
    return copy(record);
  }

  async renewLeases(ids: readonly string[], holder: string, until: number, now: number): Promise<string[]> {
    const renewed: string[] = [];
    for (const id of ids) {
      const record = this.entries.get(id);
      if (!record || record.finishedAt !== undefined || record.leaseOwner !== holder || !(now < (record.leaseExpiresAt ?? -Infinity))) continue;
      record.leaseExpiresAt = until;
      record.updatedAt = now;
      renewed.push(id);
    }
    return renewed;
  }

  /** One synchronous step over the batch's members: nothing else runs in between. */
  async updateBatchMembers(batchId: string, change: GenerationChange): Promise<GenerationRecord[]> {
    const out: GenerationRecord[] = [];
    const settles = settleInStore(this.settling, change);
    for (const id of this.batches.get(batchId)?.generationIds ?? []) {
      const record = this.entries.get(id);
      if (!record || record.batchId !== batchId || !holds(record, change.expect, change.now)) continue;
      const wasFinished = record.finishedAt !== undefined;
      apply(record, change.set);
      record.updatedAt = change.now;
      if (!wasFinished && record.finishedAt !== undefined) this.finished(record.ownerId);
      if (change.event) this.append(record, change.event, change.now);
      settles?.settleNow(id, change.settle!, change.now);
      out.push(copy(record));
    }
    return out;
  }

  private finished(ownerId: string): void {
    const n = (this.unfinished.get(ownerId) ?? 1) - 1;
    if (n > 0) this.unfinished.set(ownerId, n);
    else this.unfinished.delete(ownerId);
  }

  async listUnfinished(limit: number, after?: string): Promise<GenerationRecord[]> {
    const all = this.sorted((r) => r.finishedAt === undefined, (a, b) => a.createdAt - b.createdAt);
    let start = 0;
    if (after !== undefined) {
      const anchor = this.entries.get(after);
      if (!anchor) return [];
      start = all.findIndex((e) => e.createdAt > anchor.createdAt || (e.createdAt === anchor.createdAt && e.order > anchor.order));
      if (start === -1) return [];
    }
    return all.slice(start, start + Math.max(0, limit)).map(copy);
  }

  async list(ownerId: string, query: ListQuery): Promise<GenerationRecord[]> {
    const owned = this.byOwner.get(ownerId);
    if (!owned || !(query.limit > 0)) return [];
    const out: StoredGeneration[] = [];
    for (let i = 0; i < owned.entries.length; i++) {
      const r = owned.entries.at(i);
      if (r === undefined) continue;
      if (query.status !== undefined && r.status !== query.status) continue;
      if (query.modelId !== undefined && r.modelId !== query.modelId) continue;
      if (query.batchId !== undefined && r.batchId !== query.batchId) continue;
      if (query.before && !(r.createdAt < query.before.createdAt || (r.createdAt === query.before.createdAt && r.id < query.before.id))) continue;
      out.push(r);
    }
    out.sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
    return out.slice(0, Math.floor(query.limit)).map(copy);
  }

  async eventsOf(generationId: string, after = 0): Promise<GenerationEvent[]> {
    const record = this.entries.get(generationId);
    const out: GenerationEvent[] = [];
    if (record === undefined) return out;
    for (let seq = Math.max(0, Math.floor(after)) + 1; seq <= record.events; seq++) out.push(this.eventAt(this.indexOf(record.positionOf(seq))));
    return out;
  }

  async readFeed(after: string, limit: number): Promise<FeedPage> {
    const from = after === '' ? 0 : Number(after);
    if (!(limit > 0) || !Number.isSafeInteger(from)) return { events: [], cursor: after };
    // The first event after the cursor, by binary search over the positions.
    const lo = this.indexOf(from + 1);
    const n = this.logPos.length;
    const max = Math.floor(limit);
    const events: GenerationEvent[] = [];
    let i = lo;
    for (; i < n && events.length < max; i++) if (this.logEntry.at(i).slot !== REMOVED) events.push(this.eventAt(i));
    return { events, cursor: i > lo ? String(this.logPos.at(i - 1)) : after };
  }

  async feedHead(): Promise<string> {
    return String(this.position);
  }

  async listFinishedBefore(before: number, limit: number): Promise<GenerationRecord[]> {
    const finished = this.sorted((r) => r.finishedAt !== undefined && r.finishedAt < before, (a, b) => a.finishedAt! - b.finishedAt!);
    return finished.slice(0, Math.max(0, limit)).map(copy);
  }

  async listLifeEndedBefore(before: number, limit: number): Promise<GenerationRecord[]> {
    const ended = this.sorted((r) => r.lifeEndsAt !== undefined && r.lifeEndsAt < before, (a, b) => a.lifeEndsAt! - b.lifeEndsAt!);
    return ended.slice(0, Math.max(0, limit)).map(copy);
  }

  async remove(id: string, expect: { status: readonly GenerationStatus[] }): Promise<boolean> {
    const entry = this.entries.get(id);
    if (!entry || !expect.status.includes(entry.status)) return false;
    this.entries.delete(id);
    this.unlist(entry);
    if (entry.finishedAt === undefined) this.finished(entry.ownerId);
    this.times.free(entry.at);
    // Its events stay in the feed as gaps (reads skip them) until gaps are half of it: a removal costs no scan.
    entry.slot = REMOVED;
    this.logGaps += entry.events;
    if (this.logGaps > 64 && this.logGaps * 2 > this.logEntry.length) this.compactFeed();
    return true;
  }

  /** Drops the events of removed generations from the feed's columns. */
  private compactFeed(): void {
    let w = 0;
    const n = this.logEntry.length;
    for (let i = 0; i < n; i++) {
      if (this.logEntry.at(i).slot === REMOVED) continue;
      if (w !== i) {
        this.logEntry.set(w, this.logEntry.at(i));
        this.logSeq.set(w, this.logSeq.at(i));
        this.logType.set(w, this.logType.at(i));
        this.logAt.set(w, this.logAt.at(i));
        this.logData.set(w, this.logData.at(i));
        this.logPos.set(w, this.logPos.at(i));
      }
      w++;
    }
    this.logEntry.truncate(w);
    this.logSeq.truncate(w);
    this.logType.truncate(w);
    this.logAt.truncate(w);
    this.logData.truncate(w);
    this.logPos.truncate(w);
    this.logGaps = 0;
  }

  async countByStatus(): Promise<Record<GenerationStatus, number>> {
    const counts = Object.fromEntries(GENERATION_STATUSES.map((s) => [s, 0])) as Record<GenerationStatus, number>;
    for (const record of this.entries.values()) counts[record.status] += 1;
    return counts;
  }

  /** Takes a removed entry out of its owner's list; the list is compacted once more than half of it is gaps. */
  private unlist(entry: StoredGeneration): void {
    const owned = this.byOwner.get(entry.ownerId);
    if (!owned || owned.entries.at(entry.slot) !== entry) return;
    owned.entries.set(entry.slot, undefined);
    if (++owned.removed <= 64 || owned.removed * 2 <= owned.entries.length) return;
    const kept = new Chunked<StoredGeneration | undefined>(objectSlots);
    for (let i = 0; i < owned.entries.length; i++) {
      const e = owned.entries.at(i);
      if (e === undefined) continue;
      e.slot = kept.length;
      kept.push(e);
    }
    if (kept.length === 0) this.byOwner.delete(entry.ownerId);
    else {
      owned.entries = kept;
      owned.removed = 0;
    }
  }

  private sorted(keep: (r: StoredGeneration) => boolean, compare: (a: StoredGeneration, b: StoredGeneration) => number): StoredGeneration[] {
    const kept: StoredGeneration[] = [];
    for (const entry of this.entries.values()) if (keep(entry)) kept.push(entry);
    return kept.sort((a, b) => compare(a, b) || a.order - b.order);
  }
}

/** One owner's entries, in insertion order; `removed` counts the gaps removals left. */
interface Owned {
  entries: Chunked<StoredGeneration | undefined>;
  removed: number;
}

/** The `slot` of a removed entry: its events left in the feed are gaps. */
const REMOVED = -1;

/** What an event keeps when its data is its generation's `{ modelId }` (never handed out: read as that). */
const MODEL_OF_RECORD: GenerationEvent['data'] = Object.freeze({}) as GenerationEvent['data'];

/** Whether `data` is exactly `{ modelId }`. */
function isModelOf(data: NewEvent['data'], modelId: string): boolean {
  let fields = 0;
  for (const key in data) if (++fields > 1 || key !== 'modelId') return false;
  return fields === 1 && data.modelId === modelId;
}
