/**
 * `tools/list`: one tool per model the key may use (what `GET /v1/models` answers for it), named by its model id, with
 * its settings as the input schema. The schemas are the service's own: each model's settings schema from
 * `GET /v1/openapi.json`, compiled from the very validators a create is checked with (types, enums, required, bounds).
 */
import type { GenerationService, ModelInfo, ResultType, SettingDescriptor } from '@genservice/core';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { Api, bodyBytes } from './api.js';

type JsonSchema = Record<string, unknown>;

/** The settings schema of each model, read once from the service's OpenAPI document. */
export class SettingsSchemas {
  private loading: Promise<Map<string, JsonSchema>> | undefined;

  constructor(private readonly service: GenerationService) {}

  get(): Promise<Map<string, JsonSchema>> {
    this.loading ??= this.load().catch((err: unknown) => {
      this.loading = undefined; // a failed read is tried again by the next list
      throw err;
    });
    return this.loading;
  }

  private async load(): Promise<Map<string, JsonSchema>> {
    const res = await this.service.handle({ method: 'GET', path: '/v1/openapi.json', headers: { accept: 'application/json' } });
    const text = new TextDecoder().decode(await bodyBytes(res.body));
    if (res.status !== 200) throw new Error(`GET /v1/openapi.json answered ${res.status}`);
    const doc = JSON.parse(text) as { paths?: Record<string, { post?: { requestBody?: { content?: Record<string, { schema?: { oneOf?: JsonSchema[] } }> } } }> };
    const oneOf = doc.paths?.['/v1/generations']?.post?.requestBody?.content?.['application/json']?.schema?.oneOf ?? [];
    const out = new Map<string, JsonSchema>();
    for (const body of oneOf) {
      const props = body.properties as Record<string, JsonSchema> | undefined;
      const modelId = props?.modelId?.const;
      if (typeof modelId === 'string' && props?.settings) out.set(modelId, props.settings);
    }
    return out;
  }
}

/** A settings schema from the descriptors alone, for a model the OpenAPI document does not list. */
function schemaFromDescriptors(settings: SettingDescriptor[]): JsonSchema {
  const properties: Record<string, JsonSchema> = {};
  for (const s of settings) {
    if (s.fieldType === 'text') properties[s.name] = { type: 'string', description: s.title };
    else if (s.fieldType === 'select') properties[s.name] = { type: 'string', enum: s.options ?? [], description: s.title };
    else properties[s.name] = { type: 'array', items: { type: 'string' }, description: `${s.title} (URLs)` };
  }
  const required = settings.filter((s) => s.required).map((s) => s.name);
  return { type: 'object', properties, ...(required.length > 0 ? { required } : {}), additionalProperties: false };
}

/** The input schema of a tool: the settings schema, each property titled by its descriptor, without the optional wrapper. */
function inputSchema(model: ModelInfo, fromDoc: JsonSchema | undefined): Tool['inputSchema'] {
  const base = fromDoc && fromDoc.type === 'object' ? structuredClone(fromDoc) : schemaFromDescriptors(model.settings);
  const properties = (base.properties ?? {}) as Record<string, JsonSchema>;
  for (const s of model.settings) {
    const p = properties[s.name];
    if (p) p.title = s.title;
  }
  return { ...base, type: 'object', properties } as Tool['inputSchema'];
}

const RESULT_WORDS: Record<ResultType, string> = { text: 'text', image: 'an image', video: 'a video', audio: 'audio', '3d': 'a 3D model' };

function plural(n: number): string {
  return `${n} token${n === 1 ? '' : 's'}`;
}

/**
 * The price in words. GET /v1/models has no price (the contract fixes its shape), so it is asked of the model's
 * definition (`service.getModel`): a fixed number, or a function of the settings, priced here at the model's defaults.
 */
export function priceText(service: GenerationService, modelId: string): string {
  const price = service.getModel(modelId)?.price;
  if (typeof price === 'number') return plural(price);
  if (typeof price === 'function') {
    try {
      const atDefaults = price({});
      if (typeof atDefaults === 'number' && Number.isFinite(atDefaults)) return `${plural(atDefaults)} with the default settings (depends on the settings)`;
    } catch {
      // A price function that needs settings: say only that it depends on them.
    }
    return 'depends on the settings';
  }
  return 'unknown';
}

function returnsText(resultType: ResultType, inlineMaxBytes: number): string {
  if (resultType === 'text') return 'Returns the text.';
  if ((resultType === 'image' || resultType === 'audio') && inlineMaxBytes > 0) {
    return `Returns ${RESULT_WORDS[resultType]}, inline when at most ${inlineMaxBytes} bytes, else a link to the file.`;
  }
  return `Returns a link to ${RESULT_WORDS[resultType] === 'audio' ? 'the audio' : RESULT_WORDS[resultType]} file.`;
}

export function toolOf(service: GenerationService, model: ModelInfo, schema: JsonSchema | undefined, inlineMaxBytes: number): Tool {
  const seconds = model.estimatedGenerationTime;
  const description = [
    `${model.title}: makes ${RESULT_WORDS[model.resultType] ?? model.resultType}.`,
    `Price: ${priceText(service, model.modelId)}, paid from your balance (nothing is charged for a refused call).`,
    `Takes about ${seconds} s; call it as a task to poll long ones instead of waiting.`,
    returnsText(model.resultType, inlineMaxBytes),
  ].join(' ');
  return {
    name: model.modelId,
    title: model.title,
    description,
    inputSchema: inputSchema(model, schema),
    execution: { taskSupport: 'optional' },
    annotations: { title: model.title, readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    _meta: { 'genservice/model': { resultType: model.resultType, estimatedGenerationTime: seconds } },
  };
}

/** The models this key may use, as GET /v1/models answers them for it. */
export async function modelsOf(api: Api): Promise<ModelInfo[]> {
  const res = await api.json<{ models: ModelInfo[] }>('GET', '/v1/models');
  if (!res.ok) throw new Error(`GET /v1/models answered ${res.error.status} ${res.error.code}: ${res.error.message}`);
  return res.value.models;
}
