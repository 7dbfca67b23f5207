import { inject, injectable } from 'tsyringe';
import { FileUrlSigner } from '../domain/file-urls.js';
import { FETCH_DEFAULTS, fetchMedia, OutboundError, type FetchedMedia, type FetchMediaOptions } from '../outbound/guard.js';
import type { BlobStore } from '../ports/blob.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';

/**
 * `ctx.files.fetch`: a media setting's URL, as a model reads it. The service's own file links (uploads, generation
 * files: signed by this service, whatever host they name) are read from the blob store, with no HTTP request, so a
 * service on a loopback or private address can take its own files as inputs; every other URL goes through the
 * outbound guard (`fetchMedia`). Which own links a create may name (the caller's, unexpired) was decided when it was
 * admitted (`fileReferenceRefusal`); a link that expired while the generation waited is still read while its file is
 * kept.
 */
@injectable()
export class MediaReader {
  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(FileUrlSigner) private readonly signer: FileUrlSigner,
    @inject(TOKENS.Blobs) private readonly blobs: BlobStore,
  ) {}

  async fetch(url: string, options: FetchMediaOptions = {}): Promise<FetchedMedia> {
    const ref = this.signer.read(url, this.options.clock.now());
    if (ref === null || ref.state === 'forged') return fetchMedia(url, options);
    options.signal?.throwIfAborted();
    const label = `${ref.base}/v1/files/${encodeURIComponent(ref.key)}`;
    const file = await this.blobs.get(ref.key);
    if (file === null) throw new OutboundError('http_status', `${label} is gone (the upload expired or its generation was deleted)`);
    const maxBytes = options.maxBytes ?? FETCH_DEFAULTS.maxBytes;
    if (file.bytes.byteLength > maxBytes) throw new OutboundError('too_large', `${label} is ${file.bytes.byteLength} bytes, over the limit of ${maxBytes}`);
    return { bytes: file.bytes, contentType: file.mimeType, url };
  }
}
