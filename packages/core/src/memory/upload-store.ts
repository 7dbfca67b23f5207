import type { UploadRecord, UploadStore } from '../ports/uploads.js';

/** The uploads of one process, in memory (the default). */
export class MemoryUploadStore implements UploadStore {
  private readonly byKey = new Map<string, UploadRecord>();

  async insert(upload: UploadRecord): Promise<void> {
    if (!this.byKey.has(upload.key)) this.byKey.set(upload.key, { ...upload });
  }

  async listExpiredBefore(before: number, limit: number): Promise<UploadRecord[]> {
    return [...this.byKey.values()]
      .filter((u) => u.expiresAt < before)
      .sort((a, b) => a.expiresAt - b.expiresAt || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
      .slice(0, Math.max(0, limit))
      .map((u) => ({ ...u }));
  }

  async remove(keys: readonly string[]): Promise<void> {
    for (const key of keys) this.byKey.delete(key);
  }
}
