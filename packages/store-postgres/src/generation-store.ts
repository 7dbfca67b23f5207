import type {
  ClaimOptions,
  CompleteInput,
  FailInput,
  FailureCode,
  GenerationEvent,
  GenerationRecord,
  GenerationStatus,
  GenerationStore,
  InsertOptions,
  ListQuery,
  NewGeneration,
  ProgressInput,
} from '@genservice/core';
import type { Pool } from 'pg';
import { PgDatabase, decodeKey, encodeKey, num, optNum, optStr, storableText } from './db.js';

export type GenerationSqlName =
  | 'insert'
  | 'get'
  | 'getById'
  | 'claim'
  | 'renew'
  | 'progress'
  | 'complete'
  | 'failByWorker'
  | 'failOther'
  | 'setRemoteHandle'
  | 'park'
  | 'listUnfinished'
  | 'listUnfinishedAfter'
  | 'deleteFinished'
  | 'readEvents'
  | 'eventsOf'
  | 'lastSeq'
  | 'countByStatus';

/**
 * Taken (transaction-scoped) by every statement that appends to the event log, right before the append: seq numbers
 * are then handed out and committed in the same order, so a reader walking the log forward from a cursor never skips
 * an event that commits late with a smaller seq. The lock is held from the append to the commit of one statement.
 */
export const EVENTS_LOCK_KEY = 7_340_512_846_113_202;

/** Appends one event per row of `moved` (a CTE of updated generations), under the events lock. */
function appendEvents(s: string, from: string, type: string, at: string, data: string, where = 'true'): string {
  return `INSERT INTO ${s}.events (generation_id, owner_id, type, at, data)
    SELECT m.id, m.owner_id, '${type}', ${at}, ${data}
    FROM ${from} m, LATERAL (SELECT pg_advisory_xact_lock(${EVENTS_LOCK_KEY})) l
    WHERE ${where}`;
}

/**
 * The statements, given the quoted schema. Exported so the index tests EXPLAIN exactly what the store runs.
 *
 * "Holds the lease" means `lease_owner = worker AND now < lease_expires_at`; "expired" is its complement
 * `lease_expires_at <= now` (the in-memory store's rule), so at any instant exactly one of a stale worker and a
 * re-claimer can act. Each transition and its event are one statement (a data-modifying CTE): one transaction, and
 * no event when no row moved.
 */
export function generationSql(s: string): Record<GenerationSqlName, string> {
  const holds = `status = 'processing' AND lease_owner = $2 AND lease_expires_at > $3`;
  return {
    // $8 is the in-flight cap (null: none); the caller holds the owner's advisory lock, so the count is exact. It
    // counts at most $8 rows, so its cost is bounded by the cap, not by how many rows the owner has.
    insert: `WITH ins AS (
        INSERT INTO ${s}.generations
          (id, owner_id, model_id, settings, status, reserved, attempts, created_at, updated_at, metadata, webhook)
        SELECT $1, $2, $3, $4::json, 'pending', $5, 0, $6, $6, $7::jsonb, $9::jsonb
        WHERE $8::int IS NULL OR (SELECT count(*) FROM (SELECT 1 FROM ${s}.generations
          WHERE owner_id = $2 AND status IN ('pending', 'processing') LIMIT $8::int) capped) < $8::int
        RETURNING id, owner_id, model_id),
      ev AS (${appendEvents(s, 'ins', 'created', '$6', "jsonb_build_object('modelId', m.model_id)")})
      SELECT count(*)::int AS inserted FROM ins`,
    get: `SELECT * FROM ${s}.generations WHERE id = $1 AND owner_id = $2`,
    getById: `SELECT * FROM ${s}.generations WHERE id = $1`,
    // A parked remote job's claim is a planned check: no attempt, no event (the SET side sees the old row).
    claim: `WITH moved AS (
        UPDATE ${s}.generations
        SET status = 'processing', attempts = attempts + CASE WHEN parked_until IS NULL THEN 1 ELSE 0 END,
            claim_resumed = (parked_until IS NOT NULL), parked_until = NULL,
            lease_owner = $2, lease_expires_at = $3 + $4::bigint, updated_at = $3, started_at = coalesce(started_at, $3)
        WHERE id = $1 AND (status = 'pending'
          OR (status = 'processing' AND (lease_expires_at IS NULL OR lease_expires_at <= $3)))
        RETURNING *),
      ev AS (${appendEvents(s, 'moved', 'processing', '$3', "jsonb_build_object('attempt', m.attempts)", 'NOT m.claim_resumed')})
      SELECT * FROM moved`,
    renew: `UPDATE ${s}.generations SET lease_expires_at = $3 + $4::bigint, updated_at = $3
      WHERE id = $1 AND ${holds}`,
    progress: `WITH moved AS (
        UPDATE ${s}.generations SET progress_fraction = $4, progress_message = $5, updated_at = $3
        WHERE id = $1 AND ${holds}
        RETURNING id, owner_id, progress_fraction, progress_message),
      ev AS (${appendEvents(
        s,
        'moved',
        'progress',
        '$3',
        "CASE WHEN m.progress_message IS NULL THEN jsonb_build_object('fraction', m.progress_fraction) ELSE jsonb_build_object('fraction', m.progress_fraction, 'message', m.progress_message) END",
      )})
      SELECT count(*)::int AS n FROM moved`,
    complete: `WITH moved AS (
        UPDATE ${s}.generations
        SET status = 'completed', price = $4, result_text = $5, result_key = $6, finished_at = $3, updated_at = $3
        WHERE id = $1 AND ${holds}
        RETURNING id, owner_id, price),
      ev AS (${appendEvents(s, 'moved', 'completed', '$3', "jsonb_build_object('price', m.price)")})
      SELECT count(*)::int AS n FROM moved`,
    // A worker fails only what it claimed (never a pending one); `force` (cancellation) overrides the lease. The price
    // follows the state the row moves from ($7: the price from pending, when given).
    failByWorker: `WITH moved AS (
        UPDATE ${s}.generations
        SET status = 'failed', price = CASE WHEN status = 'pending' AND $7::numeric IS NOT NULL THEN $7::numeric ELSE $4 END,
            failure_reason = $5, error_code = $8, error_message = $9, parked_until = NULL, finished_at = $3, updated_at = $3
        WHERE id = $1 AND status = 'processing' AND ($6::boolean OR (lease_owner = $2 AND lease_expires_at > $3))
        RETURNING id, owner_id, price, error_code, error_message),
      ev AS (${appendEvents(s, 'moved', 'failed', '$3', "jsonb_build_object('price', m.price, 'error', jsonb_build_object('code', m.error_code, 'message', m.error_message))")})
      SELECT count(*)::int AS n FROM moved`,
    // Not a worker's failure: from pending, or from processing once nobody holds it (or when forced).
    failOther: `WITH moved AS (
        UPDATE ${s}.generations
        SET status = 'failed', price = CASE WHEN status = 'pending' AND $6::numeric IS NOT NULL THEN $6::numeric ELSE $3 END,
            failure_reason = $4, error_code = $7, error_message = $8, parked_until = NULL, finished_at = $2, updated_at = $2
        WHERE id = $1 AND (status = 'pending'
          OR (status = 'processing' AND (lease_expires_at IS NULL OR lease_expires_at <= $2 OR $5::boolean)))
        RETURNING id, owner_id, price, error_code, error_message),
      ev AS (${appendEvents(s, 'moved', 'failed', '$2', "jsonb_build_object('price', m.price, 'error', jsonb_build_object('code', m.error_code, 'message', m.error_message))")})
      SELECT count(*)::int AS n FROM moved`,
    setRemoteHandle: `UPDATE ${s}.generations SET remote_handle = $4::jsonb, updated_at = $3
      WHERE id = $1 AND ${holds} AND remote_handle IS NULL`,
    park: `UPDATE ${s}.generations SET lease_owner = NULL, lease_expires_at = NULL, parked_until = $4, updated_at = $3
      WHERE id = $1 AND ${holds}`,
    // Ties on created_at fall back to id: stable across instances, which insertion order would not be.
    listUnfinished: `SELECT * FROM ${s}.generations WHERE status IN ('pending', 'processing')
      ORDER BY created_at, id LIMIT $1`,
    // The page after a given generation, resumed from that row's (created_at, id).
    listUnfinishedAfter: `SELECT * FROM ${s}.generations WHERE status IN ('pending', 'processing')
      AND (created_at, id) > (SELECT created_at, id FROM ${s}.generations WHERE id = $2)
      ORDER BY created_at, id LIMIT $1`,
    // SKIP LOCKED lets several instances sweep at once without waiting on each other's batches. `= ANY(ARRAY(...))`
    // rather than `IN (...)`: with IN the planner may hash-join against a scan of the whole table. The events of the
    // deleted rows go in the same statement.
    deleteFinished: `WITH gone AS (
        DELETE FROM ${s}.generations WHERE id = ANY(ARRAY(
          SELECT id FROM ${s}.generations
          WHERE status IN ('completed', 'failed') AND finished_at < $1
          ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED))
        RETURNING id, result_key),
      ev AS (DELETE FROM ${s}.events WHERE generation_id = ANY(ARRAY(SELECT id FROM gone)))
      SELECT id, result_key FROM gone`,
    readEvents: `SELECT * FROM ${s}.events WHERE seq > $1 ORDER BY seq LIMIT $2`,
    eventsOf: `SELECT * FROM ${s}.events WHERE generation_id = $1 AND seq > $2 ORDER BY seq`,
    lastSeq: `SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS seq FROM ${s}.events_seq_seq`,
    countByStatus: `SELECT status, count(*)::int AS n FROM ${s}.generations GROUP BY status`,
  };
}

/** The owner's list query, for each combination of filters and cursor (exported for the EXPLAIN tests). */
export function listSql(s: string, q: { status: boolean; modelId: boolean; before: boolean }): string {
  const where = ['owner_id = $1'];
  let n = 2;
  if (q.status) where.push(`status = $${n++}`);
  if (q.modelId) where.push(`model_id = $${n++}`);
  if (q.before) {
    where.push(`(created_at, id) < ($${n}, $${n + 1})`);
    n += 2;
  }
  return `SELECT * FROM ${s}.generations WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT $${n}`;
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
  if (row.metadata !== null && row.metadata !== undefined) rec.metadata = row.metadata as Record<string, string>;
  if (row.error_code !== null && row.error_code !== undefined) {
    rec.error = { code: String(row.error_code) as FailureCode, message: String(row.error_message ?? '') };
  }
  const fraction = optNum(row.progress_fraction);
  if (fraction !== undefined) {
    const message = optStr(row.progress_message);
    rec.progress = message === undefined ? { fraction } : { fraction, message };
  }
  const startedAt = optNum(row.started_at);
  if (startedAt !== undefined) rec.startedAt = startedAt;
  if (row.webhook !== null && row.webhook !== undefined) rec.webhook = row.webhook as GenerationRecord['webhook'];
  if (row.remote_handle !== null && row.remote_handle !== undefined) rec.remoteHandle = row.remote_handle;
  const parkedUntil = optNum(row.parked_until);
  if (parkedUntil !== undefined) rec.parkedUntil = parkedUntil;
  return rec;
}

function toEvent(row: Record<string, unknown>): GenerationEvent {
  return {
    seq: num(row.seq),
    generationId: decodeKey(String(row.generation_id)),
    ownerId: decodeKey(String(row.owner_id)),
    type: row.type as GenerationEvent['type'],
    at: num(row.at),
    data: row.data as GenerationEvent['data'],
  };
}

/** A stable 64-bit advisory-lock key per owner (Postgres hashes the text), for the in-flight count. */
const OWNER_LOCK = `SELECT pg_advisory_xact_lock(hashtextextended($1, ${EVENTS_LOCK_KEY}))`;

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

  async insert(gen: NewGeneration, options: InsertOptions = {}): Promise<'inserted' | 'limit_reached'> {
    const params = [
      encodeKey(gen.id),
      encodeKey(gen.ownerId),
      encodeKey(gen.modelId),
      JSON.stringify(gen.settings ?? {}),
      gen.reserved,
      gen.createdAt,
      gen.metadata === undefined ? null : JSON.stringify(gen.metadata),
      options.maxUnfinishedPerOwner ?? null,
      gen.webhook === undefined ? null : JSON.stringify(gen.webhook),
    ];
    if (options.maxUnfinishedPerOwner === undefined) {
      const { rows } = await this.db.query<{ inserted: number }>(this.sql.insert, params);
      return rows[0]!.inserted === 1 ? 'inserted' : 'limit_reached';
    }
    // The owner's lock first, then the count in a statement of its own: under READ COMMITTED a statement sees what
    // committed before it started, so racing inserts of one owner are counted one after another, exactly.
    return this.db.transaction(async (tx) => {
      await tx.query(OWNER_LOCK, [encodeKey(gen.ownerId)]);
      const { rows } = await tx.query<{ inserted: number }>(this.sql.insert, params);
      return rows[0]!.inserted === 1 ? 'inserted' : 'limit_reached';
    });
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

  async progress(id: string, input: ProgressInput): Promise<boolean> {
    const { rows } = await this.db.query<{ n: number }>(this.sql.progress, [
      encodeKey(id),
      encodeKey(input.workerId),
      input.now,
      input.fraction,
      input.message === undefined ? null : storableText(input.message),
    ]);
    return rows[0]!.n === 1;
  }

  async setRemoteHandle(id: string, workerId: string, handle: unknown, now: number): Promise<boolean> {
    const res = await this.db.query(this.sql.setRemoteHandle, [encodeKey(id), encodeKey(workerId), now, JSON.stringify(handle ?? null)]);
    return res.rowCount === 1;
  }

  async park(id: string, workerId: string, until: number, now: number): Promise<boolean> {
    const res = await this.db.query(this.sql.park, [encodeKey(id), encodeKey(workerId), now, until]);
    return res.rowCount === 1;
  }

  async complete(id: string, input: CompleteInput): Promise<boolean> {
    const { rows } = await this.db.query<{ n: number }>(this.sql.complete, [
      encodeKey(id),
      encodeKey(input.workerId),
      input.now,
      input.price,
      storableText(input.resultText),
      input.resultKey === undefined ? null : encodeKey(input.resultKey),
    ]);
    return rows[0]!.n === 1;
  }

  async fail(id: string, input: FailInput): Promise<boolean> {
    const force = input.force === true;
    const reason = storableText(input.reason);
    const pending = input.pendingPrice ?? null;
    const code = input.error.code;
    const message = storableText(input.error.message);
    const { rows } =
      input.workerId !== undefined
        ? await this.db.query<{ n: number }>(this.sql.failByWorker, [encodeKey(id), encodeKey(input.workerId), input.now, input.price, reason, force, pending, code, message])
        : await this.db.query<{ n: number }>(this.sql.failOther, [encodeKey(id), input.now, input.price, reason, force, pending, code, message]);
    return rows[0]!.n === 1;
  }

  async listUnfinished(limit: number, after?: string): Promise<GenerationRecord[]> {
    const { rows } =
      after === undefined
        ? await this.db.query(this.sql.listUnfinished, [limit])
        : await this.db.query(this.sql.listUnfinishedAfter, [limit, encodeKey(after)]);
    return rows.map(toRecord);
  }

  async list(ownerId: string, query: ListQuery): Promise<GenerationRecord[]> {
    if (!(query.limit > 0)) return [];
    const params: unknown[] = [encodeKey(ownerId)];
    if (query.status !== undefined) params.push(query.status);
    if (query.modelId !== undefined) params.push(encodeKey(query.modelId));
    if (query.before !== undefined) params.push(query.before.createdAt, encodeKey(query.before.id));
    params.push(Math.floor(query.limit));
    const sql = listSql(this.db.s, { status: query.status !== undefined, modelId: query.modelId !== undefined, before: query.before !== undefined });
    const { rows } = await this.db.query(sql, params);
    return rows.map(toRecord);
  }

  async readEvents(after: number, limit: number): Promise<GenerationEvent[]> {
    if (!(limit > 0)) return [];
    const { rows } = await this.db.query(this.sql.readEvents, [after, Math.floor(limit)]);
    return rows.map(toEvent);
  }

  async eventsOf(generationId: string, after = 0): Promise<GenerationEvent[]> {
    const { rows } = await this.db.query(this.sql.eventsOf, [encodeKey(generationId), after]);
    return rows.map(toEvent);
  }

  async lastSeq(): Promise<number> {
    const { rows } = await this.db.query<{ seq: string | number }>(this.sql.lastSeq);
    return num(rows[0]?.seq ?? 0);
  }

  async deleteFinishedBefore(before: number, limit: number): Promise<{ deleted: number; resultKeys: string[]; ids: string[] }> {
    const { rows } = await this.db.query<{ id: string; result_key: string | null }>(this.sql.deleteFinished, [before, limit]);
    const resultKeys = rows.flatMap((r) => (r.result_key === null ? [] : [decodeKey(r.result_key)]));
    return { deleted: rows.length, resultKeys, ids: rows.map((r) => decodeKey(r.id)) };
  }

  async countByStatus(): Promise<Record<GenerationStatus, number>> {
    const counts: Record<GenerationStatus, number> = { pending: 0, processing: 0, completed: 0, failed: 0 };
    const { rows } = await this.db.query<{ status: GenerationStatus; n: number }>(this.sql.countByStatus);
    for (const r of rows) counts[r.status] = r.n;
    return counts;
  }
}
