export interface StoredBlob {
  bytes: Uint8Array;
  mimeType: string;
}

/** What the files route asks a store that can serve a file itself (see `BlobStore.serve`). */
export interface ServeRequest {
  /** The `Content-Disposition` the file must be answered with, given its type (core decides it; the store sets it). */
  contentDisposition(mimeType: string): string;
  /** Seconds the service's own signed URL is still valid: a URL of the store's should not outlive it. */
  expiresInSeconds: number;
}

/**
 * How a store serves one file itself:
 * - `{ redirect }`: a short-lived URL of the store's own (an S3 presigned GET) that answers `Range`, the content type
 *   and `Content-Disposition` by itself; the files route answers with a redirect to it.
 * - `{ size, mimeType, read }`: the files route streams the bytes, asking `read(start, end)` (inclusive) for the one
 *   range it decided to send, so a file never has to fit in memory.
 */
export type ServedBlob =
  | { redirect: string }
  | { size: number; mimeType: string; read(start: number, end: number): AsyncIterable<Uint8Array> };

/**
 * Where result files live. Keys are opaque, URL-safe and unguessable; URLs are built and signed by core
 * (see `FileUrlSigner`), so a BlobStore never needs to know the public address.
 *
 * Guarantees: `put` is durable once it resolves; `get` of an unknown key returns null (never throws for it);
 * `delete` of an unknown key is a no-op. `deleteMany` deletes every key given (unknown keys are skipped) in as few
 * calls to the backing service as it allows, and resolves only when all are gone: when it rejects, some may remain,
 * and calling it again with the same keys finishes the job. A store whose backing service cannot be reached throws
 * `UnavailableError`.
 */
export interface BlobStore {
  put(bytes: Uint8Array, mimeType: string): Promise<string>;
  get(key: string): Promise<StoredBlob | null>;
  delete(key: string): Promise<void>;
  deleteMany(keys: readonly string[]): Promise<void>;
  /**
   * Optional: serve a file without handing its bytes through `get` (files kept elsewhere, such as S3). `null` when
   * the key is unknown, like `get`. Without it the files route reads the file with `get`.
   */
  serve?(key: string, request: ServeRequest): Promise<ServedBlob | null>;
}
