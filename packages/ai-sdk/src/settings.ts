import type { SettingDescriptor, Settings } from '@genservice/core/ports';
import type { AiSdkModel, AiSdkModelKind } from './types.js';

const select = (name: string, title: string, options: ReadonlyArray<string | number> | undefined): SettingDescriptor[] =>
  options && options.length > 0 ? [{ name, title, fieldType: 'select', options: options.map(String) }] : [];

const prompt = (): SettingDescriptor => ({ name: 'prompt', title: 'Prompt', fieldType: 'text', required: true });
const seed = (): SettingDescriptor => ({ name: 'seed', title: 'Seed (a whole number)', fieldType: 'text' });

/** The settings a model of this kind takes, from the choices the host listed. */
export function defaultSettings(kind: AiSdkModelKind, entry: AiSdkModel): SettingDescriptor[] {
  switch (kind) {
    case 'image':
      return [
        prompt(),
        ...select('size', 'Size', entry.sizes),
        ...select('aspect_ratio', 'Aspect ratio', entry.aspectRatios),
        seed(),
        ...(entry.acceptsImage ? [{ name: 'image', title: 'Input image', fieldType: 'image', maxItems: 1 }] : []),
      ];
    case 'video':
      return [
        prompt(),
        ...select('size', 'Resolution', entry.sizes),
        ...select('aspect_ratio', 'Aspect ratio', entry.aspectRatios),
        ...select('duration', 'Duration (seconds)', entry.durations),
        seed(),
        ...(entry.acceptsImage ? [{ name: 'image', title: 'First frame', fieldType: 'image', maxItems: 1 }] : []),
      ];
    case 'speech':
      return [{ name: 'text', title: 'Text', fieldType: 'text', required: true }, ...select('voice', 'Voice', entry.voices)];
    case 'transcription':
      return [{ name: 'audio', title: 'Audio', fieldType: 'audio', required: true, maxItems: 1 }];
    case 'language':
      return [
        prompt(),
        { name: 'system', title: 'System instructions', fieldType: 'text' },
        ...select('temperature', 'Temperature', entry.temperatures),
        ...select('max_output_tokens', 'Longest answer (tokens)', Array.isArray(entry.maxOutputTokens) ? entry.maxOutputTokens : undefined),
      ];
  }
}

/** The settings a model offers, and the renames to undo before the bridge reads them (offered name -> default name). */
export interface ResolvedSettings {
  descriptors: SettingDescriptor[];
  renames: Map<string, string>;
}

/** Applies the host's `settings` option to the defaults; a mistake in it is a startup error naming the model. */
export function resolveSettings(kind: AiSdkModelKind, entry: AiSdkModel): ResolvedSettings {
  const where = `createAiSdkProvider: ${entry.modelId}.settings`;
  const defaults = defaultSettings(kind, entry);
  const renames = new Map<string, string>();
  let descriptors: SettingDescriptor[];
  const option = entry.settings;
  if (option === undefined) {
    descriptors = defaults;
  } else if (typeof option === 'function') {
    descriptors = option(defaults.map((d) => ({ ...d, ...(d.options ? { options: [...d.options] } : {}) })));
    if (!Array.isArray(descriptors)) throw new TypeError(`${where} must return an array of setting descriptors`);
  } else if (typeof option === 'object' && option !== null) {
    const known = new Set(defaults.map((d) => d.name));
    for (const name of Object.keys(option)) {
      if (!known.has(name)) throw new TypeError(`${where}: ${name} is not a setting of this ${kind} model (it has ${[...known].join(', ')})`);
    }
    descriptors = [];
    for (const d of defaults) {
      const change = option[d.name];
      if (change === false) continue;
      if (change === undefined) {
        descriptors.push(d);
        continue;
      }
      const changed = { ...d, ...change };
      if (changed.name !== d.name) renames.set(changed.name, d.name);
      descriptors.push(changed);
    }
  } else {
    throw new TypeError(`${where} must be a map of setting names or a function`);
  }
  const seen = new Set<string>();
  for (const d of descriptors) {
    if (!d || typeof d.name !== 'string' || d.name === '' || typeof d.title !== 'string' || typeof d.fieldType !== 'string') {
      throw new TypeError(`${where}: every setting needs a name, a title and a fieldType`);
    }
    if (seen.has(d.name)) throw new TypeError(`${where}: the setting ${d.name} is offered twice`);
    seen.add(d.name);
  }
  return { descriptors, renames };
}

/** The validated settings under the default names the bridge reads. */
export function underDefaultNames(settings: Settings, renames: Map<string, string>): Settings {
  if (renames.size === 0) return settings;
  const out: Settings = {};
  for (const [name, value] of Object.entries(settings)) {
    const original = renames.get(name);
    if (original !== undefined) out[original] = value;
    else if (!(name in out)) out[name] = value;
  }
  return out;
}
