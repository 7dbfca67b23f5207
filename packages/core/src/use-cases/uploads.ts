import { inject, injectable } from 'tsyringe';
import { DomainError } from '../domain/errors.js';
import { FileUrlSigner } from '../domain/file-urls.js';
import type { BaseUrl } from '../domain/types.js';
import type { BlobStore } from '../ports/blob.js';
import type { UploadStore } from '../ports/uploads.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { Views } from './views.js';

/** What `POST /v1/uploads` answers: the file's id and the service's own signed URL of it. */
export interface Upload {
  id: string;
  url: string;
  /** ISO 8601: when the URL stops working. */
  expiresAt: string;
}

/**
 * Files users upload as inputs (`POST /v1/uploads`): checked against `uploads.types` and `uploads.maxBytes`, kept in
 * the blob store (and recorded in the upload store, whose expired entries the maintenance deletes with their files),
 * and answered as the service's own signed file URL, tagged with its owner (`owner`, an HMAC of
 * owner and key), so a create takes it as the owner's input and nobody else's (`fileReferenceRefusal`).
 */
@injectable()
export class Uploads {
  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Blobs) private readonly blobs: BlobStore,
    @inject(FileUrlSigner) private readonly signer: FileUrlSigner,
    @inject(Views) private readonly views: Views,
    @inject(TOKENS.UploadStore) private readonly uploads: UploadStore,
  ) {}

  /** Keeps one file of `userId`'s; `contentType` is the request's (parameters such as `charset` are dropped). */
  async create(userId: string, bytes: Uint8Array, contentType: string | undefined, baseUrl?: BaseUrl): Promise<Upload> {
    const { maxBytes, types, ttlSeconds } = this.options.uploads;
    const mimeType = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
    if (!types.includes(mimeType)) {
      throw new DomainError('unsupported_media_type', `An upload must be one of: ${types.join(', ')} (its Content-Type).`);
    }
    if (bytes.byteLength > maxBytes) throw new DomainError('payload_too_large', `An upload is at most ${maxBytes} bytes.`);
    if (bytes.byteLength === 0) throw new DomainError('invalid_request', 'The upload is empty.');
    const base = this.views.fileBase(baseUrl);
    const now = this.options.clock.now();
    const key = await this.blobs.put(bytes, mimeType);
    const path = this.signer.sign(key, now, now + ttlSeconds * 1000, userId);
    const expiresAt = Number(new URL(path, 'http://x').searchParams.get('exp')) * 1000;
    try {
      await this.uploads.insert({ key, ownerId: userId, mimeType, size: bytes.byteLength, createdAt: now, expiresAt });
    } catch (err) {
      // Unrecorded, the file would never be deleted: it goes now, and the upload fails (503 for an outage).
      await this.blobs.delete(key).catch(() => undefined);
      throw err;
    }
    return { id: key, url: `${base}${path}`, expiresAt: new Date(expiresAt).toISOString() };
  }
}
