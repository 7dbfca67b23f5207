export { MemoryGenerationStore } from './generation-store.js';
export { MemoryLedger, type MemoryLedgerOptions } from './ledger.js';
export { MemoryApiKeyStore, hashApiKey, type MemoryApiKeyStoreOptions } from './api-keys.js';
export { MemoryIdempotencyStore } from './idempotency.js';
export { MemoryBlobStore } from './blob-store.js';
export { MemoryWebhookStore } from './webhook-store.js';
export { MemoryAuditLog } from './audit-log.js';
export { MemoryUploadStore } from './upload-store.js';
export { MemoryCapacityStore } from './capacity-store.js';
