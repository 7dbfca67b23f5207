import type { z } from 'zod';
import type { ErrorDetail } from '../domain/errors.js';
import type { BatchCreateRequest, BatchRequestItem } from '../use-cases/batches.js';
import type { CreateGenerationInput } from '../service-types.js';
import { createBodyDoc, schema } from '../openapi/common.js';
import { batchItemSchema, batchRequestDocSchema, batchRequestSchema } from './batch-schemas.js';
import { createBody as readCreateBody, readBody } from './request-body.js';
import { Refusal, fail, header } from './respond.js';
import type { BodySpec } from './route.js';
import type { HttpRequest } from './types.js';

/** The request bodies of the route table: how each is read and checked, and its schema in the document. */

/** A create's (and a quote's) body: checked down to the model-independent fields; documented one variant per model. */
export const createBody: BodySpec<CreateGenerationInput> = {
  doc: (ctx) => createBodyDoc(ctx.registry),
  read(req, bodyBytes) {
    const body = readCreateBody(req, bodyBytes);
    if ('res' in body) throw new Refusal(body.res);
    return body.value;
  },
};

/** A JSON body handed as it is to a use case that checks it (the admin routes); documented with `doc`. */
export function jsonBody(doc: z.ZodType): BodySpec<unknown> {
  return {
    doc: () => schema(doc, 'input'),
    read(req, bodyBytes) {
      const read = readBody(req, bodyBytes);
      if (!read.ok) throw new Refusal(read.res);
      return read.value;
    },
  };
}

/** Whether the request came with a body (declared, streamed, or read), whatever its type. */
function hasBody(req: HttpRequest): boolean {
  if (req.bodyError !== undefined) return true;
  if (Number(header(req, 'content-length')) > 0 || header(req, 'transfer-encoding') !== undefined) return true;
  if (req.body !== undefined) return (typeof req.body === 'string' ? req.body.length : req.body.byteLength) > 0;
  return false;
}

/** No body at all (a DELETE): one is a client mistake, refused before anything is done. */
export const noBody: BodySpec<void> = {
  read(req) {
    if (hasBody(req)) throw new Refusal(fail('invalid_request', 'A DELETE request takes no body.', [{ field: 'body', code: 'invalid_value', message: 'must be empty' }]));
  },
};

/** The first issue of a value against a schema, as the contract's error detail under `field`. */
function detailOf(field: string, issue: { path: readonly PropertyKey[]; message: string; code: string }): ErrorDetail {
  const at = issue.path.length > 0 ? `${field}.${issue.path.map(String).join('.')}` : field;
  return { field: at, code: issue.code === 'invalid_type' && issue.message.includes('undefined') ? 'required' : 'invalid_value', message: `${at}: ${issue.message}` };
}

/** A batch: the whole checked first, then each request on its own, so the answer names every bad one by its index. */
export const batchBody: BodySpec<BatchCreateRequest> = {
  doc: () => schema(batchRequestDocSchema, 'input'),
  read(req, bodyBytes) {
    const body = readBody(req, bodyBytes);
    if (!body.ok) throw new Refusal(body.res);
    const value = body.value;
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Refusal(fail('invalid_request', 'The request body must be a JSON object.'));
    const parsed = batchRequestSchema.safeParse(value);
    if (!parsed.success) {
      throw new Refusal(fail('invalid_request', 'The batch is not valid; nothing was created.', parsed.error.issues.slice(0, 50).map((i) => detailOf('body', i))));
    }
    const details: ErrorDetail[] = [];
    const requests: BatchRequestItem[] = [];
    parsed.data.requests.forEach((item, i) => {
      const r = batchItemSchema.safeParse(item);
      if (r.success) requests.push({ modelId: r.data.modelId, ...(r.data.settings !== undefined ? { settings: r.data.settings } : {}), ...(r.data.metadata !== undefined ? { metadata: r.data.metadata } : {}) });
      else details.push(detailOf(`requests[${i}]`, r.error.issues[0]!));
    });
    if (details.length > 0) {
      const n = parsed.data.requests.length;
      throw new Refusal(fail('invalid_request', `${details.length} of the ${n} requests ${details.length === 1 ? 'is' : 'are'} not valid; nothing was created.`, details));
    }
    return { requests, ...(parsed.data.webhook ? { webhook: parsed.data.webhook } : {}) };
  },
};
