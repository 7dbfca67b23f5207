import { retryMethodsWhileBusy } from './busy.js';
import {
  GENERATION_STATUSES,
  type BatchCounts,
  type BatchRecord,
  type FailureInfo,
  type FeedPage,
  type GenerationChange,
  type GenerationEvent,
  type GenerationEventType,
  type GenerationPatch,
  type GenerationRecord,
  type GenerationStatus,
  type GenerationStore,
  type InsertOptions,
  type ListQuery,
  type NewBatch,
  type NewEvent,
  type NewGeneration,
} from '@genservice/core/ports';
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
  traceparent: string | null;
  priority: string | null;
  deadline_at: number | null;
  progress_fraction: number | null;
  progress_message: string | null;
  remote_handle: string | null;
  parked_until: number | null;
  claims: number;
  lease_owner: string | null;
  lease_expires_at: number | null;
  last_seq: number;
  created_at: number;
  updated_at: number;
  started_at: number | null;
  finished_at: number | null;
  expires_after_seconds: number | null;
  life_ends_at: number | null;
  batch_id: string | null;
  served_model_id: string | null;
}

interface BatchRow {
  id: string;
  owner_id: string;
  generation_ids: string;
  webhook_url: string | null;
  created_at: number;
  completed_at: number | null;
}

interface EventRow {
  position: number;
  seq: number;
  generation_id: string;
  owner_id: string;
  type: GenerationEventType;
  at: number;
  data: string;
}

const COLUMNS = `id, owner_id, model_id, settings, status, reserved, price, result_text, result_key, failure_reason,
  error_code, error_message, metadata, webhook, progress_fraction, progress_message, remote_handle, parked_until,
  claims, lease_owner, lease_expires_at, last_seq, created_at, updated_at, started_at, finished_at,
  expires_after_seconds, life_ends_at, batch_id, served_model_id, traceparent, priority, deadline_at`;

const EVENT_COLUMNS = 'position, seq, generation_id, owner_id, type, at, data';

type SqlValue = string | number | null;

/**
 * Each patch field, the columns it is stored in, and how a value becomes those columns (`null` clears them all).
 * Only these names ever reach the SQL text: a patch key outside this table is refused, never interpolated.
 */
const PATCH_COLUMNS: { [K in keyof GenerationPatch]-?: [columns: string[], encode: (v: NonNullable<GenerationPatch[K]>) => SqlValue[]] } = {
  status: [['status'], (v) => [v]],
  price: [['price'], (v) => [v]],
  resultText: [['result_text'], (v) => [v]],
  resultKey: [['result_key'], (v) => [v]],
  failureReason: [['failure_reason'], (v) => [v]],
  error: [['error_code', 'error_message'], (v) => [v.code, v.message]],
  progress: [['progress_fraction', 'progress_message'], (v) => [v.fraction, v.message ?? null]],
  startedAt: [['started_at'], (v) => [v]],
  remoteHandle: [['remote_handle'], (v) => [JSON.stringify(v)]],
  parkedUntil: [['parked_until'], (v) => [v]],
  claims: [['claims'], (v) => [v]],
  leaseOwner: [['lease_owner'], (v) => [v]],
  leaseExpiresAt: [['lease_expires_at'], (v) => [v]],
  finishedAt: [['finished_at'], (v) => [v]],
  lifeEndsAt: [['life_ends_at'], (v) => [v]],
  servedModelId: [['served_model_id'], (v) => [v]],
};

/** Which optional parts a list query has; each combination is its own statement, so each can use its index. */
export interface ListShape {
  status: boolean;
  modelId: boolean;
  before: boolean;
  batchId?: boolean;
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
  if (shape.batchId) where.push('batch_id = @batchId');
  if (shape.before) where.push('(created_at, id) < (@beforeCreatedAt, @beforeId)');
  return `SELECT ${COLUMNS} FROM generations
     WHERE ${where.join(' AND ')}
     ORDER BY created_at DESC, id DESC
     LIMIT @limit`;
}

/**
 * The compare-and-set of one change: its SET from the patch's keys, its WHERE from the expectation's parts. Values
 * are bound parameters (`@s0..` statuses, `@holder`, `@claims`, `@now`, `@p_<column>`); only the shape is text.
 */
export function updateSql(change: GenerationChange, by: 'id' | 'batch_id' = 'id'): string {
  const set = ['updated_at = @now'];
  for (const key of Object.keys(change.set) as Array<keyof GenerationPatch>) {
    if (change.set[key] === undefined) continue;
    if (!Object.hasOwn(PATCH_COLUMNS, key)) throw new TypeError(`Unknown generation field in a change: ${String(key)}`);
    for (const column of PATCH_COLUMNS[key][0]) set.push(`${column} = @p_${column}`);
  }
  if (change.event) set.push('last_seq = last_seq + 1');
  const { status, lease, parked, claims, noRemoteHandle } = change.expect;
  const where = [`${by} = @id`, `status IN (${status.length === 0 ? 'NULL' : status.map((_, i) => `@s${i}`).join(', ')})`];
  if (lease === 'free') where.push('(lease_expires_at IS NULL OR lease_expires_at <= @now)');
  else if (lease !== undefined) where.push('lease_owner = @holder AND lease_expires_at > @now');
  if (parked !== undefined) where.push(parked ? 'parked_until IS NOT NULL' : 'parked_until IS NULL');
  if (claims !== undefined) where.push('claims = @claims');
  if (noRemoteHandle) where.push('remote_handle IS NULL');
  return `UPDATE generations SET ${set.join(', ')} WHERE ${where.join(' AND ')} RETURNING ${COLUMNS}`;
}

function updateParams(id: string, change: GenerationChange): Record<string, SqlValue> {
  const params: Record<string, SqlValue> = { id, now: change.now };
  change.expect.status.forEach((s, i) => (params[`s${i}`] = s));
  const { lease, claims } = change.expect;
  if (lease !== undefined && lease !== 'free') params.holder = lease.heldBy;
  if (claims !== undefined) params.claims = claims;
  for (const key of Object.keys(change.set) as Array<keyof GenerationPatch>) {
    const value = change.set[key];
    if (value === undefined) continue;
    const [columns, encode] = PATCH_COLUMNS[key] as [string[], (v: unknown) => SqlValue[]];
    const values = value === null ? columns.map(() => null) : encode(value);
    columns.forEach((column, i) => (params[`p_${column}`] = values[i]!));
  }
  return params;
}

const EXPECTATIONS = new Set(['status', 'lease', 'parked', 'claims', 'noRemoteHandle']);

/**
 * What the statement text of a change depends on (never a value): the key of its cached prepared statement. An
 * expectation this store does not know is refused: skipping it would apply a change whose condition was not checked.
 */
function shapeOf(change: GenerationChange): string {
  for (const key of Object.keys(change.expect)) {
    if (!EXPECTATIONS.has(key)) throw new TypeError(`Unknown expectation in a change: ${key}`);
  }
  const { status, lease, parked, claims, noRemoteHandle } = change.expect;
  const keys = Object.keys(change.set).filter((k) => change.set[k as keyof GenerationPatch] !== undefined);
  return [status.length, lease === undefined ? '' : lease === 'free' ? 'f' : 'h', parked ?? '', claims === undefined ? '' : 'c', noRemoteHandle ? 'r' : '', change.event ? 'e' : '', keys.sort().join(',')].join('|');
}

/** Every fixed statement the store runs. Exported from this module (not the package) so tests can EXPLAIN them. */
export const GENERATION_SQL = {
  insert: `INSERT INTO generations (id, owner_id, model_id, settings, status, reserved, claims, metadata, webhook,
                                    expires_after_seconds, last_seq, created_at, updated_at, batch_id, traceparent,
                                    priority, deadline_at)
    VALUES (@id, @ownerId, @modelId, @settings, @status, @reserved, 0, @metadata, @webhook, @expiresAfterSeconds, 1,
            @createdAt, @createdAt, @batchId, @traceparent, @priority, @deadlineAt)`,
  insertBatch: `INSERT INTO batches (id, owner_id, generation_ids, webhook_url, created_at) VALUES (?, ?, ?, ?, ?)`,
  getBatch: `SELECT id, owner_id, generation_ids, webhook_url, created_at, completed_at FROM batches WHERE id = ? AND owner_id = ?`,
  // One read over the batch's index: counts by status and the charge of the finished ones.
  batchCounts: `SELECT status, count(*) AS n, total(CASE WHEN finished_at IS NOT NULL THEN price END) AS price
     FROM generations WHERE batch_id = ? GROUP BY status`,
  completeBatch: `UPDATE batches SET completed_at = ? WHERE id = ? AND completed_at IS NULL`,
  // The WHERE repeats the partial index's condition word for word, so SQLite walks only open batches, in order.
  listOpenBatches: `SELECT id, owner_id, generation_ids, webhook_url, created_at, completed_at FROM batches
     WHERE completed_at IS NULL AND created_at < @before
     ORDER BY created_at, id
     LIMIT @limit`,
  // The page after a given batch (completed since or not): the same order, resumed from its (created_at, id).
  listOpenBatchesAfter: `SELECT id, owner_id, generation_ids, webhook_url, created_at, completed_at FROM batches
     WHERE completed_at IS NULL AND created_at < @before
       AND (created_at, id) > (SELECT created_at, id FROM batches WHERE id = @after)
     ORDER BY created_at, id
     LIMIT @limit`,
  get: `SELECT ${COLUMNS} FROM generations WHERE id = ? AND owner_id = ?`,
  getById: `SELECT ${COLUMNS} FROM generations WHERE id = ?`,
  // Counts at most the cap (the second parameter): the cost stays bounded by the cap, however many rows the owner has.
  // INDEXED BY: only the partial index reads no finished row at all; the planner, costing it like the owner's list
  // index, may otherwise pick that one (it did once migration 7 widened the row) and walk every finished row too.
  countUnfinished: `SELECT count(*) AS n FROM
     (SELECT 1 FROM generations INDEXED BY generations_owner_unfinished WHERE owner_id = ? AND finished_at IS NULL LIMIT ?)`,
  // One statement for every lease an instance holds; the ids come as one JSON array, each seeking the primary key.
  renew: `UPDATE generations SET lease_expires_at = @until, updated_at = @now
     WHERE id IN (SELECT value FROM json_each(@ids)) AND finished_at IS NULL
       AND lease_owner = @holder AND lease_expires_at > @now
    RETURNING id`,
  // The WHERE repeats the partial index's condition word for word: that is what lets SQLite use the index.
  listUnfinished: `SELECT ${COLUMNS} FROM generations
     WHERE finished_at IS NULL
     ORDER BY created_at, rowid
     LIMIT ?`,
  // The page after a given generation: the same order, resumed from that row's (created_at, rowid).
  listUnfinishedAfter: `SELECT ${COLUMNS} FROM generations
     WHERE finished_at IS NULL
       AND (created_at, rowid) > (SELECT created_at, rowid FROM generations WHERE id = @after)
     ORDER BY created_at, rowid
     LIMIT @limit`,
  list: listSql({ status: false, modelId: false, before: false }),
  listFinished: `SELECT ${COLUMNS} FROM generations
     WHERE finished_at IS NOT NULL AND finished_at < ?
     ORDER BY finished_at, rowid
     LIMIT ?`,
  // The WHERE repeats the partial index's condition, as for listUnfinished.
  listLifeEnded: `SELECT ${COLUMNS} FROM generations
     WHERE life_ends_at IS NOT NULL AND life_ends_at < ?
     ORDER BY life_ends_at, rowid
     LIMIT ?`,
  removeOne: `DELETE FROM generations WHERE id = ? AND status IN (SELECT value FROM json_each(?)) RETURNING id`,
  // The ids come as one JSON array: one statement whatever the batch size, each id seeking events_of_generation.
  deleteEvents: `DELETE FROM events WHERE generation_id IN (SELECT value FROM json_each(?))`,
  appendEvent: `INSERT INTO events (generation_id, seq, owner_id, type, at, data) VALUES (?, ?, ?, ?, ?, ?)`,
  readFeed: `SELECT ${EVENT_COLUMNS} FROM events WHERE position > ? ORDER BY position LIMIT ?`,
  eventsOf: `SELECT ${EVENT_COLUMNS} FROM events WHERE generation_id = ? AND seq > ? ORDER BY seq`,
  // sqlite_sequence keeps the largest position ever handed out, so events deleted by retention still count.
  feedHead: `SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0) AS position`,
  count: 'SELECT status, count(*) AS n FROM generations GROUP BY status',
} as const;

type Tx<A extends unknown[], R> = (...args: A) => R;

/**
 * GenerationStore and its event log on SQLite. It holds no rule of the generation's life: the Lifecycle hands it
 * one compare-and-set at a time, and it applies each as one `UPDATE ... WHERE <expectation> RETURNING` plus, when
 * the change carries one, the append of its event, in one IMMEDIATE transaction.
 *
 * SQLite has one writer at a time, across processes too, so of racing changes whose expectations exclude each
 * other exactly one finds its row, and only that one appends. The event's feed position (the events table's
 * AUTOINCREMENT rowid) is taken inside the writing transaction, so positions commit in order: a reader walking the
 * feed forward from a cursor never skips an event that was still being written. The generation's own number
 * (`seq`) is its row's `last_seq`, bumped by the same UPDATE.
 */
export class SqliteGenerationStore implements GenerationStore {
  /** Every fixed statement, prepared once. */
  private readonly sql: { [K in keyof typeof GENERATION_SQL]: Statement };
  /** Prepared on first use, one per shape (list: status / model / cursor; update: the change's shape). */
  private readonly statements = new Map<string, Statement>();

  private readonly insertTx: Tx<[NewGeneration, NewEvent, number | undefined], 'inserted' | 'limit_reached'>;
  private readonly updateTx: Tx<[Statement, Record<string, SqlValue>, NewEvent, number], GenerationRow | undefined>;
  private readonly updateBatchTx: Tx<[Statement, Record<string, SqlValue>, NewEvent | undefined, number], GenerationRow[]>;
  private readonly removeTx: Tx<[string, string], boolean>;
  private readonly insertBatchTx: Tx<[NewBatch, readonly NewGeneration[], readonly NewEvent[]], void>;

  constructor(private readonly db: SqliteDatabase) {
    retryMethodsWhileBusy(this, db);
    const sql = Object.fromEntries(Object.entries(GENERATION_SQL).map(([name, text]) => [name, db.prepare(text)])) as SqliteGenerationStore['sql'];
    this.sql = sql;
    const append = (row: { id: string; owner_id: string }, seq: number, event: NewEvent, at: number): void => {
      sql.appendEvent.run(row.id, seq, row.owner_id, event.type, at, JSON.stringify(event.data));
    };

    // IMMEDIATE: each takes the write lock before its first statement, so a transaction never has to upgrade a
    // read snapshot (which, in WAL mode, fails at once with SQLITE_BUSY_SNAPSHOT instead of waiting). For the
    // insert, the lock is held from the count to the insert, across processes, so the cap is exact.
    const insertRow = (gen: NewGeneration): void => {
      sql.insert.run({
        id: gen.id,
        ownerId: gen.ownerId,
        modelId: gen.modelId,
        settings: JSON.stringify(gen.settings ?? {}),
        status: gen.status,
        reserved: gen.reserved,
        metadata: gen.metadata === undefined ? null : JSON.stringify(gen.metadata),
        webhook: gen.webhook === undefined ? null : JSON.stringify({ url: gen.webhook.url, events: gen.webhook.events }),
        expiresAfterSeconds: gen.expiresAfterSeconds ?? null,
        createdAt: gen.createdAt,
        batchId: gen.batchId ?? null,
        traceparent: gen.traceparent ?? null,
        priority: gen.priority ?? null,
        deadlineAt: gen.deadlineAt ?? null,
      });
    };
    this.insertTx = db.transaction((gen: NewGeneration, event: NewEvent, max: number | undefined) => {
      if (max !== undefined && (sql.countUnfinished.get(gen.ownerId, max) as { n: number }).n >= max) return 'limit_reached' as const;
      insertRow(gen);
      append({ id: gen.id, owner_id: gen.ownerId }, 1, event, gen.createdAt);
      return 'inserted' as const;
    }).immediate;

    // One transaction for the whole batch: SQLite's prepared inserts in one transaction are the fast path (one
    // journal write at commit), and a failing row rolls every row back.
    this.insertBatchTx = db.transaction((batch: NewBatch, gens: readonly NewGeneration[], events: readonly NewEvent[]) => {
      if (events.length !== gens.length) throw new Error('insertBatch: one first event per generation');
      sql.insertBatch.run(batch.id, batch.ownerId, JSON.stringify(batch.generationIds), batch.webhook?.url ?? null, batch.createdAt);
      gens.forEach((gen, i) => {
        insertRow(gen);
        append({ id: gen.id, owner_id: gen.ownerId }, 1, events[i]!, gen.createdAt);
      });
    }).immediate;

    // Every member in one statement; their events in the same transaction.
    this.updateBatchTx = db.transaction((stmt: Statement, params: Record<string, SqlValue>, event: NewEvent | undefined, now: number) => {
      const rows = stmt.all(params) as GenerationRow[];
      if (event) for (const row of rows) append(row, row.last_seq, event, now);
      return rows;
    }).immediate;

    this.updateTx = db.transaction((stmt: Statement, params: Record<string, SqlValue>, event: NewEvent, now: number) => {
      const row = stmt.get(params) as GenerationRow | undefined;
      if (row) append(row, row.last_seq, event, now);
      return row;
    }).immediate;

    this.removeTx = db.transaction((id: string, statuses: string) => {
      if (sql.removeOne.get(id, statuses) === undefined) return false;
      sql.deleteEvents.run(JSON.stringify([id]));
      return true;
    }).immediate;
  }

  async insert(gen: NewGeneration, event: NewEvent, options: InsertOptions = {}): Promise<'inserted' | 'limit_reached'> {
    try {
      return this.insertTx(gen, event, options.maxUnfinishedPerOwner);
    } catch (error) {
      if (isConstraint(error, 'SQLITE_CONSTRAINT_PRIMARYKEY')) {
        throw new Error(`Generation ${gen.id} already exists`, { cause: error });
      }
      throw error;
    }
  }

  async insertBatch(batch: NewBatch, generations: readonly NewGeneration[], events: readonly NewEvent[]): Promise<void> {
    try {
      this.insertBatchTx(batch, generations, events);
    } catch (error) {
      if (isConstraint(error, 'SQLITE_CONSTRAINT_PRIMARYKEY')) throw new Error(`Batch ${batch.id} or one of its generations already exists`, { cause: error });
      throw error;
    }
  }

  async getBatch(id: string, ownerId: string): Promise<BatchRecord | null> {
    const row = this.sql.getBatch.get(id, ownerId) as BatchRow | undefined;
    return row ? toBatch(row) : null;
  }

  async listOpenBatches(createdBefore: number, limit: number, after?: string): Promise<BatchRecord[]> {
    // SQLite reads a negative LIMIT as "no limit"; the port means "none".
    if (!(limit > 0)) return [];
    const rows =
      after === undefined
        ? this.sql.listOpenBatches.all({ before: createdBefore, limit })
        : this.sql.listOpenBatchesAfter.all({ before: createdBefore, limit, after });
    return (rows as BatchRow[]).map(toBatch);
  }

  async batchCounts(batchId: string): Promise<BatchCounts> {
    const counts = Object.fromEntries(GENERATION_STATUSES.map((s) => [s, 0])) as Record<GenerationStatus, number>;
    let price = 0;
    for (const row of this.sql.batchCounts.all(batchId) as Array<{ status: GenerationStatus; n: number; price: number }>) {
      counts[row.status] = row.n;
      price += row.price;
    }
    return { counts, price };
  }

  async completeBatch(id: string, now: number): Promise<boolean> {
    return this.sql.completeBatch.run(now, id).changes === 1;
  }

  /** Answers at once (better-sqlite3 reads synchronously; the port allows it), typed as the port is. */
  get(id: string, ownerId: string): GenerationRecord | null | PromiseLike<GenerationRecord | null> {
    return toRecord(this.sql.get.get(id, ownerId) as GenerationRow | undefined);
  }

  async getById(id: string): Promise<GenerationRecord | null> {
    return toRecord(this.sql.getById.get(id) as GenerationRow | undefined);
  }

  async update(id: string, change: GenerationChange): Promise<GenerationRecord | null> {
    const shape = shapeOf(change);
    let stmt = this.statements.get(shape);
    if (!stmt) this.statements.set(shape, (stmt = this.db.prepare(updateSql(change))));
    const params = updateParams(id, change);
    // Without an event the UPDATE alone is the whole change, and one statement is atomic by itself.
    const row = change.event ? this.updateTx(stmt, params, change.event, change.now) : (stmt.get(params) as GenerationRow | undefined);
    return toRecord(row);
  }

  async updateBatchMembers(batchId: string, change: GenerationChange): Promise<GenerationRecord[]> {
    const shape = `batch|${shapeOf(change)}`;
    let stmt = this.statements.get(shape);
    if (!stmt) this.statements.set(shape, (stmt = this.db.prepare(updateSql(change, 'batch_id'))));
    const rows = this.updateBatchTx(stmt, updateParams(batchId, change), change.event, change.now);
    return rows.map((row) => toRecord(row)!);
  }

  /** Appends no event: a renewal is an instance keeping its claims, not a change a client could see. */
  async renewLeases(ids: readonly string[], holder: string, until: number, now: number): Promise<string[]> {
    if (ids.length === 0) return [];
    const rows = this.sql.renew.all({ ids: JSON.stringify(ids), holder, until, now }) as Array<{ id: string }>;
    return rows.map((r) => r.id);
  }

  async listUnfinished(limit: number, after?: string): Promise<GenerationRecord[]> {
    // SQLite reads a negative LIMIT as "no limit"; the port means "none".
    if (!(limit > 0)) return [];
    const rows =
      after === undefined
        ? this.sql.listUnfinished.all(Math.floor(limit))
        : this.sql.listUnfinishedAfter.all({ after, limit: Math.floor(limit) });
    return (rows as GenerationRow[]).map((row) => toRecord(row)!);
  }

  async list(ownerId: string, query: ListQuery): Promise<GenerationRecord[]> {
    if (!(query.limit > 0)) return [];
    const shape: ListShape = {
      status: query.status !== undefined,
      modelId: query.modelId !== undefined,
      before: query.before !== undefined,
      batchId: query.batchId !== undefined,
    };
    const params: Record<string, unknown> = { ownerId, limit: Math.floor(query.limit) };
    if (query.status !== undefined) params.status = query.status;
    if (query.modelId !== undefined) params.modelId = query.modelId;
    if (query.batchId !== undefined) params.batchId = query.batchId;
    if (query.before !== undefined) {
      params.beforeCreatedAt = query.before.createdAt;
      params.beforeId = query.before.id;
    }
    const key = `list|${+shape.status}${+shape.modelId}${+shape.before}${+(shape.batchId ?? false)}`;
    let stmt = this.statements.get(key);
    if (!stmt) this.statements.set(key, (stmt = this.db.prepare(listSql(shape))));
    return (stmt.all(params) as GenerationRow[]).map((row) => toRecord(row)!);
  }

  async eventsOf(generationId: string, after = 0): Promise<GenerationEvent[]> {
    return (this.sql.eventsOf.all(generationId, after) as EventRow[]).map(toEvent);
  }

  /** The cursor is the decimal feed position of the last event read (`''` or `'0'`: from the start). */
  async readFeed(after: string, limit: number): Promise<FeedPage> {
    const from = after === '' ? 0 : /^\d{1,15}$/.test(after) ? Number(after) : Number.NaN;
    if (!(limit > 0) || Number.isNaN(from)) return { events: [], cursor: after };
    const rows = this.sql.readFeed.all(from, Math.floor(limit)) as EventRow[];
    return { events: rows.map(toEvent), cursor: rows.length > 0 ? String(rows[rows.length - 1]!.position) : after };
  }

  async feedHead(): Promise<string> {
    return String((this.sql.feedHead.get() as { position: number }).position);
  }

  async listFinishedBefore(before: number, limit: number): Promise<GenerationRecord[]> {
    if (!(limit > 0)) return [];
    return (this.sql.listFinished.all(before, Math.floor(limit)) as GenerationRow[]).map((r) => toRecord(r)!);
  }

  async listLifeEndedBefore(before: number, limit: number): Promise<GenerationRecord[]> {
    if (!(limit > 0)) return [];
    return (this.sql.listLifeEnded.all(before, Math.floor(limit)) as GenerationRow[]).map((r) => toRecord(r)!);
  }

  async remove(id: string, expect: { status: readonly GenerationStatus[] }): Promise<boolean> {
    return this.removeTx(id, JSON.stringify(expect.status));
  }

  /** A full scan of the table: meant for tests and operators, not for a request path. */
  async countByStatus(): Promise<Record<GenerationStatus, number>> {
    const counts = Object.fromEntries(GENERATION_STATUSES.map((s) => [s, 0])) as Record<GenerationStatus, number>;
    for (const row of this.sql.count.all() as Array<{ status: GenerationStatus; n: number }>) counts[row.status] = row.n;
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
    claims: row.claims,
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
  if (row.traceparent !== null) record.traceparent = row.traceparent;
  if (row.priority !== null) record.priority = row.priority as GenerationRecord['priority'];
  if (row.deadline_at !== null) record.deadlineAt = row.deadline_at;
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
  if (row.expires_after_seconds !== null) record.expiresAfterSeconds = row.expires_after_seconds;
  if (row.life_ends_at !== null) record.lifeEndsAt = row.life_ends_at;
  if (row.batch_id !== null) record.batchId = row.batch_id;
  if (row.served_model_id !== null) record.servedModelId = row.served_model_id;
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

function toBatch(row: BatchRow): BatchRecord {
  const batch: BatchRecord = { id: row.id, ownerId: row.owner_id, generationIds: JSON.parse(row.generation_ids) as string[], createdAt: row.created_at };
  if (row.webhook_url !== null) batch.webhook = { url: row.webhook_url };
  if (row.completed_at !== null) batch.completedAt = row.completed_at;
  return batch;
}
