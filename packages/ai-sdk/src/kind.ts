import type { AiSdkModel, AiSdkModelKind } from './types.js';

const KINDS: readonly AiSdkModelKind[] = ['image', 'speech', 'transcription', 'language', 'video'];

/**
 * The kind of an AI SDK model: the host's `kind`, else its shape (image models have `maxImagesPerCall`, video models
 * `maxVideosPerCall`, language models `doStream`), else, for speech and transcription models, which have the same
 * shape, its class name. Anything else is a startup error that names the model.
 */
export function kindOf(entry: AiSdkModel): AiSdkModelKind {
  const where = `createAiSdkProvider: ${entry.modelId}`;
  const m = entry.model as unknown as Record<string, unknown> | null | undefined;
  if (!m || typeof m !== 'object') throw new TypeError(`${where}.model is not an AI SDK model`);
  if (typeof m.doGenerate !== 'function') {
    const what = typeof m.doEmbed === 'function' ? 'an embedding model' : typeof m.doRerank === 'function' ? 'a reranking model' : 'not an AI SDK model';
    throw new TypeError(`${where}.model is ${what} (no doGenerate): the bridge takes image, speech, transcription, language and video models`);
  }
  if (m.specificationVersion !== 'v3') {
    throw new TypeError(`${where}.model is of specification ${String(m.specificationVersion)}; this bridge takes v3 (@ai-sdk/provider@3)`);
  }
  if (entry.kind !== undefined) {
    if (!KINDS.includes(entry.kind)) throw new TypeError(`${where}: kind ${JSON.stringify(entry.kind)} is not one of ${KINDS.join(', ')}`);
    return entry.kind;
  }
  if ('maxImagesPerCall' in m) return 'image';
  if ('maxVideosPerCall' in m) return 'video';
  if (typeof m.doStream === 'function') return 'language';
  const name = (m as object).constructor?.name ?? '';
  if (/speech/i.test(name)) return 'speech';
  if (/transcri/i.test(name)) return 'transcription';
  throw new TypeError(`${where}: say kind: 'speech' or 'transcription' (the shape of ${String(m.provider)} ${String(m.modelId)} does not tell)`);
}
