import { MemoryWebhookStore } from '@genservice/core';
import { runWebhookStoreContract } from '@genservice/testing';

runWebhookStoreContract('MemoryWebhookStore', async () => ({ webhooks: new MemoryWebhookStore(), close: async () => undefined }));
