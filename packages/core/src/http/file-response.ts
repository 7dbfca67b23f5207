import type { BlobStore } from '../ports/blob.js';
import type { HttpResponse } from './types.js';

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

function contentDisposition(key: string, mimeType: string): string {
  return `inline; filename="${fileName(key, mimeType)}"`;
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

/** A file to answer with: its size and type, and its bytes for the one range the answer sends. */
interface FileSource {
  size: number;
  mimeType: string;
  bytes(start: number, end: number): Uint8Array | AsyncIterable<Uint8Array>;
}

/**
 * The answer to a verified file link (`exp` is its expiry, in seconds): `null` when the file is gone. A store with
 * `serve` answers for itself, by a redirect to its own short-lived URL or by streaming ranges; any other store is
 * read with `get`. Either way the status, range and headers are decided here, once.
 */
export async function fileResponse(blobs: BlobStore, key: string, exp: number, range: string | undefined, nowMs: number): Promise<HttpResponse | null> {
  const remaining = Math.max(0, Math.floor(exp - nowMs / 1000));
  let source: FileSource;
  if (blobs.serve) {
    const served = await blobs.serve(key, { contentDisposition: (mimeType) => contentDisposition(key, mimeType), expiresInSeconds: remaining });
    if (!served) return null;
    if ('redirect' in served) {
      // Never cached: the target expires, and a cached redirect would outlive a deleted file.
      return { status: 302, headers: { location: served.redirect, 'cache-control': 'private, no-store', 'content-length': '0' }, body: '' };
    }
    source = { size: served.size, mimeType: served.mimeType, bytes: (start, end) => served.read(start, end) };
  } else {
    const blob = await blobs.get(key);
    if (!blob) return null;
    source = { size: blob.bytes.byteLength, mimeType: blob.mimeType, bytes: (start, end) => blob.bytes.subarray(start, end + 1) };
  }
  const { size, mimeType } = source;
  const headers: Record<string, string> = {
    'content-type': mimeType,
    'cache-control': `private, max-age=${remaining}`,
    'x-content-type-options': 'nosniff',
    // A provider's file must never run as a page of the host's origin.
    'content-security-policy': "default-src 'none'; sandbox",
    'accept-ranges': 'bytes',
    'content-disposition': contentDisposition(key, mimeType),
  };
  const wanted = parseRange(range, size);
  if (wanted === 'unsatisfiable') {
    return { status: 416, headers: Object.assign(headers, { 'content-range': `bytes */${size}`, 'content-length': '0' }), body: '' };
  }
  if (wanted) {
    const [start, end] = wanted;
    return {
      status: 206,
      headers: Object.assign(headers, { 'content-range': `bytes ${start}-${end}/${size}`, 'content-length': String(end - start + 1) }),
      body: source.bytes(start, end),
    };
  }
  return { status: 200, headers: Object.assign(headers, { 'content-length': String(size) }), body: size === 0 ? new Uint8Array(0) : source.bytes(0, size - 1) };
}
