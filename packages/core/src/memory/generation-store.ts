import type { GenerationRecord, GenerationStatus } from '../domain.js';
import { GENERATION_STATUSES, isTerminal } from '../domain.js';
import type {
  ClaimOptions,
  CompleteInput,
  FailInput,
  GenerationStore,
  NewGeneration,
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
  private readonly records = new Map<string, GenerationRecord>();
  /** Insertion order breaks createdAt ties, so "oldest first" is stable. */
  private readonly order = new Map<string, number>();
  private sequence = 0;

  async insert(gen: NewGeneration): Promise<void> {
    if (this.records.has(gen.id)) {
      throw new Error(`Generation ${gen.id} already exists`);
    }
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
    this.records.set(gen.id, record);
    this.order.set(gen.id, this.sequence++);
  }

  async get(id: string, ownerId: string): Promise<GenerationRecord | null> {
    const record = this.records.get(id);
    if (!record || record.ownerId !== ownerId) return null;
    return copy(record);
  }

  async getById(id: string): Promise<GenerationRecord | null> {
    const record = this.records.get(id);
    return record ? copy(record) : null;
  }

  async claim(id: string, opts: ClaimOptions): Promise<GenerationRecord | null> {
    const record = this.records.get(id);
    if (!record) return null;
    const claimable =
      record.status === 'pending' || (record.status === 'processing' && leaseExpired(record, opts.now));
    if (!claimable) return null;
    record.status = 'processing';
    record.attempts += 1;
    record.leaseOwner = opts.workerId;
    record.leaseExpiresAt = opts.now + opts.leaseMs;
    record.updatedAt = opts.now;
    return copy(record);
  }

  async renewLease(id: string, workerId: string, leaseMs: number, now: number): Promise<boolean> {
    const record = this.records.get(id);
    if (!record || !holdsLease(record, workerId, now)) return false;
    record.leaseExpiresAt = now + leaseMs;
    record.updatedAt = now;
    return true;
  }

  async complete(id: string, input: CompleteInput): Promise<boolean> {
    const record = this.records.get(id);
    if (!record || !holdsLease(record, input.workerId, input.now)) return false;
    record.status = 'completed';
    record.price = input.price;
    if (input.resultText !== undefined) record.resultText = input.resultText;
    if (input.resultKey !== undefined) record.resultKey = input.resultKey;
    record.finishedAt = input.now;
    record.updatedAt = input.now;
    return true;
  }

  async fail(id: string, input: FailInput): Promise<boolean> {
    const record = this.records.get(id);
    if (!record || !mayFail(record, input)) return false;
    record.status = 'failed';
    record.price = input.price;
    record.failureReason = input.reason;
    record.finishedAt = input.now;
    record.updatedAt = input.now;
    return true;
  }

  async listUnfinished(limit: number, after?: string): Promise<GenerationRecord[]> {
    const all = this.sorted((r) => !isTerminal(r.status), (a, b) => a.createdAt - b.createdAt);
    let start = 0;
    if (after !== undefined) {
      const anchor = this.records.get(after);
      if (!anchor) return [];
      const key = (r: GenerationRecord): [number, number] => [r.createdAt, this.order.get(r.id) ?? 0];
      const [c, o] = key(anchor);
      start = all.findIndex((r) => {
        const [rc, ro] = key(r);
        return rc > c || (rc === c && ro > o);
      });
      if (start === -1) return [];
    }
    return all.slice(start, start + Math.max(0, limit)).map(copy);
  }

  async deleteFinishedBefore(before: number, limit: number): Promise<{ deleted: number; resultKeys: string[] }> {
    const victims = this.sorted(
      (r) => isTerminal(r.status) && r.finishedAt !== undefined && r.finishedAt < before,
      (a, b) => (a.finishedAt ?? 0) - (b.finishedAt ?? 0),
    ).slice(0, Math.max(0, limit));
    const resultKeys: string[] = [];
    for (const record of victims) {
      this.records.delete(record.id);
      this.order.delete(record.id);
      if (record.resultKey !== undefined) resultKeys.push(record.resultKey);
    }
    return { deleted: victims.length, resultKeys };
  }

  async countByStatus(): Promise<Record<GenerationStatus, number>> {
    const counts = Object.fromEntries(GENERATION_STATUSES.map((s) => [s, 0])) as Record<GenerationStatus, number>;
    for (const record of this.records.values()) counts[record.status] += 1;
    return counts;
  }

  private sorted(
    keep: (r: GenerationRecord) => boolean,
    compare: (a: GenerationRecord, b: GenerationRecord) => number,
  ): GenerationRecord[] {
    return [...this.records.values()]
      .filter(keep)
      .sort((a, b) => compare(a, b) || (this.order.get(a.id) ?? 0) - (this.order.get(b.id) ?? 0));
  }
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
  if (Array.isArray(value)) return value.map(cloneJson);
  if (value !== null && typeof value === 'object') {
    // A host field type may produce a Date, a Map...: those keep the general (slower) copy.
    if (Object.getPrototypeOf(value) !== Object.prototype && Object.getPrototypeOf(value) !== null) return structuredClone(value);
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = cloneJson(v);
    return out;
  }
  return value;
}

/**
 * A caller's copy of a record: it must not be able to change the store's state through it. Much cheaper than
 * structuredClone (which took 40 % of an in-memory GET, see docs/benchmarks.md).
 */
function copy(record: GenerationRecord): GenerationRecord {
  return { ...record, settings: cloneJson(record.settings) as GenerationRecord['settings'] };
}
