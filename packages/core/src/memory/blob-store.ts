import { randomBytes } from 'node:crypto';
import type { BlobStore, StoredBlob } from '../ports/blob.js';

/** 32 random bytes, base64url: 256 bits, URL-safe, no padding. */
export function newBlobKey(): string {
  return randomBytes(32).toString('base64url');
}

/** BlobStore in a Map; files live as long as the process. Bytes are copied in and out. */
export class MemoryBlobStore implements BlobStore {
  private readonly blobs = new Map<string, StoredBlob>();

  async put(bytes: Uint8Array, mimeType: string): Promise<string> {
    const key = newBlobKey();
    this.blobs.set(key, { bytes: new Uint8Array(bytes), mimeType });
    return key;
  }

  async get(key: string): Promise<StoredBlob | null> {
    const blob = this.blobs.get(key);
    return blob ? { bytes: new Uint8Array(blob.bytes), mimeType: blob.mimeType } : null;
  }

  async delete(key: string): Promise<void> {
    this.blobs.delete(key);
  }

  async deleteMany(keys: readonly string[]): Promise<void> {
    for (const key of keys) this.blobs.delete(key);
  }
}
