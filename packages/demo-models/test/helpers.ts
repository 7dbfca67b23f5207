import type { GenerationContext } from '@genservice/core';
import { fetchMedia, silentLogger } from '@genservice/core';

/** What a provider streamed through `ctx.output`. */
export interface Streamed {
  text: string[];
  previews: Array<{ bytes: Uint8Array; mimeType: string }>;
}

/** A context good enough for calling a provider directly, without a service around it. */
export function makeContext(signal: AbortSignal = new AbortController().signal, streamed: Streamed = { text: [], previews: [] }): GenerationContext {
  return {
    output: {
      append: (text) => void streamed.text.push(text),
      preview: (bytes, mimeType) => void streamed.previews.push({ bytes, mimeType }),
    },
    generationId: 'gen_test',
    signal,
    deadline: Date.now() + 60_000,
    claim: 1,
    progress: () => undefined,
    files: {
      put: () => Promise.reject(new Error('demo models return bytes, they never store files themselves')),
      // No service around it: every URL goes through the outbound guard, as `fetchMedia` does.
      fetch: (url, options) => fetchMedia(url, options),
    },
    logger: silentLogger,
  };
}

/** Byte equality without vitest's deep diff, which is slow on megabyte buffers. */
export function same(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}
