import type { ErrorDetail } from '../domain/errors.js';
import type { CreateGenerationInput } from '../service-types.js';
import { fail, header } from './respond.js';
import { METADATA_LIMITS, createRequestSchema } from './schemas.js';
import type { HttpRequest, HttpResponse } from './types.js';

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;.*)?$/i;
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/**
 * The JSON body of a request, checked against the service's body limit, its encoding and type; the error answer
 * otherwise. Takes the raw bytes, or what a host's body parser already made of them.
 */
export function readBody(req: HttpRequest, limit: number): { ok: true; value: unknown } | { ok: false; res: HttpResponse } {
  if (req.bodyError === 'payload_too_large') {
    // A host body parser's lower limit refused it: name that one.
    const applied = req.bodyLimitApplied;
    return tooLarge(applied !== undefined && Number.isFinite(applied) && applied > 0 && applied < limit ? applied : limit);
  }
  const declared = Number(header(req, 'content-length'));
  if (Number.isFinite(declared) && declared > limit) return tooLarge(limit);
  // Compressed bodies are not taken: inflating them is a way around the body limit, and the API never needs them.
  const encoding = header(req, 'content-encoding');
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity' && encoding.trim() !== '') {
    return { ok: false, res: fail('unsupported_media_type', 'Compressed request bodies are not accepted (send it without Content-Encoding).') };
  }
  const type = header(req, 'content-type');
  if (!type || !JSON_TYPE.test(type.trim())) {
    return { ok: false, res: fail('unsupported_media_type', 'The request body must be JSON (Content-Type: application/json).') };
  }
  if (req.bodyError === 'invalid_json') return { ok: false, res: fail('invalid_json', 'The request body is not valid JSON.') };
  if (req.body === undefined) {
    if (req.parsedBody !== undefined) return { ok: true, value: req.parsedBody };
    return { ok: false, res: fail('invalid_json', 'The request body is not valid JSON.') };
  }
  const size = typeof req.body === 'string' ? Buffer.byteLength(req.body) : req.body.byteLength;
  if (size > limit) return tooLarge(limit);
  try {
    const text = typeof req.body === 'string' ? req.body : utf8.decode(req.body);
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false, res: fail('invalid_json', 'The request body is not valid JSON.') };
  }
}

/** The 413 of a body over `applied` bytes. */
function tooLarge(applied: number): { ok: false; res: HttpResponse } {
  return { ok: false, res: fail('payload_too_large', `The request body is larger than ${applied} bytes.`) };
}

/** The body of a create (or quote), checked down to the model-independent fields. */
export function createBody(req: HttpRequest, limit: number): { value: CreateGenerationInput } | { res: HttpResponse } {
  const body = readBody(req, limit);
  if (!body.ok) return { res: body.res };
  const value = body.value;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return { res: fail('invalid_request', 'The request body must be a JSON object.') };
  }
  const parsed = createRequestSchema.safeParse(value);
  if (!parsed.success) {
    const details = parsed.error.issues.slice(0, 50).map((i) => issueDetail(i.path, i.code, value as Record<string, unknown>, ruleOf(i)));
    return { res: fail('invalid_request', 'The request is not valid.', details) };
  }
  const { modelId, settings, metadata, webhook, expiresAfterSeconds, priority, deadline } = parsed.data;
  // Only the fields given, set one by one (conditional spreads build and copy an object each: issue 36).
  const input: CreateGenerationInput = { modelId };
  if (settings !== undefined) input.settings = settings;
  if (metadata !== undefined) input.metadata = metadata;
  if (webhook !== undefined) input.webhook = webhook;
  if (expiresAfterSeconds !== undefined) input.expiresAfterSeconds = expiresAfterSeconds;
  if (priority !== undefined) input.priority = priority;
  if (deadline !== undefined) input.deadline = deadline;
  return { value: input };
}

/**
 * The sentence of a rule the schema states itself (text no store can keep, a `__proto__` key), also inside a record
 * key's issue; undefined for zod's own checks, which get the field's general sentence.
 */
function ruleOf(issue: { code: string; message: string; issues?: ReadonlyArray<{ code: string; message: string }> }): string | undefined {
  if (issue.code === 'custom') return issue.message;
  if (issue.code === 'invalid_key') return issue.issues?.find((inner) => inner.code === 'custom')?.message;
  return undefined;
}

/** One schema issue as the contract's error detail, named by its top-level field. */
function issueDetail(path: readonly PropertyKey[], code: string, value: Record<string, unknown>, rule?: string): ErrorDetail {
  const top = path.length > 0 ? String(path[0]) : 'body';
  const missing = code === 'invalid_type' && value[top] === undefined;
  if (missing) return { field: top, code: 'required', message: `${top} is required` };
  if (rule !== undefined && (top === 'webhook' || top === 'metadata') && path.length > 1) {
    const field = `${top}.${String(path[1])}`;
    return { field, code: 'invalid_value', message: `${field}: ${rule}` };
  }
  if (top === 'webhook') {
    const field = path.length > 1 ? `webhook.${String(path[1])}` : 'webhook';
    return {
      field,
      code: 'invalid_value',
      message:
        field === 'webhook.events'
          ? 'webhook.events must be a non-empty list of generation.processing, generation.progress, generation.completed, generation.failed'
          : 'webhook must be an object { url, events? } with a URL of at most 2048 characters',
    };
  }
  if (top === 'metadata') {
    const field = path.length > 1 ? `metadata.${String(path[1])}` : 'metadata';
    return {
      field,
      code: 'invalid_value',
      message: `metadata must be an object of at most ${METADATA_LIMITS.entries} string values, keys of 1 to ${METADATA_LIMITS.keyLength} characters, values of at most ${METADATA_LIMITS.valueLength}`,
    };
  }
  return {
    field: top,
    code: 'invalid_type',
    message: top === 'settings' ? 'settings must be an object' : `${top} must be a non-empty string of at most 200 characters`,
  };
}
