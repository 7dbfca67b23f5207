import { randomBytes } from 'node:crypto';
import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { UnavailableError } from '@genservice/core/ports';
import type { BlobStore, ServedBlob, ServeRequest, StoredBlob } from '@genservice/core/ports';

export interface S3BlobStoreOptions {
  /** The bucket; it must exist (the store never creates or configures buckets). */
  bucket: string;
  /** Put before every object key, e.g. `genservice/results/`. Default none. */
  prefix?: string;
  /** Default: the SDK's own resolution (`AWS_REGION`, the shared config file), else `us-east-1`. */
  region?: string;
  /** An S3-compatible endpoint (MinIO, R2, Ceph, GCS interop), e.g. `http://127.0.0.1:9000`. Default: AWS. */
  endpoint?: string;
  /** Address buckets as `endpoint/bucket/key` instead of `bucket.endpoint/key` (most self-hosted stores need it). */
  forcePathStyle?: boolean;
  /** Default: the SDK's default chain (environment, shared files, SSO, container and instance roles). */
  credentials?: S3ClientConfig['credentials'];
  /**
   * How the files route answers a signed file URL. `redirect` (default): `302` to a fresh presigned GET URL, so the
   * bytes, `Range`, the content type and `Content-Disposition` come from S3 and never pass through the service.
   * `stream`: the service streams the object (for buckets clients cannot reach, or a CDN in front of the service).
   */
  serve?: 'redirect' | 'stream';
  /** Lifetime of a presigned URL, in seconds (1..604800, default 300); never longer than the service's own URL. */
  presignedUrlTtlSeconds?: number;
  /** Your own client (custom middleware, retries, an HTTP agent); `region`, `endpoint`, ... are then ignored. */
  client?: S3Client;
}

/** Exactly what `put` hands out: 32 random bytes, base64url. Anything else is refused before it reaches S3. */
const KEY_PATTERN = /^[A-Za-z0-9_-]{43}$/;
/** DeleteObjects takes at most 1000 keys per call. */
const DELETE_BATCH = 1000;

/**
 * BlobStore on Amazon S3 or any S3-compatible store, on the AWS SDK v3. Result URLs stay the service's own signed
 * URLs (stable, revocable); when a client follows one, `serve` answers a redirect to a short-lived presigned GET URL
 * or the bytes as a stream.
 *
 * Failures to reach the store (network errors, 5xx, throttling) are thrown as `UnavailableError`, so an upload
 * fails its generation retryably and a delete answers 503. A missing object reads as `null`.
 */
export class S3BlobStore implements BlobStore {
  readonly client: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;
  private readonly mode: 'redirect' | 'stream';
  private readonly presignTtl: number;

  constructor(options: S3BlobStoreOptions) {
    if (typeof options.bucket !== 'string' || options.bucket === '') throw new TypeError('S3BlobStore: bucket is required');
    const ttl = options.presignedUrlTtlSeconds ?? 300;
    // SigV4 presigned URLs live at most seven days.
    if (!Number.isInteger(ttl) || ttl < 1 || ttl > 604_800) throw new TypeError('S3BlobStore: presignedUrlTtlSeconds must be an integer from 1 to 604800');
    if (options.serve !== undefined && options.serve !== 'redirect' && options.serve !== 'stream') {
      throw new TypeError("S3BlobStore: serve must be 'redirect' or 'stream'");
    }
    this.bucket = options.bucket;
    this.prefix = options.prefix ?? '';
    this.mode = options.serve ?? 'redirect';
    this.presignTtl = ttl;
    this.client =
      options.client ??
      new S3Client({
        region: options.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1',
        ...(options.endpoint !== undefined ? { endpoint: options.endpoint } : {}),
        ...(options.forcePathStyle !== undefined ? { forcePathStyle: options.forcePathStyle } : {}),
        ...(options.credentials !== undefined ? { credentials: options.credentials } : {}),
      });
  }

  async put(bytes: Uint8Array, mimeType: string): Promise<string> {
    const key = randomBytes(32).toString('base64url');
    await this.call('put', () =>
      this.client.send(
        // A copy: the SDK may read the body after the caller has reused its buffer.
        new PutObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key), Body: new Uint8Array(bytes), ContentType: mimeType, ContentLength: bytes.byteLength }),
      ),
    );
    return key;
  }

  async get(key: string): Promise<StoredBlob | null> {
    if (!isKey(key)) return null;
    const out = await this.call('get', () => this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key) })));
    if (out === null) return null;
    const bytes = out.Body ? await out.Body.transformToByteArray() : new Uint8Array(0);
    return { bytes, mimeType: out.ContentType ?? 'application/octet-stream' };
  }

  async delete(key: string): Promise<void> {
    if (!isKey(key)) return;
    await this.call('delete', () => this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key) })));
  }

  async deleteMany(keys: readonly string[]): Promise<void> {
    const valid = [...new Set(keys.filter(isKey))];
    for (let i = 0; i < valid.length; i += DELETE_BATCH) {
      const batch = valid.slice(i, i + DELETE_BATCH);
      const out = await this.call('delete', () =>
        this.client.send(
          new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: batch.map((k) => ({ Key: this.objectKey(k) })), Quiet: true } }),
        ),
      );
      // DeleteObjects answers 200 even when some keys failed: those are listed, and must not be reported as gone.
      const failed = out?.Errors?.filter((e) => e.Code !== 'NoSuchKey') ?? [];
      if (failed.length > 0) {
        throw new UnavailableError(`S3 could not delete ${failed.length} of ${batch.length} objects (${failed[0]!.Code}: ${failed[0]!.Message})`);
      }
    }
  }

  async serve(key: string, request: ServeRequest): Promise<ServedBlob | null> {
    if (!isKey(key)) return null;
    const objectKey = this.objectKey(key);
    // Checked first, so a deleted file answers the service's own 404 rather than a redirect to S3's error page.
    const head = await this.call('get', () => this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: objectKey })));
    if (head === null) return null;
    if (this.mode === 'redirect') {
      const expiresIn = Math.max(1, Math.min(this.presignTtl, Math.floor(request.expiresInSeconds)));
      const command = new GetObjectCommand({
        Bucket: this.bucket,
        Key: objectKey,
        ResponseContentDisposition: request.contentDisposition(head.ContentType ?? 'application/octet-stream'),
        ResponseCacheControl: `private, max-age=${expiresIn}`,
      });
      const url = await this.call('get', () => getSignedUrl(this.client, command, { expiresIn }));
      return url === null ? null : { redirect: url };
    }
    return {
      size: head.ContentLength ?? 0,
      mimeType: head.ContentType ?? 'application/octet-stream',
      read: (start, end) => this.read(objectKey, start, end),
    };
  }

  private async *read(objectKey: string, start: number, end: number): AsyncIterable<Uint8Array> {
    const out = await this.call('get', () => this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: objectKey, Range: `bytes=${start}-${end}` })));
    if (out === null) throw new UnavailableError('the object was deleted while it was being read');
    const body = out.Body as unknown as AsyncIterable<Uint8Array> | undefined;
    if (body) yield* body;
  }

  private objectKey(key: string): string {
    return `${this.prefix}${key}`;
  }

  /** Runs one S3 call: a missing object answers `null`; an outage becomes `UnavailableError`. */
  private async call<T>(what: string, run: () => Promise<T>): Promise<T | null> {
    try {
      return await run();
    } catch (err) {
      const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
      const name = (err as { name?: string }).name;
      if (status === 404 || name === 'NoSuchKey' || name === 'NotFound') {
        if (name === 'NoSuchBucket') throw new Error(`S3BlobStore: bucket ${this.bucket} does not exist`, { cause: err });
        return null;
      }
      // A 4xx other than timeout and throttling is a configuration error (credentials, policy, bucket), not an outage.
      if (status !== undefined && status >= 400 && status < 500 && status !== 408 && status !== 429) {
        throw new Error(`S3BlobStore: ${what} was refused (${status} ${name ?? ''})`, { cause: err });
      }
      throw new UnavailableError(`S3BlobStore: ${what} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
  }
}

function isKey(key: unknown): key is string {
  return typeof key === 'string' && KEY_PATTERN.test(key);
}
