import type { AuditEntry, AuditLog, AuditPage } from '../ports/audit.js';

/** The admin audit log in an array; lost on restart, like every in-memory port. */
export class MemoryAuditLog implements AuditLog {
  private readonly entries: AuditEntry[] = [];

  async append(entry: Omit<AuditEntry, 'id'>): Promise<void> {
    this.entries.push(structuredClone({ ...entry, id: String(this.entries.length + 1) }));
  }

  async list(options: { before?: string; limit: number }): Promise<AuditPage> {
    const before = options.before === undefined ? this.entries.length + 1 : Number(options.before);
    const limit = Math.max(0, Math.floor(options.limit));
    if (!Number.isSafeInteger(before) || before < 1) return { entries: [], nextCursor: null };
    const end = Math.min(before - 1, this.entries.length);
    const start = Math.max(0, end - limit);
    const page = this.entries.slice(start, end).reverse().map((e) => structuredClone(e));
    return { entries: page, nextCursor: start > 0 && page.length > 0 ? page[page.length - 1]!.id : null };
  }
}
