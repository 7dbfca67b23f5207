import { z, type ZodType } from 'zod';
import type { SettingDescriptor } from '../domain/types.js';
import type { ErrorDetail } from '../domain/errors.js';
import type { FieldTypeSchema, LimitsOptions } from '../options.js';

export type ResolvedLimits = Required<LimitsOptions>;

export const DEFAULT_LIMITS: ResolvedLimits = {
  bodyBytes: 1024 * 1024,
  bodyTimeoutMs: 30_000,
  mediaUrls: 10,
  urlLength: 2048,
  textLength: 10_000,
  idempotencyKeyLength: 255,
  inFlightPerUser: 100,
  streamsPerUser: 20,
  streamsTotal: 5000,
};

/** Media field types: arrays of http(s) URLs. */
export const MEDIA_FIELD_TYPES = ['image', 'video', 'audio', 'file'] as const;

/** Most `details` one invalid_settings answer lists. */
export const MAX_DETAILS = 50;

export type SettingsValidator = (
  settings: unknown,
) => { ok: true; value: Record<string, unknown> } | { ok: false; details: ErrorDetail[] };

function isHttpUrl(value: string): boolean {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '' && url.username === '' && url.password === '';
}

const textSchema: FieldTypeSchema = (d, limits) => {
  const s = z.string().max(limits.textLength);
  // A required text of only white space would be charged and then fail at run time: it is as good as missing.
  return d.required ? s.refine((v) => v.trim().length > 0, { message: 'blank', params: { blank: true } }) : s;
};

const selectSchema: FieldTypeSchema = (d) => {
  if (!d.options || d.options.length === 0) {
    throw new Error(`setting "${d.name}" is a select without options`);
  }
  return z.enum(d.options as [string, ...string[]]);
};

const mediaSchema: FieldTypeSchema = (d, limits) => {
  if (d.maxItems !== undefined && !(Number.isInteger(d.maxItems) && d.maxItems >= 1)) {
    throw new Error(`setting "${d.name}" has an invalid maxItems (a whole number >= 1 is needed)`);
  }
  const arr = z
    .array(z.string().max(limits.urlLength).refine(isHttpUrl, { message: 'must be an absolute http or https URL' }))
    .max(Math.min(limits.mediaUrls, d.maxItems ?? limits.mediaUrls));
  return d.required ? arr.min(1) : arr;
};

/** The field types every service knows; hosts add more through `options.fieldTypes`. */
export const BUILTIN_FIELD_TYPES: Record<string, FieldTypeSchema> = {
  text: textSchema,
  select: selectSchema,
  image: mediaSchema,
  video: mediaSchema,
  audio: mediaSchema,
  file: mediaSchema,
};

function detailFor(issue: z.core.$ZodIssue, descriptors: Map<string, SettingDescriptor>, input: Record<string, unknown>): ErrorDetail[] {
  const name = issue.path.length > 0 ? String(issue.path[0]) : '';
  const field = issue.path.length > 0 ? `settings.${issue.path.map(String).join('.')}` : 'settings';
  const d = descriptors.get(name);
  switch (issue.code) {
    case 'unrecognized_keys':
      return issue.keys.map((key) => ({
        field: `settings.${key}`,
        code: 'unknown_setting',
        message: `"${key}" is not a setting of this model`,
      }));
    case 'invalid_type':
      // zod 4 does not report the input by default; a missing setting is one absent from the input.
      if (issue.path.length === 1 && input[name] === undefined) {
        return [{ field, code: 'required', message: `"${name}" is required` }];
      }
      return [{ field, code: 'invalid_type', message: `must be ${issue.expected === 'array' ? 'an array of URLs' : `a ${issue.expected}`}` }];
    case 'invalid_value':
      return [
        {
          field,
          code: 'invalid_option',
          message: `must be one of: ${(d?.options ?? issue.values.map(String)).join(', ')}`,
        },
      ];
    case 'too_big':
      return [
        {
          field,
          code: issue.origin === 'array' ? 'too_many' : 'too_long',
          message: issue.origin === 'array' ? `at most ${String(issue.maximum)} items` : `at most ${String(issue.maximum)} characters`,
        },
      ];
    case 'too_small':
      return [{ field, code: 'required', message: `"${name}" must not be empty` }];
    case 'custom':
      if (issue.params?.blank) return [{ field, code: 'required', message: `"${name}" must not be empty or only white space` }];
      return [{ field, code: 'invalid_url', message: issue.message }];
    default:
      return [{ field, code: 'invalid_value', message: issue.message }];
  }
}

/** The zod schema of a model's settings: the validator and the OpenAPI document both come from it. */
export function buildSettingsSchema(
  descriptors: SettingDescriptor[],
  limits: ResolvedLimits,
  fieldTypes: Record<string, FieldTypeSchema>,
): z.ZodObject {
  const shape: Record<string, ZodType> = {};
  const seen = new Set<string>();
  for (const d of descriptors) {
    const build = fieldTypes[d.fieldType];
    if (!build) {
      throw new Error(`setting "${d.name}" has unknown fieldType "${d.fieldType}"; register it in options.fieldTypes`);
    }
    if (seen.has(d.name)) throw new Error(`setting "${d.name}" is declared twice`);
    seen.add(d.name);
    const schema = build(d, limits).describe(d.title);
    shape[d.name] = d.required ? schema : schema.optional();
  }
  return z.strictObject(shape);
}

/**
 * Compiles a model's setting descriptors to one validator, once per model, so no schema is built per request.
 * Every violation is reported, not just the first.
 */
export function compileSettings(descriptors: SettingDescriptor[], schema: z.ZodObject): SettingsValidator {
  const byName = new Map(descriptors.map((d) => [d.name, d] as const));
  return (settings) => {
    const parsed = schema.safeParse(settings ?? {});
    if (parsed.success) return { ok: true, value: parsed.data as Record<string, unknown> };
    // A value of the wrong type gets one detail, not also the checks that only make sense for the right type.
    const wrongType = new Set(parsed.error.issues.filter((i) => i.code === 'invalid_type').map((i) => i.path.join('.')));
    const issues = parsed.error.issues.filter((i) => i.code === 'invalid_type' || !wrongType.has(i.path.join('.')));
    const details = issues.flatMap((i) => detailFor(i, byName, (settings ?? {}) as Record<string, unknown>));
    // A hostile body can name thousands of unknown settings: list the first MAX_DETAILS, then say how many more.
    if (details.length > MAX_DETAILS) {
      const more = details.length - MAX_DETAILS;
      details.length = MAX_DETAILS;
      details.push({ field: 'settings', code: 'too_many_errors', message: `${more} more problems not listed` });
    }
    return { ok: false, details };
  };
}
