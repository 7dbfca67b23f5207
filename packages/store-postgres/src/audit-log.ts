import type { AuditEntry, AuditLog, AuditPage } from '@genservice/core/ports';
import type { Pool } from 'pg';
import { PgDatabase, decodeKey, encodeKey, num, storableText, type PgStatementOptions } from './db.js';

interface AuditRow {
  seq: string;
  at: string;
  actor: string;
  action: AuditEntry['action'];
  user_id: string | null;
  key_id: string | null;
  details: string | null;
}

/** The admin audit log on PostgreSQL: one row per action, paged newest first by its seq. */
export class PostgresAuditLog implements AuditLog {
  private readonly db: PgDatabase;

  constructor(pool: Pool, options: { schema?: string } & PgStatementOptions = {}) {
    this.db = new PgDatabase(pool, options.schema ?? 'genservice', options);
  }

  async append(entry: Omit<AuditEntry, 'id'>): Promise<void> {
    await this.db.query(
      `INSERT INTO ${this.db.s}.audit_log (at, actor, action, user_id, key_id, details) VALUES ($1, $2, $3, $4, $5, $6)`,
      [
        Math.trunc(entry.at),
        storableText(entry.actor),
        entry.action,
        entry.userId !== undefined ? encodeKey(entry.userId) : null,
        entry.keyId !== undefined ? encodeKey(entry.keyId) : null,
        // JSON text escapes \u0000, so any detail is storable.
        entry.details !== undefined ? JSON.stringify(entry.details) : null,
      ],
    );
  }

  async list(options: { before?: string; limit: number }): Promise<AuditPage> {
    const before = options.before === undefined ? Number.MAX_SAFE_INTEGER : Number(options.before);
    const limit = Math.max(0, Math.floor(options.limit));
    if (!Number.isSafeInteger(before) || limit === 0) return { entries: [], nextCursor: null };
    // One more than asked: whether an older page exists, without a second query.
    const { rows } = await this.db.query<AuditRow>(
      `SELECT * FROM ${this.db.s}.audit_log WHERE seq < $1 ORDER BY seq DESC LIMIT $2`,
      [before, limit + 1],
    );
    const entries = rows.slice(0, limit).map(entryOf);
    return { entries, nextCursor: rows.length > limit ? entries[entries.length - 1]!.id : null };
  }
}

function entryOf(row: AuditRow): AuditEntry {
  const e: AuditEntry = { id: String(row.seq), at: num(row.at), actor: row.actor, action: row.action };
  if (row.user_id !== null) e.userId = decodeKey(row.user_id);
  if (row.key_id !== null) e.keyId = decodeKey(row.key_id);
  if (row.details !== null) e.details = JSON.parse(row.details) as Record<string, unknown>;
  return e;
}
