import { z } from 'zod';
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

/** The raw body: its bytes as sent (the content type and size are the use case's to check). */
const rawBody: BodySpec<{ bytes: Uint8Array; contentType: string | undefined }> = {
  content: ({ options }) => Object.fromEntries(options.uploads.types.map((type) => [type, { schema: { type: 'string', format: 'binary' } }])),
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
    const bytes = typeof req.body === 'string' ? new TextEncoder().encode(req.body) : req.body;
    if (bytes.byteLength > limit) throw tooLarge();
    return { bytes, contentType: header(req, 'content-type') };
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
    body: rawBody,
    answers: { 201: { description: 'Stored', schema: uploadSchema } },
    errors: [400, 403, 413, 415],
    doc: {
      operationId: 'createUpload',
      tag: 'Files',
      summary: 'Upload an input file',
      description:
        "The file as the raw body, with its Content-Type (`uploads.types`; at most `uploads.maxBytes`). Kept in the blob store; answers the service's own signed URL of it, which works until `expiresAt` (`uploads.ttlSeconds`).",
    },
    handle(call, s) {
      const { bytes, contentType } = call.body();
      return s.uploads.create(call.userId, bytes, contentType, call.req.baseUrl).then((upload) => jsonOf(201, upload));
    },
  }),
];
