import type {
  BatchCounts,
  BatchRecord,
  FailureInfo,
  GenerationEvent,
  GenerationEventType,
  GenerationRecord,
  GenerationStatus,
  Metadata,
  Progress,
  Settings,
  WebhookEventType,
} from '../domain/types.js';
import type { ReserveResult } from './ledger.js';

/** A generation as it is first stored: the Lifecycle decides every field. */
export interface NewGeneration {
  id: string;
  ownerId: string;
  modelId: string;
  settings: Settings;
  status: GenerationStatus;
  reserved: number;
  createdAt: number;
  /** The client's labels; absent when none were given. */
  metadata?: Metadata;
  /** The client's webhook for this generation (URL already checked); absent when none was given. */
  webhook?: { url: string; events: WebhookEventType[] };
  /** The shorter life the client asked for (seconds after it finishes); absent when none was asked. */
  expiresAfterSeconds?: number;
  /** The batch it belongs to (inserted with `insertBatch`). */
  batchId?: string;
  /** The create's W3C `traceparent` (at most 55 characters); absent without tracing. */
  traceparent?: string;
  /** The priority its create asked; absent when it asked none. */
  priority?: 'low' | 'normal' | 'high';
  /** A `low` generation's deadline (epoch ms). */
  deadlineAt?: number;
}

/** A batch as first stored (`insertBatch`); `completedAt` is set later with `completeBatch`. */
export type NewBatch = Omit<BatchRecord, 'completedAt'>;

/** An event to append: the store numbers it (`seq`, per generation) and stamps it with the change's `now`. */
export interface NewEvent {
  type: GenerationEventType;
  data: Record<string, unknown>;
}

export interface InsertOptions {
  /**
   * Refuse the insert (answer `limit_reached`) when the owner already has this many unfinished generations (no
   * `finishedAt`). Counted and inserted atomically, across processes: of racing inserts exactly `max` win.
   */
  maxUnfinishedPerOwner?: number;
}

/**
 * What must hold for a change to apply, all of it at once, checked in the same atomic step as the write.
 * `now` is the change's.
 */
export interface Expectation {
  /** The generation's `status` is one of these. */
  status: readonly GenerationStatus[];
  /**
   * `{ heldBy }`: `leaseOwner === heldBy && now < leaseExpiresAt`. `'free'`: no lease, or `leaseExpiresAt <= now`
   * (so at any instant exactly one of a stale holder and a newcomer may act).
   */
  lease?: { heldBy: string } | 'free';
  /** `parkedUntil` is set (true) or absent (false). */
  parked?: boolean;
  /** `claims` equals this. */
  claims?: number;
  /** `remoteHandle` is absent. */
  noRemoteHandle?: true;
}

/**
 * The fields a change may write. A key that is absent is left as it is; `null` clears the field. Everything else
 * (id, owner, model, settings, reserved, createdAt, metadata, webhook, expiresAfterSeconds) never changes after the
 * insert.
 */
export type GenerationPatch = {
  [K in
    | 'status'
    | 'price'
    | 'resultText'
    | 'resultKey'
    | 'failureReason'
    | 'error'
    | 'progress'
    | 'startedAt'
    | 'remoteHandle'
    | 'parkedUntil'
    | 'claims'
    | 'leaseOwner'
    | 'leaseExpiresAt'
    | 'finishedAt'
    | 'lifeEndsAt'
    | 'servedModelId']?: Exclude<GenerationRecord[K], undefined> | null;
};

/** One compare-and-set on one generation. */
export interface GenerationChange {
  expect: Expectation;
  set: GenerationPatch;
  /** Appended in the same atomic step, numbered after the generation's last event. */
  event?: NewEvent;
  /** The time of the change: lease checks use it, `updatedAt` and the event's `at` take it. */
  now: number;
  /**
   * Only for a store whose `settlesFor(ledger)` is true: the generation's reserve settled at this amount in the same
   * atomic step, exactly as that ledger's `settle(id, amount, now)` would (clamped to the reserve, idempotent, usage
   * rolled up), when the change applies. Issue 36: a run is then a claim and a finish, one round trip each.
   */
  settle?: number;
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
  /** Only the generations of this batch. */
  batchId?: string;
  /** Only generations strictly after this position in the order (older, or equal time and smaller id). */
  before?: ListCursor;
}

/** A page of the feed across generations, and where the next read starts. */
export interface FeedPage {
  events: GenerationEvent[];
  /** Opaque; pass it back as `after`. Equal to the `after` given when the page is empty. */
  cursor: string;
}

/**
 * Where generations and their event log live. A store holds no business rules: which changes exist, when they are
 * allowed, what they cost and what their events say is decided by core's Lifecycle, which hands the store one
 * compare-and-set at a time. The store's job is to apply it atomically.
 *
 * Guarantees an implementation must give (the contract suite in @genservice/testing checks each):
 * - `insert` stores the record and its first event in one atomic step; it is durable once it resolves; a duplicate
 *   id rejects. With `maxUnfinishedPerOwner` it counts the owner's records without `finishedAt` and inserts
 *   atomically (exact under races, across processes). A new record has `claims` 0 and no lease.
 * - `get(id, ownerId)` is owner-scoped: another user's generation reads as `null`, exactly like a missing one. It may
 *   answer at once instead of with a promise (an in-memory or synchronous driver, like SQLite's); core takes any
 *   thenable as `await` would. A throw is read as a rejection.
 * - `update(id, change)` applies `change.set` and appends `change.event` only if every condition of
 *   `change.expect` holds at that moment, all in one atomic step (one statement or transaction; one synchronous step
 *   in memory): of racing changes whose expectations exclude each other exactly one applies. It answers the record
 *   as written, or `null` when nothing was written (missing, or an expectation failed). It also sets `updatedAt`.
 * - `renewLeases(ids, holder, until, now)` moves `leaseExpiresAt` to `until` on every one of `ids` that is unfinished
 *   (no `finishedAt`) and whose lease `holder` still holds at `now` (as in `Expectation.lease`), in one call; it
 *   answers the ids it renewed. No event.
 * - Events: each generation's are numbered 1, 2, 3, ... in the order they were appended (`seq`), and an event exists
 *   only if the change that carried it applied. `eventsOf` reads one generation's.
 * - The feed across generations: `readFeed(after)` answers events in an order where each generation's events are
 *   in `seq` order, and a reader that walks it forward from cursor to cursor receives every event exactly once,
 *   including an event that commits after others that were appended later. An event may become readable some time
 *   after its commit (never before it). `feedHead()` is where a reader that only wants new events starts: it receives
 *   every event committed after the call (and possibly some committed shortly before it). No write may take a lock
 *   that every generation shares to give this (a single-writer database such as SQLite gives it by being one).
 * - `listUnfinished` returns records without `finishedAt` (for recovery), oldest first.
 * - `listFinishedBefore` answers records whose `finishedAt` is before a time (retention), oldest first; the sweep
 *   deletes their files and then removes each with `remove`.
 * - `listLifeEndedBefore` answers records whose `lifeEndsAt` is before a time, oldest `lifeEndsAt` first; records
 *   without `lifeEndsAt` are never in it. Like `listFinishedBefore`, it only reads.
 * - `remove(id, expect)` deletes one record and all its events in one atomic step, only if its status is one of
 *   `expect.status` at that moment; it answers whether it deleted. Afterwards every read treats the id as unknown.
 * - Batches: `insertBatch` stores the batch, every one of its generations (each with `batchId`) and each one's first
 *   event in one atomic step (one transaction, multi-row inserts): all of them or none; no in-flight cap applies.
 *   `getBatch(id, ownerId)` is owner-scoped like `get`. `batchCounts` counts the batch's generations by status and
 *   sums the `price` of its finished ones, in one read. `completeBatch(id, now)` sets `completedAt` only when it is
 *   not set yet (a compare-and-set: of racing calls exactly one answers true). `listOpenBatches(createdBefore,
 *   limit, after)` answers at most `limit` batches without `completedAt` created before `createdBefore`, oldest
 *   `createdAt` first (ties in an order of the store's choosing that does not change), from after the batch `after`
 *   (completed since or not) when given, so recovery can walk them all and complete a batch whose last generation
 *   finished in a process that died before completing it. Reads only; index-backed (only open batches in it).
 */
/** The reserve `insertReserved` holds with the insert: the ledger's `reserve(ownerId, id, amount, now, options)`. */
export interface InsertReserve {
  amount: number;
  now: number;
  keyId?: string;
  /** The in-flight cap, as `ReserveOptions.maxInFlight`. */
  maxInFlight?: number;
}

export interface GenerationStore {
  /**
   * Only for a store whose `settlesFor(ledger)` is true: that ledger's reserve for the generation (as its `reserve`
   * would hold it, the model being the generation's; no key limit) and the insert with its first event, in one atomic
   * step. 'ok' when both happened; otherwise the reserve's refusal, and nothing is written. A duplicate id rejects.
   * `limited`: the owner has limits beyond its balance and in-flight cap (an organisation), which this step does not
   * hold: nothing is written, and the caller takes the ledger's full reserve and the plain insert.
   */
  insertReserved?(gen: NewGeneration, event: NewEvent, reserve: InsertReserve): Promise<ReserveResult | 'limited'>;
  /**
   * True when this store can settle `ledger`'s reserves inside its own changes (`GenerationChange.settle`): the
   * Postgres store with the Postgres ledger of the same database and schema. Absent or false: the caller settles.
   */
  settlesFor?(ledger: unknown): boolean;
  insert(gen: NewGeneration, event: NewEvent, options?: InsertOptions): Promise<'inserted' | 'limit_reached'>;
  get(id: string, ownerId: string): GenerationRecord | null | PromiseLike<GenerationRecord | null>;
  /** Not owner-scoped: for workers and recovery only, never for answering a client. */
  getById(id: string): Promise<GenerationRecord | null>;
  /** The one way a stored generation changes: a compare-and-set with its event. */
  update(id: string, change: GenerationChange): Promise<GenerationRecord | null>;
  /**
   * `update` over a batch, set-based: applies `change` to every generation of batch `batchId` whose `change.expect`
   * holds, each with its own `change.event`, all in one atomic step (one statement or transaction, never a read and
   * a write per member); answers the records after it (any order). A member a concurrent change moved first (a claim)
   * is either changed by it or left as the other change wrote it, never both.
   */
  updateBatchMembers(batchId: string, change: GenerationChange): Promise<GenerationRecord[]>;
  /** Extends the leases `holder` still holds among `ids`; answers those renewed. */
  renewLeases(ids: readonly string[], holder: string, until: number, now: number): Promise<string[]>;
  /**
   * Unfinished generations (no `finishedAt`) in a stable order (oldest `createdAt` first; ties in an order of the
   * store's choosing that does not change), at most `limit`. With `after` (the id of the last generation of the
   * previous page), the page that follows it, so recovery can walk any number of them. An `after` that no longer
   * exists gives an empty page.
   */
  listUnfinished(limit: number, after?: string): Promise<GenerationRecord[]>;
  /**
   * One owner's generations, newest first: ordered by `createdAt` descending, then `id` descending, at most
   * `query.limit`, optionally only one status and/or one model, starting after `query.before`. Index-backed: a
   * page costs the same with a million rows stored as with a thousand.
   */
  list(ownerId: string, query: ListQuery): Promise<GenerationRecord[]>;
  /** One generation's events with `seq > after` (default: all), in `seq` order. Not owner-scoped. */
  eventsOf(generationId: string, after?: number): Promise<GenerationEvent[]>;
  /** Events of every generation past `after` (see the feed guarantee), at most `limit`. */
  readFeed(after: string, limit: number): Promise<FeedPage>;
  /** A feed cursor from which every event committed after this call is read. */
  feedHead(): Promise<string>;
  /**
   * At most `limit` records whose `finishedAt` is before `before` (retention), oldest `finishedAt` first. Reads
   * only: the sweep deletes their files first and then each record with `remove`, so an unreachable blob store
   * leaves every record in place for the next sweep. Index-backed.
   */
  listFinishedBefore(before: number, limit: number): Promise<GenerationRecord[]>;
  /**
   * At most `limit` records whose `lifeEndsAt` is before `before` (a life the client asked for), oldest
   * `lifeEndsAt` first. Reads only, like `listFinishedBefore`. Index-backed (only rows with a `lifeEndsAt` in it).
   */
  listLifeEndedBefore(before: number, limit: number): Promise<GenerationRecord[]>;
  /**
   * Deletes one generation and its events, all or nothing, if its status is one of `expect.status` (the Lifecycle
   * deletes only finished ones). True when it deleted; false when it was missing or in another status.
   */
  remove(id: string, expect: { status: readonly GenerationStatus[] }): Promise<boolean>;
  /** Stores a batch and all its generations with their first events, all or nothing. */
  insertBatch(batch: NewBatch, generations: readonly NewGeneration[], events: readonly NewEvent[]): Promise<void>;
  /** The caller's batch (another user's reads as null, like a missing one). */
  getBatch(id: string, ownerId: string): Promise<BatchRecord | null>;
  /** Not owner-scoped: the batch's generations by status and the price of its finished ones. */
  batchCounts(batchId: string): Promise<BatchCounts>;
  /** Marks a batch completed once: true for the one call that set `completedAt`. */
  completeBatch(id: string, now: number): Promise<boolean>;
  /**
   * Batches not completed yet (no `completedAt`) created before `createdBefore`, oldest first (ties in an order of the
   * store's choosing that does not change), at most `limit`. With `after` (the id of the last batch of the previous
   * page, completed since or not), the page that follows it; an `after` that does not exist gives an empty page.
   */
  listOpenBatches(createdBefore: number, limit: number, after?: string): Promise<BatchRecord[]>;
  /** Counts by status; for tests and operators. */
  countByStatus?(): Promise<Record<GenerationStatus, number>>;
}

export type { BatchCounts, BatchRecord, FailureInfo, Progress };
