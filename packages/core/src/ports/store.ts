import type { GenerationRecord, GenerationStatus, Settings } from '../domain.js';

export interface NewGeneration {
  id: string;
  ownerId: string;
  modelId: string;
  settings: Settings;
  reserved: number;
  createdAt: number;
}

export interface ClaimOptions {
  /** Identifies the worker; later transitions of this claim must name it. */
  workerId: string;
  /** Lease length in ms from `now`. */
  leaseMs: number;
  now: number;
}

export interface CompleteInput {
  workerId: string;
  price: number;
  resultText?: string;
  resultKey?: string;
  now: number;
}

export interface FailInput {
  /**
   * The worker whose claim fails it. Omitted for a failure that is not a worker's (cancel of a pending
   * generation, recovery giving up, a crash-looping job): then it succeeds from `pending`, or from `processing`
   * only when the lease has expired or `force` is set.
   */
  workerId?: string;
  /** Fail a `processing` generation whatever its lease (used by cancellation, which also aborts the worker). */
  force?: boolean;
  price: number;
  reason: string;
  now: number;
}

/**
 * Where generations live.
 *
 * Guarantees an implementation must give (the contract suite in @genservice/testing checks each):
 * - `insert` is durable once it resolves; a duplicate id rejects.
 * - `get(id, ownerId)` is owner-scoped: another user's generation reads as `null`, exactly like a missing one.
 * - Transitions only go forward (pending -> processing -> completed | failed; pending -> failed) and are
 *   conditional on the current status, so under any race exactly one caller wins and the others get
 *   `null`/`false`. A terminal generation never changes again.
 * - `claim` moves `pending -> processing`, or re-claims a `processing` one whose lease has expired (a lost
 *   worker); each claim increments `attempts` and sets the lease. `complete`/`fail` by a worker succeed only
 *   while that worker still holds the lease: a stale worker's late completion is refused.
 * - A worker holds its lease while `leaseOwner === workerId && now < leaseExpiresAt`; from `now >= leaseExpiresAt`
 *   on it has expired, even if nobody re-claimed it, and that worker can no longer complete, fail or renew (the
 *   runner renews every leaseMs/3, so only a stalled or dead worker loses it).
 * - `fail` with a `workerId` is refused for a pending generation (a worker never held it); `force` skips the lease
 *   check (cancellation).
 * - `listUnfinished` returns pending and processing generations (for recovery), oldest first.
 */
export interface GenerationStore {
  insert(gen: NewGeneration): Promise<void>;
  get(id: string, ownerId: string): Promise<GenerationRecord | null>;
  /** Not owner-scoped: for workers and recovery only, never for answering a client. */
  getById(id: string): Promise<GenerationRecord | null>;
  /** Returns the claimed record, or null when the generation is not claimable (missing, terminal, or leased). */
  claim(id: string, opts: ClaimOptions): Promise<GenerationRecord | null>;
  /** Extends the lease while the worker still holds it. */
  renewLease(id: string, workerId: string, leaseMs: number, now: number): Promise<boolean>;
  complete(id: string, input: CompleteInput): Promise<boolean>;
  fail(id: string, input: FailInput): Promise<boolean>;
  /**
   * Unfinished generations in a stable order (oldest first; ties in an order of the store's choosing that does not
   * change), at most `limit`. With `after` (the id of the last generation of the previous page), the page that follows
   * it, so recovery can walk any number of them. An `after` that no longer exists gives an empty page.
   */
  listUnfinished(limit: number, after?: string): Promise<GenerationRecord[]>;
  /**
   * Deletes terminal generations finished before `before` (retention), at most `limit` at a time.
   * Returns the deleted records' result keys so their files can be deleted too.
   */
  deleteFinishedBefore(before: number, limit: number): Promise<{ deleted: number; resultKeys: string[] }>;
  /** Counts by status; for tests and operators. */
  countByStatus?(): Promise<Record<GenerationStatus, number>>;
}
