/**
 * A small, bounded `multipart/form-data` reader (RFC 7578) for bodies already held in memory (within
 * `limits.bodyBytes`): text fields and files, nothing written to disk, no streaming. What the OpenAI surface's uploads
 * need (`POST /openai/v1/images/edits`, `/videos`), and no more: at most `MAX_PARTS` parts, part headers of at most
 * `MAX_HEADER_BYTES`, no nested multipart, no `Content-Transfer-Encoding`.
 */

/** One file part. */
export interface FormFile {
  /** The part's `name`. */
  field: string;
  filename: string;
  /** The part's Content-Type (`application/octet-stream` when it names none). */
  mimeType: string;
  bytes: Uint8Array;
}

export interface FormData {
  /** Text fields by name; a name given more than once keeps every value, in order. */
  fields: Map<string, string[]>;
  files: FormFile[];
}

export const MAX_PARTS = 64;
const MAX_HEADER_BYTES = 8 * 1024;
const CRLF = Buffer.from('\r\n');
const HEADER_END = Buffer.from('\r\n\r\n');
const utf8 = new TextDecoder('utf-8', { fatal: true });
/** A media type (`type/subtype`, RFC 9110 tokens): a file's type is the Content-Type it is served with later. */
const MEDIA_TYPE = /^[\w!#$%&'*+.^`|~-]+\/[\w!#$%&'*+.^`|~-]+$/;

/** Why a body is not a form this reader takes, in words for a 400. */
export class MultipartError extends Error {}

/** The boundary of a `multipart/form-data` Content-Type; undefined for any other type. */
export function boundaryOf(contentType: string | undefined): string | undefined {
  if (!contentType || !/^\s*multipart\/form-data\s*(;|$)/i.test(contentType)) return undefined;
  const m = /;\s*boundary\s*=\s*(?:"([^"]{1,70})"|([^\s;"]{1,70}))/i.exec(contentType);
  return m ? (m[1] ?? m[2]) : undefined;
}

/** A part header's parameter (`name="image"`), unquoted; undefined when absent. */
function param(header: string, name: string): string | undefined {
  const m = new RegExp(`;\\s*${name}\\s*=\\s*(?:"((?:[^"\\\\]|\\\\.)*)"|([^;\\s]+))`, 'i').exec(header);
  if (!m) return undefined;
  return m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : m[2];
}

/** Reads a whole multipart body. Throws `MultipartError` for anything malformed or beyond the bounds. */
export function parseMultipart(body: Uint8Array, boundary: string): FormData {
  const buf = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const delimiter = Buffer.from(`--${boundary}`);
  const out: FormData = { fields: new Map(), files: [] };
  let at = buf.indexOf(delimiter);
  if (at === -1) throw new MultipartError('the body has no part (its boundary does not appear)');
  let parts = 0;
  for (;;) {
    at += delimiter.length;
    // `--` after a delimiter ends the body.
    if (buf[at] === 0x2d && buf[at + 1] === 0x2d) return out;
    // Transport padding (spaces, tabs) may follow a delimiter before its line break.
    while (buf[at] === 0x20 || buf[at] === 0x09) at++;
    if (buf.compare(CRLF, 0, 2, at, at + 2) !== 0) throw new MultipartError('a boundary is not followed by a line break');
    at += 2;
    if (++parts > MAX_PARTS) throw new MultipartError(`the form has more than ${MAX_PARTS} parts`);
    const headEnd = buf.indexOf(HEADER_END, at);
    if (headEnd === -1 || headEnd - at > MAX_HEADER_BYTES) throw new MultipartError('a part has no end of headers within 8 KiB');
    const headers = buf.toString('latin1', at, headEnd).split('\r\n');
    const next = buf.indexOf(Buffer.concat([CRLF, delimiter]), headEnd + 4);
    if (next === -1) throw new MultipartError('the body ends inside a part (no closing boundary)');
    const content = buf.subarray(headEnd + 4, next);
    addPart(out, headers, content);
    at = next + 2;
  }
}

function addPart(out: FormData, headers: string[], content: Buffer): void {
  let disposition: string | undefined;
  let type: string | undefined;
  for (const line of headers) {
    const i = line.indexOf(':');
    if (i <= 0) throw new MultipartError('a part header is malformed');
    const name = line.slice(0, i).trim().toLowerCase();
    const value = line.slice(i + 1).trim();
    if (name === 'content-disposition') disposition = value;
    else if (name === 'content-type') type = value;
    else if (name === 'content-transfer-encoding' && !/^(binary|8bit|7bit)$/i.test(value)) throw new MultipartError('a part uses a Content-Transfer-Encoding this reader does not take');
  }
  if (!disposition || !/^form-data\b/i.test(disposition)) throw new MultipartError('a part has no Content-Disposition: form-data');
  // Header values are read as Latin-1 bytes: a UTF-8 name or file name is decoded back.
  const field = utf8Of(param(disposition, 'name'));
  if (!field) throw new MultipartError('a part has no name');
  const filename = param(disposition, 'filename');
  if (filename !== undefined) {
    const mimeType = type?.split(';')[0]!.trim().toLowerCase() || 'application/octet-stream';
    if (!MEDIA_TYPE.test(mimeType)) throw new MultipartError(`the file ${field} has a Content-Type that is no media type`);
    out.files.push({ field, filename: utf8Of(filename) ?? '', mimeType, bytes: new Uint8Array(content) });
    return;
  }
  let text: string;
  try {
    text = utf8.decode(content);
  } catch {
    throw new MultipartError(`the field ${field} is not UTF-8 text`);
  }
  const list = out.fields.get(field);
  if (list) list.push(text);
  else out.fields.set(field, [text]);
}

function utf8Of(latin1: string | undefined): string | undefined {
  if (latin1 === undefined) return undefined;
  try {
    return utf8.decode(Buffer.from(latin1, 'latin1'));
  } catch {
    return latin1;
  }
}
