import { describe } from 'vitest';
import type { GenerationStore } from '@genservice/core/ports';
import { useFresh } from './harness.js';
import { describeStoreChanges } from './store-changes.js';
import { describeStoreFeed } from './store-feed.js';
import { storeKit } from './store-kit.js';
import { describeStoreReads } from './store-reads.js';
import { describeStoreRemoval } from './store-removal.js';

/** The GenerationStore half of `runPortContracts`, area by area (each a file of its own), in one fresh store per test. */
export function describeStoreContract(make: () => Promise<{ store: GenerationStore; close(): Promise<void> }>): void {
  describe('GenerationStore', () => {
    const ports = useFresh(make);
    const kit = storeKit(() => ports().store);
    describeStoreChanges(kit);
    describeStoreFeed(kit);
    describeStoreReads(kit);
    describeStoreRemoval(kit);
  });
}
