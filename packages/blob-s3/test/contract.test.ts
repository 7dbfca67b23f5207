import { S3BlobStore } from '@genservice/blob-s3';
import { runBlobStoreContract } from '@genservice/testing';
import { afterAll, beforeAll } from 'vitest';
import { type LocalS3, S3RVER_CREDENTIALS, startS3 } from './s3rver.js';

let s3: LocalS3;
let n = 0;
beforeAll(async () => {
  s3 = await startS3();
});
afterAll(async () => {
  await s3.close();
});

for (const serve of ['redirect', 'stream'] as const) {
  runBlobStoreContract(`S3 (s3rver, ${serve})`, async () => {
    // A fresh bucket per test: the contract needs an empty store.
    const bucket = `contract-${serve}-${++n}`;
    await s3.createBucket(bucket);
    const blobs = new S3BlobStore({ bucket, prefix: 'results/', endpoint: s3.endpoint, forcePathStyle: true, credentials: S3RVER_CREDENTIALS, serve });
    return { blobs, close: async () => blobs.client.destroy() };
  });
}
