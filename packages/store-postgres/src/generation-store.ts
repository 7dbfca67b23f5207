import type {
  ClaimOptions,
  CompleteInput,
  FailInput,
  GenerationRecord,
  GenerationStatus,
  GenerationStore,
  NewGeneration,
} from '@genservice/core';
import type { Pool } from 'pg';
import { PgDatabase, decodeKey, encodeKey, num, optNum, optStr, storableText } from './db.js';

export type GenerationSqlName =
  | 'insert'
  | 'get'
  | 'getById'
  | 'claim'
  | 'renew'
  | 'complete'
  | 'failByWorker'
  | 'failOther'
  | 'listUnfinished'
  | 'listUnfinishedAfter'
  | 'deleteFinished'
  | 'countByStatus';

/**
 * The statements, given the quoted schema. Exported so the index tests EXPLAIN exactly what the store runs.
 *
 * "Holds the lease" means `lease_owner = worker AND now < lease_expires_at`; "expired" is its complement
 * `lease_expires_at <= now` (the in-memory store's rule), so at any instant exactly one of a stale worker and a
 * re-claimer can act.
 */
export function generationSql(s: string): Record<GenerationSqlName, string> {
  const holds = `status = 'processing' AND lease_owner = $2 AND lease_expires_at > $3`;
  return {
    insert: `INSERT INTO ${s}.generations
      (id, owner_id, model_id, settings, status, reserved, attempts, created_at, updated_at)
      VALUES ($1, $2, $3, $4::json, 'pending', $5, 0, $6, $6)`,
    get: `SELECT * FROM ${s}.generations WHERE id = $1 AND owner_id = $2`,
    getById: `SELECT * FROM ${s}.generations WHERE id = $1`,
    claim: `UPDATE ${s}.generations
      SET status = 'processing', attempts = attempts + 1, lease_owner = $2, lease_expires_at = $3 + $4::bigint,
          updated_at = $3
      WHERE id = $1 AND (status = 'pending'
        OR (status = 'processing' AND (lease_expires_at IS NULL OR lease_expires_at <= $3)))
      RETURNING *`,
    renew: `UPDATE ${s}.generations SET lease_expires_at = $3 + $4::bigint, updated_at = $3
      WHERE id = $1 AND ${holds}`,
    complete: `UPDATE ${s}.generations
      SET status = 'completed', price = $4, result_text = $5, result_key = $6, finished_at = $3, updated_at = $3
      WHERE id = $1 AND ${holds}`,
    // A worker fails only what it claimed (never a pending one); `force` (cancellation) overrides the lease.
    failByWorker: `UPDATE ${s}.generations
      SET status = 'failed', price = $4, failure_reason = $5, finished_at = $3, updated_at = $3
      WHERE id = $1 AND status = 'processing' AND ($6::boolean OR (lease_owner = $2 AND lease_expires_at > $3))`,
    // Not a worker's failure: from pending, or from processing once nobody holds it (or when forced).
    failOther: `UPDATE ${s}.generations
      SET status = 'failed', price = $3, failure_reason = $4, finished_at = $2, updated_at = $2
      WHERE id = $1 AND (status = 'pending'
        OR (status = 'processing' AND (lease_expires_at IS NULL OR lease_expires_at <= $2 OR $5::boolean)))`,
    // Ties on created_at fall back to id: stable across instances, which insertion order would not be.
    listUnfinished: `SELECT * FROM ${s}.generations WHERE status IN ('pending', 'processing')
      ORDER BY created_at, id LIMIT $1`,
    // The page after a given generation, resumed from that row's (created_at, id).
    listUnfinishedAfter: `SELECT * FROM ${s}.generations WHERE status IN ('pending', 'processing')
      AND (created_at, id) > (SELECT created_at, id FROM ${s}.generations WHERE id = $2)
      ORDER BY created_at, id LIMIT $1`,
    // SKIP LOCKED lets several instances sweep at once without waiting on each other's batches. `= ANY(ARRAY(...))`
    // rather than `IN (...)`: with IN the planner may hash-join against a scan of the whole table.
    deleteFinished: `DELETE FROM ${s}.generations WHERE id = ANY(ARRAY(
        SELECT id FROM ${s}.generations
        WHERE status IN ('completed', 'failed') AND finished_at < $1
        ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED))
      RETURNING result_key`,
    countByStatus: `SELECT status, count(*)::int AS n FROM ${s}.generations GROUP BY status`,
  };
}

type GenerationRow = Record<string, unknown>;

function optKey(value: unknown): string | undefined {
  const s = optStr(value);
  return s === undefined ? undefined : decodeKey(s);
}


function toRecord(row: GenerationRow): GenerationRecord {
  const rec: GenerationRecord = {
    id: decodeKey(String(row.id)),
    ownerId: decodeKey(String(row.owner_id)),
    modelId: decodeKey(String(row.model_id)),
    settings: (row.settings ?? {}) as GenerationRecord['settings'],
    status: row.status as GenerationStatus,
    reserved: num(row.reserved),
    attempts: num(row.attempts),
    createdAt: num(row.created_at),
    updatedAt: num(row.updated_at),
  };
  // Absent rather than undefined-valued, so records compare equal to the in-memory store's.
  const price = optNum(row.price);
  if (price !== undefined) rec.price = price;
  const resultText = optStr(row.result_text);
  if (resultText !== undefined) rec.resultText = resultText;
  const resultKey = optKey(row.result_key);
  if (resultKey !== undefined) rec.resultKey = resultKey;
  const failureReason = optStr(row.failure_reason);
  if (failureReason !== undefined) rec.failureReason = failureReason;
  const leaseOwner = optKey(row.lease_owner);
  if (leaseOwner !== undefined) rec.leaseOwner = leaseOwner;
  const leaseExpiresAt = optNum(row.lease_expires_at);
  if (leaseExpiresAt !== undefined) rec.leaseExpiresAt = leaseExpiresAt;
  const finishedAt = optNum(row.finished_at);
  if (finishedAt !== undefined) rec.finishedAt = finishedAt;
  return rec;
}

/**
 * GenerationStore on PostgreSQL. Every transition is one conditional UPDATE, so the row lock decides races:
 * concurrent callers re-check the WHERE clause against the winner's row and get no row back.
 *
 * Does not migrate; `createPostgresStores` does (or call `runMigrations` yourself).
 */
export class PostgresGenerationStore implements GenerationStore {
  private readonly db: PgDatabase;
  private readonly sql: Record<GenerationSqlName, string>;

  constructor(pool: Pool, options: { schema?: string } = {}) {
    this.db = new PgDatabase(pool, options.schema ?? 'genservice');
    this.sql = generationSql(this.db.s);
  }

  async insert(gen: NewGeneration): Promise<void> {
    await this.db.query(this.sql.insert, [
      encodeKey(gen.id),
      encodeKey(gen.ownerId),
      encodeKey(gen.modelId),
      JSON.stringify(gen.settings ?? {}),
      gen.reserved,
      gen.createdAt,
    ]);
  }

  async get(id: string, ownerId: string): Promise<GenerationRecord | null> {
    const { rows } = await this.db.query(this.sql.get, [encodeKey(id), encodeKey(ownerId)]);
    return rows[0] ? toRecord(rows[0]) : null;
  }

  async getById(id: string): Promise<GenerationRecord | null> {
    const { rows } = await this.db.query(this.sql.getById, [encodeKey(id)]);
    return rows[0] ? toRecord(rows[0]) : null;
  }

  async claim(id: string, opts: ClaimOptions): Promise<GenerationRecord | null> {
    const { rows } = await this.db.query(this.sql.claim, [encodeKey(id), encodeKey(opts.workerId), opts.now, opts.leaseMs]);
    return rows[0] ? toRecord(rows[0]) : null;
  }

  async renewLease(id: string, workerId: string, leaseMs: number, now: number): Promise<boolean> {
    const res = await this.db.query(this.sql.renew, [encodeKey(id), encodeKey(workerId), now, leaseMs]);
    return res.rowCount === 1;
  }

  async complete(id: string, input: CompleteInput): Promise<boolean> {
    const res = await this.db.query(this.sql.complete, [
      encodeKey(id),
      encodeKey(input.workerId),
      input.now,
      input.price,
      storableText(input.resultText),
      input.resultKey === undefined ? null : encodeKey(input.resultKey),
    ]);
    return res.rowCount === 1;
  }

  async fail(id: string, input: FailInput): Promise<boolean> {
    const force = input.force === true;
    const reason = storableText(input.reason);
    const res =
      input.workerId !== undefined
        ? await this.db.query(this.sql.failByWorker, [encodeKey(id), encodeKey(input.workerId), input.now, input.price, reason, force])
        : await this.db.query(this.sql.failOther, [encodeKey(id), input.now, input.price, reason, force]);
    return res.rowCount === 1;
  }

  async listUnfinished(limit: number, after?: string): Promise<GenerationRecord[]> {
    const { rows } =
      after === undefined
        ? await this.db.query(this.sql.listUnfinished, [limit])
        : await this.db.query(this.sql.listUnfinishedAfter, [limit, encodeKey(after)]);
    return rows.map(toRecord);
  }

  async deleteFinishedBefore(before: number, limit: number): Promise<{ deleted: number; resultKeys: string[] }> {
    const { rows } = await this.db.query<{ result_key: string | null }>(this.sql.deleteFinished, [before, limit]);
    const resultKeys = rows.flatMap((r) => (r.result_key === null ? [] : [decodeKey(r.result_key)]));
    return { deleted: rows.length, resultKeys };
  }

  async countByStatus(): Promise<Record<GenerationStatus, number>> {
    const counts: Record<GenerationStatus, number> = { pending: 0, processing: 0, completed: 0, failed: 0 };
    const { rows } = await this.db.query<{ status: GenerationStatus; n: number }>(this.sql.countByStatus);
    for (const r of rows) counts[r.status] = r.n;
    return counts;
  }
}
