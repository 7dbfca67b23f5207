import { ProviderError, type GenerationOutput, type ModelDefinition, type Settings } from '@genservice/core/ports';

/**
 * A model of a ready provider: a genservice model definition, how its settings become the upstream input, and how
 * the upstream output becomes a result.
 */
export interface RemoteModel<Output = unknown> extends ModelDefinition {
  /** The upstream input for a generation's validated settings. Default: the settings as they are. */
  input?: (settings: Settings) => Record<string, unknown>;
  /**
   * The result in the upstream output: a URL of a file (downloaded through the outbound guard and stored), or
   * `{ text }` for a text model. Default: the provider's usual output shapes (see its docs).
   */
  output?: (output: Output) => string | { text: string };
}

/** Checks a host's model list at construction: a mistake there is a startup error, not a failed generation later. */
export function checkModels(models: readonly RemoteModel<any>[], provider: string): void {
  if (!Array.isArray(models) || models.length === 0) throw new TypeError(`${provider}: models must be a non-empty array`);
  const seen = new Set<string>();
  for (const m of models) {
    if (typeof m.modelId !== 'string' || m.modelId === '') throw new TypeError(`${provider}: every model needs a modelId`);
    if (seen.has(m.modelId)) throw new TypeError(`${provider}: modelId ${m.modelId} is listed twice`);
    seen.add(m.modelId);
    if (m.input !== undefined && typeof m.input !== 'function') throw new TypeError(`${provider}: ${m.modelId}.input must be a function`);
    if (m.output !== undefined && typeof m.output !== 'function') throw new TypeError(`${provider}: ${m.modelId}.output must be a function`);
  }
}

/** Finds a generation's model among a provider's own (a handle or input naming another is a bug: not retried). */
export function modelLookup<M extends RemoteModel<any>>(models: readonly M[], provider: string): (id: string) => M {
  const byId = new Map(models.map((m) => [m.modelId, m]));
  return (id) => {
    const m = byId.get(id);
    if (!m) throw new ProviderError(`${provider}: no model ${id}`);
    return m;
  };
}

/** The definition core sees (without the mapping functions). */
export function definitionOf(model: RemoteModel<any>): ModelDefinition {
  const { input: _input, output: _output, ...definition } = model as RemoteModel & Record<string, unknown>;
  for (const key of ['model', 'version', 'endpoint']) delete (definition as Record<string, unknown>)[key];
  return definition as ModelDefinition;
}

/** What the host's mapping (or the default) made of the upstream output. */
export function resolveOutput(result: string | { text: string } | undefined, modelId: string, provider: string): { url: string } | GenerationOutput {
  if (typeof result === 'string' && /^https?:\/\//i.test(result)) return { url: result };
  if (result && typeof result === 'object' && typeof result.text === 'string') return { text: result.text };
  throw new ProviderError(`${provider}: ${modelId}: no result in the upstream output`, {
    publicMessage: `${provider} finished without a result this service could use.`,
  });
}
