export interface StoredBlob {
  bytes: Uint8Array;
  mimeType: string;
}

/**
 * Where result files live. Keys are opaque, URL-safe and unguessable; URLs are built and signed by core
 * (see `FileUrlSigner`), so a BlobStore never needs to know the public address.
 *
 * Guarantees: `put` is durable once it resolves; `get` of an unknown key returns null (never throws for it);
 * `delete` of an unknown key is a no-op.
 */
export interface BlobStore {
  put(bytes: Uint8Array, mimeType: string): Promise<string>;
  get(key: string): Promise<StoredBlob | null>;
  delete(key: string): Promise<void>;
}
