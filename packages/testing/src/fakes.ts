/**
 * Scripted fake providers: models whose behaviour a test decides (succeed, fail, fail N times then succeed, wait
 * for the test to release them, return file bytes), with a record of every call.
 *
 * @example
 * ```ts
 * const gate = createGate();
 * const provider = createScriptedProvider({
 *   models: [fakeModel({ modelId: 'echo' }), fakeModel({ modelId: 'held' })],
 *   scripts: { held: gate.script },
 * });
 * const service = createGenerationService({ providers: [provider] });
 * // ... create a 'held' generation, then:
 * await gate.reached(1); // the provider is running
 * gate.release();        // let it finish
 * ```
 */
import {
  ProviderError,
  type GenerationContext,
  type GenerationInput,
  type GenerationOutput,
  type ModelDefinition,
  type GenerateProvider,
  type ResultType,
  type Settings,
} from '@genservice/core';

/** What a fake model does when it runs. */
export type Script = (input: GenerationInput, ctx: GenerationContext) => GenerationOutput | Promise<GenerationOutput>;

export interface ProviderCall {
  modelId: string;
  generationId: string;
  claim: number;
  settings: Settings;
}

export interface ScriptedProvider extends GenerateProvider {
  /** Every call of `generate`, in order (a retry is a call of its own). */
  readonly calls: ProviderCall[];
  /** Calls for one generation. */
  callsFor(generationId: string): ProviderCall[];
}

export interface ScriptedProviderOptions {
  /** Default: one `fakeModel()`. */
  models?: ModelDefinition[];
  /** Runs every model that has no entry in `scripts`. Default: `defaultScript`. */
  script?: Script;
  /** Per-model scripts, by modelId. */
  scripts?: Record<string, Script>;
}

/** A complete model definition (a text model priced 1 token with no settings), with the given fields replaced. */
export function fakeModel(overrides: Partial<ModelDefinition> = {}): ModelDefinition {
  return {
    modelId: 'fake-text',
    title: 'Fake text model',
    resultType: 'text',
    estimatedGenerationTime: 1,
    settings: [],
    price: 1,
    ...overrides,
  };
}

/** A provider that runs each model's script and records every call. */
export function createScriptedProvider(options: ScriptedProviderOptions = {}): ScriptedProvider {
  const models = options.models ?? [fakeModel()];
  const fallback = options.script ?? defaultScript;
  const scripts = options.scripts ?? {};
  const calls: ProviderCall[] = [];
  return {
    models,
    calls,
    callsFor: (generationId) => calls.filter((c) => c.generationId === generationId),
    async generate(input, ctx) {
      calls.push({ modelId: input.model.modelId, generationId: ctx.generationId, claim: ctx.claim, settings: input.settings });
      const script = scripts[input.model.modelId] ?? fallback;
      return script(input, ctx);
    },
  };
}

const MIME_OF: Record<Exclude<ResultType, 'text'>, string> = {
  image: 'image/png',
  video: 'video/mp4',
  audio: 'audio/mpeg',
  '3d': 'model/gltf-binary',
};

/** A text model answers `ok`; any other model answers a few bytes of its result type's MIME type. */
export const defaultScript: Script = (input) => {
  const type = input.model.resultType;
  if (type === 'text') return { text: 'ok' };
  return { bytes: new TextEncoder().encode(`fake ${type} for ${input.model.modelId}`), mimeType: MIME_OF[type] };
};

/** Succeeds with this text (or the text computed from the input). */
export function textScript(text: string | ((input: GenerationInput) => string) = 'ok'): Script {
  return (input) => ({ text: typeof text === 'function' ? text(input) : text });
}

/**
 * Succeeds with a file. `via: 'bytes'` returns the bytes for core to store; `via: 'put'` stores them with
 * `ctx.files.put` and returns the key.
 */
export function fileScript(bytes: Uint8Array, mimeType: string, via: 'bytes' | 'put' = 'bytes'): Script {
  return async (_input, ctx) => {
    if (via === 'bytes') return { bytes, mimeType };
    return { file: await ctx.files.put(bytes, mimeType) };
  };
}

/** Always fails with a non-retryable ProviderError (or, with `plainError`, a plain Error, as a buggy provider would). */
export function failingScript(message = 'the fake model failed', options: { plainError?: boolean } = {}): Script {
  return () => {
    throw options.plainError ? new Error(message) : new ProviderError(message, { retryable: false });
  };
}

/** Throws a retryable ProviderError on the first `failures` calls for each generation, then runs `then`. */
export function flakyScript(failures: number, then: Script = textScript()): Script {
  const seen = new Map<string, number>();
  return (input, ctx) => {
    const n = (seen.get(ctx.generationId) ?? 0) + 1;
    seen.set(ctx.generationId, n);
    if (n <= failures) throw new ProviderError(`transient failure ${n} of ${failures}`, { retryable: true });
    return then(input, ctx);
  };
}

/** Waits `ms` (or a random time in `[min, max]`) before running `then`; stops early with an error when aborted. */
export function delayScript(ms: number | [min: number, max: number], then: Script = textScript()): Script {
  return async (input, ctx) => {
    const wait = typeof ms === 'number' ? ms : ms[0] + Math.random() * (ms[1] - ms[0]);
    await abortableSleep(wait, ctx.signal);
    return then(input, ctx);
  };
}

/** Resolves after `ms`, or rejects with the signal's reason when it fires first. */
export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason ?? new Error('aborted'));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason ?? new Error('aborted'));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

export interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(reason: unknown): void;
}

export function createDeferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A script that holds every run until the test lets it through. */
export interface Gate {
  /** Use as a model's script. Each run waits at the gate, then runs `then`. A run whose signal fires rejects. */
  readonly script: Script;
  /**
   * Resolves once `count` runs in total have reached the gate. Read `total` before starting the work and wait
   * for `total + n`: a run may reach the gate before this is called.
   */
  reached(count: number): Promise<void>;
  /** Lets the runs waiting now through; later runs wait again. */
  release(): void;
  /** Lets every run through, now and later, until `close()`. */
  open(): void;
  close(): void;
  /** Runs waiting at the gate now. */
  readonly waiting: number;
  /** Runs that ever reached the gate. */
  readonly total: number;
}

export function createGate(then: Script = textScript()): Gate {
  let waiters: Array<Deferred<void>> = [];
  let total = 0;
  let isOpen = false;
  const watchers: Array<{ count: number; done: () => void }> = [];

  const script: Script = async (input, ctx) => {
    total++;
    for (const w of watchers.filter((x) => total >= x.count)) {
      watchers.splice(watchers.indexOf(w), 1);
      w.done();
    }
    if (!isOpen) {
      const d = createDeferred<void>();
      waiters.push(d);
      const onAbort = (): void => d.reject(ctx.signal.reason ?? new Error('aborted'));
      ctx.signal.addEventListener('abort', onAbort, { once: true });
      try {
        await d.promise;
      } finally {
        ctx.signal.removeEventListener('abort', onAbort);
        waiters = waiters.filter((x) => x !== d);
      }
    }
    return then(input, ctx);
  };

  const release = (): void => {
    const now = waiters;
    waiters = [];
    for (const d of now) d.resolve();
  };

  return {
    script,
    reached(count) {
      if (total >= count) return Promise.resolve();
      return new Promise<void>((done) => watchers.push({ count, done }));
    },
    release,
    open() {
      isOpen = true;
      release();
    },
    close() {
      isOpen = false;
    },
    get waiting() {
      return waiters.length;
    },
    get total() {
      return total;
    },
  };
}

/** A scripted provider pre-loaded with one model of each behaviour, for quick tests. */
export function createFakeProvider(): ScriptedProvider & { gate: Gate } {
  const gate = createGate();
  const provider = createScriptedProvider({
    models: [
      fakeModel({ modelId: 'fake-text', title: 'Echoes its prompt', settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text' }] }),
      fakeModel({ modelId: 'fake-noop', title: 'Answers ok' }),
      fakeModel({ modelId: 'fake-fail', title: 'Always fails', failureFee: 1 }),
      fakeModel({ modelId: 'fake-flaky', title: 'Fails twice, then succeeds', maxAttempts: 3 }),
      fakeModel({ modelId: 'fake-held', title: 'Waits for the test' }),
      fakeModel({ modelId: 'fake-image', title: 'Makes a PNG', resultType: 'image' }),
    ],
    scripts: {
      'fake-text': textScript((input) => String(input.settings.prompt ?? '')),
      'fake-fail': failingScript(),
      'fake-flaky': flakyScript(2),
      'fake-held': gate.script,
      'fake-image': fileScript(PNG_BYTES, 'image/png'),
    },
  });
  return Object.assign(provider, { gate });
}

/** A valid 1x1 transparent PNG. */
export const PNG_BYTES: Uint8Array = Uint8Array.from(
  Buffer.from(
    'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
    'base64',
  ),
);
