import { retryMethodsWhileBusy } from './busy.js';
import {
  GENERATION_STATUSES,
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
  claims, lease_owner, lease_expires_at, last_seq, created_at, updated_at, started_at, finished_at, traceparent`;

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
};

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

/**
 * The compare-and-set of one change: its SET from the patch's keys, its WHERE from the expectation's parts. Values
 * are bound parameters (`@s0..` statuses, `@holder`, `@claims`, `@now`, `@p_<column>`); only the shape is text.
 */
export function updateSql(change: GenerationChange): string {
  const set = ['updated_at = @now'];
  for (const key of Object.keys(change.set) as Array<keyof GenerationPatch>) {
    if (change.set[key] === undefined) continue;
    if (!Object.hasOwn(PATCH_COLUMNS, key)) throw new TypeError(`Unknown generation field in a change: ${String(key)}`);
    for (const column of PATCH_COLUMNS[key][0]) set.push(`${column} = @p_${column}`);
  }
  if (change.event) set.push('last_seq = last_seq + 1');
  const { status, lease, parked, claims, noRemoteHandle } = change.expect;
  const where = ['id = @id', `status IN (${status.length === 0 ? 'NULL' : status.map((_, i) => `@s${i}`).join(', ')})`];
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
                                    last_seq, created_at, updated_at, traceparent)
    VALUES (@id, @ownerId, @modelId, @settings, @status, @reserved, 0, @metadata, @webhook, 1, @createdAt, @createdAt, @traceparent)`,
  get: `SELECT ${COLUMNS} FROM generations WHERE id = ? AND owner_id = ?`,
  getById: `SELECT ${COLUMNS} FROM generations WHERE id = ?`,
  // Counts at most the cap (the second parameter): the cost stays bounded by the cap, however many rows the owner has.
  countUnfinished: `SELECT count(*) AS n FROM
     (SELECT 1 FROM generations WHERE owner_id = ? AND finished_at IS NULL LIMIT ?)`,
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
  private readonly removeTx: Tx<[string, string], boolean>;

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
    this.insertTx = db.transaction((gen: NewGeneration, event: NewEvent, max: number | undefined) => {
      if (max !== undefined && (sql.countUnfinished.get(gen.ownerId, max) as { n: number }).n >= max) return 'limit_reached' as const;
      sql.insert.run({
        id: gen.id,
        ownerId: gen.ownerId,
        modelId: gen.modelId,
        settings: JSON.stringify(gen.settings ?? {}),
        status: gen.status,
        reserved: gen.reserved,
        metadata: gen.metadata === undefined ? null : JSON.stringify(gen.metadata),
        webhook: gen.webhook === undefined ? null : JSON.stringify({ url: gen.webhook.url, events: gen.webhook.events }),
        createdAt: gen.createdAt,
        traceparent: gen.traceparent ?? null,
      });
      append({ id: gen.id, owner_id: gen.ownerId }, 1, event, gen.createdAt);
      return 'inserted' as const;
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

  async get(id: string, ownerId: string): Promise<GenerationRecord | null> {
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
    };
    const params: Record<string, unknown> = { ownerId, limit: Math.floor(query.limit) };
    if (query.status !== undefined) params.status = query.status;
    if (query.modelId !== undefined) params.modelId = query.modelId;
    if (query.before !== undefined) {
      params.beforeCreatedAt = query.before.createdAt;
      params.beforeId = query.before.id;
    }
    const key = `list|${+shape.status}${+shape.modelId}${+shape.before}`;
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
