export type * from './logger.js';
export type * from './api-keys.js';
export type * from './store.js';
export type * from './ledger.js';
export type * from './blob.js';
export type * from './queue.js';
export type * from './idempotency.js';
export type * from './provider.js';
