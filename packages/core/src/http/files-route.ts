import { inject, injectable } from 'tsyringe';
import { FileUrlSigner } from '../files.js';
import type { BlobStore } from '../ports/blob.js';
import { TOKENS } from '../tokens.js';
import { decodeSegment, fail, header } from './respond.js';
import type { HttpRequest, HttpResponse } from './types.js';

const EXTENSIONS: Record<string, string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/webp': 'webp',
  'image/gif': 'gif',
  'image/svg+xml': 'svg',
  'video/mp4': 'mp4',
  'video/webm': 'webm',
  'audio/wav': 'wav',
  'audio/x-wav': 'wav',
  'audio/mpeg': 'mp3',
  'audio/ogg': 'ogg',
  'model/gltf-binary': 'glb',
  'model/gltf+json': 'gltf',
  'text/plain': 'txt',
  'application/json': 'json',
};

/** A file name for Content-Disposition: the key (URL-safe already) and an extension from the type. */
function fileName(key: string, mimeType: string): string {
  const base = key.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 100) || 'result';
  const ext = EXTENSIONS[mimeType.split(';')[0]!.trim().toLowerCase()];
  return ext && !base.endsWith(`.${ext}`) ? `${base}.${ext}` : base;
}

/**
 * One byte range of `Range: bytes=...` (RFC 9110 14.2) as [first, last]; null to answer the whole file (no header,
 * another unit, several ranges, or a malformed one); 'unsatisfiable' for a range that starts past the end.
 */
function parseRange(value: string | undefined, size: number): [number, number] | null | 'unsatisfiable' {
  if (!value) return null;
  const m = /^bytes=(\d{0,15})-(\d{0,15})$/.exec(value.trim());
  if (!m || (m[1] === '' && m[2] === '')) return null;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0) return 'unsatisfiable';
    return size === 0 ? 'unsatisfiable' : [Math.max(0, size - suffix), size - 1];
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size) return 'unsatisfiable';
  if (end < start) return null;
  return [start, end];
}

/** `GET /v1/files/{key}?exp&sig`: a result file behind its signed, expiring link, with byte ranges. */
@injectable()
export class FilesRoute {
  constructor(
    @inject(FileUrlSigner) private readonly signer: FileUrlSigner,
    @inject(TOKENS.Blobs) private readonly blobs: BlobStore,
  ) {}

  async serve(req: HttpRequest, rawKey: string, query: string): Promise<HttpResponse> {
    const key = decodeSegment(rawKey);
    const params = new URLSearchParams(query);
    if (key === null || !this.signer.verify(key, params.get('exp'), params.get('sig'))) {
      return fail('forbidden', 'This file link is invalid or has expired.');
    }
    const blob = await this.blobs.get(key);
    if (!blob) return fail('not_found', 'File not found.');
    const exp = Number(params.get('exp'));
    const size = blob.bytes.byteLength;
    const headers: Record<string, string> = {
      'content-type': blob.mimeType,
      'cache-control': `private, max-age=${Math.max(0, Math.floor(exp - Date.now() / 1000))}`,
      'x-content-type-options': 'nosniff',
      // A provider's file must never run as a page of the host's origin.
      'content-security-policy': "default-src 'none'; sandbox",
      'accept-ranges': 'bytes',
      'content-disposition': `inline; filename="${fileName(key, blob.mimeType)}"`,
    };
    const range = parseRange(header(req, 'range'), size);
    if (range === 'unsatisfiable') {
      return { status: 416, headers: { ...headers, 'content-range': `bytes */${size}`, 'content-length': '0' }, body: '' };
    }
    if (range) {
      const [start, end] = range;
      return {
        status: 206,
        headers: { ...headers, 'content-range': `bytes ${start}-${end}/${size}`, 'content-length': String(end - start + 1) },
        body: blob.bytes.subarray(start, end + 1),
      };
    }
    return { status: 200, headers: { ...headers, 'content-length': String(size) }, body: blob.bytes };
  }
}
