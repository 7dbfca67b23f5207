import type {
  ClaimOptions,
  CompleteInput,
  FailInput,
  GenerationRecord,
  GenerationStatus,
  GenerationStore,
  NewGeneration,
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
  attempts: number;
  lease_owner: string | null;
  lease_expires_at: number | null;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
}

const COLUMNS = `id, owner_id, model_id, settings, status, reserved, price, result_text, result_key, failure_reason,
  attempts, lease_owner, lease_expires_at, created_at, updated_at, finished_at`;

/**
 * The lease rule, the same as the in-memory store's: a worker holds its lease while `lease_owner` is its id and
 * `now < lease_expires_at`; from `now >= lease_expires_at` on the lease has expired.
 */
const HOLDS_LEASE = `status = 'processing' AND lease_owner = @workerId AND lease_expires_at > @now`;
const LEASE_EXPIRED = `(lease_expires_at IS NULL OR lease_expires_at <= @now)`;

/** Every statement the store runs. Exported from this module (not the package) so tests can EXPLAIN them. */
export const GENERATION_SQL = {
  insert: `INSERT INTO generations (id, owner_id, model_id, settings, status, reserved, attempts, created_at, updated_at)
    VALUES (@id, @ownerId, @modelId, @settings, 'pending', @reserved, 0, @createdAt, @createdAt)`,
  get: `SELECT ${COLUMNS} FROM generations WHERE id = ? AND owner_id = ?`,
  getById: `SELECT ${COLUMNS} FROM generations WHERE id = ?`,
  claim: `UPDATE generations
       SET status = 'processing', attempts = attempts + 1, lease_owner = @workerId,
           lease_expires_at = @expiresAt, updated_at = @now
     WHERE id = @id AND (status = 'pending' OR (status = 'processing' AND ${LEASE_EXPIRED}))
    RETURNING ${COLUMNS}`,
  renew: `UPDATE generations SET lease_expires_at = @expiresAt, updated_at = @now WHERE id = @id AND ${HOLDS_LEASE}`,
  // coalesce keeps an earlier value when the input leaves a result field out, as the in-memory store does.
  complete: `UPDATE generations
       SET status = 'completed', price = @price, result_text = coalesce(@resultText, result_text),
           result_key = coalesce(@resultKey, result_key), finished_at = @now, updated_at = @now
     WHERE id = @id AND ${HOLDS_LEASE}`,
  failByWorker: `UPDATE generations
       SET status = 'failed', price = @price, failure_reason = @reason, finished_at = @now, updated_at = @now
     WHERE id = @id AND (${HOLDS_LEASE} OR (@force = 1 AND status = 'processing'))`,
  fail: `UPDATE generations
       SET status = 'failed', price = @price, failure_reason = @reason, finished_at = @now, updated_at = @now
     WHERE id = @id AND (status = 'pending' OR (status = 'processing' AND (@force = 1 OR ${LEASE_EXPIRED})))`,
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
  // One statement, so the rows whose keys are returned are exactly the rows deleted, even with other writers.
  deleteFinished: `DELETE FROM generations
     WHERE id IN (
       SELECT id FROM generations
        WHERE finished_at IS NOT NULL AND finished_at < ? AND status IN ('completed', 'failed')
        ORDER BY finished_at, rowid
        LIMIT ?)
    RETURNING result_key`,
  count: 'SELECT status, count(*) AS n FROM generations GROUP BY status',
} as const;

/**
 * GenerationStore on SQLite.
 *
 * Every transition is a single conditional `UPDATE ... WHERE status = ...` (plus the lease for worker
 * transitions): SQLite serialises writers, across processes too, so of racing callers exactly one sees a
 * changed row and the rest see none, with no read-then-write window in between.
 */
export class SqliteGenerationStore implements GenerationStore {
  private readonly insertStmt: Statement;
  private readonly getStmt: Statement;
  private readonly getByIdStmt: Statement;
  private readonly claimStmt: Statement;
  private readonly renewStmt: Statement;
  private readonly completeStmt: Statement;
  private readonly failByWorkerStmt: Statement;
  private readonly failStmt: Statement;
  private readonly listUnfinishedStmt: Statement;
  private readonly listUnfinishedAfterStmt: Statement;
  private readonly deleteFinishedStmt: Statement;
  private readonly countStmt: Statement;

  constructor(db: SqliteDatabase) {
    this.insertStmt = db.prepare(GENERATION_SQL.insert);
    this.getStmt = db.prepare(GENERATION_SQL.get);
    this.getByIdStmt = db.prepare(GENERATION_SQL.getById);
    this.claimStmt = db.prepare(GENERATION_SQL.claim);
    this.renewStmt = db.prepare(GENERATION_SQL.renew);
    this.completeStmt = db.prepare(GENERATION_SQL.complete);
    this.failByWorkerStmt = db.prepare(GENERATION_SQL.failByWorker);
    this.failStmt = db.prepare(GENERATION_SQL.fail);
    this.listUnfinishedStmt = db.prepare(GENERATION_SQL.listUnfinished);
    this.listUnfinishedAfterStmt = db.prepare(GENERATION_SQL.listUnfinishedAfter);
    this.deleteFinishedStmt = db.prepare(GENERATION_SQL.deleteFinished);
    this.countStmt = db.prepare(GENERATION_SQL.count);
  }

  async insert(gen: NewGeneration): Promise<void> {
    try {
      this.insertStmt.run({
        id: gen.id,
        ownerId: gen.ownerId,
        modelId: gen.modelId,
        settings: JSON.stringify(gen.settings ?? {}),
        reserved: gen.reserved,
        createdAt: gen.createdAt,
      });
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
    const row = this.claimStmt.get({
      id,
      workerId: opts.workerId,
      expiresAt: opts.now + opts.leaseMs,
      now: opts.now,
    }) as GenerationRow | undefined;
    return toRecord(row);
  }

  async renewLease(id: string, workerId: string, leaseMs: number, now: number): Promise<boolean> {
    return this.renewStmt.run({ id, workerId, expiresAt: now + leaseMs, now }).changes === 1;
  }

  async complete(id: string, input: CompleteInput): Promise<boolean> {
    const result = this.completeStmt.run({
      id,
      workerId: input.workerId,
      price: input.price,
      resultText: input.resultText ?? null,
      resultKey: input.resultKey ?? null,
      now: input.now,
    });
    return result.changes === 1;
  }

  async fail(id: string, input: FailInput): Promise<boolean> {
    const params = { id, price: input.price, reason: input.reason, now: input.now, force: input.force === true ? 1 : 0 };
    // A worker can only fail what it claimed; a pending generation is failed by cancellation or recovery.
    const result =
      input.workerId === undefined
        ? this.failStmt.run(params)
        : this.failByWorkerStmt.run({ ...params, workerId: input.workerId });
    return result.changes === 1;
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

  async deleteFinishedBefore(before: number, limit: number): Promise<{ deleted: number; resultKeys: string[] }> {
    if (!(limit > 0)) return { deleted: 0, resultKeys: [] };
    const rows = this.deleteFinishedStmt.all(before, Math.floor(limit)) as Array<{ result_key: string | null }>;
    const resultKeys = rows.flatMap((r) => (r.result_key === null ? [] : [r.result_key]));
    return { deleted: rows.length, resultKeys };
  }

  /** A full scan of the table: meant for tests and operators, not for a request path. */
  async countByStatus(): Promise<Record<GenerationStatus, number>> {
    const counts: Record<GenerationStatus, number> = { pending: 0, processing: 0, completed: 0, failed: 0 };
    for (const row of this.countStmt.all() as Array<{ status: GenerationStatus; n: number }>) counts[row.status] = row.n;
    return counts;
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
  if (row.lease_owner !== null) record.leaseOwner = row.lease_owner;
  if (row.lease_expires_at !== null) record.leaseExpiresAt = row.lease_expires_at;
  if (row.finished_at !== null) record.finishedAt = row.finished_at;
  return record;
}

export function isConstraint(error: unknown, code: string): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === code;
}
