import { GenServiceError } from './errors.js';
import { isRecord, type Transport } from './transport.js';

/** What `uploads.create` answers: the file's id and the link to give as an `image` / `audio` setting. */
export interface Upload {
  /** The upload's id. */
  id: string;
  /**
   * The service's own signed URL of the file. Give it (in an array) as a media setting of your generations, e.g.
   * `settings: { images: [upload.url] }`; only your own generations take it, and only until `expiresAt`.
   */
  url: string;
  /** ISO 8601: when the URL stops working; the file is deleted some time after it. */
  expiresAt: string;
}

/** A file to upload: a `Blob` or `File` (browsers, Node 20+), or bytes (a `Uint8Array`, as Node's `readFile` gives, or an `ArrayBuffer`). */
export type UploadData = Blob | Uint8Array | ArrayBuffer;

export interface UploadOptions {
  /**
   * The file's type, one of the service's `uploads.types` (by default PNG, JPEG, WebP, GIF and common audio).
   * Default: the `type` of a Blob or File; bytes have none, so pass it for them.
   */
  contentType?: string;
  signal?: AbortSignal;
}

/** `client.uploads`: files of yours kept by the service for a while, to give as inputs of your generations. */
export interface UploadsApi {
  /**
   * POST /v1/uploads: sends the file as the request body. Throws `PayloadTooLargeError` (413) over the service's
   * `uploads.maxBytes`, a `GenServiceError` with code `unsupported_media_type` (415) for a type it does not take, and
   * a `TypeError` before sending anything when no content type is known. Not retried (each call stores a new file).
   *
   * @example
   * const upload = await client.uploads.create(fileInput.files[0]); // a File from <input type="file">
   * const done = await client.generations.run({ modelId: 'demo-image-remix', settings: { prompt: 'dusk', images: [upload.url] } });
   * // In Node: await client.uploads.create(await readFile('cat.png'), { contentType: 'image/png' });
   */
  create(file: UploadData, options?: UploadOptions): Promise<Upload>;
}

export function uploadsApi(transport: Transport): UploadsApi {
  return {
    async create(file, options = {}) {
      const given = options.contentType ?? (typeof Blob !== 'undefined' && file instanceof Blob ? file.type : undefined);
      if (!given) throw new TypeError('uploads.create: the file has no content type; pass { contentType } (for example "image/png")');
      const body = await transport.request('POST', '/v1/uploads', { raw: { data: file, contentType: given }, signal: options.signal });
      if (!isRecord(body) || typeof body.id !== 'string' || typeof body.url !== 'string' || typeof body.expiresAt !== 'string') {
        throw new GenServiceError('POST /v1/uploads: no id, url and expiresAt', { status: 201, code: 'invalid_response' });
      }
      return { id: body.id, url: body.url, expiresAt: body.expiresAt };
    },
  };
}
