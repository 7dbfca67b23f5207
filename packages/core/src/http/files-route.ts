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

  async serve(req: HttpRequest, rawKey: string, query: string): Promise<HttpResponse> {
    const key = decodeSegment(rawKey);
    const params = new URLSearchParams(query);
    if (key === null || !this.signer.verify(key, params.get('exp'), params.get('sig'), this.clock.now())) {
      return fail('forbidden', 'This file link is invalid or has expired.');
    }
    const res = await fileResponse(this.blobs, key, Number(params.get('exp')), header(req, 'range'), this.clock.now());
    return res ?? fail('not_found', 'File not found.');
  }
}
