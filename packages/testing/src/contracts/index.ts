import { describe } from 'vitest';
import type { ApiKeyStore, GenerationStore, IdempotencyStore, Ledger } from '@genservice/core/ports';
import { describeApiKeyContract } from './api-keys.js';
import { describeBatchCancel } from './batch-cancel.js';
import { describeBatchContract } from './batches.js';
import { describeIdempotencyContract } from './idempotency.js';
import { describeKeyScenarios } from './keys-scenarios.js';
import { describeLedgerContract } from './ledger.js';
import { describeServiceScenarios } from './scenarios.js';
import { describeStoreContract } from './store.js';

export { runAuditLogContract, type AuditLogUnderTest } from './audit.js';
export { runCapacityContract, type CapacityUnderTest } from './capacity.js';
export { runBlobStoreContract } from './blob.js';
export { runQueueContract, type QueueUnderTest } from './queue.js';
export { runSettlingStoreContract, type SettlingPortsUnderTest } from './store-settling.js';
export { runWebhookStoreContract, type WebhookStoreUnderTest } from './webhooks.js';
export { runUploadStoreContract, type UploadStoreUnderTest } from './uploads.js';
export { describeWebhookEndpointsEndToEnd, type WebhookEndpointStores } from './webhook-endpoints-e2e.js';

/** The ports a durable backend (or the in-memory set) provides together. */
export interface PortsUnderTest {
  store: GenerationStore;
  ledger: Ledger;
  apiKeys: ApiKeyStore;
  idempotency: IdempotencyStore;
  close(): Promise<void>;
}

/**
 * Contract suites for GenerationStore, Ledger, ApiKeyStore and IdempotencyStore. `make()` runs before every test
 * and must return ports with no data in them; `close()` runs after it.
 *
 * @example
 * runPortContracts('sqlite', async () => {
 *   const db = openTempDb();
 *   return { ...createSqlitePorts(db), close: async () => db.close() };
 * });
 */
export function runPortContracts(name: string, make: () => Promise<PortsUnderTest>): void {
  describe(`${name}: port contracts`, () => {
    describeStoreContract(make);
    describeLedgerContract(make);
    describeBatchContract(make);
    describeBatchCancel(make);
    describeApiKeyContract(make);
    describeIdempotencyContract(make);
    describeServiceScenarios(make);
    describeKeyScenarios(make);
  });
}
