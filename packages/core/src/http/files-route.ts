import { inject, injectable } from 'tsyringe';
import { FileUrlSigner } from '../domain/file-urls.js';
import type { BlobStore } from '../ports/blob.js';
import type { Clock } from '../ports/clock.js';
import { TOKENS } from '../tokens.js';
import { fileResponse } from './file-response.js';
import { decodeSegment, fail, header } from './respond.js';
import type { HttpRequest, HttpResponse } from './types.js';

/** `GET /v1/files/{key}?exp&sig`: a result file behind its signed, expiring link, with byte ranges. */
@injectable()
export class FilesRoute {
  constructor(
    @inject(FileUrlSigner) private readonly signer: FileUrlSigner,
    @inject(TOKENS.Blobs) private readonly blobs: BlobStore,
    @inject(TOKENS.Clock) private readonly clock: Clock,
  ) {}

  /** The file of a link: its key as it came in the path, its `exp` and `sig` query parameters. */
  async serve(req: HttpRequest, rawKey: string, exp: string | undefined, sig: string | undefined): Promise<HttpResponse> {
    const key = decodeSegment(rawKey);
    if (key === null || !this.signer.verify(key, exp ?? null, sig ?? null, this.clock.now())) {
      return fail('forbidden', 'This file link is invalid or has expired.');
    }
    const res = await fileResponse(this.blobs, key, Number(exp), header(req, 'range'), this.clock.now());
    return res ?? fail('not_found', 'File not found.');
  }

  /**
   * A file its caller may read (checked by the route: its own generation's), answered as the files route answers a
   * link, Range included; `ttlSeconds` is how long a cache or a store's redirect may keep it.
   */
  async serveKey(req: HttpRequest, key: string, ttlSeconds: number): Promise<HttpResponse> {
    const now = this.clock.now();
    const res = await fileResponse(this.blobs, key, Math.floor(now / 1000) + ttlSeconds, header(req, 'range'), now);
    return res ?? fail('not_found', 'File not found.');
  }
}
