import { MemoryUploadStore } from '@genservice/core';
import { runUploadStoreContract } from '@genservice/testing';

runUploadStoreContract('MemoryUploadStore', async () => ({ uploads: new MemoryUploadStore(), close: async () => undefined }));
