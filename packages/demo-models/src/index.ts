/**
 * @module @genservice/demo-models
 *
 * A catalogue of demo models that make real files on the local machine: PNG images, MP4 (H.264) video, text,
 * WAV audio, GLB 3D models, an image-to-image remix with safe media fetching, and a model that always fails.
 *
 * @example
 * import { createDemoProvider } from '@genservice/demo-models';
 * const provider = createDemoProvider({ speed: 1 });
 */
export { createDemoProvider, demoModels, DEMO_MODEL_IDS } from './provider.js';
export type { DemoProviderOptions, DemoModelId } from './provider.js';
// The media guard lives in core now (one guard for media, provider results and webhooks); re-exported for existing users.
export { fetchMedia, MediaFetchError, FETCH_DEFAULTS, blockedAddressReason } from '@genservice/core';
export type { FetchMediaOptions, FetchedMedia, MediaFetchErrorCode, ResolvedAddress } from '@genservice/core';
export { encodePng, decodePng, readPngHeader, PngDecodeError, type PngHeader } from './formats/png.js';
export { ImageWorkerPool, type ImageWorkerPoolOptions } from './workers/pool.js';
export type { RgbaImage } from './formats/png.js';
export { ALWAYS_FAILS_MESSAGE } from './models/failing.js';
