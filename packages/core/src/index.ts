// tsyringe needs the Reflect metadata API before any decorated class is defined.
import 'reflect-metadata';

export * from './domain.js';
export * from './errors.js';
export type * from './ports/index.js';
export type * from './options.js';
export type * from './service-types.js';
export type { BaseUrl, HttpRequest, HttpResponse } from './http/types.js';
export { STATUS_OF } from './http/errors.js';
export { SERVED_ROUTES } from './http/handler.js';
export { isApiPath, readRawBody, type RawBody } from './http/node-body.js';
export { needsNodeWrite, writeNodeResponse } from './http/node-response.js';
export { createGenerationService } from './service.js';
export { InProcessQueue, type InProcessQueueOptions } from './runner/in-process-queue.js';
export { FileUrlSigner } from './files.js';
export { CachedApiKeyResolver, type ApiKeyCacheOptions } from './api-key-cache.js';
export { newGenerationId, GENERATION_ID_PATTERN } from './ids.js';
export { createJsonLogger, silentLogger, type LogLevel } from './logger.js';
export { BUILTIN_FIELD_TYPES, DEFAULT_LIMITS, MEDIA_FIELD_TYPES } from './settings/compile.js';
export * from './memory/index.js';
export * from './disk/index.js';
export * from './outbound/index.js';
