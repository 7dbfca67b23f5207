import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DiskBlobStore,
  InProcessQueue,
  MemoryApiKeyStore,
  MemoryAuditLog,
  MemoryCapacityStore,
  MemoryBlobStore,
  MemoryGenerationStore,
  MemoryIdempotencyStore,
  MemoryLedger,
} from '@genservice/core';
import { runAuditLogContract, runBlobStoreContract, runCapacityContract, runPortContracts, runQueueContract, runSettlingStoreContract } from '@genservice/testing';

runPortContracts('memory', async () => ({
  store: new MemoryGenerationStore(),
  ledger: new MemoryLedger(),
  apiKeys: new MemoryApiKeyStore(),
  idempotency: new MemoryIdempotencyStore(),
  close: async () => undefined,
}));

// The memory store linked to a memory ledger, as createGenerationService links them.
runSettlingStoreContract('memory', async () => {
  const store = new MemoryGenerationStore();
  const ledger = new MemoryLedger();
  store.settleWith(ledger);
  return { store, ledger, close: async () => undefined };
});

runBlobStoreContract('memory', async () => ({ blobs: new MemoryBlobStore(), close: async () => undefined }));

runAuditLogContract('memory', async () => ({ auditLog: new MemoryAuditLog(), close: async () => undefined }));

runCapacityContract('memory', async () => ({ capacity: new MemoryCapacityStore(), close: async () => undefined }));

runBlobStoreContract('disk', async () => {
  const directory = await mkdtemp(join(tmpdir(), 'genservice-blobs-'));
  return {
    blobs: new DiskBlobStore({ directory }),
    close: async () => {
      // No temp file may be left behind by a finished put.
      const leftovers = (await readdir(directory, { recursive: true })).filter((f) => f.endsWith('.tmp'));
      await rm(directory, { recursive: true, force: true });
      if (leftovers.length > 0) throw new Error(`temp files left behind: ${leftovers.join(', ')}`);
    },
  };
});

runQueueContract('InProcessQueue (default concurrency)', async () => {
  const queue = new InProcessQueue();
  return { queue, concurrency: 8, close: () => queue.stop({ timeoutMs: 100 }) };
});

runQueueContract('InProcessQueue (concurrency from the service at start)', async () => {
  const queue = new InProcessQueue();
  return { queue, concurrency: 3, settings: { concurrency: 3 }, takesConcurrencyFromStart: true, close: () => queue.stop({ timeoutMs: 100 }) };
});

runQueueContract('InProcessQueue (concurrency 2)', async () => {
  const queue = new InProcessQueue({ concurrency: 2 });
  return { queue, concurrency: 2, close: () => queue.stop({ timeoutMs: 100 }) };
});

runQueueContract('InProcessQueue (concurrency 1)', async () => {
  const queue = new InProcessQueue({ concurrency: 1 });
  return { queue, concurrency: 1, close: () => queue.stop({ timeoutMs: 100 }) };
});
