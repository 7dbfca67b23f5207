import { inject, injectable } from 'tsyringe';
import { FileUrlSigner } from '../domain/file-urls.js';
import { expiresAt } from '../domain/rules.js';
import type { BaseUrl, GenerationRecord } from '../domain/types.js';
import type { BlobStore, StoredBlob } from '../ports/blob.js';
import type { UploadStore } from '../ports/uploads.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';

/** An uploaded file of a multipart request (an image to edit, a mask, a video's reference). */
export interface UploadedFile {
  bytes: Uint8Array;
  mimeType: string;
}

/**
 * The OpenAI surface's files: uploads stored in the blob store and handed to a model as the service's own signed file
 * URLs (the model reads them like any media URL), and the signed URLs and bytes of a generation's files.
 */
@injectable()
export class OpenAiFiles {
  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Blobs) private readonly blobs: BlobStore,
    @inject(FileUrlSigner) private readonly signer: FileUrlSigner,
    @inject(TOKENS.UploadStore) private readonly uploads: UploadStore,
  ) {}

  /**
   * `ownerId`'s uploaded file, stored, as a URL the model can read (valid for `fileUrlTtlSeconds`). Recorded in the
   * upload store like a `POST /v1/uploads` file, so the clean-up deletes it once its link expired.
   */
  async upload(file: UploadedFile, ownerId: string, baseUrl: BaseUrl | undefined): Promise<{ key: string; url: string }> {
    const base = this.base(baseUrl);
    const now = this.options.clock.now();
    const key = await this.blobs.put(file.bytes, file.mimeType);
    const path = this.signer.sign(key, now, undefined, ownerId);
    const expiresAt = Number(new URL(path, 'http://x').searchParams.get('exp')) * 1000;
    try {
      await this.uploads.insert({ key, ownerId, mimeType: file.mimeType, size: file.bytes.byteLength, createdAt: now, expiresAt });
    } catch (err) {
      await this.blobs.delete(key).catch(() => undefined);
      throw err;
    }
    return { key, url: base + path };
  }

  /** Uploads of a request that was refused: no generation reads them, so they go now rather than once expired. */
  async discard(keys: readonly string[]): Promise<void> {
    if (keys.length === 0) return;
    await Promise.all(keys.map((key) => this.blobs.delete(key).catch(() => undefined)));
    // A record left behind (its store failing now) only makes the clean-up look for files that are gone.
    await this.uploads.remove(keys).catch(() => undefined);
  }

  /** The signed URL of one of a generation's files; it stops working when the generation expires. */
  url(rec: GenerationRecord, key: string, baseUrl: BaseUrl | undefined): string {
    return this.base(baseUrl) + this.signer.sign(key, this.options.clock.now(), expiresAt(rec, this.options.retention.finishedTtlMs), rec.ownerId);
  }

  /** A file's bytes, or null when it is gone. */
  get(key: string): Promise<StoredBlob | null> {
    return this.blobs.get(key);
  }

  private base(baseUrl: BaseUrl | undefined): string {
    if (this.options.publicUrl) return this.options.publicUrl;
    const base = typeof baseUrl === 'function' ? baseUrl() : baseUrl;
    if (this.options.trustRequestHost && base) return base.replace(/\/+$/, '');
    throw new Error('a file URL needs options.publicUrl (or trustRequestHost)');
  }
}
