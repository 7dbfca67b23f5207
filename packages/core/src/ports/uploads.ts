/** One file a user uploaded (`POST /v1/uploads`), as the service remembers it until it expires. */
export interface UploadRecord {
  /** The file's BlobStore key (also the upload's id). */
  key: string;
  ownerId: string;
  mimeType: string;
  /** Its size in bytes. */
  size: number;
  /** Epoch ms. */
  createdAt: number;
  /** Epoch ms its link stops working; the file is deleted by the first clean-up after it. */
  expiresAt: number;
}

/**
 * Which uploaded files exist and when each expires, so the maintenance can delete expired ones from the blob store
 * (the blob store itself cannot list its files).
 *
 * Guarantees: `insert` is durable once it resolves; inserting a key that exists already replaces nothing and does
 * not throw. `listExpiredBefore(before, limit)` answers at most `limit` records whose `expiresAt` is before `before`,
 * oldest `expiresAt` first (ties in an order of the store's choosing that does not change); it only reads, and is
 * index-backed. `remove(keys)` forgets every record named (unknown keys are skipped), all in one call; afterwards no
 * listing answers them. A store whose backing service cannot be reached throws `UnavailableError`.
 */
export interface UploadStore {
  insert(upload: UploadRecord): Promise<void>;
  listExpiredBefore(before: number, limit: number): Promise<UploadRecord[]>;
  remove(keys: readonly string[]): Promise<void>;
}
