import { inject, injectable } from 'tsyringe';
import type { BlobStore } from '../ports/blob.js';
import type { UploadStore } from '../ports/uploads.js';
import { TOKENS } from '../tokens.js';

/**
 * Deleting expired uploads: their files first, in one batched call, then their records, so a blob store that cannot
 * be reached leaves every record in place for the next clean-up.
 */
@injectable()
export class UploadExpiry {
  constructor(
    @inject(TOKENS.UploadStore) private readonly uploads: UploadStore,
    @inject(TOKENS.Blobs) private readonly blobs: BlobStore,
  ) {}

  /** Deletes at most `limit` uploads that expired before `now`; answers how many. */
  async purge(now: number, limit: number): Promise<number> {
    const expired = await this.uploads.listExpiredBefore(now, limit);
    if (expired.length === 0) return 0;
    const keys = expired.map((u) => u.key);
    await this.blobs.deleteMany(keys);
    await this.uploads.remove(keys);
    return keys.length;
  }
}
