import {
  GENERATION_STATUSES,
  type BatchCounts,
  type BatchRecord,
  type Expectation,
  type FailureCode,
  type FeedPage,
  type GenerationChange,
  type GenerationEvent,
  type GenerationPatch,
  type GenerationRecord,
  type GenerationStatus,
  type GenerationStore,
  type InsertOptions,
  type InsertReserve,
  type ReserveResult,
  type ListQuery,
  type NewBatch,
  type NewEvent,
  type NewGeneration,
} from '@genservice/core/ports';
import type { Pool } from 'pg';
import { usageDayIndex } from '@genservice/core/ports';
import { PgDatabase, decodeKey, encodeKey, num, optNum, optStr, storableText, type PgStatementOptions } from './db.js';
import { reserveSteps, settleSteps, type PostgresLedger } from './ledger.js';

/**
 * The oldest transaction id, in the statement's snapshot, that is still running and may belong to this database (or
 * the next id to be handed out). Ids of the snapshot's running transactions that `pg_stat_activity` shows in another
 * database are left out: a transaction writes in one database only, so a long one elsewhere on the server does not
 * hold this feed back. An id not shown there (ended since, or hidden from this role) counts, which only delays.
 */
const RUNNING = `SELECT coalesce(min(x), pg_snapshot_xmax(pg_current_snapshot()))
      FROM pg_snapshot_xip(pg_current_snapshot()) AS x
      WHERE xid(x) NOT IN (SELECT backend_xid FROM pg_stat_activity
        WHERE backend_xid IS NOT NULL AND datname IS DISTINCT FROM current_database())`;

/**
 * The fixed statements, given the quoted schema. Exported so the index tests EXPLAIN exactly what the store runs
 * (`update` is built per shape by `updateSql`).
 *
 * "Unfinished" is `finished_at IS NULL`: the store knows no status names. No statement here takes a lock that every
 * generation shares: a change locks its generation's row, an insert with a cap its owner's advisory lock.
 */
export function generationSql(s: string) {
  // Not `AS tx`: an ORDER BY tx would then sort by the text, and '10' < '9'.
  const feedRow = `generation_id, seq, owner_id, type, at, data, tx::text AS tx_text, pos`;
  return {
    // $8 is the in-flight cap (null: none); the caller holds the owner's advisory lock, so the count is exact. It
    // counts at most $8 rows, so its cost is bounded by the cap, not by how many rows the owner has.
    insert: `WITH ins AS (
        INSERT INTO ${s}.generations
          (id, owner_id, model_id, settings, status, reserved, claims, created_at, updated_at, metadata, webhook, last_seq, last_tx,
           expires_after_seconds, traceparent, priority, deadline_at)
        SELECT $1, $2, $3, $4::json, $10, $5, 0, $6, $6, $7::jsonb, $9::jsonb, 1, pg_current_xact_id(), $13::int, $14, $15, $16::bigint
        WHERE $8::int IS NULL OR (SELECT count(*) FROM (SELECT 1 FROM ${s}.generations
          WHERE owner_id = $2 AND finished_at IS NULL LIMIT $8::int) capped) < $8::int
        RETURNING id, owner_id),
      ev AS (INSERT INTO ${s}.events (generation_id, seq, owner_id, type, at, data)
        SELECT id, 1, owner_id, $11, $6, $12::jsonb FROM ins)
      SELECT count(*)::int AS inserted FROM ins`,
    get: `SELECT * FROM ${s}.generations WHERE id = $1 AND owner_id = $2`,
    getById: `SELECT * FROM ${s}.generations WHERE id = $1`,
    renewLeases: `UPDATE ${s}.generations SET lease_expires_at = $3, updated_at = $4
      WHERE id = ANY($1::text[]) AND finished_at IS NULL AND lease_owner = $2 AND lease_expires_at > $4 RETURNING id`,
    // Ties on created_at fall back to id: stable across instances, which insertion order would not be.
    listUnfinished: `SELECT * FROM ${s}.generations WHERE finished_at IS NULL ORDER BY created_at, id LIMIT $1`,
    // The page after a given generation, resumed from that row's (created_at, id); a vanished anchor gives none.
    listUnfinishedAfter: `SELECT * FROM ${s}.generations WHERE finished_at IS NULL
      AND (created_at, id) > (SELECT created_at, id FROM ${s}.generations WHERE id = $2)
      ORDER BY created_at, id LIMIT $1`,
    // Ties on finished_at fall back to id, so a page is the same whichever instance reads it.
    listFinished: `SELECT * FROM ${s}.generations WHERE finished_at < $1 ORDER BY finished_at, id LIMIT $2`,
    // Only rows with a life of their own, by the partial index; ties fall back to id as above.
    listLifeEnded: `SELECT * FROM ${s}.generations WHERE life_ends_at IS NOT NULL AND life_ends_at < $1
      ORDER BY life_ends_at, id LIMIT $2`,
    // One statement: the row and its events go together or not at all; the row lock orders it against any change.
    remove: `WITH gone AS (
        DELETE FROM ${s}.generations WHERE id = $1 AND status = ANY($2::text[]) RETURNING id),
      ev AS (DELETE FROM ${s}.events WHERE generation_id = ANY(ARRAY(SELECT id FROM gone)))
      SELECT count(*)::int AS removed FROM gone`,
    eventsOf: `SELECT ${feedRow} FROM ${s}.events WHERE generation_id = $1 AND seq > $2 ORDER BY seq`,
    // Only below the oldest transaction still running that could have written here: everything there has committed
    // or never will, so a reader that walks (tx, pos) forward never passes an event that commits later. One
    // generation's events are in seq order in (tx, pos) too (see updateSql). `tx >= $1` repeats the row comparison's
    // lower bound in a form the planner can estimate from the histogram.
    readFeed: `SELECT ${feedRow} FROM ${s}.events
      WHERE (tx, pos) > ($1::xid8, $2::bigint) AND tx >= $1::xid8 AND tx < (${RUNNING})
      ORDER BY tx, pos LIMIT $3`,
    // Just below that transaction: everything before it is final, everything after it is not yet read.
    feedHead: `SELECT ((${RUNNING})::text::numeric - 1)::text AS tx`,
    countByStatus: `SELECT status, count(*)::int AS n FROM ${s}.generations GROUP BY status`,
    // The batch, its generations and their first events in one statement: all rows or none, one round trip.
    // The ledger's reserve (ledger.ts reserveSteps: the debit and in-flight count on the account row, the reserve row)
    // and the insert with its event, in one statement (issue 36); $8 is the in-flight cap, $17 the key. An owner in an
    // organisation gets no debit, so nothing is written (the caller takes the full reserve).
    insertReserved: `WITH ${reserveSteps(s, { id: '$1', user: '$2', amount: '$5', now: '$6', model: '$3', cap: '$8', key: '$17' })},
      ins AS (
        INSERT INTO ${s}.generations
          (id, owner_id, model_id, settings, status, reserved, claims, created_at, updated_at, metadata, webhook, last_seq, last_tx,
           expires_after_seconds, traceparent, priority, deadline_at)
        SELECT $1, $2, $3, $4::json, $10, $5, 0, $6, $6, $7::jsonb, $9::jsonb, 1, pg_current_xact_id(), $13::int, $14, $15, $16::bigint FROM r
        RETURNING id, owner_id),
      ev AS (INSERT INTO ${s}.events (generation_id, seq, owner_id, type, at, data)
        SELECT id, 1, owner_id, $11, $6, $12::jsonb FROM ins)
      SELECT count(*)::int AS inserted FROM ins`,
    insertBatch: `WITH b AS (
        INSERT INTO ${s}.batches (id, owner_id, generation_ids, webhook_url, created_at) VALUES ($1, $2, $3, $4, $5)),
      ins AS (
        INSERT INTO ${s}.generations
          (id, owner_id, model_id, settings, status, reserved, claims, created_at, updated_at, metadata, webhook, last_seq, last_tx, batch_id)
        SELECT g.id, $2, g.model_id, g.settings::json, g.status, g.reserved, 0, g.created_at, g.created_at, g.metadata::jsonb,
               g.webhook::jsonb, 1, pg_current_xact_id(), $1
          FROM unnest($6::text[], $7::text[], $8::text[], $9::text[], $10::numeric[], $11::bigint[], $12::text[], $13::text[])
            AS g(id, model_id, settings, status, reserved, created_at, metadata, webhook)
        RETURNING id)
      INSERT INTO ${s}.events (generation_id, seq, owner_id, type, at, data)
        SELECT e.id, 1, $2, e.type, e.at, e.data::jsonb
          FROM unnest($6::text[], $14::text[], $11::bigint[], $15::text[]) AS e(id, type, at, data)`,
    getBatch: `SELECT * FROM ${s}.batches WHERE id = $1 AND owner_id = $2`,
    batchCounts: `SELECT status, count(*)::int AS n, coalesce(sum(price) FILTER (WHERE finished_at IS NOT NULL), 0) AS price
      FROM ${s}.generations WHERE batch_id = $1 GROUP BY status`,
    completeBatch: `UPDATE ${s}.batches SET completed_at = $2 WHERE id = $1 AND completed_at IS NULL`,
    // Only open batches, by the partial index; ties on created_at fall back to id.
    listOpenBatches: `SELECT * FROM ${s}.batches WHERE completed_at IS NULL AND created_at < $1 ORDER BY created_at, id LIMIT $2`,
    // The page after a given batch (completed since or not), resumed from its (created_at, id); a missing one gives none.
    listOpenBatchesAfter: `SELECT * FROM ${s}.batches WHERE completed_at IS NULL AND created_at < $1
      AND (created_at, id) > (SELECT created_at, id FROM ${s}.batches WHERE id = $3)
      ORDER BY created_at, id LIMIT $2`,
  };
}

/** The owner's list query, for each combination of filters and cursor (exported for the EXPLAIN tests). */
export function listSql(s: string, q: { status: boolean; modelId: boolean; before: boolean; batchId?: boolean }): string {
  const where = ['owner_id = $1'];
  let n = 2;
  if (q.status) where.push(`status = $${n++}`);
  if (q.modelId) where.push(`model_id = $${n++}`);
  if (q.batchId) where.push(`batch_id = $${n++}`);
  if (q.before) {
    where.push(`(created_at, id) < ($${n}, $${n + 1})`);
    n += 2;
  }
  return `SELECT * FROM ${s}.generations WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT $${n}`;
}

/** Each patch field's columns and how its value is stored (`null` clears every column of the field). */
const COLUMNS: { [K in keyof GenerationPatch]-?: [string[], (v: NonNullable<GenerationPatch[K]>) => unknown[]] } = {
  status: [['status'], (v) => [v]],
  price: [['price'], (v) => [v]],
  resultText: [['result_text'], (v) => [storableText(v)]],
  resultKey: [['result_key'], (v) => [encodeKey(v)]],
  failureReason: [['failure_reason'], (v) => [storableText(v)]],
  error: [['error_code', 'error_message'], (v) => [v.code, storableText(v.message)]],
  progress: [['progress_fraction', 'progress_message'], (v) => [v.fraction, v.message === undefined ? null : storableText(v.message)]],
  startedAt: [['started_at'], (v) => [v]],
  remoteHandle: [['remote_handle'], (v) => [jsonb(v)]],
  parkedUntil: [['parked_until'], (v) => [v]],
  claims: [['claims'], (v) => [v]],
  leaseOwner: [['lease_owner'], (v) => [encodeKey(v)]],
  leaseExpiresAt: [['lease_expires_at'], (v) => [v]],
  finishedAt: [['finished_at'], (v) => [v]],
  lifeEndsAt: [['life_ends_at'], (v) => [v]],
  servedModelId: [['served_model_id'], (v) => [encodeKey(v)]],
};

/** The patch fields in one fixed order (sorted): a statement's columns and its shape follow it. */
const PATCH_KEYS = (Object.keys(COLUMNS) as Array<keyof GenerationPatch>).sort();

const TYPES: Record<string, string> = { remote_handle: '::jsonb', price: '::numeric', progress_fraction: '::float8' };

/**
 * One compare-and-set as one statement: the row lock decides races (a concurrent change re-checks the WHERE clause
 * against the winner's row and updates nothing), and the event is numbered from the row's own counter, so only that
 * row is locked. Its text depends only on the change's shape, so it is built once per shape.
 */
export function updateSql(s: string, change: GenerationChange, by: 'id' | 'batch_id' = 'id'): { text: string; values: (id: string, change: GenerationChange) => unknown[] } {
  const { expect, set, event } = change;
  const sets: string[] = ['updated_at = $2'];
  const where: string[] = [`${by} = $1`, 'status = ANY($3::text[])'];
  // Each pushes its values onto the statement's list, in the order of their placeholders.
  const pick: Array<(c: GenerationChange, out: unknown[]) => void> = [(c, out) => out.push(c.now, [...c.expect.status])];
  let n = 4;
  for (const key of PATCH_KEYS) {
    if (set[key] === undefined) continue;
    const [cols, encode] = COLUMNS[key];
    if (set[key] === null) {
      for (const c of cols) sets.push(`${c} = NULL`);
      continue;
    }
    for (const c of cols) sets.push(`${c} = $${n++}${TYPES[c] ?? ''}`);
    pick.push((c, out) => out.push(...(encode as (v: unknown) => unknown[])(c.set[key])));
  }
  if (expect.lease === 'free') where.push('(lease_expires_at IS NULL OR lease_expires_at <= $2)');
  else if (expect.lease !== undefined) {
    where.push(`lease_owner = $${n++} AND lease_expires_at > $2`);
    pick.push((c, out) => out.push(encodeKey((c.expect.lease as { heldBy: string }).heldBy)));
  }
  if (expect.parked !== undefined) where.push(`parked_until IS ${expect.parked ? 'NOT ' : ''}NULL`);
  if (expect.claims !== undefined) {
    where.push(`claims = $${n++}`);
    pick.push((c, out) => out.push(c.expect.claims));
  }
  if (expect.noRemoteHandle) where.push('remote_handle IS NULL');
  // The event's feed position is this transaction's id, or its generation's previous event's when that is larger: a
  // transaction may get its id before another that then takes the row lock first and appends first. Still safe for
  // readers: while this transaction runs, the oldest running id is at most its own, so none has read past either.
  const append = ', last_seq = last_seq + 1, last_tx = GREATEST(last_tx, pg_current_xact_id())';
  let text = `UPDATE ${s}.generations SET ${sets.join(', ')}${event ? append : ''}
    WHERE ${where.join(' AND ')} RETURNING *`;
  const steps: string[] = [];
  if (event) {
    steps.push(`ev AS (INSERT INTO ${s}.events (generation_id, seq, owner_id, type, at, data, tx)
        SELECT id, last_seq, owner_id, $${n}, $2, $${n + 1}::jsonb, last_tx FROM moved)`);
    pick.push((c, out) => out.push(c.event!.type, jsonb(c.event!.data)));
    n += 2;
  }
  if (change.settle !== undefined) {
    // The ledger's own settle steps (ledger.ts), on the reserve of the generation this change moved (none: no row).
    steps.push(settleSteps(s, { id: '(SELECT id FROM moved)', amount: `$${n}`, now: '$2', day: `$${n + 1}` }));
    pick.push((c, out) => out.push(Math.max(0, c.settle!), usageDayIndex(c.now)));
    n += 2;
  }
  if (steps.length > 0) text = `WITH moved AS (${text}),\n      ${steps.join(',\n      ')}\n      SELECT * FROM moved`;
  return {
    text,
    values: (id, c) => {
      const out: unknown[] = [encodeKey(id)];
      for (const p of pick) p(c, out);
      return out;
    },
  };
}

/** The shape of a change: what decides its statement's text. */
function shapeOf(change: GenerationChange): string {
  const e = change.expect;
  const lease = e.lease === undefined ? '' : e.lease === 'free' ? 'f' : 'h';
  let set = '';
  for (const k of PATCH_KEYS) {
    const v = change.set[k];
    if (v !== undefined) set += v === null ? `-${k},` : `${k},`;
  }
  return `${lease}|${e.parked ?? ''}|${e.claims !== undefined}|${e.noRemoteHandle === true}|${change.event !== undefined}|${change.settle !== undefined}|${set}`;
}

/** jsonb cannot hold U+0000 in a string: those become U+FFFD (free text only; identifiers never reach jsonb). */
function jsonb(value: unknown): string {
  const text = JSON.stringify(value ?? null);
  return text.includes('\\u0000') ? JSON.stringify(value, (_k, v: unknown) => (typeof v === 'string' ? v.replace(/\u0000/g, '\ufffd') : v)) : text;
}

type Row = Record<string, unknown>;

function optKey(value: unknown): string | undefined {
  const s = optStr(value);
  return s === undefined ? undefined : decodeKey(s);
}

function toBatch(row: Row): BatchRecord {
  const batch: BatchRecord = {
    id: decodeKey(String(row.id)),
    ownerId: decodeKey(String(row.owner_id)),
    generationIds: (JSON.parse(String(row.generation_ids)) as string[]).map(decodeKey),
    createdAt: num(row.created_at),
  };
  const url = optStr(row.webhook_url);
  if (url !== undefined) batch.webhook = { url };
  const completedAt = optNum(row.completed_at);
  if (completedAt !== undefined) batch.completedAt = completedAt;
  return batch;
}

function toRecord(row: Row): GenerationRecord {
  const rec: GenerationRecord = {
    id: decodeKey(String(row.id)),
    ownerId: decodeKey(String(row.owner_id)),
    modelId: decodeKey(String(row.model_id)),
    settings: (row.settings ?? {}) as GenerationRecord['settings'],
    status: row.status as GenerationStatus,
    reserved: num(row.reserved),
    claims: num(row.claims),
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
  if (typeof row.traceparent === 'string') rec.traceparent = row.traceparent;
  if (typeof row.priority === 'string') rec.priority = row.priority as GenerationRecord['priority'];
  const deadlineAt = optNum(row.deadline_at);
  if (deadlineAt !== undefined) rec.deadlineAt = deadlineAt;
  if (row.remote_handle !== null && row.remote_handle !== undefined) rec.remoteHandle = row.remote_handle;
  const parkedUntil = optNum(row.parked_until);
  if (parkedUntil !== undefined) rec.parkedUntil = parkedUntil;
  const expiresAfterSeconds = optNum(row.expires_after_seconds);
  if (expiresAfterSeconds !== undefined) rec.expiresAfterSeconds = expiresAfterSeconds;
  const lifeEndsAt = optNum(row.life_ends_at);
  if (lifeEndsAt !== undefined) rec.lifeEndsAt = lifeEndsAt;
  const batchId = optKey(row.batch_id);
  if (batchId !== undefined) rec.batchId = batchId;
  const servedModelId = optKey(row.served_model_id);
  if (servedModelId !== undefined) rec.servedModelId = servedModelId;
  return rec;
}

function toEvent(row: Row): GenerationEvent {
  return {
    seq: num(row.seq),
    generationId: decodeKey(String(row.generation_id)),
    ownerId: decodeKey(String(row.owner_id)),
    type: row.type as GenerationEvent['type'],
    at: num(row.at),
    data: row.data as GenerationEvent['data'],
  };
}

/** The insert's parameters ($1..$14; $8 the in-flight cap, null for none). */
function insertParams(gen: NewGeneration, event: NewEvent, cap: number | undefined): unknown[] {
  return [
    encodeKey(gen.id),
    encodeKey(gen.ownerId),
    encodeKey(gen.modelId),
    JSON.stringify(gen.settings ?? {}),
    gen.reserved,
    gen.createdAt,
    gen.metadata === undefined ? null : jsonb(gen.metadata),
    cap ?? null,
    gen.webhook === undefined ? null : jsonb(gen.webhook),
    gen.status,
    event.type,
    jsonb(event.data),
    gen.expiresAfterSeconds ?? null,
    gen.traceparent ?? null,
    gen.priority ?? null,
    gen.deadlineAt ?? null,
  ];
}

/** Past any position in a transaction's events. */
const MAX_POS = '9223372036854775807';

/** A feed cursor is `<tx>:<pos>` of the last event read; `''` is the start. */
function parseCursor(cursor: string): [string, string] | null {
  if (cursor === '') return ['0', '0'];
  const m = /^(\d{1,20}):(\d{1,19})$/.exec(cursor);
  return m ? [m[1]!, m[2]!] : null;
}

/** A stable 64-bit advisory-lock key per owner (Postgres hashes the text), for the in-flight count. */
const OWNER_LOCK = 'SELECT pg_advisory_xact_lock(hashtextextended($1, 7340512846113202))';

/**
 * GenerationStore on PostgreSQL. Each change is one conditional statement with its event; the store applies what
 * core's Lifecycle decided and holds no rule of its own.
 *
 * Does not migrate; `createPostgresStores` does (or call `runMigrations` yourself).
 */
export class PostgresGenerationStore implements GenerationStore {
  private readonly db: PgDatabase;
  private readonly sql: ReturnType<typeof generationSql>;
  private readonly shapes = new Map<string, ReturnType<typeof updateSql>>();

  constructor(pool: Pool, options: { schema?: string } & PgStatementOptions = {}) {
    this.db = new PgDatabase(pool, options.schema ?? 'genservice', options);
    this.sql = generationSql(this.db.s);
  }

  /** The ledger of the same pool and schema, whose reserves this store's changes may settle (`createPostgresStores`). */
  private settling: PostgresLedger | undefined;

  /** Lets changes carry the settle of `ledger`'s reserves (it must use the same database and schema as this store). */
  settleWith(ledger: PostgresLedger): void {
    this.settling = ledger;
  }

  settlesFor(ledger: unknown): boolean {
    return ledger !== undefined && ledger === this.settling;
  }

  async insertReserved(gen: NewGeneration, event: NewEvent, reserve: InsertReserve): Promise<ReserveResult | 'limited'> {
    const ledger = this.settling;
    if (!ledger) throw new Error('insertReserved: no ledger linked (settleWith)');
    const params = insertParams(gen, event, reserve.maxInFlight);
    const user = params[1] as string;
    params[4] = reserve.amount;
    params[5] = reserve.now;
    params.push(reserve.keyId === undefined ? null : encodeKey(reserve.keyId));
    // A free generation's settle still moves (zero) tokens through the account row.
    if (reserve.amount === 0) await ledger.ensureAccount(user);
    try {
      const { rows } = await this.db.query<{ inserted: number }>(this.sql.insertReserved, params);
      if (rows[0]!.inserted === 1) return 'ok';
    } catch (err) {
      if ((err as { code?: string }).code !== '23505') throw err;
      // The reserve row exists (a retry of this id): as the ledger's own reserve would, hold nothing more and insert.
      const why = await ledger.refusalOf(this.db, params[0] as string, user, reserve.amount);
      if (why === 'reserved_by_other') throw new Error(`Generation ${gen.id} is already reserved for another user`);
      if (why !== 'reserved') throw err;
      await this.insert(gen, event);
      return 'ok';
    }
    const why = await ledger.refusalOf(this.db, null, user, reserve.amount, true);
    return why === 'insufficient' || why === 'limited' ? why : 'in_flight_limit';
  }

  async insert(gen: NewGeneration, event: NewEvent, options: InsertOptions = {}): Promise<'inserted' | 'limit_reached'> {
    const cap = options.maxUnfinishedPerOwner;
    const params = insertParams(gen, event, cap);
    if (cap === undefined) {
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

  async insertBatch(batch: NewBatch, generations: readonly NewGeneration[], events: readonly NewEvent[]): Promise<void> {
    if (events.length !== generations.length) throw new Error('insertBatch: one first event per generation');
    try {
      await this.db.query(this.sql.insertBatch, [
        encodeKey(batch.id),
        encodeKey(batch.ownerId),
        JSON.stringify(batch.generationIds.map(encodeKey)),
        batch.webhook?.url ?? null,
        batch.createdAt,
        generations.map((g) => encodeKey(g.id)),
        generations.map((g) => encodeKey(g.modelId)),
        generations.map((g) => JSON.stringify(g.settings ?? {})),
        generations.map((g) => g.status),
        generations.map((g) => g.reserved),
        generations.map((g) => g.createdAt),
        generations.map((g) => (g.metadata === undefined ? null : jsonb(g.metadata))),
        generations.map((g) => (g.webhook === undefined ? null : jsonb(g.webhook))),
        events.map((e) => e.type),
        events.map((e) => jsonb(e.data)),
      ]);
    } catch (err) {
      if ((err as { code?: string }).code === '23505') throw new Error(`Batch ${batch.id} or one of its generations already exists`, { cause: err });
      throw err;
    }
  }

  async getBatch(id: string, ownerId: string): Promise<BatchRecord | null> {
    const { rows } = await this.db.query(this.sql.getBatch, [encodeKey(id), encodeKey(ownerId)]);
    return rows[0] ? toBatch(rows[0]) : null;
  }

  async listOpenBatches(createdBefore: number, limit: number, after?: string): Promise<BatchRecord[]> {
    if (!(limit > 0)) return [];
    const { rows } =
      after === undefined
        ? await this.db.query(this.sql.listOpenBatches, [createdBefore, limit])
        : await this.db.query(this.sql.listOpenBatchesAfter, [createdBefore, limit, encodeKey(after)]);
    return rows.map(toBatch);
  }

  async batchCounts(batchId: string): Promise<BatchCounts> {
    const counts = Object.fromEntries(GENERATION_STATUSES.map((st) => [st, 0])) as Record<GenerationStatus, number>;
    let price = 0;
    const { rows } = await this.db.query<{ status: GenerationStatus; n: number; price: string }>(this.sql.batchCounts, [encodeKey(batchId)]);
    for (const r of rows) {
      counts[r.status] = r.n;
      price += num(r.price);
    }
    return { counts, price };
  }

  async completeBatch(id: string, now: number): Promise<boolean> {
    const r = await this.db.query(this.sql.completeBatch, [encodeKey(id), now]);
    return r.rowCount === 1;
  }

  async get(id: string, ownerId: string): Promise<GenerationRecord | null> {
    const { rows } = await this.db.query(this.sql.get, [encodeKey(id), encodeKey(ownerId)]);
    return rows[0] ? toRecord(rows[0]) : null;
  }

  async getById(id: string): Promise<GenerationRecord | null> {
    const { rows } = await this.db.query(this.sql.getById, [encodeKey(id)]);
    return rows[0] ? toRecord(rows[0]) : null;
  }

  /** One statement: the UPDATE over the batch's index and every moved row's event (a CTE), atomic by itself. */
  async updateBatchMembers(batchId: string, change: GenerationChange): Promise<GenerationRecord[]> {
    if (change.expect.status.length === 0) return [];
    const shape = `batch|${shapeOf(change)}`;
    let stmt = this.shapes.get(shape);
    if (!stmt) this.shapes.set(shape, (stmt = updateSql(this.db.s, change, 'batch_id')));
    const { rows } = await this.db.query(stmt.text, stmt.values(batchId, change));
    return rows.map((row) => toRecord(row));
  }

  async update(id: string, change: GenerationChange): Promise<GenerationRecord | null> {
    if (change.expect.status.length === 0) return null;
    const shape = shapeOf(change);
    let stmt = this.shapes.get(shape);
    if (!stmt) this.shapes.set(shape, (stmt = updateSql(this.db.s, change)));
    const { rows } = await this.db.query(stmt.text, stmt.values(id, change));
    return rows[0] ? toRecord(rows[0]) : null;
  }

  async renewLeases(ids: readonly string[], holder: string, until: number, now: number): Promise<string[]> {
    if (ids.length === 0) return [];
    const { rows } = await this.db.query<{ id: string }>(this.sql.renewLeases, [ids.map(encodeKey), encodeKey(holder), until, now]);
    return rows.map((r) => decodeKey(r.id));
  }

  async listUnfinished(limit: number, after?: string): Promise<GenerationRecord[]> {
    const n = Math.max(0, Math.floor(limit));
    const { rows } =
      after === undefined
        ? await this.db.query(this.sql.listUnfinished, [n])
        : await this.db.query(this.sql.listUnfinishedAfter, [n, encodeKey(after)]);
    return rows.map(toRecord);
  }

  async list(ownerId: string, query: ListQuery): Promise<GenerationRecord[]> {
    if (!(query.limit > 0)) return [];
    const params: unknown[] = [encodeKey(ownerId)];
    if (query.status !== undefined) params.push(query.status);
    if (query.modelId !== undefined) params.push(encodeKey(query.modelId));
    if (query.batchId !== undefined) params.push(encodeKey(query.batchId));
    if (query.before !== undefined) params.push(query.before.createdAt, encodeKey(query.before.id));
    params.push(Math.floor(query.limit));
    const sql = listSql(this.db.s, {
      status: query.status !== undefined,
      modelId: query.modelId !== undefined,
      before: query.before !== undefined,
      batchId: query.batchId !== undefined,
    });
    const { rows } = await this.db.query(sql, params);
    return rows.map(toRecord);
  }

  async eventsOf(generationId: string, after = 0): Promise<GenerationEvent[]> {
    const { rows } = await this.db.query(this.sql.eventsOf, [encodeKey(generationId), after]);
    return rows.map(toEvent);
  }

  async readFeed(after: string, limit: number): Promise<FeedPage> {
    const from = parseCursor(after);
    if (!from || !(limit > 0)) return { events: [], cursor: after };
    const { rows } = await this.db.query(this.sql.readFeed, [from[0], from[1], Math.floor(limit)]);
    const last = rows[rows.length - 1];
    return { events: rows.map(toEvent), cursor: last ? `${last.tx_text}:${last.pos}` : after };
  }

  async feedHead(): Promise<string> {
    const { rows } = await this.db.query<{ tx: string }>(this.sql.feedHead);
    return `${rows[0]!.tx}:${MAX_POS}`;
  }

  async listFinishedBefore(before: number, limit: number): Promise<GenerationRecord[]> {
    const { rows } = await this.db.query(this.sql.listFinished, [before, Math.max(0, Math.floor(limit))]);
    return rows.map((r) => toRecord(r));
  }

  async listLifeEndedBefore(before: number, limit: number): Promise<GenerationRecord[]> {
    const { rows } = await this.db.query(this.sql.listLifeEnded, [before, Math.max(0, Math.floor(limit))]);
    return rows.map((r) => toRecord(r));
  }

  async remove(id: string, expect: { status: readonly GenerationStatus[] }): Promise<boolean> {
    const { rows } = await this.db.query<{ removed: number }>(this.sql.remove, [encodeKey(id), [...expect.status]]);
    return rows[0]!.removed > 0;
  }

  async countByStatus(): Promise<Record<GenerationStatus, number>> {
    const counts = Object.fromEntries(GENERATION_STATUSES.map((s) => [s, 0])) as Record<GenerationStatus, number>;
    const { rows } = await this.db.query<{ status: GenerationStatus; n: number }>(this.sql.countByStatus);
    for (const r of rows) counts[r.status] = r.n;
    return counts;
  }
}
