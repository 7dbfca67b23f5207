import { retryMethodsWhileBusy } from './busy.js';
import type { AuditEntry, AuditLog, AuditPage } from '@genservice/core/ports';
import type Database from 'better-sqlite3';
import type { SqliteDatabase } from './database.js';

interface AuditRow {
  seq: number;
  at: number;
  actor: string;
  action: AuditEntry['action'];
  user_id: string | null;
  key_id: string | null;
  details: string | null;
}

/** The admin audit log on SQLite: one row per action, paged newest first by its seq. */
export class SqliteAuditLog implements AuditLog {
  private readonly insertStmt: Database.Statement;
  private readonly pageStmt: Database.Statement;

  constructor(db: SqliteDatabase) {
    retryMethodsWhileBusy(this, db);
    this.insertStmt = db.prepare(
      'INSERT INTO audit_log (at, actor, action, user_id, key_id, details) VALUES (@at, @actor, @action, @userId, @keyId, @details)',
    );
    this.pageStmt = db.prepare('SELECT * FROM audit_log WHERE seq < ? ORDER BY seq DESC LIMIT ?');
  }

  async append(entry: Omit<AuditEntry, 'id'>): Promise<void> {
    this.insertStmt.run({
      at: entry.at,
      actor: entry.actor,
      action: entry.action,
      userId: entry.userId ?? null,
      keyId: entry.keyId ?? null,
      details: entry.details !== undefined ? JSON.stringify(entry.details) : null,
    });
  }

  async list(options: { before?: string; limit: number }): Promise<AuditPage> {
    const before = options.before === undefined ? Number.MAX_SAFE_INTEGER : Number(options.before);
    const limit = Math.max(0, Math.floor(options.limit));
    if (!Number.isSafeInteger(before) || limit === 0) return { entries: [], nextCursor: null };
    // One more than asked: whether an older page exists, without a second query.
    const rows = this.pageStmt.all(before, limit + 1) as AuditRow[];
    const entries = rows.slice(0, limit).map(entryOf);
    return { entries, nextCursor: rows.length > limit ? entries[entries.length - 1]!.id : null };
  }
}

function entryOf(row: AuditRow): AuditEntry {
  const e: AuditEntry = { id: String(row.seq), at: row.at, actor: row.actor, action: row.action };
  if (row.user_id !== null) e.userId = row.user_id;
  if (row.key_id !== null) e.keyId = row.key_id;
  if (row.details !== null) e.details = JSON.parse(row.details) as Record<string, unknown>;
  return e;
}
