import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// The servers the packages' own tests start: a real S3-compatible server (s3rver) and a database of its own.
import { until } from '@genservice/testing';
import { type LocalS3, S3RVER_CREDENTIALS, startS3 } from '../../packages/blob-s3/test/s3rver.js';
import { createTestDatabase, type TestDatabase } from '../../packages/store-postgres/test/helpers.js';
import { type RunningHost, startHost } from './helpers.js';

const KEY = 'alice-key-0123456789abcdef';
const auth = { authorization: `Bearer ${KEY}` };

interface Gen {
  status: string;
  result?: string;
  price?: number;
}

/** A directory of the instance's own, holding only its users file: nothing is shared between instances. */
function ownDir(): { dir: string; usersFile: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'genservice-s3host-'));
  const usersFile = join(dir, 'users.json');
  writeFileSync(usersFile, JSON.stringify({ users: [{ id: 'alice', apiKey: KEY, balance: 1000 }] }));
  return { dir, usersFile, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

async function createImage(api: string): Promise<string> {
  const models = (await (await fetch(`${api}/v1/models`, { headers: auth })).json()) as {
    models: Array<{ modelId: string; resultType: string; settings: Array<{ name: string; required?: boolean; options?: string[]; fieldType?: string }> }>;
  };
  const image = models.models.find((m) => m.resultType === 'image' && !m.settings.some((s) => ['image', 'video', 'audio', 'file'].includes(s.fieldType ?? '')))!;
  const settings: Record<string, unknown> = {};
  for (const s of image.settings) {
    if (s.options) settings[s.name] = s.options[0];
    else if (s.required) settings[s.name] = 'a red fox at dawn';
  }
  const res = await fetch(`${api}/v1/generations`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ modelId: image.modelId, settings }) });
  expect(res.status).toBe(201);
  return ((await res.json()) as { generationId: string }).generationId;
}

function completed(api: string, id: string): Promise<Gen> {
  return until(
    async () => (await (await fetch(`${api}/v1/generations/${id}`, { headers: auth })).json()) as Gen,
    { accept: (g) => g.status === 'completed' || g.status === 'failed', timeoutMs: 30_000, intervalMs: 50 },
  );
}

function s3Env(s3: LocalS3, bucket: string): Record<string, string> {
  return {
    S3_BUCKET: bucket,
    S3_ENDPOINT: s3.endpoint,
    S3_FORCE_PATH_STYLE: '1',
    S3_PREFIX: 'results/',
    AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey,
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    DEMO_SPEED: '0.02',
  };
}

let s3: LocalS3;
beforeAll(async () => {
  s3 = await startS3();
});
afterAll(async () => {
  await s3?.close();
});

describe('express-host with S3_BUCKET', () => {
  let host: RunningHost;
  let data: ReturnType<typeof ownDir>;

  beforeAll(async () => {
    await s3.createBucket('host-results');
    data = ownDir();
    host = await startHost('express', { ...s3Env(s3, 'host-results'), USERS_FILE: data.usersFile, DATA_DIR: data.dir });
  }, 60_000);
  afterAll(async () => {
    if (host) expect(await host.stop()).toBe(0);
    data?.cleanup();
  });

  it('makes an image whose object is in the bucket; its result URL with Range gives 206 from S3; DELETE removes the object and every read answers 404', async () => {
    const id = await createImage(host.api);
    const done = await completed(host.api, id);
    expect(done.status).toBe('completed');
    const key = decodeURIComponent(/\/v1\/files\/([^?]+)/.exec(done.result!)![1]!);
    expect(await s3.keys('host-results')).toContain(`results/${key}`);

    const first = await fetch(done.result!, { redirect: 'manual' });
    expect(first.status).toBe(302);
    expect(first.headers.get('location')!.startsWith(`${s3.endpoint}/host-results/results/${key}?`)).toBe(true);

    const ranged = await fetch(done.result!, { headers: { range: 'bytes=0-15' } });
    expect(ranged.redirected).toBe(true);
    expect(ranged.url.startsWith(s3.endpoint)).toBe(true);
    expect(ranged.status).toBe(206);
    expect(ranged.headers.get('content-range')).toMatch(/^bytes 0-15\/\d+$/);
    expect(ranged.headers.get('content-type')).toBe('image/png');
    const bytes = new Uint8Array(await ranged.arrayBuffer());
    expect(bytes.byteLength).toBe(16);
    expect([...bytes.slice(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

    // DELETE removes the object from the bucket, and every read of the generation answers 404.
    const deleted = await fetch(`${host.api}/v1/generations/${id}`, { method: 'DELETE', headers: auth });
    expect(deleted.status).toBe(204);
    expect(await s3.keys('host-results')).not.toContain(`results/${key}`);
    const reads = [
      `${host.api}/v1/generations/${id}`,
      `${host.api}/v1/generations/${id}?include=details`,
      `${host.api}/v1/generations/${id}/events`,
      `${host.api}/v1/generations/${id}/webhook-deliveries`,
    ];
    for (const url of reads) expect((await fetch(url, { headers: auth })).status, url).toBe(404);
    expect((await fetch(done.result!, { redirect: 'manual' })).status).toBe(404);
    expect((await fetch(`${host.api}/v1/generations/${id}`, { method: 'DELETE', headers: auth })).status).toBe(404);
  });
});

describe('two instances with no shared directory (Postgres, S3)', () => {
  let db: TestDatabase;
  const hosts: RunningHost[] = [];
  const dirs: Array<ReturnType<typeof ownDir>> = [];

  beforeAll(async () => {
    await s3.createBucket('shared-results');
    db = await createTestDatabase('genservice_s3hosts');
    // What examples/multi-instance/start.sh hands every instance when S3_BUCKET is set: one secret, no directory.
    const secret = randomBytes(32).toString('base64url');
    for (const kind of ['express', 'fastify'] as const) {
      const data = ownDir();
      dirs.push(data);
      // One after the other: the first creates the schema.
      hosts.push(await startHost(kind, { ...s3Env(s3, 'shared-results'), DATABASE_URL: db.url, FILE_URL_SECRET: secret, USERS_FILE: data.usersFile, DATA_DIR: data.dir }));
    }
  }, 90_000);
  afterAll(async () => {
    for (const h of hosts) expect(await h.stop()).toBe(0);
    for (const d of dirs) d.cleanup();
    await db?.drop();
  });

  it("serves each other's files", async () => {
    const [a, b] = hosts as [RunningHost, RunningHost];
    const fromA = await createImage(a.api);
    const fromB = await createImage(b.api);
    for (const [id, other] of [
      [fromA, b],
      [fromB, a],
    ] as const) {
      // Read through the other instance: the result URL is its own, the file was written by the first.
      const done = await completed(other.api, id);
      expect(done.status).toBe('completed');
      expect(done.result!.startsWith(`${other.api}/v1/files/`)).toBe(true);
      const file = await fetch(done.result!);
      expect(file.status).toBe(200);
      expect(file.headers.get('content-type')).toBe('image/png');
      expect([...new Uint8Array(await file.arrayBuffer()).slice(0, 4)]).toEqual([0x89, 0x50, 0x4e, 0x47]);
    }
  });
});
