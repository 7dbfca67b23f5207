/**
 * @module @genservice/blob-s3
 *
 * Result files in Amazon S3 or any S3-compatible store (MinIO, Cloudflare R2, Ceph, Google Cloud Storage's XML
 * interoperability API), on the official AWS SDK v3. Several service instances share one bucket instead of a
 * shared directory.
 *
 * @example
 * ```ts
 * import { createGenerationService } from '@genservice/core';
 * import { S3BlobStore } from '@genservice/blob-s3';
 *
 * const service = createGenerationService({
 *   // ...
 *   blobs: new S3BlobStore({ bucket: 'my-results', prefix: 'genservice/', region: 'eu-west-1' }),
 * });
 * ```
 */
export { S3BlobStore, type S3BlobStoreOptions } from './s3-blob-store.js';
