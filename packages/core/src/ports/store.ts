import type {
  FailureInfo,
  GenerationEvent,
  GenerationRecord,
  GenerationStatus,
  Metadata,
  Settings,
  WebhookEventType,
} from '../domain.js';

export interface NewGeneration {
  id: string;
  ownerId: string;
  modelId: string;
  settings: Settings;
  reserved: number;
  createdAt: number;
  /** The client's labels; absent when none were given. */
  metadata?: Metadata;
  /** The client's webhook for this generation (URL already checked); absent when none was given. */
  webhook?: { url: string; events: WebhookEventType[] };
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
  /** Tokens charged. When `pendingPrice` is given, this is the price for a generation failed from `processing`. */
  price: number;
  /**
   * The price when the generation is failed from `pending` instead. The store picks between the two in the same
   * atomic step as the transition, so the fee follows the state the generation really moved from (a cancel
   * racing a claim). The settled price is then read back from the record.
   */
  pendingPrice?: number;
  /** Internal reason, for logs and operators (`failureReason`). */
  reason: string;
  /** Client-safe reason (`error`), recorded with the `failed` event. */
  error: FailureInfo;
  now: number;
}

export interface ProgressInput {
  workerId: string;
  /** 0..1 (the caller clamps it). */
  fraction: number;
  message?: string;
  now: number;
}

export interface InsertOptions {
  /**
   * Refuse the insert (answer `limit_reached`) when the owner already has this many generations pending or
   * processing. Checked and inserted atomically, across processes: of racing inserts exactly `max` win.
   */
  maxUnfinishedPerOwner?: number;
}

/** Keyset position in a user's list: the last item of the previous page. */
export interface ListCursor {
  createdAt: number;
  id: string;
}

export interface ListQuery {
  /** At most this many (1..100; the caller checks it). */
  limit: number;
  status?: GenerationStatus;
  modelId?: string;
  /** Only generations strictly after this position in the order (older, or equal time and smaller id). */
  before?: ListCursor;
}

/**
 * Where generations and their event log live.
 *
 * Guarantees an implementation must give (the contract suite in @genservice/testing checks each):
 * - `insert` is durable once it resolves; a duplicate id rejects. With `maxUnfinishedPerOwner` it counts and inserts
 *   atomically (exact under races, across processes).
 * - `get(id, ownerId)` is owner-scoped: another user's generation reads as `null`, exactly like a missing one.
 * - Transitions only go forward (pending -> processing -> completed | failed; pending -> failed) and are
 *   conditional on the current status, so under any race exactly one caller wins and the others get
 *   `null`/`false`. A terminal generation never changes again.
 * - `claim` moves `pending -> processing`, or re-claims a `processing` one whose lease has expired (a lost
 *   worker) or that is parked; each claim increments `attempts` (except the claim of a parked one) and sets the
 *   lease; the first claim sets `startedAt`.
 *   `complete`/`fail`/`progress` by a worker succeed only while that worker still holds the lease: a stale
 *   worker's late completion is refused.
 * - A worker holds its lease while `leaseOwner === workerId && now < leaseExpiresAt`; from `now >= leaseExpiresAt`
 *   on it has expired, even if nobody re-claimed it, and that worker can no longer complete, fail or renew (the
 *   runner renews every leaseMs/3, so only a stalled or dead worker loses it).
 * - `fail` with a `workerId` is refused for a pending generation (a worker never held it); `force` skips the lease
 *   check (cancellation).
 * - `listUnfinished` returns pending and processing generations (for recovery), oldest first, parked ones included.
 * - The event log: `insert` appends `created`, `claim` `processing` (not when it resumes a parked one), `progress` `progress`, `complete`
 *   `completed`, `fail` `failed`, each in the same atomic step as its change (one transaction; a crash leaves
 *   both or neither). A call that changes nothing appends nothing. `renewLease` appends nothing. `seq` only grows
 *   over the whole store (every owner), is never reused, survives restarts, and an event is visible to
 *   `readEvents` only after every event with a smaller `seq` is (so a reader that walks forward from a cursor
 *   never skips one that commits late). Retention deletes a generation's events with it.
 */
export interface GenerationStore {
  insert(gen: NewGeneration, options?: InsertOptions): Promise<'inserted' | 'limit_reached'>;
  get(id: string, ownerId: string): Promise<GenerationRecord | null>;
  /** Not owner-scoped: for workers and recovery only, never for answering a client. */
  getById(id: string): Promise<GenerationRecord | null>;
  /** Returns the claimed record, or null when the generation is not claimable (missing, terminal, or leased). */
  claim(id: string, opts: ClaimOptions): Promise<GenerationRecord | null>;
  /** Extends the lease while the worker still holds it. */
  renewLease(id: string, workerId: string, leaseMs: number, now: number): Promise<boolean>;
  /** Records a worker's progress (while it holds the lease) and appends a `progress` event. */
  progress(id: string, input: ProgressInput): Promise<boolean>;
  /**
   * Stores a remote job's handle while `workerId` holds the lease and none is stored yet (a handle is set once per
   * generation: the upstream job is started once). No event.
   */
  setRemoteHandle(id: string, workerId: string, handle: unknown, now: number): Promise<boolean>;
  /**
   * A remote job waits between checks: while `workerId` holds the lease, release the lease (leaseOwner and
   * leaseExpiresAt cleared) and set `parkedUntil`; the generation stays `processing`. The next `claim` of a parked
   * generation does not count as an attempt (it is a planned check, not a lost worker) and appends no event; it clears
   * `parkedUntil`. No event.
   */
  park(id: string, workerId: string, until: number, now: number): Promise<boolean>;
  complete(id: string, input: CompleteInput): Promise<boolean>;
  fail(id: string, input: FailInput): Promise<boolean>;
  /**
   * Unfinished generations in a stable order (oldest first; ties in an order of the store's choosing that does not
   * change), at most `limit`. With `after` (the id of the last generation of the previous page), the page that follows
   * it, so recovery can walk any number of them. An `after` that no longer exists gives an empty page.
   */
  listUnfinished(limit: number, after?: string): Promise<GenerationRecord[]>;
  /**
   * One owner's generations, newest first: ordered by `createdAt` descending, then `id` descending, at most
   * `query.limit`, optionally only one status and/or one model, starting after `query.before`. Index-backed: a
   * page costs the same with a million rows stored as with a thousand.
   */
  list(ownerId: string, query: ListQuery): Promise<GenerationRecord[]>;
  /** Events with `seq > after`, every owner, in `seq` order, at most `limit` (for delivery). */
  readEvents(after: number, limit: number): Promise<GenerationEvent[]>;
  /** One generation's events with `seq > after` (default: all), in `seq` order. Not owner-scoped. */
  eventsOf(generationId: string, after?: number): Promise<GenerationEvent[]>;
  /** The largest `seq` ever appended (0 when none): where a reader that only wants new events starts. */
  lastSeq(): Promise<number>;
  /**
   * Deletes terminal generations finished before `before` (retention), and their events, at most `limit` at a
   * time. Returns the deleted records' ids and result keys so their files and webhook deliveries can go too.
   */
  deleteFinishedBefore(before: number, limit: number): Promise<{ deleted: number; resultKeys: string[]; ids: string[] }>;
  /** Counts by status; for tests and operators. */
  countByStatus?(): Promise<Record<GenerationStatus, number>>;
}
