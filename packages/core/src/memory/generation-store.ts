import type { GenerationEvent, GenerationEventType, GenerationRecord, GenerationStatus } from '../domain.js';
import { GENERATION_STATUSES, isTerminal } from '../domain.js';
import type {
  ClaimOptions,
  CompleteInput,
  FailInput,
  GenerationStore,
  InsertOptions,
  ListQuery,
  NewGeneration,
  ProgressInput,
} from '../ports/store.js';

/**
 * GenerationStore held in a Map, for tests and single-process hosts.
 *
 * Every method does its check and its write in one synchronous step before yielding, so concurrent callers in
 * one process see the same "exactly one wins" behaviour a SQL store gets from conditional UPDATEs. Records go in
 * and out as deep copies: a caller that mutates what it got back cannot change the stored state.
 *
 * A worker holds its lease while `leaseOwner === workerId` and `now < leaseExpiresAt`; from
 * `now >= leaseExpiresAt` on, the lease is expired and the generation may be re-claimed or failed by recovery.
 */
export class MemoryGenerationStore implements GenerationStore {
  /**
   * One entry per generation holding its record, its insertion order and its own events: one hash table to grow and
   * look up instead of three (at hundreds of thousands of generations, every Map.set of a new key is a cache miss).
   */
  private readonly entries = new Map<string, Entry>();
  private sequence = 0;
  /** The log in seq order (each generation's own events are on its entry, for SSE and details without a scan). */
  private readonly log: GenerationEvent[] = [];
  private lastSeqValue = 0;
  /** Each owner's ids; a list page sorts only that owner's generations, never the whole store. */
  private readonly byOwner = new Map<string, Set<string>>();
  /** Pending and processing generations per owner, for the in-flight cap without a scan. */
  private readonly unfinished = new Map<string, number>();

  private finished(record: GenerationRecord): void {
    const n = (this.unfinished.get(record.ownerId) ?? 1) - 1;
    if (n > 0) this.unfinished.set(record.ownerId, n);
    else this.unfinished.delete(record.ownerId);
  }

  /** Appends in the same synchronous step as the change it records: nothing can run in between. */
  private append(entry: Entry, type: GenerationEventType, at: number, data: Record<string, unknown>): void {
    const record = entry.record;
    const event: GenerationEvent = { seq: ++this.lastSeqValue, generationId: record.id, ownerId: record.ownerId, type, at, data };
    this.log.push(event);
    // A pushed-to array keeps room for 17 elements (~150 bytes), held for as long as the store keeps the generation:
    // the first event starts an exact array, and a finished generation's list is trimmed to its length (a later event,
    // if any, is still pushed as before).
    if (entry.events.length === 0) entry.events = [event];
    else {
      entry.events.push(event);
      if (type === 'completed' || type === 'failed') entry.events = entry.events.slice();
    }
  }

  private recordOf(id: string): GenerationRecord | undefined {
    return this.entries.get(id)?.record;
  }

  /** The stored (mutable) record by id, for subclasses such as the contract suite's mutation tests. */
  protected readonly records: { get(id: string): GenerationRecord | undefined } = { get: (id) => this.recordOf(id) };

  async insert(gen: NewGeneration, options: InsertOptions = {}): Promise<'inserted' | 'limit_reached'> {
    if (this.entries.has(gen.id)) {
      throw new Error(`Generation ${gen.id} already exists`);
    }
    const max = options.maxUnfinishedPerOwner;
    if (max !== undefined && (this.unfinished.get(gen.ownerId) ?? 0) >= max) return 'limit_reached';
    const record: GenerationRecord = {
      id: gen.id,
      ownerId: gen.ownerId,
      modelId: gen.modelId,
      settings: cloneJson(gen.settings) as GenerationRecord['settings'],
      status: 'pending',
      reserved: gen.reserved,
      attempts: 0,
      createdAt: gen.createdAt,
      updatedAt: gen.createdAt,
    };
    if (gen.metadata !== undefined) record.metadata = { ...gen.metadata };
    if (gen.webhook !== undefined) record.webhook = { url: gen.webhook.url, events: [...gen.webhook.events] };
    const entry: Entry = { record, order: this.sequence++, events: [] };
    this.entries.set(gen.id, entry);
    let owned = this.byOwner.get(gen.ownerId);
    if (!owned) {
      owned = new Set();
      this.byOwner.set(gen.ownerId, owned);
    }
    owned.add(gen.id);
    this.unfinished.set(gen.ownerId, (this.unfinished.get(gen.ownerId) ?? 0) + 1);
    this.append(entry, 'created', gen.createdAt, { modelId: gen.modelId });
    return 'inserted';
  }

  async get(id: string, ownerId: string): Promise<GenerationRecord | null> {
    const record = this.recordOf(id);
    if (!record || record.ownerId !== ownerId) return null;
    return copy(record);
  }

  async getById(id: string): Promise<GenerationRecord | null> {
    const record = this.recordOf(id);
    return record ? copy(record) : null;
  }

  async claim(id: string, opts: ClaimOptions): Promise<GenerationRecord | null> {
    const entry = this.entries.get(id);
    if (!entry) return null;
    const record = entry.record;
    const claimable =
      record.status === 'pending' || (record.status === 'processing' && leaseExpired(record, opts.now));
    if (!claimable) return null;
    // A parked remote job's check is planned work, not a lost worker: no attempt, no event.
    const resumed = record.parkedUntil !== undefined;
    record.status = 'processing';
    if (!resumed) record.attempts += 1;
    delete record.parkedUntil;
    record.leaseOwner = opts.workerId;
    record.leaseExpiresAt = opts.now + opts.leaseMs;
    record.updatedAt = opts.now;
    record.startedAt ??= opts.now;
    if (!resumed) this.append(entry, 'processing', opts.now, { attempt: record.attempts });
    return copy(record);
  }

  async renewLease(id: string, workerId: string, leaseMs: number, now: number): Promise<boolean> {
    const record = this.recordOf(id);
    if (!record || !holdsLease(record, workerId, now)) return false;
    record.leaseExpiresAt = now + leaseMs;
    record.updatedAt = now;
    return true;
  }

  async progress(id: string, input: ProgressInput): Promise<boolean> {
    const entry = this.entries.get(id);
    const record = entry?.record;
    if (!entry || !record || !holdsLease(record, input.workerId, input.now)) return false;
    record.progress = input.message === undefined ? { fraction: input.fraction } : { fraction: input.fraction, message: input.message };
    record.updatedAt = input.now;
    this.append(entry, 'progress', input.now, { ...record.progress });
    return true;
  }

  async setRemoteHandle(id: string, workerId: string, handle: unknown, now: number): Promise<boolean> {
    const record = this.recordOf(id);
    if (!record || !holdsLease(record, workerId, now) || record.remoteHandle !== undefined) return false;
    record.remoteHandle = cloneJson(handle);
    record.updatedAt = now;
    return true;
  }

  async park(id: string, workerId: string, until: number, now: number): Promise<boolean> {
    const record = this.recordOf(id);
    if (!record || !holdsLease(record, workerId, now)) return false;
    delete record.leaseOwner;
    delete record.leaseExpiresAt;
    record.parkedUntil = until;
    record.updatedAt = now;
    return true;
  }

  async complete(id: string, input: CompleteInput): Promise<boolean> {
    const entry = this.entries.get(id);
    const record = entry?.record;
    if (!entry || !record || !holdsLease(record, input.workerId, input.now)) return false;
    record.status = 'completed';
    record.price = input.price;
    if (input.resultText !== undefined) record.resultText = input.resultText;
    if (input.resultKey !== undefined) record.resultKey = input.resultKey;
    record.finishedAt = input.now;
    record.updatedAt = input.now;
    this.finished(record);
    this.append(entry, 'completed', input.now, { price: input.price });
    return true;
  }

  async fail(id: string, input: FailInput): Promise<boolean> {
    const entry = this.entries.get(id);
    const record = entry?.record;
    if (!entry || !record || !mayFail(record, input)) return false;
    const price = record.status === 'pending' && input.pendingPrice !== undefined ? input.pendingPrice : input.price;
    record.status = 'failed';
    record.price = price;
    record.failureReason = input.reason;
    record.error = { code: input.error.code, message: input.error.message };
    record.finishedAt = input.now;
    record.updatedAt = input.now;
    delete record.parkedUntil;
    this.finished(record);
    this.append(entry, 'failed', input.now, { price, error: { ...record.error } });
    return true;
  }

  async listUnfinished(limit: number, after?: string): Promise<GenerationRecord[]> {
    const all = this.sorted((r) => !isTerminal(r.status), (a, b) => a.createdAt - b.createdAt);
    let start = 0;
    if (after !== undefined) {
      const anchor = this.recordOf(after);
      if (!anchor) return [];
      const key = (r: GenerationRecord): [number, number] => [r.createdAt, this.entries.get(r.id)?.order ?? 0];
      const [c, o] = key(anchor);
      start = all.findIndex((r) => {
        const [rc, ro] = key(r);
        return rc > c || (rc === c && ro > o);
      });
      if (start === -1) return [];
    }
    return all.slice(start, start + Math.max(0, limit)).map(copy);
  }

  async list(ownerId: string, query: ListQuery): Promise<GenerationRecord[]> {
    const owned = this.byOwner.get(ownerId);
    if (!owned || !(query.limit > 0)) return [];
    const out: GenerationRecord[] = [];
    for (const id of owned) {
      const r = this.entries.get(id)!.record;
      if (query.status !== undefined && r.status !== query.status) continue;
      if (query.modelId !== undefined && r.modelId !== query.modelId) continue;
      if (query.before && !(r.createdAt < query.before.createdAt || (r.createdAt === query.before.createdAt && r.id < query.before.id))) continue;
      out.push(r);
    }
    out.sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
    return out.slice(0, Math.floor(query.limit)).map(copy);
  }

  async readEvents(after: number, limit: number): Promise<GenerationEvent[]> {
    if (!(limit > 0)) return [];
    // The log is in seq order: binary search for the first event after the cursor.
    let lo = 0;
    let hi = this.log.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.log[mid]!.seq <= after) lo = mid + 1;
      else hi = mid;
    }
    return this.log.slice(lo, lo + Math.floor(limit)).map(copyEvent);
  }

  async eventsOf(generationId: string, after = 0): Promise<GenerationEvent[]> {
    return (this.entries.get(generationId)?.events ?? []).filter((e) => e.seq > after).map(copyEvent);
  }

  async lastSeq(): Promise<number> {
    return this.lastSeqValue;
  }

  async deleteFinishedBefore(before: number, limit: number): Promise<{ deleted: number; resultKeys: string[]; ids: string[] }> {
    const victims = this.sorted(
      (r) => isTerminal(r.status) && r.finishedAt !== undefined && r.finishedAt < before,
      (a, b) => (a.finishedAt ?? 0) - (b.finishedAt ?? 0),
    ).slice(0, Math.max(0, limit));
    const resultKeys: string[] = [];
    const gone = new Set<string>();
    for (const record of victims) {
      this.entries.delete(record.id);
      this.byOwner.get(record.ownerId)?.delete(record.id);
      gone.add(record.id);
      if (record.resultKey !== undefined) resultKeys.push(record.resultKey);
    }
    if (gone.size > 0) {
      let w = 0;
      for (const e of this.log) if (!gone.has(e.generationId)) this.log[w++] = e;
      this.log.length = w;
    }
    return { deleted: victims.length, resultKeys, ids: [...gone] };
  }

  async countByStatus(): Promise<Record<GenerationStatus, number>> {
    const counts = Object.fromEntries(GENERATION_STATUSES.map((s) => [s, 0])) as Record<GenerationStatus, number>;
    for (const { record } of this.entries.values()) counts[record.status] += 1;
    return counts;
  }

  private sorted(
    keep: (r: GenerationRecord) => boolean,
    compare: (a: GenerationRecord, b: GenerationRecord) => number,
  ): GenerationRecord[] {
    const kept: Entry[] = [];
    for (const entry of this.entries.values()) if (keep(entry.record)) kept.push(entry);
    return kept.sort((a, b) => compare(a.record, b.record) || a.order - b.order).map((e) => e.record);
  }
}

interface Entry {
  record: GenerationRecord;
  /** Insertion order: breaks createdAt ties, so "oldest first" is stable. */
  order: number;
  /** This generation's events, in seq order. */
  events: GenerationEvent[];
}

function leaseExpired(record: GenerationRecord, now: number): boolean {
  return record.leaseExpiresAt === undefined || now >= record.leaseExpiresAt;
}

function holdsLease(record: GenerationRecord, workerId: string, now: number): boolean {
  return record.status === 'processing' && record.leaseOwner === workerId && !leaseExpired(record, now);
}

function mayFail(record: GenerationRecord, input: FailInput): boolean {
  if (record.status === 'pending') {
    // A worker can only fail what it claimed; a pending generation is failed by cancellation or recovery.
    return input.workerId === undefined;
  }
  if (record.status !== 'processing') return false;
  if (input.force === true) return true;
  if (input.workerId !== undefined) return holdsLease(record, input.workerId, input.now);
  return leaseExpired(record, input.now);
}

/** Settings are validated JSON (strings, numbers, booleans, arrays, plain objects): a JSON-shaped deep copy is enough. */
function cloneJson(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map(cloneJson);
  // A host field type may produce a Date, a Map...: those keep the general (slower) copy.
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return structuredClone(value);
  // Object.keys, not Object.entries: one array per object instead of one more per property (every insert and read).
  const out: Record<string, unknown> = {};
  const src = value as Record<string, unknown>;
  for (const k of Object.keys(src)) out[k] = cloneJson(src[k]);
  return out;
}

/**
 * A caller's copy of a record: it must not be able to change the store's state through it. Much cheaper than
 * structuredClone (which took 40 % of an in-memory GET, see docs/benchmarks.md).
 */
function copy(record: GenerationRecord): GenerationRecord {
  const out: GenerationRecord = { ...record, settings: cloneJson(record.settings) as GenerationRecord['settings'] };
  if (record.metadata) out.metadata = { ...record.metadata };
  if (record.progress) out.progress = { ...record.progress };
  if (record.error) out.error = { ...record.error };
  if (record.webhook) out.webhook = { url: record.webhook.url, events: [...record.webhook.events] };
  if (record.remoteHandle !== undefined) out.remoteHandle = cloneJson(record.remoteHandle);
  return out;
}

function copyEvent(event: GenerationEvent): GenerationEvent {
  return { ...event, data: cloneJson(event.data) as GenerationEvent['data'] };
}
