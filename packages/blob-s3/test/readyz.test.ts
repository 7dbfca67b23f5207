import { S3Client } from '@aws-sdk/client-s3';
import { S3BlobStore } from '@genservice/blob-s3';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, type GenerationService } from '@genservice/core';
import { afterEach, describe, expect, it } from 'vitest';
import { S3RVER_CREDENTIALS, startS3 } from './s3rver.js';

const services: GenerationService[] = [];
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => s.stop({ timeoutMs: 100 })));
});

async function readyz(service: GenerationService): Promise<{ status: number; body: any; retryAfter?: string }> {
  const res = await service.handle({ method: 'GET', path: '/readyz', headers: {} });
  return { status: res.status, body: JSON.parse(String(res.body)), retryAfter: res.headers['retry-after'] as string | undefined };
}

describe('readyz and the blob store', () => {
  it('answers ready while s3rver runs, and 503 naming blobs once it is stopped', async () => {
    const s3 = await startS3();
    let closed = false;
    try {
      await s3.createBucket('ready');
      // One attempt per call, so the stopped server is seen as an error at once rather than after the SDK's retries.
      const client = new S3Client({ region: 'us-east-1', endpoint: s3.endpoint, forcePathStyle: true, credentials: S3RVER_CREDENTIALS, maxAttempts: 1 });
      const service = createGenerationService({
        providers: [{ models: [], generate: async () => ({ text: '' }) }],
        apiKeys: new MemoryApiKeyStore({ keys: [] }),
        ledger: new MemoryLedger({ balances: {} }),
        blobs: new S3BlobStore({ bucket: 'ready', client }),
        health: { timeoutMs: 10_000 },
      });
      services.push(service);
      const up = await readyz(service);
      expect(up).toMatchObject({ status: 200, body: { status: 'ready', checks: { store: 'ok', ledger: 'ok', blobs: 'ok' } } });
      await s3.close();
      closed = true;
      const down = await readyz(service);
      expect(down.status).toBe(503);
      expect(down.retryAfter).toBe('1');
      expect(down.body).toEqual({ status: 'unavailable', failing: ['blobs'], checks: { store: 'ok', ledger: 'ok', blobs: 'error' } });
      client.destroy();
    } finally {
      if (!closed) await s3.close();
    }
  });
});
