import { z } from 'zod';
import { boundaryOf, MultipartError, parseMultipart } from '../multipart.js';
import { fail, header, Refusal } from '../respond.js';
import { type BodySpec, type RouteEntry, route } from '../route.js';
import type { HttpRequest } from '../types.js';
import { jsonOf } from './shared.js';

/** Files users upload as inputs of their generations. */

const uploadSchema = z.object({
  id: z.string().describe('The upload'),
  url: z.string().describe("The service's own signed URL of the file: give it as an image / audio setting"),
  expiresAt: z.string().describe('ISO 8601: when the URL stops working'),
});

/**
 * The file of a `multipart/form-data` body: exactly one file part (any field name; text fields are ignored), with
 * the part's own Content-Type. Zero or several files are a 400 that says so.
 */
function formFile(raw: Uint8Array, boundary: string): { bytes: Uint8Array; contentType: string | undefined } {
  let form: ReturnType<typeof parseMultipart>;
  try {
    form = parseMultipart(raw, boundary);
  } catch (err) {
    if (err instanceof MultipartError) throw new Refusal(fail('invalid_request', `The multipart body is not valid: ${err.message}.`));
    throw err;
  }
  if (form.files.length !== 1) {
    const message = form.files.length === 0 ? 'holds no file part (send the file as a part with a filename)' : `holds ${form.files.length} files; an upload is one file`;
    throw new Refusal(fail('invalid_request', `The multipart body ${message}.`, [{ field: 'file', code: form.files.length === 0 ? 'required' : 'too_many', message }]));
  }
  const file = form.files[0]!;
  return { bytes: file.bytes, contentType: file.mimeType };
}

/**
 * The file as the raw body (its bytes as sent, with the request's Content-Type), or as the one file of a
 * `multipart/form-data` body (with its part's Content-Type). The content type and size are the use case's to check.
 */
const uploadBody: BodySpec<{ bytes: Uint8Array; contentType: string | undefined }> = {
  content: ({ options }) => ({
    ...Object.fromEntries(options.uploads.types.map((type) => [type, { schema: { type: 'string', format: 'binary' } }])),
    'multipart/form-data': {
      schema: { type: 'object', properties: { file: { type: 'string', format: 'binary', description: 'The file, with its Content-Type' } }, required: ['file'] },
    },
  }),
  read(req: HttpRequest, limit: number) {
    const tooLarge = () => new Refusal(fail('payload_too_large', `The request body is larger than ${limit} bytes.`));
    if (req.bodyError === 'payload_too_large') throw tooLarge();
    const declared = Number(header(req, 'content-length'));
    if (Number.isFinite(declared) && declared > limit) throw tooLarge();
    const encoding = header(req, 'content-encoding')?.trim().toLowerCase();
    if (encoding !== undefined && encoding !== '' && encoding !== 'identity') {
      throw new Refusal(fail('unsupported_media_type', 'Compressed request bodies are not accepted (send it without Content-Encoding).'));
    }
    if (req.body === undefined) throw new Refusal(fail('invalid_request', 'An upload needs the file as its raw body (no host body parser in front of this route).'));
    const contentType = header(req, 'content-type');
    const boundary = boundaryOf(contentType);
    // A string body is what a host's text parser left: its characters are the bytes (Latin-1) of a form, UTF-8 of a file.
    const bytes = typeof req.body === 'string' ? (boundary !== undefined ? Buffer.from(req.body, 'latin1') : new TextEncoder().encode(req.body)) : req.body;
    if (bytes.byteLength > limit) throw tooLarge();
    if (boundary !== undefined) return formFile(bytes, boundary);
    if (contentType !== undefined && /^\s*multipart\/form-data/i.test(contentType)) throw new Refusal(fail('invalid_request', 'A multipart/form-data body needs its boundary in the Content-Type.'));
    return { bytes, contentType };
  },
};

export const uploadRoutes: RouteEntry[] = [
  route({
    name: 'createUpload',
    method: 'POST',
    path: '/v1/uploads',
    auth: 'user',
    scope: 'generate',
    rate: 'create',
    body: uploadBody,
    answers: { 201: { description: 'Stored', schema: uploadSchema } },
    errors: [400, 403, 413, 415],
    doc: {
      operationId: 'createUpload',
      tag: 'Files',
      summary: 'Upload an input file',
      description:
        "The file as the raw body with its Content-Type, or as the one file part of a `multipart/form-data` body with the part's Content-Type (`uploads.types`; at most `uploads.maxBytes`). Kept in the blob store until it expires; answers the service's own signed URL of it, which works until `expiresAt` (`uploads.ttlSeconds`) and which only the uploader's generations take as an `image` / `audio` input.",
    },
    handle(call, s) {
      const { bytes, contentType } = call.body();
      return s.uploads.create(call.userId, bytes, contentType, call.req.baseUrl).then((upload) => jsonOf(201, upload));
    },
  }),
];
