import { DomainError, type ErrorDetail } from '../domain/errors.js';
import type { ResultType, SettingDescriptor, Settings } from '../domain/types.js';
import type { ModelDefinition } from '../ports/provider.js';

/**
 * OpenAI's request fields to a model's settings (docs/openai-compatible.md, "The mapping"): each field goes to the
 * setting `model.openai.params` names for it, or to the setting of its own name. Content a model has no place for
 * (a prompt, an input image, a mask) is a 400 naming the field; any other field the model has no setting for is left
 * out (an OpenAI client sends defaults a model may not have).
 */

/** Fields of a request that are the surface's own (how many, in which shape, streamed), never a model's setting. */
export type ControlFields = readonly string[];

/** Longest model id a request may name, as `modelId` of `POST /v1/generations`. */
const MAX_MODEL_ID_LENGTH = 200;

/** Fields that carry what the model works on: refused, not left out, when the model has no setting for them. */
const CONTENT = new Set(['prompt', 'input', 'image', 'mask', 'input_reference']);

/** Fields whose value is files: they go to the model's first media setting of that kind unless mapped. */
const FILE_FIELDS: Record<string, string> = { image: 'image', input_reference: 'image' };

/** The 400 of one request field, named as the client named it. */
export function badField(field: string, message: string, code: ErrorDetail['code'] = 'invalid_value'): DomainError {
  return new DomainError('invalid_request', `${field}: ${message}`, { details: [{ field, code, message }] });
}

/** The setting an OpenAI field goes to on this model, or undefined when it has none. */
export function settingFor(model: ModelDefinition, field: string): SettingDescriptor | undefined {
  const mapped = model.openai?.params?.[field];
  if (mapped !== undefined) return model.settings.find((s) => s.name === mapped);
  const same = model.settings.find((s) => s.name === field);
  if (same !== undefined) return same;
  const kind = FILE_FIELDS[field];
  return kind === undefined ? undefined : model.settings.find((s) => s.fieldType === kind);
}

/** A value as the setting takes it: a select or text takes a string (`speed: 1.5` is `"1.5"`), media a list. */
function coerce(d: SettingDescriptor, value: unknown): unknown {
  if (d.fieldType === 'select' || d.fieldType === 'text') return typeof value === 'number' || typeof value === 'boolean' ? String(value) : value;
  if (d.fieldType === 'image' || d.fieldType === 'video' || d.fieldType === 'audio' || d.fieldType === 'file') {
    return typeof value === 'string' ? [value] : value;
  }
  return value;
}

/**
 * The settings of `fields` for `model`. `files` are fields whose value is already a list of URLs (uploads).
 * Throws the 400 of content the model cannot take.
 */
export function settingsOf(model: ModelDefinition, fields: Record<string, unknown>, control: ControlFields): Settings {
  const settings: Settings = {};
  for (const [field, value] of Object.entries(fields)) {
    if (value === undefined || value === null || control.includes(field)) continue;
    const d = settingFor(model, field);
    if (d === undefined) {
      if (CONTENT.has(field)) throw badField(field, `the model "${model.modelId}" takes no ${field}`, 'unknown_setting');
      continue;
    }
    const before = settings[d.name];
    if (before !== undefined) {
      // Two fields for one setting (`image` and `input_reference`): the lists join. Anything else cannot be joined
      // (spreading a number or an object throws): a 400 naming the field, never a 500.
      const more = coerce(d, value);
      if (!Array.isArray(before) || !Array.isArray(more)) {
        throw badField(field, `goes to the setting "${d.name}" that another field of this request also gives; only lists of URLs are joined, so send one of them`);
      }
      settings[d.name] = [...before, ...more];
    } else {
      settings[d.name] = coerce(d, value);
    }
  }
  return settings;
}

/** The OpenAI field that fed a setting of this request (the name the client used), else the setting's own. */
function fieldOf(model: ModelDefinition, setting: string, fields: Record<string, unknown>): string {
  for (const field of Object.keys(fields)) if (settingFor(model, field)?.name === setting) return field;
  return setting;
}

/**
 * A create's error in the client's words: a setting's 400 names the OpenAI field it came from (`seconds`, not
 * `settings.duration`), a missing model names `model`. Anything else as it is.
 */
export function inClientWords(err: unknown, model: ModelDefinition | undefined, modelId: string, fields: Record<string, unknown>): unknown {
  if (!(err instanceof DomainError)) return err;
  if (err.code === 'model_not_found') {
    const message = `The model \`${modelId}\` does not exist or you do not have access to it.`;
    return new DomainError('model_not_found', message, { details: [{ field: 'model', code: 'invalid_value', message }] });
  }
  if (err.code !== 'invalid_settings' || model === undefined) return err;
  const details = (err.details ?? []).map((d) => {
    const setting = d.field.replace(/^settings\.?/, '').split('.')[0] ?? '';
    return { ...d, field: setting === '' ? 'body' : fieldOf(model, setting, fields) };
  });
  const first = details[0];
  const message = first ? `Invalid value for ${first.field}: ${first.message}` : 'The request is not valid for this model.';
  return new DomainError('invalid_request', message, { details });
}

/** The model of a request for this kind of result: a 404 for one the key cannot see, a 400 for another kind. */
export function modelFor(get: (id: string) => ModelDefinition | undefined, allowed: (id: string) => boolean, modelId: unknown, kind: ResultType): ModelDefinition {
  if (typeof modelId !== 'string' || modelId === '') throw badField('model', 'is required (the id of one of GET /models)', 'required');
  // The native API's bound on a model id: a longer one is no model's, and is not echoed back in the 404.
  if (modelId.length > MAX_MODEL_ID_LENGTH) throw badField('model', `must be at most ${MAX_MODEL_ID_LENGTH} characters`, 'too_long');
  const model = allowed(modelId) ? get(modelId) : undefined;
  if (model === undefined) throw inClientWords(new DomainError('model_not_found', ''), undefined, modelId, {});
  if (model.resultType !== kind) throw badField('model', `the model "${modelId}" makes ${model.resultType}, not ${kind}`);
  return model;
}

/** What a setting holds for a video object's `seconds` and `size`: the value given, else the model's first option. */
export function settingValue(model: ModelDefinition | undefined, settings: Settings, field: string): string | null {
  if (model === undefined) return null;
  const d = settingFor(model, field);
  if (d === undefined) return null;
  const v = settings[d.name];
  if (typeof v === 'string') return v;
  return d.options?.[0] ?? null;
}
