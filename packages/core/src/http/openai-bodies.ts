import type { UploadedFile } from '../openai/uploads.js';
import { MultipartError, boundaryOf, parseMultipart } from './multipart.js';
import { readBody } from './request-body.js';
import { Refusal, fail, header } from './respond.js';
import type { BodySpec } from './route.js';

/** The request bodies of the OpenAI surface: a JSON object, or a multipart form with files. */

/** A request's fields and its uploaded files by field (`image` and `image[]` are both `image`). */
export interface OpenAiBody {
  fields: Record<string, unknown>;
  files: Record<string, UploadedFile[]>;
}

/** Multipart fields sent as text that OpenAI's schema makes numbers or booleans. */
const NUMBERS = new Set(['n', 'partial_images', 'speed', 'output_compression']);
const BOOLEANS = new Set(['stream']);
/** File fields each route takes (any other file part is a 400 naming it). */
export type FileFields = readonly string[];

function refuse(field: string, message: string): Refusal {
  return new Refusal(fail('invalid_request', `${field}: ${message}`, [{ field, code: 'invalid_value', message }]));
}

/** A JSON object body, as it is. */
export const openAiJson: BodySpec<OpenAiBody> = {
  read(req, bodyBytes) {
    const read = readBody(req, bodyBytes);
    if (!read.ok) throw new Refusal(read.res);
    const value = read.value;
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Refusal(fail('invalid_request', 'The request body must be a JSON object.'));
    return { fields: value as Record<string, unknown>, files: {} };
  },
};

/** A multipart form (the files of `fileFields`) or a JSON object; anything else is 415. */
export function openAiForm(fileFields: FileFields): BodySpec<OpenAiBody> {
  return {
    read(req, bodyBytes) {
      const boundary = boundaryOf(header(req, 'content-type'));
      if (boundary === undefined) return openAiJson.read(req, bodyBytes);
      if (req.bodyError === 'payload_too_large') return openAiJson.read(req, bodyBytes);
      const declared = Number(header(req, 'content-length'));
      const raw = req.body;
      if ((Number.isFinite(declared) && declared > bodyBytes) || (raw !== undefined && (typeof raw === 'string' ? Buffer.byteLength(raw) : raw.byteLength) > bodyBytes)) {
        throw new Refusal(fail('payload_too_large', `The request body is larger than ${bodyBytes} bytes.`));
      }
      const encoding = header(req, 'content-encoding');
      if (encoding !== undefined && !/^\s*(identity)?\s*$/i.test(encoding)) {
        throw new Refusal(fail('unsupported_media_type', 'Compressed request bodies are not accepted (send it without Content-Encoding).'));
      }
      // A host body parser that consumed a form (none of the adapters' usual ones does) leaves no bytes to read.
      if (raw === undefined) throw new Refusal(fail('invalid_request', 'The multipart body could not be read (a host body parser consumed it).'));
      let form: ReturnType<typeof parseMultipart>;
      try {
        form = parseMultipart(typeof raw === 'string' ? Buffer.from(raw, 'latin1') : raw, boundary);
      } catch (err) {
        if (err instanceof MultipartError) throw new Refusal(fail('invalid_request', `The multipart body is not valid: ${err.message}.`));
        throw err;
      }
      return formBody(form, fileFields);
    },
  };
}

function formBody(form: ReturnType<typeof parseMultipart>, fileFields: FileFields): OpenAiBody {
  const fields: Record<string, unknown> = {};
  for (const [name, values] of form.fields) {
    const field = name.endsWith('[]') ? name.slice(0, -2) : name;
    const value = values.length === 1 && !name.endsWith('[]') ? values[0]! : values;
    if (NUMBERS.has(field) && typeof value === 'string') {
      const n = Number(value);
      if (value.trim() === '' || !Number.isFinite(n)) throw refuse(field, 'must be a number');
      fields[field] = n;
    } else if (BOOLEANS.has(field) && typeof value === 'string') {
      if (value !== 'true' && value !== 'false') throw refuse(field, 'must be true or false');
      fields[field] = value === 'true';
    } else {
      fields[field] = value;
    }
  }
  const files: Record<string, UploadedFile[]> = {};
  for (const f of form.files) {
    const field = f.field.endsWith('[]') ? f.field.slice(0, -2) : f.field;
    if (!fileFields.includes(field)) throw refuse(field, `is not a file field of this request (${fileFields.join(', ') || 'none'})`);
    (files[field] ??= []).push({ bytes: f.bytes, mimeType: f.mimeType });
  }
  return { fields, files };
}
