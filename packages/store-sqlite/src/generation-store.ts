import { retryMethodsWhileBusy } from './busy.js';
import type {
  ClaimOptions,
  CompleteInput,
  FailInput,
  FailureInfo,
  GenerationEvent,
  GenerationEventType,
  GenerationRecord,
  GenerationStatus,
  GenerationStore,
  InsertOptions,
  ListQuery,
  NewGeneration,
  ProgressInput,
} from '@genservice/core';
import type Database from 'better-sqlite3';
import type { SqliteDatabase } from './database.js';

type Statement = Database.Statement;

interface GenerationRow {
  id: string;
  owner_id: string;
  model_id: string;
  settings: string;
  status: GenerationStatus;
  reserved: number;
  price: number | null;
  result_text: string | null;
  result_key: string | null;
  failure_reason: string | null;
  error_code: string | null;
  error_message: string | null;
  metadata: string | null;
  webhook: string | null;
  progress_fraction: number | null;
  progress_message: string | null;
  attempts: number;
  lease_owner: string | null;
  lease_expires_at: number | null;
  created_at: number;
  updated_at: number;
  started_at: number | null;
  finished_at: number | null;
  remote_handle: string | null;
  parked_until: number | null;
}

interface EventRow {
  seq: number;
  generation_id: string;
  owner_id: string;
  type: GenerationEventType;
  at: number;
  data: string;
}

const COLUMNS = `id, owner_id, model_id, settings, status, reserved, price, result_text, result_key, failure_reason,
  error_code, error_message, metadata, webhook, progress_fraction, progress_message,
  attempts, lease_owner, lease_expires_at, created_at, updated_at, started_at, finished_at, remote_handle, parked_until`;

const EVENT_COLUMNS = 'seq, generation_id, owner_id, type, at, data';

/**
 * The lease rule, the same as the in-memory store's: a worker holds its lease while `lease_owner` is its id and
 * `now < lease_expires_at`; from `now >= lease_expires_at` on the lease has expired.
 */
const HOLDS_LEASE = `status = 'processing' AND lease_owner = @workerId AND lease_expires_at > @now`;
const LEASE_EXPIRED = `(lease_expires_at IS NULL OR lease_expires_at <= @now)`;

/**
 * SET clause of both fails. SQLite evaluates every SET expression against the row as it was before the UPDATE,
 * so `status` in the CASE is the state the generation is leaving: the fee follows the state the transition really
 * moved from, even when a claim committed between the caller's read and this statement.
 */
const FAIL_SET = `status = 'failed',
           price = CASE WHEN status = 'pending' THEN coalesce(@pendingPrice, @price) ELSE @price END,
           failure_reason = @reason, error_code = @errorCode, error_message = @errorMessage,
           parked_until = NULL, finished_at = @now, updated_at = @now`;

/** Which optional parts a list query has; each combination is its own statement, so each can use its index. */
export interface ListShape {
  status: boolean;
  modelId: boolean;
  before: boolean;
}

/**
 * One owner's page, newest first. The equality filters lead, then `(created_at, id)` as a row value: SQLite turns
 * that into one seek on the index's trailing columns (a keyset cursor), where `created_at < ? OR (created_at = ?
 * AND id < ?)` would not seek. Which index serves which shape is checked in test/query-plan.test.ts.
 */
export function listSql(shape: ListShape): string {
  const where = ['owner_id = @ownerId'];
  if (shape.status) where.push('status = @status');
  if (shape.modelId) where.push('model_id = @modelId');
  if (shape.before) where.push('(created_at, id) < (@beforeCreatedAt, @beforeId)');
  return `SELECT ${COLUMNS} FROM generations
     WHERE ${where.join(' AND ')}
     ORDER BY created_at DESC, id DESC
     LIMIT @limit`;
}

/** Every statement the store runs. Exported from this module (not the package) so tests can EXPLAIN them. */
export const GENERATION_SQL = {
  insert: `INSERT INTO generations (id, owner_id, model_id, settings, status, reserved, attempts, metadata, webhook,
                                    created_at, updated_at)
    VALUES (@id, @ownerId, @modelId, @settings, 'pending', @reserved, 0, @metadata, @webhook, @createdAt, @createdAt)`,
  get: `SELECT ${COLUMNS} FROM generations WHERE id = ? AND owner_id = ?`,
  getById: `SELECT ${COLUMNS} FROM generations WHERE id = ?`,
  // A parked remote job's claim is a planned check: no attempt (SET sees the row as it was). The caller reads
  // parked_until first, in the same transaction, to know whether to append the event.
  claim: `UPDATE generations
       SET status = 'processing', attempts = attempts + CASE WHEN parked_until IS NULL THEN 1 ELSE 0 END,
           parked_until = NULL, lease_owner = @workerId,
           lease_expires_at = @expiresAt, updated_at = @now, started_at = coalesce(started_at, @now)
     WHERE id = @id AND (status = 'pending' OR (status = 'processing' AND ${LEASE_EXPIRED}))
    RETURNING ${COLUMNS}`,
  parkedOf: `SELECT parked_until FROM generations WHERE id = ?`,
  // Counts at most the cap (the second parameter): the cost stays bounded by the cap, however many rows the owner has.
  countUnfinished: `SELECT count(*) AS n FROM
     (SELECT 1 FROM generations WHERE owner_id = ? AND status IN ('pending', 'processing') LIMIT ?)`,
  setRemoteHandle: `UPDATE generations SET remote_handle = @handle, updated_at = @now
     WHERE id = @id AND ${HOLDS_LEASE} AND remote_handle IS NULL`,
  park: `UPDATE generations SET lease_owner = NULL, lease_expires_at = NULL, parked_until = @until, updated_at = @now
     WHERE id = @id AND ${HOLDS_LEASE}`,
  renew: `UPDATE generations SET lease_expires_at = @expiresAt, updated_at = @now WHERE id = @id AND ${HOLDS_LEASE}`,
  progress: `UPDATE generations
       SET progress_fraction = @fraction, progress_message = @message, updated_at = @now
     WHERE id = @id AND ${HOLDS_LEASE}
    RETURNING owner_id`,
  // coalesce keeps an earlier value when the input leaves a result field out, as the in-memory store does.
  complete: `UPDATE generations
       SET status = 'completed', price = @price, result_text = coalesce(@resultText, result_text),
           result_key = coalesce(@resultKey, result_key), finished_at = @now, updated_at = @now
     WHERE id = @id AND ${HOLDS_LEASE}
    RETURNING owner_id, price`,
  failByWorker: `UPDATE generations
       SET ${FAIL_SET}
     WHERE id = @id AND (${HOLDS_LEASE} OR (@force = 1 AND status = 'processing'))
    RETURNING owner_id, price`,
  fail: `UPDATE generations
       SET ${FAIL_SET}
     WHERE id = @id AND (status = 'pending' OR (status = 'processing' AND (@force = 1 OR ${LEASE_EXPIRED})))
    RETURNING owner_id, price`,
  // The WHERE repeats the partial index's condition word for word: that is what lets SQLite use the index.
  listUnfinished: `SELECT ${COLUMNS} FROM generations
     WHERE status IN ('pending', 'processing')
     ORDER BY created_at, rowid
     LIMIT ?`,
  // The page after a given generation: the same order, resumed from that row's (created_at, rowid).
  listUnfinishedAfter: `SELECT ${COLUMNS} FROM generations
     WHERE status IN ('pending', 'processing')
       AND (created_at, rowid) > (SELECT created_at, rowid FROM generations WHERE id = @after)
     ORDER BY created_at, rowid
     LIMIT @limit`,
  list: listSql({ status: false, modelId: false, before: false }),
  // One statement, so the rows whose keys are returned are exactly the rows deleted, even with other writers.
  deleteFinished: `DELETE FROM generations
     WHERE id IN (
       SELECT id FROM generations
        WHERE finished_at IS NOT NULL AND finished_at < ? AND status IN ('completed', 'failed')
        ORDER BY finished_at, rowid
        LIMIT ?)
    RETURNING id, result_key`,
  // The ids come as one JSON array: one statement whatever the batch size, each id seeking events_generation.
  deleteEvents: `DELETE FROM events WHERE generation_id IN (SELECT value FROM json_each(?))`,
  appendEvent: `INSERT INTO events (generation_id, owner_id, type, at, data) VALUES (?, ?, ?, ?, ?)`,
  readEvents: `SELECT ${EVENT_COLUMNS} FROM events WHERE seq > ? ORDER BY seq LIMIT ?`,
  eventsOf: `SELECT ${EVENT_COLUMNS} FROM events WHERE generation_id = ? AND seq > ? ORDER BY seq`,
  // sqlite_sequence keeps the largest seq ever handed out, so events deleted by retention still count.
  lastSeq: `SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0) AS seq`,
  count: 'SELECT status, count(*) AS n FROM generations GROUP BY status',
} as const;

type Tx<A extends unknown[], R> = (...args: A) => R;

/**
 * GenerationStore and its event log on SQLite.
 *
 * Every transition is a conditional `UPDATE ... WHERE status = ...` (plus the lease for worker transitions) and
 * the append of its event, together in one IMMEDIATE transaction: SQLite serialises writers, across processes
 * too, so of racing callers exactly one sees a changed row, and only that one appends. A crash leaves both or
 * neither. Because writers are serialised and `seq` is taken inside the transaction, events commit in `seq`
 * order: a reader walking forward from a cursor never skips one that commits late.
 */
export class SqliteGenerationStore implements GenerationStore {
  private readonly getStmt: Statement;
  private readonly getByIdStmt: Statement;
  private readonly renewStmt: Statement;
  private readonly listUnfinishedStmt: Statement;
  private readonly listUnfinishedAfterStmt: Statement;
  private readonly readEventsStmt: Statement;
  private readonly eventsOfStmt: Statement;
  private readonly lastSeqStmt: Statement;
  private readonly countStmt: Statement;
  /** Prepared on first use, one per shape (status / model / cursor present or not). */
  private readonly listStmts = new Map<string, Statement>();

  private readonly insertTx: Tx<[NewGeneration, number | undefined], 'inserted' | 'limit_reached'>;
  private readonly setRemoteHandleStmt: Statement;
  private readonly parkStmt: Statement;
  private readonly claimTx: Tx<[string, ClaimOptions], GenerationRow | undefined>;
  private readonly progressTx: Tx<[string, ProgressInput], boolean>;
  private readonly completeTx: Tx<[string, CompleteInput], boolean>;
  private readonly failTx: Tx<[string, FailInput], boolean>;
  private readonly deleteFinishedTx: Tx<[number, number], { deleted: number; resultKeys: string[]; ids: string[] }>;

  constructor(private readonly db: SqliteDatabase) {
    retryMethodsWhileBusy(this, db);
    this.getStmt = db.prepare(GENERATION_SQL.get);
    this.getByIdStmt = db.prepare(GENERATION_SQL.getById);
    this.renewStmt = db.prepare(GENERATION_SQL.renew);
    this.listUnfinishedStmt = db.prepare(GENERATION_SQL.listUnfinished);
    this.listUnfinishedAfterStmt = db.prepare(GENERATION_SQL.listUnfinishedAfter);
    this.readEventsStmt = db.prepare(GENERATION_SQL.readEvents);
    this.eventsOfStmt = db.prepare(GENERATION_SQL.eventsOf);
    this.lastSeqStmt = db.prepare(GENERATION_SQL.lastSeq);
    this.countStmt = db.prepare(GENERATION_SQL.count);

    const insertStmt = db.prepare(GENERATION_SQL.insert);
    const countUnfinishedStmt = db.prepare(GENERATION_SQL.countUnfinished);
    const parkedOfStmt = db.prepare(GENERATION_SQL.parkedOf);
    this.setRemoteHandleStmt = db.prepare(GENERATION_SQL.setRemoteHandle);
    this.parkStmt = db.prepare(GENERATION_SQL.park);
    const claimStmt = db.prepare(GENERATION_SQL.claim);
    const progressStmt = db.prepare(GENERATION_SQL.progress);
    const completeStmt = db.prepare(GENERATION_SQL.complete);
    const failStmt = db.prepare(GENERATION_SQL.fail);
    const failByWorkerStmt = db.prepare(GENERATION_SQL.failByWorker);
    const deleteFinishedStmt = db.prepare(GENERATION_SQL.deleteFinished);
    const deleteEventsStmt = db.prepare(GENERATION_SQL.deleteEvents);
    const appendStmt = db.prepare(GENERATION_SQL.appendEvent);
    const append = (generationId: string, ownerId: string, type: GenerationEventType, at: number, data: Record<string, unknown>): void => {
      appendStmt.run(generationId, ownerId, type, at, JSON.stringify(data));
    };

    // IMMEDIATE: each takes the write lock before its first statement, so a transaction never has to upgrade a
    // read snapshot (which, in WAL mode, fails at once with SQLITE_BUSY_SNAPSHOT instead of waiting).
    // IMMEDIATE: the write lock is held from the count to the insert, across processes, so the cap is exact.
    this.insertTx = db.transaction((gen: NewGeneration, max: number | undefined) => {
      if (max !== undefined && (countUnfinishedStmt.get(gen.ownerId, max) as { n: number }).n >= max) return 'limit_reached' as const;
      insertStmt.run({
        id: gen.id,
        ownerId: gen.ownerId,
        modelId: gen.modelId,
        settings: JSON.stringify(gen.settings ?? {}),
        reserved: gen.reserved,
        metadata: gen.metadata === undefined ? null : JSON.stringify(gen.metadata),
        webhook: gen.webhook === undefined ? null : JSON.stringify({ url: gen.webhook.url, events: gen.webhook.events }),
        createdAt: gen.createdAt,
      });
      append(gen.id, gen.ownerId, 'created', gen.createdAt, { modelId: gen.modelId });
      return 'inserted' as const;
    }).immediate;

    this.claimTx = db.transaction((id: string, opts: ClaimOptions) => {
      const resumed = (parkedOfStmt.get(id) as { parked_until: number | null } | undefined)?.parked_until != null;
      const row = claimStmt.get({ id, workerId: opts.workerId, expiresAt: opts.now + opts.leaseMs, now: opts.now }) as
        | GenerationRow
        | undefined;
      if (row && !resumed) append(id, row.owner_id, 'processing', opts.now, { attempt: row.attempts });
      return row;
    }).immediate;

    this.progressTx = db.transaction((id: string, input: ProgressInput) => {
      const message = input.message ?? null;
      const row = progressStmt.get({ id, workerId: input.workerId, fraction: input.fraction, message, now: input.now }) as
        | { owner_id: string }
        | undefined;
      if (!row) return false;
      append(id, row.owner_id, 'progress', input.now, message === null ? { fraction: input.fraction } : { fraction: input.fraction, message });
      return true;
    }).immediate;

    this.completeTx = db.transaction((id: string, input: CompleteInput) => {
      const row = completeStmt.get({
        id,
        workerId: input.workerId,
        price: input.price,
        resultText: input.resultText ?? null,
        resultKey: input.resultKey ?? null,
        now: input.now,
      }) as { owner_id: string; price: number } | undefined;
      if (!row) return false;
      append(id, row.owner_id, 'completed', input.now, { price: row.price });
      return true;
    }).immediate;

    this.failTx = db.transaction((id: string, input: FailInput) => {
      const params = {
        id,
        price: input.price,
        pendingPrice: input.pendingPrice ?? null,
        reason: input.reason,
        errorCode: input.error.code,
        errorMessage: input.error.message,
        now: input.now,
        force: input.force === true ? 1 : 0,
      };
      // A worker can only fail what it claimed; a pending generation is failed by cancellation or recovery.
      const row = (
        input.workerId === undefined ? failStmt.get(params) : failByWorkerStmt.get({ ...params, workerId: input.workerId })
      ) as { owner_id: string; price: number } | undefined;
      if (!row) return false;
      // The price the UPDATE actually set (RETURNING), not the caller's guess of which one applies.
      append(id, row.owner_id, 'failed', input.now, { price: row.price, error: { code: input.error.code, message: input.error.message } });
      return true;
    }).immediate;

    this.deleteFinishedTx = db.transaction((before: number, limit: number) => {
      const rows = deleteFinishedStmt.all(before, limit) as Array<{ id: string; result_key: string | null }>;
      const ids = rows.map((r) => r.id);
      if (ids.length > 0) deleteEventsStmt.run(JSON.stringify(ids));
      const resultKeys = rows.flatMap((r) => (r.result_key === null ? [] : [r.result_key]));
      return { deleted: rows.length, resultKeys, ids };
    }).immediate;
  }

  async insert(gen: NewGeneration, options: InsertOptions = {}): Promise<'inserted' | 'limit_reached'> {
    try {
      return this.insertTx(gen, options.maxUnfinishedPerOwner);
    } catch (error) {
      if (isConstraint(error, 'SQLITE_CONSTRAINT_PRIMARYKEY')) {
        throw new Error(`Generation ${gen.id} already exists`, { cause: error });
      }
      throw error;
    }
  }

  async get(id: string, ownerId: string): Promise<GenerationRecord | null> {
    return toRecord(this.getStmt.get(id, ownerId) as GenerationRow | undefined);
  }

  async getById(id: string): Promise<GenerationRecord | null> {
    return toRecord(this.getByIdStmt.get(id) as GenerationRow | undefined);
  }

  async claim(id: string, opts: ClaimOptions): Promise<GenerationRecord | null> {
    return toRecord(this.claimTx(id, opts));
  }

  /** Appends no event: a renewal is the runner keeping its claim, not a change a client could see. */
  async renewLease(id: string, workerId: string, leaseMs: number, now: number): Promise<boolean> {
    return this.renewStmt.run({ id, workerId, expiresAt: now + leaseMs, now }).changes === 1;
  }

  async progress(id: string, input: ProgressInput): Promise<boolean> {
    return this.progressTx(id, input);
  }

  /** No event: the handle is the runner's bookkeeping, not a change a client sees. */
  async setRemoteHandle(id: string, workerId: string, handle: unknown, now: number): Promise<boolean> {
    return this.setRemoteHandleStmt.run({ id, workerId, handle: JSON.stringify(handle ?? null), now }).changes === 1;
  }

  async park(id: string, workerId: string, until: number, now: number): Promise<boolean> {
    return this.parkStmt.run({ id, workerId, until, now }).changes === 1;
  }

  async complete(id: string, input: CompleteInput): Promise<boolean> {
    return this.completeTx(id, input);
  }

  async fail(id: string, input: FailInput): Promise<boolean> {
    return this.failTx(id, input);
  }

  async listUnfinished(limit: number, after?: string): Promise<GenerationRecord[]> {
    // SQLite reads a negative LIMIT as "no limit"; the port means "none".
    if (!(limit > 0)) return [];
    const rows =
      after === undefined
        ? this.listUnfinishedStmt.all(Math.floor(limit))
        : this.listUnfinishedAfterStmt.all({ after, limit: Math.floor(limit) });
    return (rows as GenerationRow[]).map((row) => toRecord(row)!);
  }

  async list(ownerId: string, query: ListQuery): Promise<GenerationRecord[]> {
    if (!(query.limit > 0)) return [];
    const shape: ListShape = {
      status: query.status !== undefined,
      modelId: query.modelId !== undefined,
      before: query.before !== undefined,
    };
    const params: Record<string, unknown> = { ownerId, limit: Math.floor(query.limit) };
    if (query.status !== undefined) params.status = query.status;
    if (query.modelId !== undefined) params.modelId = query.modelId;
    if (query.before !== undefined) {
      params.beforeCreatedAt = query.before.createdAt;
      params.beforeId = query.before.id;
    }
    return (this.listStatement(shape).all(params) as GenerationRow[]).map((row) => toRecord(row)!);
  }

  async readEvents(after: number, limit: number): Promise<GenerationEvent[]> {
    if (!(limit > 0)) return [];
    return (this.readEventsStmt.all(after, Math.floor(limit)) as EventRow[]).map(toEvent);
  }

  async eventsOf(generationId: string, after = 0): Promise<GenerationEvent[]> {
    return (this.eventsOfStmt.all(generationId, after) as EventRow[]).map(toEvent);
  }

  async lastSeq(): Promise<number> {
    return (this.lastSeqStmt.get() as { seq: number }).seq;
  }

  async deleteFinishedBefore(before: number, limit: number): Promise<{ deleted: number; resultKeys: string[]; ids: string[] }> {
    if (!(limit > 0)) return { deleted: 0, resultKeys: [], ids: [] };
    return this.deleteFinishedTx(before, Math.floor(limit));
  }

  /** A full scan of the table: meant for tests and operators, not for a request path. */
  async countByStatus(): Promise<Record<GenerationStatus, number>> {
    const counts: Record<GenerationStatus, number> = { pending: 0, processing: 0, completed: 0, failed: 0 };
    for (const row of this.countStmt.all() as Array<{ status: GenerationStatus; n: number }>) counts[row.status] = row.n;
    return counts;
  }

  private listStatement(shape: ListShape): Statement {
    const key = `${+shape.status}${+shape.modelId}${+shape.before}`;
    let stmt = this.listStmts.get(key);
    if (!stmt) {
      stmt = this.db.prepare(listSql(shape));
      this.listStmts.set(key, stmt);
    }
    return stmt;
  }
}

function toRecord(row: GenerationRow | undefined): GenerationRecord | null {
  if (!row) return null;
  const record: GenerationRecord = {
    id: row.id,
    ownerId: row.owner_id,
    modelId: row.model_id,
    settings: JSON.parse(row.settings) as GenerationRecord['settings'],
    status: row.status,
    reserved: row.reserved,
    attempts: row.attempts,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
  // Optional fields stay absent rather than null, so records compare equal to the in-memory store's.
  if (row.price !== null) record.price = row.price;
  if (row.result_text !== null) record.resultText = row.result_text;
  if (row.result_key !== null) record.resultKey = row.result_key;
  if (row.failure_reason !== null) record.failureReason = row.failure_reason;
  if (row.error_code !== null) {
    record.error = { code: row.error_code as FailureInfo['code'], message: row.error_message ?? '' };
  }
  if (row.metadata !== null) record.metadata = JSON.parse(row.metadata) as GenerationRecord['metadata'];
  if (row.webhook !== null) record.webhook = JSON.parse(row.webhook) as GenerationRecord['webhook'];
  if (row.progress_fraction !== null) {
    record.progress =
      row.progress_message === null
        ? { fraction: row.progress_fraction }
        : { fraction: row.progress_fraction, message: row.progress_message };
  }
  if (row.lease_owner !== null) record.leaseOwner = row.lease_owner;
  if (row.lease_expires_at !== null) record.leaseExpiresAt = row.lease_expires_at;
  if (row.started_at !== null) record.startedAt = row.started_at;
  if (row.finished_at !== null) record.finishedAt = row.finished_at;
  if (row.remote_handle !== null) record.remoteHandle = JSON.parse(row.remote_handle) as unknown;
  if (row.parked_until !== null) record.parkedUntil = row.parked_until;
  return record;
}

function toEvent(row: EventRow): GenerationEvent {
  return {
    seq: row.seq,
    generationId: row.generation_id,
    ownerId: row.owner_id,
    type: row.type,
    at: row.at,
    data: JSON.parse(row.data) as GenerationEvent['data'],
  };
}

export function isConstraint(error: unknown, code: string): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === code;
}
