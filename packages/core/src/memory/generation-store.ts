import type { BatchCounts, BatchRecord, GenerationEvent, GenerationRecord, GenerationStatus } from '../domain/types.js';
import { GENERATION_STATUSES } from '../domain/types.js';
import type {
  Expectation,
  FeedPage,
  GenerationChange,
  GenerationPatch,
  GenerationStore,
  InsertOptions,
  ListQuery,
  NewBatch,
  NewEvent,
  NewGeneration,
} from '../ports/store.js';

/**
 * GenerationStore held in a Map, for tests and single-process hosts.
 *
 * Every method checks and writes in one synchronous step before yielding, so concurrent callers in one process get
 * the same "exactly one wins" a SQL store gets from conditional UPDATEs. Records go in and out as copies: a caller
 * that mutates what it got back cannot change the stored state.
 */
export class MemoryGenerationStore implements GenerationStore {
  private readonly entries = new Map<string, Entry>();
  private order = 0;
  /** The feed: every event in append order with its position (one process appends and commits in one step). */
  private readonly log: FeedEntry[] = [];
  private position = 0;
  /** Each owner's ids; a list page sorts only that owner's generations, never the whole store. */
  private readonly byOwner = new Map<string, Set<string>>();
  /** Unfinished generations per owner, for the in-flight cap without a scan. */
  private readonly unfinished = new Map<string, number>();
  private readonly batches = new Map<string, BatchRecord>();

  private append(entry: Entry, event: NewEvent, at: number): void {
    const record = entry.record;
    const e: GenerationEvent = { seq: entry.events.length + 1, generationId: record.id, ownerId: record.ownerId, type: event.type, at, data: cloneJson(event.data) as GenerationEvent['data'] };
    entry.events.push(e);
    this.log.push({ pos: ++this.position, event: e });
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
      const r = this.entries.get(id)?.record;
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
    const record: GenerationRecord = {
      id: gen.id,
      ownerId: gen.ownerId,
      modelId: gen.modelId,
      settings: cloneJson(gen.settings) as GenerationRecord['settings'],
      status: gen.status,
      reserved: gen.reserved,
      claims: 0,
      createdAt: gen.createdAt,
      updatedAt: gen.createdAt,
    };
    if (gen.metadata !== undefined) record.metadata = { ...gen.metadata };
    if (gen.webhook !== undefined) record.webhook = { url: gen.webhook.url, events: [...gen.webhook.events] };
    if (gen.expiresAfterSeconds !== undefined) record.expiresAfterSeconds = gen.expiresAfterSeconds;
    if (gen.batchId !== undefined) record.batchId = gen.batchId;
    if (gen.traceparent !== undefined) record.traceparent = gen.traceparent;
    if (gen.priority !== undefined) record.priority = gen.priority;
    if (gen.deadlineAt !== undefined) record.deadlineAt = gen.deadlineAt;
    const entry: Entry = { record, order: this.order++, events: [] };
    this.entries.set(gen.id, entry);
    let owned = this.byOwner.get(gen.ownerId);
    if (!owned) this.byOwner.set(gen.ownerId, (owned = new Set()));
    owned.add(gen.id);
    this.unfinished.set(gen.ownerId, (this.unfinished.get(gen.ownerId) ?? 0) + 1);
    this.append(entry, event, gen.createdAt);
  }

  /** Answers at once (the port allows it); typed as the port is, so a subclass may answer with a promise. */
  get(id: string, ownerId: string): GenerationRecord | null | PromiseLike<GenerationRecord | null> {
    const record = this.entries.get(id)?.record;
    return record && record.ownerId === ownerId ? copy(record) : null;
  }

  async getById(id: string): Promise<GenerationRecord | null> {
    const record = this.entries.get(id)?.record;
    return record ? copy(record) : null;
  }

  async update(id: string, change: GenerationChange): Promise<GenerationRecord | null> {
    const entry = this.entries.get(id);
    if (!entry || !holds(entry.record, change.expect, change.now)) return null;
    const record = entry.record;
    const wasFinished = record.finishedAt !== undefined;
    apply(record, change.set);
    record.updatedAt = change.now;
    if (!wasFinished && record.finishedAt !== undefined) this.finished(record.ownerId);
    if (change.event) this.append(entry, change.event, change.now);
    return copy(record);
  }

  async renewLeases(ids: readonly string[], holder: string, until: number, now: number): Promise<string[]> {
    const renewed: string[] = [];
    for (const id of ids) {
      const record = this.entries.get(id)?.record;
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
    for (const id of this.batches.get(batchId)?.generationIds ?? []) {
      const entry = this.entries.get(id);
      if (!entry || entry.record.batchId !== batchId || !holds(entry.record, change.expect, change.now)) continue;
      const record = entry.record;
      const wasFinished = record.finishedAt !== undefined;
      apply(record, change.set);
      record.updatedAt = change.now;
      if (!wasFinished && record.finishedAt !== undefined) this.finished(record.ownerId);
      if (change.event) this.append(entry, change.event, change.now);
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
    const all = this.sorted((r) => r.finishedAt === undefined, (a, b) => a.record.createdAt - b.record.createdAt);
    let start = 0;
    if (after !== undefined) {
      const anchor = this.entries.get(after);
      if (!anchor) return [];
      start = all.findIndex((e) => e.record.createdAt > anchor.record.createdAt || (e.record.createdAt === anchor.record.createdAt && e.order > anchor.order));
      if (start === -1) return [];
    }
    return all.slice(start, start + Math.max(0, limit)).map((e) => copy(e.record));
  }

  async list(ownerId: string, query: ListQuery): Promise<GenerationRecord[]> {
    const owned = this.byOwner.get(ownerId);
    if (!owned || !(query.limit > 0)) return [];
    const out: GenerationRecord[] = [];
    for (const id of owned) {
      const r = this.entries.get(id)!.record;
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
    return (this.entries.get(generationId)?.events ?? []).filter((e) => e.seq > after).map(copyEvent);
  }

  async readFeed(after: string, limit: number): Promise<FeedPage> {
    const from = after === '' ? 0 : Number(after);
    if (!(limit > 0) || !Number.isSafeInteger(from)) return { events: [], cursor: after };
    // The log is in position order: binary search for the first entry after the cursor.
    let lo = 0;
    let hi = this.log.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.log[mid]!.pos <= from) lo = mid + 1;
      else hi = mid;
    }
    const page = this.log.slice(lo, lo + Math.floor(limit));
    return { events: page.map((f) => copyEvent(f.event)), cursor: page.length > 0 ? String(page[page.length - 1]!.pos) : after };
  }

  async feedHead(): Promise<string> {
    return String(this.position);
  }

  async listFinishedBefore(before: number, limit: number): Promise<GenerationRecord[]> {
    const finished = this.sorted((r) => r.finishedAt !== undefined && r.finishedAt < before, (a, b) => a.record.finishedAt! - b.record.finishedAt!);
    return finished.slice(0, Math.max(0, limit)).map((e) => copy(e.record));
  }

  async listLifeEndedBefore(before: number, limit: number): Promise<GenerationRecord[]> {
    const ended = this.sorted((r) => r.lifeEndsAt !== undefined && r.lifeEndsAt < before, (a, b) => a.record.lifeEndsAt! - b.record.lifeEndsAt!);
    return ended.slice(0, Math.max(0, limit)).map((e) => copy(e.record));
  }

  async remove(id: string, expect: { status: readonly GenerationStatus[] }): Promise<boolean> {
    const entry = this.entries.get(id);
    if (!entry || !expect.status.includes(entry.record.status)) return false;
    const { record } = entry;
    this.entries.delete(id);
    this.byOwner.get(record.ownerId)?.delete(id);
    if (record.finishedAt === undefined) this.finished(record.ownerId);
    let w = 0;
    for (const f of this.log) if (f.event.generationId !== id) this.log[w++] = f;
    this.log.length = w;
    return true;
  }

  async countByStatus(): Promise<Record<GenerationStatus, number>> {
    const counts = Object.fromEntries(GENERATION_STATUSES.map((s) => [s, 0])) as Record<GenerationStatus, number>;
    for (const { record } of this.entries.values()) counts[record.status] += 1;
    return counts;
  }

  private sorted(keep: (r: GenerationRecord) => boolean, compare: (a: Entry, b: Entry) => number): Entry[] {
    const kept: Entry[] = [];
    for (const entry of this.entries.values()) if (keep(entry.record)) kept.push(entry);
    return kept.sort((a, b) => compare(a, b) || a.order - b.order);
  }
}

interface Entry {
  record: GenerationRecord;
  /** Insertion order: breaks createdAt ties, so "oldest first" is stable. */
  order: number;
  /** This generation's events; `seq` is the index + 1. */
  events: GenerationEvent[];
}

interface FeedEntry {
  pos: number;
  event: GenerationEvent;
}

/** Whether every condition of `expect` holds for `record` at `now`. */
export function holds(record: GenerationRecord, expect: Expectation, now: number): boolean {
  if (!expect.status.includes(record.status)) return false;
  if (expect.lease !== undefined) {
    const expired = record.leaseExpiresAt === undefined || now >= record.leaseExpiresAt;
    if (expect.lease === 'free' ? !expired : expired || record.leaseOwner !== expect.lease.heldBy) return false;
  }
  if (expect.parked !== undefined && (record.parkedUntil !== undefined) !== expect.parked) return false;
  if (expect.claims !== undefined && record.claims !== expect.claims) return false;
  if (expect.noRemoteHandle && record.remoteHandle !== undefined) return false;
  return true;
}

/** Writes a patch onto a record: `null` clears a field, an absent key leaves it. Values are copied in. */
function apply(record: GenerationRecord, patch: GenerationPatch): void {
  const target = record as unknown as Record<string, unknown>;
  for (const key of Object.keys(patch) as Array<keyof GenerationPatch>) {
    const value = patch[key];
    if (value === undefined) continue;
    if (value === null) delete target[key];
    else target[key] = cloneJson(value);
  }
}

/** Records hold validated JSON (strings, numbers, booleans, arrays, plain objects): a JSON-shaped deep copy is enough. */
function cloneJson(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map(cloneJson);
  // A host field type may produce a Date, a Map...: those keep the general (slower) copy.
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return structuredClone(value);
  const out: Record<string, unknown> = {};
  const src = value as Record<string, unknown>;
  for (const k of Object.keys(src)) out[k] = cloneJson(src[k]);
  return out;
}

/** A caller's copy of a record: it must not be able to change the store's state through it. */
function copy(record: GenerationRecord): GenerationRecord {
  const out: GenerationRecord = { ...record, settings: cloneJson(record.settings) as GenerationRecord['settings'] };
  if (record.metadata) out.metadata = { ...record.metadata };
  if (record.progress) out.progress = { ...record.progress };
  if (record.error) out.error = { ...record.error };
  if (record.webhook) out.webhook = { url: record.webhook.url, events: [...record.webhook.events] };
  if (record.remoteHandle !== undefined) out.remoteHandle = cloneJson(record.remoteHandle);
  return out;
}

function copyBatch(b: BatchRecord): BatchRecord {
  const out: BatchRecord = { ...b, generationIds: [...b.generationIds] };
  if (b.webhook) out.webhook = { ...b.webhook };
  return out;
}

function copyEvent(event: GenerationEvent): GenerationEvent {
  return { ...event, data: cloneJson(event.data) as GenerationEvent['data'] };
}
